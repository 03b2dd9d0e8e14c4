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
    """The RLlib ``AlgorithmConfig`` of a run: ``PPOConfig`` or ``APPOConfig``
    (``train.algorithm``), with our RLModule on the new API stack.

    The KL to the sampling policy is always computed (``use_kl_loss``) so that it is
    logged; ``train.kl_coeff`` (default 0) is its weight in the loss. With
    ``train.advantage: group`` the env is :class:`envs.group_rollouts.GroupRolloutEnv`
    and the learner replaces GAE's advantages by the group baseline's.
    ``train.num_envs_per_env_runner`` > 1 steps that many envs in lockstep (RLlib's
    synchronous vector env) and batches their observations into one forward."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rl_module import HierarchicalGNNModule

    env, env_config, _ = env_setup(cfg, mc, tc, seed)
    if tc.advantage == "group":  # each window K times in a row, steps tagged with time
        from envs.group_rollouts import GroupRolloutEnv

        env, env_config = GroupRolloutEnv, {**env_config, "group_size": tc.group_size}
    ids = module_ids(agent_ids, mc)
    model = {k: v for k, v in dataclasses.asdict(mc).items() if k != "share_parameters"}
    specs = {m: RLModuleSpec(module_class=HierarchicalGNNModule, model_config=model) for m in ids}
    training = {
        "lr": tc.lr,
        "gamma": tc.gamma,
        "lambda_": tc.gae_lambda,
        "train_batch_size_per_learner": tc.train_batch_size,
        "minibatch_size": tc.minibatch_size,
        "num_epochs": tc.num_epochs,
        "entropy_coeff": tc.entropy_coeff,
        "clip_param": tc.clip_param,
        "vf_loss_coeff": tc.vf_loss_coeff,
        "grad_clip": tc.grad_clip,
        "use_kl_loss": True,
        "kl_coeff": tc.kl_coeff,
    }
    if tc.algorithm == "APPO":
        from ray.rllib.algorithms.appo import APPOConfig

        # an iteration = train_batch_size env steps, as with PPO (APPO's default is
        # "as many as 10 s allow"); the learner in this process, as with PPO (APPO's
        # default is one remote learner actor, which a Tune trial has no CPU for)
        config = (
            APPOConfig()
            .reporting(
                min_time_s_per_iteration=0,
                min_sample_timesteps_per_iteration=tc.train_batch_size,
            )
            .learners(num_learners=0)
        )
    else:
        from ray.rllib.algorithms.ppo import PPOConfig

        from agents.learner import ClipFractionPPOLearner

        config = PPOConfig()
        training["vf_clip_param"] = tc.vf_clip_param
        training["learner_class"] = ClipFractionPPOLearner  # logs the clip fraction too
        # GAE or the group baseline in the learner pipeline (agents.learner)
        config.learners(learner_config_dict={"advantage": tc.advantage})
    return (
        config.environment(
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
        .training(**training)
        .debugging(seed=seed)
    )


def gnn_weights(weights: dict[str, dict]) -> dict[str, dict]:
    """``{module: state}`` with only the network's ``gnn.`` tensors (APPO's learner
    also holds a target copy, ``_old_gnn.``, which inference never needs)."""
    return {m: {k: v for k, v in w.items() if k.startswith("gnn.")} for m, w in weights.items()}


# ------------------------------------------------------------------------------ warm start


def teacher_decisions(
    cfg, mc, tc, seed: int, student=None, first_episode: int = 0, progress=None
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
    ``seed * 1000 + first_episode + k``. ``progress(done)``: called after each
    episode (a :class:`marl_sched.cli.Progress`)."""
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
        if progress is not None:
            progress(episode - first_episode)
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
    if progress is not None:
        progress(tc.bc_episodes)
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


def _no_progress(total: int, label: str):
    """A progress factory that shows nothing (``Trainer(progress=...)``'s default)."""
    return _Silent()


class _Silent:
    def __call__(self, done: int) -> None:
        pass

    def close(self) -> None:
        pass


