"""Multi-agent PPO on RLlib's new API stack, with a run folder CleanRL would recognise.

One run folder per training run::

    DIR/config.yaml                     the resolved experiment config (every section)
    DIR/tb/events.out.tfevents.*        TensorBoard: charts/episode_return,
                                        charts/episode_avg_jct_s, charts/avg_jct_s (eval),
                                        losses/policy_loss, losses/value_loss,
                                        losses/entropy, charts/learning_rate,
                                        charts/env_steps_per_s; hyperparameters as text
    DIR/checkpoints/iter_000010/        rllib/ (Algorithm.save_to_path, for --resume),
                                        modules/<id>.pt + manifest.json (plain torch, for
                                        inference without Ray)
    DIR/checkpoints/latest              name of the newest complete checkpoint (atomic)
    DIR/evals/iter_000010/metrics.json  greedy rollout on the evaluation window (+ jobs.csv)

The script reads top to bottom: config → seed → Ray → algorithm (restored when
resuming) → loop (train, log, evaluate, checkpoint). A checkpoint folder is written
under a temporary name and renamed into place before ``latest`` points at it, so an
interrupted run resumes from its last complete checkpoint with its iteration count,
and TensorBoard steps purged past it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from agents.config import ModelConfig, TrainConfig, eval_windows
from marl_sched.config import ExperimentConfig, plain
from marl_sched.errors import InputError
from marl_sched.metrics import atomic_write_text, write_json, write_run

CHECKPOINTS = "checkpoints"
LATEST = "latest"


def resolved_config(cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig) -> dict:
    """Every section of the experiment, with the model and train defaults filled in."""
    data = cfg.to_dict()
    data["model"] = dataclasses.asdict(mc)
    data["train"] = dataclasses.asdict(tc)
    return plain(data)


def _map_shared(agent_id, *args, **kwargs) -> str:
    return "shared"


def _map_own(agent_id, *args, **kwargs) -> str:
    return str(agent_id)


def env_setup(cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int):
    """(env class, RLlib env_config, observation builder of the topology): the one
    environment ``ClusterPlacement-v1`` with episodes of ``train.episode_jobs`` jobs
    drawn from the config's workload and ``train.extra_windows``."""
    from envs.cluster_env import ClusterPlacementEnv
    from envs.config import env_config as parse_env
    from envs.observations import ObservationBuilder
    from marl_sched.runner import build_cluster

    topo, perf = build_cluster(cfg)
    env_cfg = parse_env(cfg)
    builder = ObservationBuilder.from_config(topo, perf, env_cfg)
    config = {
        "config": cfg,
        "env": {"window_jobs": tc.episode_jobs},
        "seed": seed,
        "workload_share": tc.workload_share,
        "windows": [
            {**dataclasses.asdict(w), "trace": str(cfg.resolve_path(w.trace))}
            for w in tc.extra_windows
        ],
    }
    return ClusterPlacementEnv, config, builder


def module_ids(agent_ids: list[str], mc: ModelConfig) -> list[str]:
    return ["shared"] if mc.share_parameters or len(agent_ids) == 1 else list(agent_ids)


