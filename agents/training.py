"""The training run loop (:class:`Trainer`): config → seed → Ray → algorithm (restored
when resuming) → loop (train, log, evaluate, checkpoint). The rest of a run lives in
:mod:`agents.run_folder`, :mod:`agents.algorithm`, :mod:`agents.warm_start`,
:mod:`agents.selection` and :mod:`agents.records`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from agents.algorithm import algo_config, env_setup, module_ids
from agents.config import ModelConfig, TrainConfig
from agents.records import (
    hparams,
    hyperparameter_text,
    no_progress,
    progress_line,
    resolved_config,
    scalars_from_result,
    timed,
    window_tag,
)
from agents.run_folder import (
    RunPaths,
    check_config_data,
    prune,
    resume_point,
    write_checkpoint,
    write_run_config,
)
from agents.selection import evaluate_weights, is_new_best, validation_runs
from agents.warm_start import behaviour_cloning
from marl_sched.config import ExperimentConfig
from marl_sched.errors import InputError
from marl_sched.metrics import atomic_write_text


def iteration_seed(seed: int, it: int, worker: int = 0) -> int:
    """The seed every RNG of iteration ``it`` starts from (``worker``: env runner index)."""
    return (seed * 1_000_003 + it * 7_919 + worker * 104_729) % 2**31


def _sub_envs(env_runner) -> list:
    """The unwrapped environments an env runner steps (one per vectorised slot)."""
    env = env_runner.env.unwrapped
    return [e.unwrapped for e in getattr(env, "envs", [env])]


def _reseed_env_runner(env_runner, seed: int, it: int) -> None:
    """On an env runner: seed Python, numpy and torch, seed each of its envs' window
    draws (env ``i`` from the iteration's seed + ``i``), and start new episodes at the
    next ``sample()``. The runner's own seed is cleared: RLlib would reset every
    episode with it, making every episode of an iteration the same window."""
    from ray.rllib.utils.debug import update_global_seed_if_necessary

    worker = int(getattr(env_runner, "worker_index", 0) or 0)
    s = iteration_seed(seed, it, worker)
    update_global_seed_if_necessary("torch", s)
    for i, env in enumerate(_sub_envs(env_runner)):
        env.reseed(s + i)
    env_runner._seed = None
    env_runner._needs_initial_reset = True


def check_updated(result: dict, it: int, tc: TrainConfig, before: float | None) -> float:
    """The env steps the learners have trained on so far, after iteration ``it``'s
    ``result``; ``InputError`` (exit 2) when the iteration trained none, or no more
    than ``before`` (the count after the previous one)."""
    figures = result.get("learners", {}).get("__all_modules__", {})
    now = float(figures.get("num_env_steps_trained") or 0)
    total = float(figures.get("num_env_steps_trained_lifetime") or 0)
    if now <= 0 or (before is not None and total <= before):
        raise InputError(
            f"train: iteration {it}: {tc.algorithm} made no learner update (0 env steps "
            f"trained of train.train_batch_size {tc.train_batch_size}); check "
            "train.train_batch_size and train.rllib.env_runners"
        )
    return total


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _rank(part: str) -> int:
    """The rank of a progress-line figure; the lowest is dropped first when too wide."""
    for rank, match in enumerate((
        lambda p: p.startswith("("),
        lambda p: p.endswith(" steps/s"),
        lambda p: p.startswith("steps "),
        lambda p: p.endswith(" s") and p[:-2].isdigit(),
        lambda p: p.startswith("return "),
    )):  # fmt: skip
        if match(part):
            return rank
    return 5


def iteration_line(it: int, total: int, line: str, eta_s: float | None, width: int) -> str:
    """``iteration k/N, ETA …`` and the figures of ``line``
    (:func:`agents.records.progress_line`, without its own ``iter k``) on one line of
    at most ``width`` characters: the figures that do not fit are dropped, the least
    telling first (:func:`_rank`)."""
    head = f"iteration {it}/{total}"
    if eta_s is not None and it < total:
        head += f", ETA {_duration(eta_s)}"
    parts = line.split("  ")[1:]
    while parts and len("  ".join([head, *parts])) > width:
        parts.remove(min(parts, key=_rank))
    return "  ".join([head, *parts])[: max(width, 1)]


class Trainer:
    """One training run (fresh or resumed) into a run folder.

    ``log(line)``: progress lines; ``progress(total, label)``: a progress bar factory
    (:class:`marl_sched.cli.Progress`'s signature) for the warm start's phases and the
    evaluations; ``on_result(metrics, checkpoint)``: called after every iteration
    (0 = the warm start) with the iteration's figures (``iteration``, ``env_steps``,
    ``validation_avg_jct_s`` when evaluated, the TensorBoard scalars) and the
    checkpoint folder written then, or None — a Ray Tune trial reports them.

    Every iteration seeds every RNG (driver and env runners) from ``(seed, iteration)``
    and starts new episodes, so a run resumed from iteration ``k`` equals the
    uninterrupted run (an episode running at an iteration's end is truncated there).
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
        progress=no_progress,
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
        torch.set_num_threads(1)  # small minibatches: more threads ran 5-20x slower
        torch.use_deterministic_algorithms(True)  # same seed, same weights
        _, _, builder = env_setup(cfg, mc, tc, tc.seed)

        self.builder, self.ids = builder, module_ids(builder.agent_ids, mc)
        state = {"iteration": 0, "env_steps": 0.0, "wall_s": 0.0, "best": None,
                 "best_runs": None, "scores": {}}  # fmt: skip
        if self.resume:
            # latest, the signature of its whole tree and state, the run's config: all
            # checked before the algorithm is built and RLlib unpickles its state
            ckpt, saved = resume_point(paths)
            check_config_data(ckpt, resolved_config(cfg, mc, tc))
            state.update(saved)
        else:
            # the record says what runs: --iterations, not the config file's
            # train.iterations (a resumed run keeps the config its checkpoints signed)
            tc = self.tc = dataclasses.replace(tc, iterations=iterations)
            write_run_config(paths, resolved_config(cfg, mc, tc))
        algo = algo_config(cfg, mc, tc, tc.seed, builder.agent_ids).build_algo()
        if self.resume:
            algo.restore_from_path(str((ckpt / "rllib").resolve()))
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
                warm: dict[str, float] = {}
                if tc.bc_teacher:

                    def on_epoch(epoch: int, loss: float, accuracy: float) -> None:
                        writer.add_scalar("imitation/loss", loss, epoch)
                        writer.add_scalar("imitation/accuracy", accuracy, epoch)

                    with timed(warm, "warm_start"):
                        weights = behaviour_cloning(
                            cfg, mc, tc, tc.seed, self.log, self.progress, on_epoch
                        )
                    algo.learner_group.set_weights({m: weights for m in self.ids})
                    algo.env_runner_group.sync_weights(
                        from_worker_or_learner_group=algo.learner_group, inference_only=True
                    )
                # iteration 0: the starting policy (warm-started or freshly initialised),
                # evaluated and checkpointed: the first point of the learning curve, and
                # what selection keeps if no update improves on it
                self._after_iteration(
                    algo, 0, warm, wall0 + time.perf_counter() - t_run, writer, summary,
                    force=True,
                )  # fmt: skip
            trained = None  # the learners' env steps so far, once an iteration ran
            self._pace = (iterations, start, time.perf_counter())  # for the ETA
            for it in range(start + 1, iterations + 1):
                update_global_seed_if_necessary("torch", iteration_seed(tc.seed, it))
                algo.env_runner_group.foreach_env_runner(
                    lambda er, it=it: _reseed_env_runner(er, tc.seed, it),
                    local_env_runner=True,
                )
                cpu = time.process_time()
                result = algo.train()
                cpu = time.process_time() - cpu
                trained = check_updated(result, it, tc, trained)
                # RLlib's timers are moving averages over iterations: dropped, so that
                # the next result's are that iteration's own (agents.records.phase_times)
                algo.metrics.delete("timers", key_error=False)
                scalars, state["env_steps"] = scalars_from_result(result, state["env_steps"])
                scalars["time/train_cpu_s"] = cpu
                scalars["charts/iteration"] = float(it)
                wall = wall0 + time.perf_counter() - t_run
                self._after_iteration(
                    algo, it, scalars, wall, writer, summary, force=it == iterations
                )
            final = state["scores"].get(f"iter_{state['iteration']:06d}")
            best = state["best"][1] if state["best"] else final
            if final is not None:
                writer.add_hparams(
                    hparams(resolved_config(cfg, mc, tc), len(self.builder.agent_ids),
                            len(self.ids)),
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
            weights = algo.learner_group.get_weights(module_ids=self.ids)
            manifest = self._manifest(
                self.builder, dataclasses.asdict(self.mc), self.ids, it, state["env_steps"], wall
            )
        if due_eval:
            with timed(scalars, "validate"):
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
        self.log(self._line(it, progress_line(it, state["env_steps"], scalars, wall, eval_m)))
        if self.on_result is not None:
            metrics = {"iteration": it, "env_steps": state["env_steps"], **scalars}
            if eval_m is not None:
                metrics["validation_avg_jct_s"] = eval_m["avg_jct_s"]
            self.on_result(metrics, folder)

    def _line(self, it: int, line: str) -> str:
        """The progress line as ``iteration k/N, ETA …`` fitting the terminal, the ETA
        from this process's iterations so far (none before the first)."""
        import shutil

        total, start, t0 = getattr(self, "_pace", (self.tc.iterations, it, 0.0))
        eta = None
        if it > start:
            eta = (time.perf_counter() - t0) / (it - start) * (total - it)
        width = shutil.get_terminal_size((100, 24)).columns - 1
        return iteration_line(it, total, line, eta, width)

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
        """``checkpoints/iter_X`` (:func:`agents.run_folder.write_checkpoint`): the
        algorithm state, the modules, the run's config; signed; then the pointers."""
        from agents.policy import save_modules

        def save(folder: Path) -> None:
            algo.save_to_path(str((folder / "rllib").resolve()))
            save_modules(folder, weights, manifest)
            text = yaml.safe_dump(manifest["config"], sort_keys=False)
            atomic_write_text(folder / "config.yaml", text)

        return write_checkpoint(self.paths, it, self.state, save)

    def _prune(self) -> None:
        prune(self.paths, self.state, self.tc.keep_checkpoints)
