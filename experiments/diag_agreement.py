"""Where does a cloned network part from its teacher? A diagnostic, not a benchmark.

For every scenario of a split and every seed, the simulator runs one of two drivers:

- ``teacher``: the teacher places every job (the states the clone was taught on, but
  in windows it never saw);
- ``student``: the network places every job (the states it visits itself, where its
  errors have compounded: DAgger's view);
- ``teacher-forwards`` / ``teacher-slots``: the network places every job, but takes
  the teacher's label wherever it is a forward / a slot or follow action (and legal):
  which kind of decision costs the network its teacher's lead (``--runs``: each run's
  average JCT).

At every job both are asked on the same state and one row is written per job (CSV):
its size, the cluster's GPU use when it arrives, its estimated work, whether the
student's whole placement equals the teacher's (GPU groups; servers; subclusters),
the predicted iteration time of each placement (:func:`agents.teachers.
predicted_iteration_time`, the job's own speed right after placing it), and the
teacher-forced decisions: walking the teacher's labels task by task (as the warm start
labels them, :func:`agents.warm_start.teacher_decisions`), how many of the network's
greedy actions equal the label, per kind of label (a GPU-group slot, a forward, a
follow action). A task forwarded to the agent that holds its group takes two
decisions (the forward, then the slot there).

    python experiments/diag_agreement.py --checkpoint DIR --teacher masked:mlfs-rl \\
        --split validation --seeds 3 --mode both --out results/.../agreement.csv

Reads only the given split (validation by default; the test split is refused).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

FIELDS = (
    "scenario", "seed", "mode", "job_id", "workers", "ps", "est_work_s", "gpu_used_frac",
    "teacher_waits", "student_waits", "same_groups", "same_servers", "same_subclusters",
    "t_student", "t_teacher", "forced_decisions", "forced_hits", "slot_labels", "slot_hits",
    "forward_labels", "forward_hits", "follow_labels", "follow_hits", "first_miss_task",
)  # fmt: skip


class AgreementProbe:
    """A policy for the simulator that asks both the network and the teacher on every
    job, writes a row, and lets ``mode``'s side place the job."""

    name = "agreement-probe"
    migrates = False

    def __init__(self, student, teacher, mode: str, rows: list, tag: dict) -> None:
        self.student, self.teacher, self.mode = student, teacher, mode
        self.rows, self.tag = rows, tag

    def reset(self, topology, seed: int = 0) -> None:
        self.student.reset(topology, seed)
        self.teacher.reset(topology, seed)

    def check_cluster(self, topology, perf) -> None:
        self.student.check_cluster(topology, perf)

    def rebalance(self, view):
        return []

    def forced(self, job, view, plan) -> dict:
        """Walk the teacher's labels from the job's first task; count the network's
        greedy actions that equal them (stops at the first label the masks refuse)."""
        from agents.credit_signal import label_kind
        from envs.rules import home_agent
        from envs.session import PlacementSession, plan_action

        b = self.student.builder
        s = PlacementSession(b, job, view, home_agent(job, b.n_agents))
        out = {f"{k}_{x}": 0 for k in ("slot", "forward", "follow") for x in ("labels", "hits")}
        out.update(forced_decisions=0, forced_hits=0, first_miss_task=-1)
        if plan is None or not s.feasible() or s.waits():
            return out
        while not s.done:
            obs = b.observe(s, s.agent)
            action = plan_action(s, plan)
            if obs["action_mask"][action] < 0.5:
                break
            kind = label_kind(action, b)
            hit = self.student.greedy(s.agent, obs) == action
            out["forced_decisions"] += 1
            out["forced_hits"] += int(hit)
            out[f"{kind}_labels"] += 1
            out[f"{kind}_hits"] += int(hit)
            if not hit and out["first_miss_task"] < 0:
                out["first_miss_task"] = s.task
            s.act(action)
        return out

    def place(self, job, view):
        from agents.teachers import predicted_iteration_time
        from envs.rules import placement_key

        topo = view.topology
        t_plan = self.teacher.place(job, view)
        s_plan = self.student.place(job, view)

        def servers(p):
            return sorted(topo.group_server[[*p.worker_groups, *p.ps_groups]].tolist())

        def subclusters(p):
            return sorted(set(topo.group_subcluster[[*p.worker_groups, *p.ps_groups]].tolist()))

        both = t_plan is not None and s_plan is not None
        row = {
            **self.tag,
            "mode": self.mode,
            "job_id": job.job_id,
            "workers": job.num_workers,
            "ps": job.num_ps,
            "est_work_s": job.gpu_work_s,
            "gpu_used_frac": 1.0 - float(view.free_gpus) / topo.n_gpus,
            "teacher_waits": int(t_plan is None),
            "student_waits": int(s_plan is None),
            "same_groups": int(both and placement_key(t_plan) == placement_key(s_plan)),
            "same_servers": int(both and servers(t_plan) == servers(s_plan)),
            "same_subclusters": int(both and subclusters(t_plan) == subclusters(s_plan)),
            "t_student": predicted_iteration_time(job, view, s_plan) if s_plan else np.nan,
            "t_teacher": predicted_iteration_time(job, view, t_plan) if t_plan else np.nan,
            **self.forced(job, view, t_plan),
        }
        self.rows.append(row)
        if self.mode in HYBRIDS:
            return self.hybrid(job, view, t_plan, HYBRIDS[self.mode])
        return t_plan if self.mode == "teacher" else s_plan

    def hybrid(self, job, view, plan, forced: frozenset):
        """The job placed by the network, except that at every decision whose teacher
        label (as :meth:`forced` walks them) is of a kind in ``forced`` and legal, the
        label is taken: which kind of decision costs the network its teacher's lead."""
        from agents.credit_signal import label_kind
        from envs.rules import home_agent
        from envs.session import PlacementSession, plan_action

        b = self.student.builder
        s = PlacementSession(b, job, view, home_agent(job, b.n_agents))
        if not s.feasible() or s.waits():
            return None
        while not s.done:
            obs = b.observe(s, s.agent)
            action = self.student.greedy(s.agent, obs)
            label = None if plan is None else plan_action(s, plan)
            if label is not None and obs["action_mask"][label] > 0.5:
                if label_kind(label, b) in forced:
                    action = label
            s.act(action)
            if not s.done and not s.feasible():
                return None
        return s.placement()