def behaviour_cloning(
    cfg, mc, tc, seed: int, log: Callable[[str], None], progress=_no_progress, on_epoch=None
) -> dict:
    """A GNN state dict (``gnn.``-prefixed, as the RLModule's) imitating the teacher.

    ``progress(total, label)``: a progress bar factory (:class:`marl_sched.cli.Progress`
    signature) for the teacher's episodes, every relabelling round and the epochs;
    ``on_epoch(epoch, loss, accuracy)``: called after every epoch (numbered on across
    DAgger rounds), with the epoch's mean weighted loss and its imitation accuracy."""
    import numpy as np
    import torch

    from agents.gnn import build_gnn
    from envs.observations import feature_dims

    t0 = time.perf_counter()
    bar = progress(tc.bc_episodes, f"warm start: {tc.bc_teacher} teacher episodes")
    try:
        observations, actions, returns, works = teacher_decisions(cfg, mc, tc, seed, progress=bar)
    finally:
        bar.close()
    _, _, builder = env_setup(cfg, mc, tc, seed)
    torch.manual_seed(seed)
    net = build_gnn(feature_dims(builder.observation_space), dataclasses.asdict(mc))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    epochs_done = [0]

    def fit() -> float:
        act = torch.as_tensor(actions)
        ret = torch.as_tensor(returns, dtype=torch.float32)
        weight = torch.as_tensor(imitation_weights(works, tc.bc_weight_power))
        data = {k: torch.as_tensor(np.stack([o[k] for o in observations])) for k in observations[0]}
        accuracy = 0.0
        bar = progress(tc.bc_epochs, f"warm start: imitation epochs ({len(actions)} decisions)")
        try:
            for epoch in range(tc.bc_epochs):
                order = torch.as_tensor(rng.permutation(len(actions)))
                hits, loss_sum = 0, 0.0
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
                    loss_sum += float(loss.detach()) * len(idx)
                accuracy = hits / len(actions)
                epochs_done[0] += 1
                if on_epoch is not None:
                    on_epoch(epochs_done[0], loss_sum / len(actions), accuracy)
                bar(epoch + 1)
        finally:
            bar.close()
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
        bar = progress(tc.bc_episodes, f"warm start: DAgger round {r} relabelling")
        try:
            o2, a2, r2, w2 = teacher_decisions(
                cfg, mc, tc, seed, student=net, first_episode=r * tc.bc_episodes, progress=bar
            )
        finally:
            bar.close()
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


#: TensorBoard tag → the learner result key averaged over the modules
LEARNER_TAGS = (
    ("losses/policy_loss", "policy_loss"),
    ("losses/value_loss", "vf_loss"),
    ("losses/total_loss", "total_loss"),
    ("losses/entropy", "entropy"),
    ("losses/approx_kl", "mean_kl_loss"),
    ("losses/explained_variance", "vf_explained_var"),
    ("losses/clip_fraction", "clip_fraction"),  # PPO (agents.learner); APPO has none
    ("losses/grad_norm", "gradients_default_optimizer_global_norm"),
    ("charts/learning_rate", "default_optimizer_learning_rate"),
)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def scalars_from_result(result: dict, last_steps: float) -> tuple[dict[str, float], float]:
    """TensorBoard scalars from one ``algo.train()`` result, and the env steps so far.

    The learner metrics RLlib reports (policy, value and total loss, entropy, the KL
    to the sampling policy, the value function's explained variance, the global
    gradient norm before clipping, the learning rate; averaged over the modules),
    the episode return, length and per-agent returns, and env steps per second; for
    PPO the clip fraction (:mod:`agents.learner`: RLlib 2.60 does not report it)."""
    out: dict[str, float] = {}
    runners = result.get("env_runners", {})
    for tag, key in (("charts/episode_return", "episode_return_mean"),
                     ("charts/episode_length", "episode_len_mean")):  # fmt: skip
        if _finite(runners.get(key)):
            out[tag] = float(runners[key])
    for group, prefix in (("agent_episode_returns_mean", "agent_return"),
                          ("module_episode_returns_mean", "module_return")):  # fmt: skip
        for name, value in (runners.get(group) or {}).items():
            if _finite(value):
                out[f"charts/{prefix}/{name}"] = float(value)
    learners = {k: v for k, v in result.get("learners", {}).items() if k != "__all_modules__"}
    for tag, key in LEARNER_TAGS:
        vals = [float(v[key]) for v in learners.values() if _finite(v.get(key))]
        if vals:
            out[tag] = sum(vals) / len(vals)
    steps = float(result.get("num_env_steps_sampled_lifetime", last_steps))
    dt = float(result.get("time_this_iter_s", 0.0))
    if dt > 0:
        out["charts/env_steps_per_s"] = (steps - last_steps) / dt
    return out, steps


def hparams(data: dict) -> dict[str, Any]:
    """The ``model`` and ``train`` sections flattened for TensorBoard's HParams
    dashboard (``section.key``; lists and nested values as text)."""
    out: dict[str, Any] = {}
    for section in ("model", "train"):
        for k, v in (data.get(section) or {}).items():
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    plain = isinstance(v2, int | float | str)
                    out[f"{section}.{k}.{k2}"] = v2 if plain else str(v2)
            elif isinstance(v, bool | int | float | str):
                out[f"{section}.{k}"] = v
            else:
                out[f"{section}.{k}"] = str(v)
    return out