def algo_config(
    cfg: ExperimentConfig, mc: ModelConfig, tc: TrainConfig, seed: int, agent_ids: list[str]
):
    """The ``PPOConfig`` of a run."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rl_module import HierarchicalGNNModule

    env, env_config, _ = env_setup(cfg, mc, tc, seed)
    ids = module_ids(agent_ids, mc)
    model = {"hidden": mc.hidden, "layers": mc.layers, "exchange": mc.exchange}
    specs = {m: RLModuleSpec(module_class=HierarchicalGNNModule, model_config=model) for m in ids}
    return (
        PPOConfig()
        .environment(
            env,
            env_config=env_config,
            # RLlib's pre-check steps random actions, which the action mask forbids
            disable_env_checking=True,
        )
        .env_runners(
            num_env_runners=tc.num_env_runners,
            num_envs_per_env_runner=tc.num_envs_per_env_runner,
        )
        .multi_agent(
            policies=set(ids),
            policy_mapping_fn=_map_shared if len(ids) == 1 else _map_own,
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(
            lr=tc.lr,
            gamma=tc.gamma,
            lambda_=tc.gae_lambda,
            train_batch_size_per_learner=tc.train_batch_size,
            minibatch_size=tc.minibatch_size,
            num_epochs=tc.num_epochs,
            entropy_coeff=tc.entropy_coeff,
            clip_param=tc.clip_param,
            vf_loss_coeff=tc.vf_loss_coeff,
            vf_clip_param=tc.vf_clip_param,
            grad_clip=tc.grad_clip,
            use_kl_loss=False,
        )
        .debugging(seed=seed)
    )


# ------------------------------------------------------------------------------ warm start


def teacher_decisions(
    cfg, mc, tc, seed: int, student=None, first_episode: int = 0
) -> tuple[list[dict], list[int], list[float], list[float]]:
    """Roll ``tc.bc_teacher`` out through the environment: (observations, actions,
    discounted returns of each acting agent's own trajectory, the GPU work of the job
    each decision places — workers × iterations × reference compute per iteration).

    ``student`` (a GNN): DAgger relabelling instead — the student acts (greedy) and
    the teacher labels every state it visits: per job, the teacher plans the whole
    placement on the view the job arrives on; each task is labelled with the action
    that puts it where that plan puts it (when the masks allow it; else the state is
    not labelled): the follow action of a hint that plans exactly the teacher's
    placement (``env.hints``), else the group slot or forward. Returns are those
    of the student's trajectory. ``first_episode``: episode seeds
    ``seed * 1000 + first_episode + k``."""
    import numpy as np

    if student is not None:
        from agents.policy import greedy_action

    from agents.teachers import make_teacher, teacher_plan
    from envs.session import action_towards, follow_action

    env_cls, env_config, _ = env_setup(cfg, mc, tc, seed)
    env = env_cls(env_config)
    builder = env.builder
    teacher = make_teacher(tc.bc_teacher, tc.bc_margin, tc.bc_protect, tc.bc_speed, tc.bc_base)
    teacher.reset(env.topology, seed)
    observations, actions, returns, works = [], [], [], []
    done: dict[tuple, tuple[int, int]] = {}  # episode key → its samples (teacher only)
    for episode in range(first_episode, first_episode + tc.bc_episodes):
        obs, _ = env.reset(seed=seed * 1000 + episode)
        if student is None and env.episode_key in done:
            # the same episode again (a window shorter than an episode is drawn whole):
            # the deterministic teacher would make the same decisions; count them twice
            lo, hi = done[env.episode_key]
            observations += observations[lo:hi]
            actions += actions[lo:hi]
            returns += returns[lo:hi]
            works += works[lo:hi]
            continue
        first_sample = len(actions)
        planned, plan = None, None
        steps: dict[str, list[list]] = {}  # agent → [sample index or None, reward]
        while True:
            agent, o = next(iter(obs.items()))
            s = env.session
            if s is not planned:  # a new job: ask the teacher for its whole placement
                planned = s
                p = teacher_plan(teacher, s, sim=env.sim)
                plan = None if p is None else [*p.worker_groups, *p.ps_groups]
            action = None
            if plan is not None:
                # a hint that plans exactly the teacher's placement: follow it
                action = follow_action(s, p)
                if action is None:
                    action = action_towards(builder, s.agent, plan[s.task])
                if o["action_mask"][action] < 0.5:
                    action = None
                    if student is None:
                        plan = None
            index = None
            if action is not None:
                index = len(actions)
                observations.append(o)
                actions.append(action)
                returns.append(0.0)
                works.append(s.job.gpu_work_s)
            if student is not None:
                label, action = action, greedy_action(student, o)
                if label != action:  # off the teacher's plan: no more labels this job
                    plan = None
            elif action is None:  # the teacher would wait: take the first legal action
                action = int(np.flatnonzero(o["action_mask"])[0])
            obs, rewards, terminated, _, _ = env.step({agent: action})
            steps.setdefault(agent, []).append([index, 0.0])
            for a, r in rewards.items():
                if a in steps:
                    steps[a][-1][1] += r
            if terminated["__all__"]:
                break
        for trajectory in steps.values():
            ret = 0.0
            for index, r in reversed(trajectory):
                ret = r + tc.gamma * ret
                if index is not None:
                    returns[index] = ret
        done[env.episode_key] = (first_sample, len(actions))
    return observations, actions, returns, works


def imitation_weights(works, power: float):
    """Per-decision weights of the imitation loss: ``work ** power``, scaled to mean 1.

    ``power = 0`` weighs every decision alike; at ``power > 0`` a decision counts more
    the more GPU work its job carries, so the few giant jobs that set a window's
    average JCT are not drowned by thousands of one-GPU placements.
    """
    import numpy as np

    works = np.nan_to_num(np.asarray(works, dtype=np.float64), nan=1.0)  # no estimate: 1
    w = np.power(np.maximum(works, 1.0), power)
    return (w / w.mean()).astype(np.float32)


def behaviour_cloning(cfg, mc, tc, seed: int, log: Callable[[str], None]) -> dict:
    """A GNN state dict (``gnn.``-prefixed, as the RLModule's) imitating the teacher."""
    import numpy as np
    import torch

    from agents.gnn import build_gnn
    from envs.observations import feature_dims

    t0 = time.perf_counter()
    observations, actions, returns, works = teacher_decisions(cfg, mc, tc, seed)
    _, _, builder = env_setup(cfg, mc, tc, seed)
    torch.manual_seed(seed)
    net = build_gnn(feature_dims(builder.observation_space), dataclasses.asdict(mc))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)

    def fit() -> float:
        act = torch.as_tensor(actions)
        ret = torch.as_tensor(returns, dtype=torch.float32)
        weight = torch.as_tensor(imitation_weights(works, tc.bc_weight_power))
        data = {k: torch.as_tensor(np.stack([o[k] for o in observations])) for k in observations[0]}
        accuracy = 0.0
        for _ in range(tc.bc_epochs):
            order = torch.as_tensor(rng.permutation(len(actions)))
            hits = 0
            for lo in range(0, len(order), 256):
                idx = order[lo : lo + 256]
                logits, values = net.forward_padded({k: v[idx] for k, v in data.items()})
                ce = torch.nn.functional.cross_entropy(logits, act[idx], reduction="none")
                loss = (ce * weight[idx]).mean()
                loss = loss + 0.5 * torch.nn.functional.mse_loss(values, ret[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                hits += int((logits.argmax(-1) == act[idx]).sum())
            accuracy = hits / len(actions)
        return accuracy

    accuracy = fit()
    log(
        f"warm start: imitated {tc.bc_teacher} on {len(actions)} decisions "
        f"({tc.bc_episodes} episodes), train accuracy {accuracy:.3f}, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    for r in range(1, tc.dagger_rounds + 1):
        # DAgger: the teacher labels the states the current network visits (fresh
        # episodes of the training window); aggregate and train on.
        net.eval()
        o2, a2, r2, w2 = teacher_decisions(
            cfg, mc, tc, seed, student=net, first_episode=r * tc.bc_episodes
        )
        net.train()
        observations += o2
        actions += a2
        returns += r2
        works += w2
        accuracy = fit()
        log(
            f"warm start: DAgger round {r}: {len(a2)} relabelled decisions, "
            f"{len(actions)} in all, train accuracy {accuracy:.3f}, "
            f"{time.perf_counter() - t0:.0f} s"
        )
    return {f"gnn.{k}": v.detach().clone() for k, v in net.state_dict().items()}


# ------------------------------------------------------------------------------ logging


def scalars_from_result(result: dict, last_steps: float) -> tuple[dict[str, float], float]:
    """CleanRL-style TensorBoard scalars from one ``algo.train()`` result."""
    out: dict[str, float] = {}
    runners = result.get("env_runners", {})
    ret = runners.get("episode_return_mean")
    if ret is not None and math.isfinite(ret):
        out["charts/episode_return"] = float(ret)
    learners = {k: v for k, v in result.get("learners", {}).items() if k != "__all_modules__"}
    for tag, key in (
        ("losses/policy_loss", "policy_loss"),
        ("losses/value_loss", "vf_loss"),
        ("losses/entropy", "entropy"),
        ("charts/learning_rate", "default_optimizer_learning_rate"),
    ):
        vals = [float(v[key]) for v in learners.values() if key in v]
        if vals:
            out[tag] = sum(vals) / len(vals)
    steps = float(result.get("num_env_steps_sampled_lifetime", last_steps))
    dt = float(result.get("time_this_iter_s", 0.0))
    if dt > 0:
        out["charts/env_steps_per_s"] = (steps - last_steps) / dt
    return out, steps


def hyperparameter_text(data: dict) -> str:
    rows = ["|section|key|value|", "|-|-|-|"]
    for section in ("model", "train", "env", "workload", "simulation"):
        for k, v in (data.get(section) or {}).items():
            rows.append(f"|{section}|{k}|{v}|")
    return "\n".join(rows)


# ------------------------------------------------------------------------------ the run


@dataclasses.dataclass
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def tb(self) -> Path:
        return self.root / "tb"

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def checkpoint(self, iteration: int) -> Path:
        return self.checkpoints / f"iter_{iteration:06d}"

    def eval(self, iteration: int) -> Path:
        return self.root / "evals" / f"iter_{iteration:06d}"

    def latest(self) -> Path | None:
        pointer = self.checkpoints / LATEST
        if not pointer.is_file():
            return None
        target = self.checkpoints / pointer.read_text(encoding="utf-8").strip()
        return target if target.is_dir() else None


def evaluate_weights(
    cfg: ExperimentConfig,
    mc: ModelConfig,
    tc: TrainConfig,
    manifest: dict,
    weights: dict,
    out: Path | None = None,
) -> dict[str, Any]:
    """Greedy rollout of ``weights`` on the validation windows; metrics (and files).

    One run (one window, no ``train.eval_loads``): that run's simulator metrics
    (``out/metrics.json``, ``jobs.csv``). Several (``train.eval_extra_windows``, and
    each window once per load of ``train.eval_loads``): the first run goes to
    ``out/``, the others to ``out/extra_<k>/`` (window k of the extra ones) or
    ``out/<main|extra_<k>>_load_<L>/`` (with loads), and the result is
    ``{"avg_jct_s": average JCT over the jobs of all runs, "jobs": their number,
    "windows": [per run: trace, start, load, jobs, avg_jct_s]}``, also written to
    ``out/validation.json``."""
    from agents.policy import MarlPolicy, SingleAgentPolicy, agents_from_weights
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    agents = agents_from_weights(manifest, weights)
    cls = SingleAgentPolicy if agents.central else MarlPolicy
    topo, perf = build_cluster(cfg)
    runs = []
    loads = tc.eval_loads or (None,)
    for k, base in enumerate(eval_windows(cfg, tc)):
        for j, load in enumerate(loads):
            window = base if load is None else {**base, "load": load}
            workload = load_workload(cfg, perf, TraceOptions(**window))
            policy = cls(agents=agents)
            metrics, records, _ = simulate(cfg, cls.name, workload, topo, perf, policy=policy)
            if out is not None:
                write_run(out / _run_dir(k, load, first=j == 0), metrics, records)
            runs.append((window, metrics, len(records)))
    if len(runs) == 1:
        return runs[0][1]
    jobs = sum(n for _, _, n in runs)
    summary = {
        "avg_jct_s": sum(m["avg_jct_s"] * n for _, m, n in runs) / jobs,
        "jobs": jobs,
        "windows": [
            {
                "trace": w["trace"] or cfg.workload.trace,
                "start": w["start"],
                "load": w["load"] if w["load"] is not None else cfg.workload.load,
                "jobs": n,
                "avg_jct_s": m["avg_jct_s"],
            }  # fmt: skip
            for w, m, n in runs
        ],
    }
    if out is not None:
        write_json(out / "validation.json", summary)
    return summary


def _run_dir(k: int, load: float | None, first: bool) -> str:
    """Sub-folder of validation run (window ``k``, ``load``) under the eval folder."""
    if load is None:
        return "" if k == 0 else f"extra_{k - 1}"
    if k == 0 and first:
        return ""
    return f"{'main' if k == 0 else f'extra_{k - 1}'}_load_{load:g}"


def validation_runs(eval_m: dict[str, Any]) -> list[float]:
    """Average JCT of each validation run (window × load) in an evaluation result."""
    if "windows" in eval_m:
        return [w["avg_jct_s"] for w in eval_m["windows"]]
    return [eval_m["avg_jct_s"]]


def is_new_best(
    tc: TrainConfig, avg: float, runs: list[float], best: list | None, best_runs: list | None
) -> bool:
    """Does a checkpoint with validation ``avg`` (per run: ``runs``) replace ``best``
    (``[name, avg]``, per run ``best_runs``) under ``train.select_rule``?

    ``mean``: a lower average. ``dominate``: a lower average and, on every run, at
    most ``1 + select_tolerance`` times the best's figure (a best without per-run
    figures, from a run folder older than the rule, is compared on the average)."""
    if best is None:
        return True
    if avg >= best[1]:
        return False
    if tc.select_rule == "dominate" and best_runs is not None:
        if len(best_runs) != len(runs):
            raise ValueError(f"{len(runs)} validation runs against the best's {len(best_runs)}")
        slack = 1.0 + tc.select_tolerance
        return all(r <= b * slack for r, b in zip(runs, best_runs, strict=True))
    return True


class Trainer:
    """One training run (fresh or resumed) into a run folder."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        mc: ModelConfig,
        tc: TrainConfig,
        out: Path,
        *,
        resume: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg, self.mc, self.tc = cfg, mc, tc
        self.paths = RunPaths(Path(out))
        self.resume = resume
        self.log = log or (lambda line: None)

    def run(self, iterations: int) -> dict[str, Any]:
        import torch
        from torch.utils.tensorboard import SummaryWriter

        cfg, mc, tc, paths = self.cfg, self.mc, self.tc, self.paths
        t_run = time.perf_counter()
        torch.manual_seed(tc.seed)
        torch.set_num_threads(1)  # tiny graphs: intra-op threads only add latency
        # deterministic torch kernels; with the fixed PYTHONHASHSEED the console script
        # sets (marl_sched.cli._fixed_hash_seed), same-seed runs give the same weights
        torch.use_deterministic_algorithms(True)
        _, _, builder = env_setup(cfg, mc, tc, tc.seed)
        from envs.config import env_config as parse_env

        self.time_scale_s = parse_env(cfg).reward.time_scale_s
        self.builder, self.ids = builder, module_ids(builder.agent_ids, mc)
        algo = algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo()
        state = {"iteration": 0, "env_steps": 0.0, "wall_s": 0.0, "best": None, "best_runs": None}
        if self.resume:
            ckpt = paths.latest()
            saved = read_state(ckpt)  # checked and its signature verified: then unpickle
            saved.pop("integrity", None)
            state.update(saved)
            algo.restore_from_path(str((ckpt / "rllib").resolve()))
        else:
            paths.root.mkdir(parents=True, exist_ok=True)
            data = resolved_config(cfg, mc, tc)
            atomic_write_text(paths.config, yaml.safe_dump(data, sort_keys=False))
        start, wall0 = state["iteration"], state["wall_s"] - time.perf_counter() + t_run
        self.state = state
        writer = SummaryWriter(str(paths.tb), purge_step=start + 1 if start else None)
        summary: dict[str, Any] = {"start_iteration": start, "evals": {}}
        try:
            if not self.resume:
                text = hyperparameter_text(resolved_config(cfg, mc, tc))
                writer.add_text("hyperparameters", text)
                if tc.bc_teacher:
                    weights = behaviour_cloning(cfg, mc, tc, tc.seed, self.log)
                    algo.learner_group.set_weights({m: weights for m in self.ids})
                    algo.env_runner_group.sync_weights(
                        from_worker_or_learner_group=algo.learner_group, inference_only=True
                    )
                    # iteration 0: the warm-started policy, evaluated and checkpointed
                    self._after_iteration(
                        algo,
                        0,
                        {},
                        wall0 + time.perf_counter() - t_run,
                        writer,
                        summary,
                        force=True,
                    )
            for it in range(start + 1, iterations + 1):
                result = algo.train()
                scalars, state["env_steps"] = scalars_from_result(result, state["env_steps"])
                ret = scalars.get("charts/episode_return")
                if ret is not None:
                    # RLlib's episode return sums the agents' rewards; each step's team
                    # reward goes to the agent that acted, so it is the team return
                    scalars["charts/episode_avg_jct_s"] = -ret * self.time_scale_s
                wall = wall0 + time.perf_counter() - t_run
                self._after_iteration(
                    algo, it, scalars, wall, writer, summary, force=it == iterations
                )
        finally:
            writer.close()
            algo.stop()
        summary.update(
            iterations=iterations,
            env_steps=state["env_steps"],
            wall_s=wall0 + time.perf_counter() - t_run,
            best=state["best"],
        )
        return summary

    def _after_iteration(self, algo, it, scalars, wall, writer, summary, force) -> None:
        """Evaluate, log, checkpoint (each when due) and print the progress line."""
        tc, state = self.tc, self.state
        state.update(iteration=it, wall_s=wall)
        due_eval = force or (tc.eval_interval and it % tc.eval_interval == 0)
        due_ckpt = force or (tc.checkpoint_interval and it % tc.checkpoint_interval == 0)
        weights = manifest = eval_m = None
        if due_eval or due_ckpt:
            weights = algo.learner_group.get_weights(module_ids=self.ids)
            manifest = self._manifest(
                self.builder, dataclasses.asdict(self.mc), self.ids, it, state["env_steps"], wall
            )
        if due_eval:
            eval_m = evaluate_weights(self.cfg, self.mc, tc, manifest, weights, self.paths.eval(it))
            scalars["charts/avg_jct_s"] = eval_m["avg_jct_s"]
            summary["evals"][it] = eval_m["avg_jct_s"]
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, it)
        writer.flush()
        if due_ckpt:
            if eval_m is not None:
                avg, runs = eval_m["avg_jct_s"], validation_runs(eval_m)
                if is_new_best(tc, avg, runs, state["best"], state["best_runs"]):
                    state["best"], state["best_runs"] = [f"iter_{it:06d}", avg], runs
            self._checkpoint(algo, it, weights, manifest)
        self.log(_progress_line(it, state["env_steps"], scalars, wall, eval_m))

    def _manifest(self, builder, model, ids, it, steps, wall) -> dict[str, Any]:
        from agents.policy import manifest_for

        return manifest_for(
            builder,
            model,
            ids,
            extra={
                "iteration": it,
                "env_steps": steps,
                "wall_s": wall,
                "config": resolved_config(self.cfg, self.mc, self.tc),
            },
        )

    def _checkpoint(self, algo, it: int, weights, manifest) -> None:
        """``checkpoints/iter_X`` written under a temporary name, then ``latest`` (and
        ``best``: the checkpoint with the lowest evaluation average JCT so far)."""
        from agents.integrity import sign_folder
        from agents.policy import save_modules

        final = self.paths.checkpoint(it)
        tmp = final.with_name(f".{final.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        algo.save_to_path(str((tmp / "rllib").resolve()))
        save_modules(tmp, weights, manifest)
        atomic_write_text(tmp / "config.yaml", yaml.safe_dump(manifest["config"], sort_keys=False))
        # every file signed with this user's key: --resume unpickles only what we wrote
        write_json(tmp / "state.json", {**self.state, "integrity": sign_folder(tmp)})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        atomic_write_text(self.paths.checkpoints / LATEST, final.name + "\n")
        if self.state["best"] is not None:
            atomic_write_text(self.paths.checkpoints / "best", self.state["best"][0] + "\n")


def read_state(ckpt: Path) -> dict:
    """The checkpoint's ``state.json``, checked (``InputError``), and its folder's
    signature verified (:mod:`agents.integrity`) — before Ray starts or anything is
    unpickled."""
    import json

    from agents.integrity import verify_folder

    path = ckpt / "state.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--resume: {path}: unreadable ({exc.__class__.__name__})") from None
    if not isinstance(state, dict):
        raise InputError(f"--resume: {path}: expected a JSON object")
    for key in ("iteration", "env_steps", "wall_s"):
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InputError(f"--resume: {path}: {key}: expected a number >= 0, got {value!r}")
    if not isinstance(state["iteration"], int):
        raise InputError(f"--resume: {path}: iteration: expected an integer")
    if not (ckpt / "rllib").is_dir():
        raise InputError(f"--resume: {ckpt}: no rllib/ folder (the algorithm state)")
    verify_folder(ckpt, state.get("integrity"))
    return state


def _progress_line(it, steps, scalars, wall, eval_m) -> str:
    parts = [f"iter {it}", f"steps {int(steps)}"]
    if "charts/episode_return" in scalars:
        parts.append(f"return {scalars['charts/episode_return']:.3f}")
    if "charts/env_steps_per_s" in scalars:
        parts.append(f"{scalars['charts/env_steps_per_s']:.0f} steps/s")
    if eval_m is not None:
        parts.append(f"eval avg JCT {eval_m['avg_jct_s']:.0f} s")
    parts.append(f"{wall:.0f} s")
    return "  ".join(parts)