#: hybrid drivers: the network, with the teacher's labels of these kinds forced
HYBRIDS = {
    "teacher-forwards": frozenset({"forward"}),
    "teacher-slots": frozenset({"slot", "follow"}),
}


def probe_run(cfg, student, teacher, mode: str, tag: dict) -> tuple[list[dict], dict]:
    """One simulation of ``cfg``'s workload with ``mode``'s side placing every job:
    (a row per job, the run's metrics)."""
    from marl_sched.runner import build_cluster, load_workload, simulate

    topo, perf = build_cluster(cfg)
    workload = load_workload(cfg, perf)
    rows: list[dict] = []
    probe = AgreementProbe(student, teacher, mode, rows, tag)
    metrics, _, _ = simulate(cfg, "probe", workload, topo, perf, seed=tag["seed"], policy=probe)
    return rows, metrics


def run(args) -> list[dict]:
    from agents.policy import MarlPolicy
    from marl_sched.benchmark.suite import load_suite
    from marl_sched.policies import build_policy

    if args.split == "test":
        raise SystemExit("diag_agreement: the test split is not for diagnostics (use validation)")
    suite = load_suite(args.suite).with_overrides([], args.track)
    scenarios = suite.split(args.split)
    if args.scenarios:
        want = set(args.scenarios.split(","))
        scenarios = tuple(s for s in scenarios if s.name in want)
    modes = ("teacher", "student") if args.mode == "both" else tuple(args.mode.split(","))
    rows: list[dict] = []
    runs: list[dict] = []
    t0 = time.perf_counter()
    cells = [(sc, seed, m) for sc in scenarios for seed in range(args.seeds) for m in modes]
    for i, (sc, seed, mode) in enumerate(cells):
        student, teacher = MarlPolicy(args.checkpoint), build_policy(args.teacher, None)
        tag = {"scenario": sc.name, "seed": seed}
        got, metrics = probe_run(suite.config_for(sc, seed=seed), student, teacher, mode, tag)
        rows += got
        runs.append({**tag, "mode": mode, "avg_jct_s": metrics["avg_jct_s"]})
        done = time.perf_counter() - t0
        eta = done / (i + 1) * (len(cells) - i - 1)
        print(f"[{i + 1}/{len(cells)}] {sc.name} seed {seed} {mode}: {done:.0f} s, ETA {eta:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return rows, runs


SIZES = ((1, 1, "1 worker"), (2, 2, "2 workers"), (3, 8, "3-8 workers"), (9, 10**9, "9+ workers"))
LOADS = ((0.0, 0.5, "GPU use < 0.5"), (0.5, 0.8, "GPU use 0.5-0.8"), (0.8, 1.01, "GPU use >= 0.8"))
SUMMARY = (
    "mode", "group", "jobs", "work_share", "same_groups", "same_servers", "decisions",
    "agreement", "slot_agreement", "forward_agreement", "follow_agreement", "time_ratio",
    "slower_share",
)  # fmt: skip


def summarize(rows) -> list[dict]:
    """Per driver (mode) and per group of jobs (all; by workers; by GPU use when the
    job is placed): jobs placed by either side, their share of the estimated GPU work,
    whole-placement agreement (GPU groups; servers), teacher-forced per-decision agreement (all; per
    kind of label), the geometric mean of the student's over the teacher's predicted
    iteration time (jobs both placed) and the share of jobs where the student's is
    more than 1 % slower."""
    import pandas as pd

    d = pd.DataFrame(rows)
    # a job that stays queued is asked again at every later event: only the attempts
    # where one side places it are decisions (the wait rule is the same for both)
    d = d[(d.teacher_waits == 0) | (d.student_waits == 0)].copy()
    d["work"] = pd.to_numeric(d["est_work_s"], errors="coerce").fillna(0.0)
    out = []
    for mode, m in d.groupby("mode", sort=False):
        groups = [("all jobs", m)]
        groups += [(n, m[(m.workers >= lo) & (m.workers <= hi)]) for lo, hi, n in SIZES]
        groups += [(n, m[(m.gpu_used_frac >= lo) & (m.gpu_used_frac < hi)]) for lo, hi, n in LOADS]
        for name, g in groups:
            both = g.dropna(subset=["t_student", "t_teacher"])
            ratio = both.t_student / both.t_teacher

            def share(hits, labels, g=g):
                n = g[labels].sum()
                return g[hits].sum() / n if n else float("nan")

            out.append({
                "mode": mode, "group": name, "jobs": len(g),
                "work_share": g.work.sum() / max(m.work.sum(), 1e-12),
                "same_groups": g.same_groups.mean(), "same_servers": g.same_servers.mean(),
                "decisions": int(g.forced_decisions.sum()),
                "agreement": share("forced_hits", "forced_decisions"),
                **{f"{k}_agreement": share(f"{k}_hits", f"{k}_labels")
                   for k in ("slot", "forward", "follow")},
                "time_ratio": float(np.exp(np.log(ratio).mean())) if len(both) else float("nan"),
                "slower_share": float((ratio > 1.01).mean()) if len(both) else float("nan"),
            })  # fmt: skip
    return out


def write_csv(path: Path, rows: list[dict], fields) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a marl checkpoint folder")
    ap.add_argument("--teacher", default="masked:mlfs-rl", help="a registered policy")
    ap.add_argument("--suite", default="benchmarks/default.yaml")
    ap.add_argument("--split", default="validation")
    ap.add_argument("--track", default="placement")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--scenarios", default="", help="comma-separated names (default: all)")
    modes = ("teacher", "student", *HYBRIDS)
    ap.add_argument(
        "--mode",
        default="both",
        help=f"both (teacher,student) or comma-separated of {', '.join(modes)}",
    )
    ap.add_argument("--out", required=True, type=Path, help="the per-job rows (CSV)")
    ap.add_argument("--summary", type=Path, help="also write summarize()'s table (CSV)")
    ap.add_argument("--runs", type=Path, help="also write each run's average JCT (CSV)")
    args = ap.parse_args(argv)
    if not 1 <= args.seeds <= 10:
        ap.error("--seeds: 1..10")
    bad = [m for m in args.mode.split(",") if m not in (*modes, "both")]
    if bad:
        ap.error(f"--mode: {bad[0]!r} is not one of both, {', '.join(modes)}")
    rows, runs = run(args)
    write_csv(args.out, rows, FIELDS)
    if args.runs:
        write_csv(args.runs, runs, ("scenario", "seed", "mode", "avg_jct_s"))
    if args.summary:
        write_csv(args.summary, summarize(rows), SUMMARY)
    print(f"{len(rows)} jobs -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