def window_tag(window: dict) -> str:
    """``validation/<trace stem>_<start>[_load<L>]``: the tag of one validation run."""
    tag = f"validation/{Path(str(window['trace'])).stem}_{window['start']}"
    return tag if window.get("load") is None else f"{tag}_load{window['load']:g}"


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
    progress=_no_progress,
) -> dict[str, Any]:
    """Greedy rollout of ``weights`` on the validation windows; metrics (and files).

    One run (one window, no ``train.eval_loads``): that run's simulator metrics
    (``out/metrics.json``, ``jobs.csv``). Several (``train.eval_extra_windows``, and
    each window once per load of ``train.eval_loads``): the first run goes to
    ``out/``, the others to ``out/extra_<k>/`` (window k of the extra ones) or
    ``out/<main|extra_<k>>_load_<L>/`` (with loads), and the result is
    ``{"avg_jct_s": average JCT over the jobs of all runs, "jobs": their number,
    "windows": [per run: trace, start, load, jobs, avg_jct_s]}``, also written to
    ``out/validation.json``. ``progress(total, label)``: a bar over each run's jobs."""
    from agents.policy import MarlPolicy, SingleAgentPolicy, agents_from_weights
    from marl_sched.runner import TraceOptions, build_cluster, load_workload, simulate

    agents = agents_from_weights(manifest, weights)
    cls = SingleAgentPolicy if agents.central else MarlPolicy
    topo, perf = build_cluster(cfg)
    runs = []
    loads = tc.eval_loads or (None,)
    windows = eval_windows(cfg, tc)
    for k, base in enumerate(windows):
        for j, load in enumerate(loads):
            window = base if load is None else {**base, "load": load}
            workload = load_workload(cfg, perf, TraceOptions(**window))
            policy = cls(agents=agents)
            n = len(runs) + 1
            bar = progress(len(workload.jobs), f"validation {n}/{len(windows) * len(loads)}")
            try:
                metrics, records, _ = simulate(
                    cfg, cls.name, workload, topo, perf, policy=policy, progress=bar
                )
            finally:
                bar.close()
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


def iteration_seed(seed: int, it: int, worker: int = 0) -> int:
    """The seed every RNG of iteration ``it`` starts from (``worker``: env runner index)."""
    return (seed * 1_000_003 + it * 7_919 + worker * 104_729) % 2**31


def _reseed_env_runner(env_runner, seed: int, it: int) -> None:
    """On an env runner: seed Python, numpy and torch, and start new episodes from
    seeded env resets at the next ``sample()``."""
    from ray.rllib.utils.debug import update_global_seed_if_necessary

    worker = int(getattr(env_runner, "worker_index", 0) or 0)
    s = iteration_seed(seed, it, worker)
    update_global_seed_if_necessary("torch", s)
    env_runner._seed = s
    env_runner._needs_initial_reset = True


class Trainer:
    """One training run (fresh or resumed) into a run folder.

    ``log(line)``: progress lines; ``progress(total, label)``: a progress bar factory
    (:class:`marl_sched.cli.Progress`'s signature) for the warm start's phases and the
    evaluations; ``on_result(metrics, checkpoint)``: called after every iteration
    (0 = the warm start) with the iteration's figures (``iteration``, ``env_steps``,
    ``validation_avg_jct_s`` when evaluated, the TensorBoard scalars) and the
    checkpoint folder written then, or None — a Ray Tune trial reports them.

    Reproducibility: every iteration starts by seeding Python, numpy and torch (in
    the driver and on every env runner) from ``(seed, iteration)`` and resetting the
    environments with a seed of the same, so an iteration's samples and updates depend
    only on the weights and optimizer state it starts from — which a checkpoint holds.
    A run resumed from iteration ``k`` therefore equals the uninterrupted run. The
    cost: an episode still running at the end of an iteration is cut there (its
    steps are trained on as a truncated episode, as RLlib does anyway) instead of
    being continued in the next iteration.
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        mc: ModelConfig,
        tc: TrainConfig,
        out: Path,
        *,
        resume: bool = False,
        log: Callable[[str], None] | None = None,
        progress=_no_progress,
        on_result: Callable[[dict, Path | None], None] | None = None,
    ) -> None:
        self.cfg, self.mc, self.tc = cfg, mc, tc
        self.paths = RunPaths(Path(out))
        self.resume = resume
        self.log = log or (lambda line: None)
        self.progress = progress
        self.on_result = on_result

    def run(self, iterations: int) -> dict[str, Any]:
        import torch
        from ray.rllib.utils.debug import update_global_seed_if_necessary
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
        state = {"iteration": 0, "env_steps": 0.0, "wall_s": 0.0, "best": None,
                 "best_runs": None, "scores": {}}  # fmt: skip
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
        # x axis: environment steps (the warm start at 0); a resumed run drops what an
        # interrupted one logged past its checkpoint
        purge = int(state["env_steps"]) + 1 if start else None
        writer = SummaryWriter(str(paths.tb), purge_step=purge)
        summary: dict[str, Any] = {"start_iteration": start, "evals": {}}
        try:
            if not self.resume:
                text = hyperparameter_text(resolved_config(cfg, mc, tc))
                writer.add_text("hyperparameters", text)
                if tc.bc_teacher:

                    def on_epoch(epoch: int, loss: float, accuracy: float) -> None:
                        writer.add_scalar("imitation/loss", loss, epoch)
                        writer.add_scalar("imitation/accuracy", accuracy, epoch)

                    weights = behaviour_cloning(
                        cfg, mc, tc, tc.seed, self.log, self.progress, on_epoch
                    )
                    if tc.algorithm == "APPO":  # its target network starts from them too
                        weights.update({f"_old_{k}": v for k, v in weights.items()})
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
                update_global_seed_if_necessary("torch", iteration_seed(tc.seed, it))
                algo.env_runner_group.foreach_env_runner(
                    lambda er, it=it: _reseed_env_runner(er, tc.seed, it),
                    local_env_runner=True,
                )
                result = algo.train()
                scalars, state["env_steps"] = scalars_from_result(result, state["env_steps"])
                ret = scalars.get("charts/episode_return")
                if ret is not None:
                    # RLlib's episode return sums the agents' rewards; each step's team
                    # reward goes to the agent that acted, so it is the team return
                    scalars["charts/episode_avg_jct_s"] = -ret * self.time_scale_s
                scalars["charts/iteration"] = float(it)
                wall = wall0 + time.perf_counter() - t_run
                self._after_iteration(
                    algo, it, scalars, wall, writer, summary, force=it == iterations
                )
            final = state["scores"].get(f"iter_{state['iteration']:06d}")
            best = state["best"][1] if state["best"] else final
            if final is not None:
                writer.add_hparams(
                    hparams(resolved_config(cfg, mc, tc)),
                    {"hparam/validation_avg_jct_s": final,
                     "hparam/best_validation_avg_jct_s": best},
                    run_name=".",
                    global_step=int(state["env_steps"]),
                )  # fmt: skip
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
            weights = gnn_weights(algo.learner_group.get_weights(module_ids=self.ids))
            manifest = self._manifest(
                self.builder, dataclasses.asdict(self.mc), self.ids, it, state["env_steps"], wall
            )
        if due_eval:
            eval_m = evaluate_weights(
                self.cfg, self.mc, tc, manifest, weights, self.paths.eval(it), self.progress
            )
            scalars["charts/avg_jct_s"] = eval_m["avg_jct_s"]
            for w in eval_m.get("windows", ()):
                scalars[window_tag(w)] = w["avg_jct_s"]
            summary["evals"][it] = eval_m["avg_jct_s"]
        step = int(state["env_steps"])
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, step)
        writer.flush()
        folder = None
        if due_ckpt:
            name = f"iter_{it:06d}"
            if eval_m is not None:
                avg, runs = eval_m["avg_jct_s"], validation_runs(eval_m)
                state["scores"][name] = avg
                if is_new_best(tc, avg, runs, state["best"], state["best_runs"]):
                    state["best"], state["best_runs"] = [name, avg], runs
            else:
                state["scores"][name] = None
            folder = self._checkpoint(algo, it, weights, manifest)
            self._prune()
        self.log(_progress_line(it, state["env_steps"], scalars, wall, eval_m))
        if self.on_result is not None:
            metrics = {"iteration": it, "env_steps": state["env_steps"], **scalars}
            if eval_m is not None:
                metrics["validation_avg_jct_s"] = eval_m["avg_jct_s"]
            self.on_result(metrics, folder)

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

    def _checkpoint(self, algo, it: int, weights, manifest) -> Path:
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
        return final

    def _prune(self) -> None:
        """With ``train.keep_checkpoints: k``, delete the checkpoints that are neither
        among the ``k`` with the lowest validation figure (unevaluated ones rank last),
        nor the newest, nor ``best`` — Tune's ``CheckpointConfig`` rule."""
        k = self.tc.keep_checkpoints
        if not k:
            return
        scores = self.state["scores"]
        ranked = sorted(scores, key=lambda n: (scores[n] is None, scores[n] or 0.0, n))
        keep = set(ranked[:k]) | {f"iter_{self.state['iteration']:06d}"}
        if self.state["best"] is not None:
            keep.add(self.state["best"][0])
        for name in sorted(set(scores) - keep):
            shutil.rmtree(self.paths.checkpoints / name, ignore_errors=True)
            del scores[name]


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
