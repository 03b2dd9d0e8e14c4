"""Harmony, MLF-H and MLF-RL: capacity, learning, checkpoints, MLF-H's priority."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from agents.baselines.checkpoint import DEFAULT_DIR, save_checkpoint
from agents.baselines.episodes import ScenarioRun
from agents.baselines.harmony import HarmonyNet, HarmonyPolicy, save_harmony
from agents.baselines.harmony_train import HarmonyConfig, train_harmony
from agents.baselines.mlf_h import (
    MlfHPolicy,
    mlfs_priority_key,
)
from agents.baselines.mlfs import MlfsNet, MlfsRlPolicy, save_mlfs
from agents.baselines.mlfs_train import MlfsConfig, train_mlfs_rl
from agents.baselines.reward_model import RewardNet
from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.ordering import ORDERINGS, OrderingContext
from marl_sched.perf import PerformanceModel
from marl_sched.simulator import Simulator
from tests.helpers import random_jobs, tiny_topology


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny networks: intra-op threads only spin against the other processes here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cluster():
    """8 servers of 8 GPUs, half V100 and half K80: placement matters."""
    topo = tiny_topology(gpu_types=("v100", "k80"))
    return topo, PerformanceModel(topo)


@pytest.fixture(scope="module")
def jobs(cluster):
    return random_jobs(cluster[1], 40, seed=3, max_workers=8, mean_gap=60.0)


def _untrained_harmony() -> HarmonyPolicy:
    torch.manual_seed(0)
    return HarmonyPolicy(net=HarmonyNet(16))


def _untrained_mlfs() -> MlfsRlPolicy:
    torch.manual_seed(0)
    return MlfsRlPolicy(net=MlfsNet(16))


POLICIES = {
    "mlfs-h": MlfHPolicy,
    "harmony-untrained": _untrained_harmony,
    "mlfs-rl-untrained": _untrained_mlfs,
    "harmony-shipped": HarmonyPolicy,
    "mlfs-rl-shipped": MlfsRlPolicy,
}


# ---------------------------------------------------------------------- capacity


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_respects_capacity_and_completes_every_job(name, cluster, jobs):
    topo, perf = cluster
    policy = POLICIES[name]()
    policy.reset(topo, 0)
    sim = Simulator(topo, jobs, perf=perf)
    placed = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        p = policy.place(job, view)
        if p is not None:
            assert len(p.worker_groups) == job.num_workers and len(p.ps_groups) == job.num_ps
            need = np.bincount(np.asarray(p.worker_groups, int), minlength=topo.n_groups)
            assert np.all(need <= view.group_free), "a GPU would be double-booked"
            spec = CATALOGUE[job.model]
            srv_w = topo.group_server[np.asarray(p.worker_groups, int)]
            srv_p = topo.group_server[np.asarray(p.ps_groups, int)]
            cpu = (
                np.bincount(srv_w, minlength=topo.n_servers) * spec.cpu_worker
                + np.bincount(srv_p, minlength=topo.n_servers) * spec.cpu_ps
            )
            assert np.all(cpu <= view.server_cpu_free + 1e-9)
            placed += 1
        sim.apply(p)
    assert placed == len(jobs)
    assert len(sim.result()) == len(jobs)
    assert not sim.unplaceable


# ---------------------------------------------------------------------- learning


def _tiny_runs(cluster, jobs):
    """A scenario made of the given jobs under the default config."""
    from marl_sched.config import ExperimentConfig
    from marl_sched.runner import Workload

    topo, perf = cluster
    return [ScenarioRun("tiny", ExperimentConfig(), topo, perf, Workload(list(jobs), "tiny", {}))]


def test_harmony_improves_over_its_untrained_start(cluster, jobs):
    runs = _tiny_runs(cluster, jobs)
    cfg = HarmonyConfig(
        iterations=12,
        episode_jobs=40,
        eval_every=4,
        hidden=16,
        replay_capacity=2000,
        batch_size=64,
        updates_per_episode=4,
        reward_windows=1,
        reward_hidden=16,
        reward_epochs=40,
        bc_windows=1,
        lr=3e-3,
        patience=0,
        seed=1,
    )
    res = train_harmony(runs, runs, cfg)
    untrained = res.history[0]["val_score"]
    trained = res.metadata["best_val_score"]
    assert res.reward_fit.val_mre < 0.3  # the reward model predicts speeds
    assert trained < 0.9 * untrained, (trained, untrained)


def test_mlfs_rl_clones_mlf_h_then_improves_over_its_untrained_start(cluster, jobs):
    runs = _tiny_runs(cluster, jobs)
    cfg = MlfsConfig(
        iterations=3,
        episode_jobs=40,
        rollouts=2,
        bc_windows=2,
        bc_epochs=30,
        hidden=16,
        eval_every=1,
        patience=0,
        seed=0,
    )
    res = train_mlfs_rl(runs, runs, cfg)
    init, bc = res.history[0], res.history[1]
    assert (init["phase"], bc["phase"]) == ("init", "bc")
    assert bc["bc_agreement"] > 0.9
    assert res.metadata["best_val_score"] < 0.9 * init["val_score"], (res.metadata, init)
    again = train_mlfs_rl(runs, runs, cfg)  # seeded: the same run twice
    assert [h["val_score"] for h in again.history] == [h["val_score"] for h in res.history]


def test_training_stops_at_the_wall_cap_and_on_patience(cluster, jobs):
    runs = _tiny_runs(cluster, jobs)
    base = MlfsConfig(iterations=50, episode_jobs=20, rollouts=2, bc_windows=1, bc_epochs=2,
                      hidden=8, eval_every=1, seed=0)  # fmt: skip
    capped = train_mlfs_rl(runs, runs, dataclasses.replace(base, wall_cap_s=1e-3, patience=0))
    assert capped.metadata["stop_reason"] == "wall cap"
    assert capped.history[-1]["iteration"] == 1
    patient = train_mlfs_rl(runs, runs, dataclasses.replace(base, wall_cap_s=0, patience=2))
    assert patient.metadata["stop_reason"] == "patience"
    scores = [h["val_score"] for h in patient.history]
    best = scores.index(min(scores))
    assert len(scores) - 1 - best == 2  # stopped two validations after the best
    assert patient.metadata["best_val_score"] == min(scores)


def test_training_refuses_the_test_split():
    from agents.baselines.episodes import load_split

    with pytest.raises(InputError, match="test split"):
        load_split("test")


# ---------------------------------------------------------------------- checkpoints


def _save_both(tmp_path, meta=None):
    save_harmony(tmp_path / "harmony.pt", HarmonyNet(8), RewardNet(8), meta or {})
    save_mlfs(tmp_path / "mlfs_rl.pt", MlfsNet(8), meta or {})


def test_checkpoint_round_trip_serves_any_topology(tmp_path, cluster):
    topo, perf = cluster
    _save_both(tmp_path)
    for cls in (HarmonyPolicy, MlfsRlPolicy):
        for t in (topo, tiny_topology(subclusters=1), tiny_topology(gpu_types=("k80",))):
            policy = cls(checkpoint=tmp_path)  # a folder: finds its own file
            policy.reset(t, 0)
            policy.check_cluster(t, PerformanceModel(t))


def _other_layout(tmp_path, cls, file) -> None:
    """Rewrite ``file`` as if made for another feature layout (one feature renamed)."""
    policy = cls(checkpoint=tmp_path / file)
    layout = policy.layout()
    key = sorted(layout["features"])[0]
    layout["features"][key] = ["renamed", *layout["features"][key][1:]]
    meta = {k: v for k, v in policy.metadata.items() if k not in ("layout", "hidden")}
    if cls is HarmonyPolicy:
        save_harmony(tmp_path / file, policy.net, RewardNet(8), meta)
    else:
        save_mlfs(tmp_path / file, policy.net, meta)
    payload = torch.load(tmp_path / file, weights_only=True)
    import json

    m = json.loads(payload["metadata"])
    m["layout"] = layout
    payload["metadata"] = json.dumps(m)
    torch.save(payload, tmp_path / file)


@pytest.mark.parametrize("cls, file", [(HarmonyPolicy, "harmony.pt"), (MlfsRlPolicy, "mlfs_rl.pt")])
def test_a_checkpoint_for_another_layout_is_refused(tmp_path, cluster, cls, file):
    topo, perf = cluster
    _save_both(tmp_path)
    _other_layout(tmp_path, cls, file)
    with pytest.raises(InputError, match=f"{file}: made for another feature layout"):
        cls(checkpoint=tmp_path / file).check_cluster(topo, perf)
    with pytest.raises(InputError, match="made for another feature layout"):
        cls(checkpoint=tmp_path / file).reset(topo, 0)


def test_benchmark_refuses_a_checkpoint_for_another_layout_with_exit_2(tmp_path, capsys):
    from marl_sched.cli import main

    _save_both(tmp_path)
    _other_layout(tmp_path, MlfsRlPolicy, "mlfs_rl.pt")
    out = tmp_path / "bench"
    argv = ["benchmark", "--split", "validation", "--policies", "first-fit,mlfs-rl",
            "--checkpoint", f"mlfs-rl={tmp_path / 'mlfs_rl.pt'}", "--seeds", "1",
            "--out", str(out), "--local", "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--policies: mlfs-rl on scenario" in err[0]
    assert "mlfs_rl.pt: made for another feature layout" in err[0]
    assert not (out / "cells").exists()


@pytest.mark.parametrize("cls, file", [(HarmonyPolicy, "harmony.pt"), (MlfsRlPolicy, "mlfs_rl.pt")])
def test_bad_checkpoints_raise_input_error_naming_the_file(tmp_path, cluster, cls, file):
    _save_both(tmp_path)
    good = (tmp_path / file).read_bytes()
    cases = {
        "missing.pt": None,
        "garbage.pt": b"not a torch file at all",
        "truncated.pt": good[: len(good) // 2],
    }
    for name, data in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match=name):
            cls(checkpoint=tmp_path / name)
    other = "mlfs_rl.pt" if file == "harmony.pt" else "harmony.pt"
    with pytest.raises(InputError, match=r"checkpoint, expected"):
        cls(checkpoint=tmp_path / other)
    kind = "harmony" if cls is HarmonyPolicy else "mlfs-rl"
    save_checkpoint(tmp_path / "v99.pt", kind, 99, {}, {"hidden": 8})
    with pytest.raises(InputError, match="v99.pt: feature layout version 99"):
        cls(checkpoint=tmp_path / "v99.pt")
    net = (
        {"actor_critic": HarmonyNet(8).state_dict()}
        if kind == "harmony"
        else {"policy": MlfsNet(8).state_dict()}
    )
    version = HarmonyPolicy.layout_version if kind == "harmony" else MlfsRlPolicy.layout_version
    save_checkpoint(tmp_path / "shape.pt", kind, version, net, {"hidden": 12})
    with pytest.raises(InputError, match="shape.pt: weights of .* do not fit"):
        cls(checkpoint=tmp_path / "shape.pt")


def test_shipped_checkpoints_load_and_record_their_layout_and_split():
    for cls, file in ((HarmonyPolicy, "harmony.pt"), (MlfsRlPolicy, "mlfs_rl.pt")):
        assert (DEFAULT_DIR / file).is_file()
        policy = cls()
        assert policy.metadata["layout"] == cls.layout()
        assert policy.metadata["trained_on"] == "benchmarks/default.yaml train split"


# ---------------------------------------------------------------------- MLF-H


def _job(i: int, workers: int, iterations: float, model: str = "resnet-50") -> Job:
    ps = 0 if workers == 1 else math.ceil(workers / 4)
    return Job(i, f"j{i}", model, workers, ps, iterations, float(i), 100.0)


def test_mlfs_priority_prefers_less_work_and_smaller_jobs_and_matches_the_ordering():
    short, long_ = _job(0, 1, 1e2), _job(1, 1, 1e6)
    small, big = _job(2, 1, 1e4), _job(3, 16, 1e4)
    assert mlfs_priority_key(short) < mlfs_priority_key(long_)
    assert mlfs_priority_key(small) < mlfs_priority_key(big)
    rng = np.random.default_rng(0)
    ordering = MlfHPolicy().ordering()
    assert ordering.name == "mlfs-priority" and ORDERINGS["mlfs-priority"]().name == ordering.name
    for i in range(50):
        j = _job(
            i,
            int(rng.choice([1, 2, 4, 8, 16])),
            float(rng.uniform(1, 1e7)),
            str(rng.choice(sorted(CATALOGUE))),
        )
        # the simulator's ordering, handed the job's (visible) iterations as its estimate
        ctx = OrderingContext(est_iterations=lambda job: job.iterations)
        assert ordering.key(j, ctx) == mlfs_priority_key(j)


#: a hand-built queue on one 8-GPU server: job 0 holds every GPU; jobs 1-4 each need
#: the whole server and wait behind it, with estimated work far apart
_QUEUE_WORK = {1: 1e6, 2: 1e3, 3: 1e5, 4: 1e2}


def _service_order(ordering) -> list[int]:
    topo = tiny_topology(subclusters=1, racks=1, servers=1)
    jobs = [_job(0, 8, 50.0)] + [_job(i, 8, w) for i, w in _QUEUE_WORK.items()]
    sim = Simulator(topo, jobs, perf=PerformanceModel(topo), ordering=ordering,
                    estimate=lambda job: job.iterations)  # fmt: skip
    policy, order = MlfHPolicy(load_control=False), []
    policy.reset(topo, 0)
    while (job := sim.next_decision()) is not None:
        order.append(job.job_id)
        sim.apply(policy.place(job, sim.view()))
    return order


def test_mlfs_orderings_serve_a_hand_built_queue_by_priority(cluster, jobs):
    by_priority = sorted(_QUEUE_WORK, key=lambda i: _QUEUE_WORK[i])
    assert _service_order("fifo") == [0, 1, 2, 3, 4]
    assert _service_order(MlfHPolicy().ordering()) == [0, *by_priority]
    # MLF-RL's order network, cloned on MLF-H's choice of the next job, agrees
    from agents.baselines.mlfs import MlfsOrderNet
    from agents.baselines.mlfs_train import clone_order

    torch.manual_seed(0)
    net = MlfsOrderNet(8)
    run = _tiny_runs(cluster, jobs)[0]
    agreement = clone_order(net, [(run, run.workload.jobs)], MlfsConfig(bc_epochs=30),
                            np.random.default_rng(0))  # fmt: skip
    assert agreement > 0.9
    learned = MlfsRlPolicy(net=MlfsNet(8), order_net=net).ordering()
    assert learned.dynamic and _service_order(learned) == [0, *by_priority]


def test_load_control_moves_a_job_off_an_overloaded_server():
    # eight 1-GPU resnet-50 jobs packed on server 0 slow each other 2x; server 1 is idle
    topo = tiny_topology(subclusters=1, racks=1, servers=2)
    jobs = [_job(i, 1, 1e7) for i in range(8)]
    sim = Simulator(topo, jobs, perf=PerformanceModel(topo))
    for k in range(8):
        assert sim.next_decision() is not None
        sim.apply(Placement((k // 2,), ()))
    view = sim.view()
    assert min(r.slowdown for r in view.running()) > 1.25
    policy = MlfHPolicy()
    policy.reset(topo, 0)
    moves = policy.rebalance(view)
    assert len(moves) == 1
    job_id, placement = moves[0]
    # the lowest priority moves first: the job that has attained the most service
    attained = {r.job_id: r.attained_gpu_s for r in view.running()}
    assert attained[job_id] == max(attained.values())
    assert set(topo.group_server[list(placement.worker_groups)].tolist()) == {1}
    sim.migrate(job_id, placement)
    assert sim.stats.migrations == 1
    assert MlfHPolicy(load_control=False).rebalance(sim.view()) == []
    # the moved job is not moved again; the next lowest-priority one goes instead
    again = policy.rebalance(sim.view())
    assert [j for j, _ in again] != [job_id]


def _mlf_h_servers(jobs: list[Job]) -> list[set[int]]:
    """Servers of each job's workers under MLF-H on two idle 8-GPU servers (all jobs
    run for days, so every placement sees the ones before it)."""
    topo = tiny_topology(subclusters=1, racks=1, servers=2)
    sim = Simulator(topo, jobs, perf=PerformanceModel(topo))
    policy, out = MlfHPolicy(), []
    while (job := sim.next_decision()) is not None:
        p = policy.place(job, sim.view())
        out.append(set(topo.group_server[list(p.worker_groups)].tolist()))
        if job.num_ps:  # workers near their PS: all on the PS's server
            assert set(topo.group_server[list(p.ps_groups)].tolist()) == out[-1]
        sim.apply(p)
    return out


def test_mlf_h_avoids_an_overloaded_server_when_another_has_room():
    # after 7 workers server 0 is 7/8 busy (> θ = 0.8); its one free GPU would be the
    # ideal host of a 1-GPU job, but load control sends the job to the idle server
    first, second = _mlf_h_servers([_job(0, 7, 1e6), _job(1, 1, 1e6)])
    assert first == {0} and second == {1}


def test_mlf_h_uses_an_overloaded_server_when_nothing_else_fits():
    first, second, third = _mlf_h_servers([_job(0, 7, 1e6), _job(1, 8, 1e6), _job(2, 1, 1e6)])
    assert first == {0} and second == {1} and third == {0}


def test_mlf_h_imports_no_torch():
    code = "import sys, agents.baselines.mlf_h; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_evaluate_rolls_out_a_baseline_checkpoint(tmp_path, capsys):
    import json

    from marl_sched.cli import main
    from marl_sched.config import REPO_ROOT

    out = tmp_path / "ev"
    argv = [
        "evaluate",
        "--checkpoint",
        str(REPO_ROOT / "checkpoints/baselines/mlfs_rl.pt"),
        "--trace",
        str(REPO_ROOT / "configs/traces/philly_sample.csv"),
        "--start",
        "2200",
        "--max-jobs",
        "30",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["policy"] == "mlfs-rl" and metrics["jobs_completed"] == 30
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"\x80\x02not really torch")
    argv[2] = str(bad)
    argv[-2] = str(tmp_path / "ev2")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
    assert not (tmp_path / "ev2" / "metrics.json").exists()


def test_numpy_inference_scores_as_the_torch_networks():
    from agents.baselines.fast_mlp import FastMLP
    from agents.baselines.harmony import JOB_FEATURES, SERVER_FEATURES
    from agents.baselines.mlfs import FEATURES

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    h = HarmonyNet(16)
    sf = torch.from_numpy(rng.normal(size=(1, 12, len(SERVER_FEATURES))).astype(np.float32))
    jf = torch.from_numpy(rng.normal(size=(1, len(JOB_FEATURES))).astype(np.float32))
    logits, _ = h(sf, jf, torch.ones(1, 12, dtype=torch.bool))
    x = torch.cat([sf, jf[:, None, :].expand(1, 12, -1)], dim=-1)[0].numpy()
    fast = FastMLP([*h.encoder, h.actor])(x)[:, 0]
    np.testing.assert_allclose(fast, logits[0].detach().numpy(), rtol=1e-5, atol=1e-5)
    m = MlfsNet(16)
    xm = rng.normal(size=(12, len(FEATURES))).astype(np.float32)
    want = m(torch.from_numpy(xm)[None], torch.ones(1, 12, dtype=torch.bool))[0].detach().numpy()
    np.testing.assert_allclose(FastMLP(m.net)(xm)[:, 0], want, rtol=1e-5, atol=1e-5)


def test_benchmark_pools_several_training_runs_and_never_reuses_a_changed_checkpoint(tmp_path):
    """``--checkpoint mlfs-rl=A+B``: each checkpoint (training run) runs every scenario x
    seed, the summary pools them (runs x seeds per scenario), and a checkpoint whose
    content changed is a new cell, not the cached one."""
    import csv

    from marl_sched.benchmark.cells import run_cell
    from marl_sched.benchmark.command import run_benchmark
    from marl_sched.benchmark.report import normalised
    from marl_sched.benchmark.stats import iqm_interval
    from tests.marl_sched.test_benchmark import _suite_data, _write

    suite = _write(tmp_path, _suite_data())
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        paths.append(tmp_path / f"run{seed}" / "mlfs_rl.pt")
        paths[-1].parent.mkdir()
        save_mlfs(paths[-1], MlfsNet(8), {})
    spec = f"mlfs-rl={paths[0]}+{paths[1]}"
    out = tmp_path / "bench"
    ran: list[dict] = []

    def recording(specs, on_done):
        for s in specs:
            ran.append(s)
            on_done(s, run_cell(s))

    policies = ["first-fit", "mlfs-rl"]
    summary, timing = run_benchmark(
        suite, "test", policies, 2, out, checkpoint=spec, executor=recording, figures=False
    )
    assert timing["cells"] == len(ran) == 2 * (1 + 2) * 2  # scenarios x (runs) x seeds
    rows = list(csv.DictReader((out / "runs.csv").open()))
    mine = [r for r in rows if r["policy"] == "mlfs-rl"]
    assert {(r["run"], r["checkpoint"]) for r in mine} == {
        ("0", str(paths[0])),
        ("1", str(paths[1])),
    }
    assert {r["checkpoint"] for r in rows if r["policy"] == "first-fit"} == {""}
    # the pooled figure is the IQM over both runs' seeds in each scenario; the
    # bootstrap sees the runs as their own level (per scenario: one array per run)
    scores = normalised(rows, policies, "avg_jct_s")["mlfs-rl"]
    assert [[len(run) for run in s] for s in scores] == [[2, 2], [2, 2]]
    row = next(r for r in summary if r["policy"] == "mlfs-rl")
    assert row["iqm_avg_jct_s"] == pytest.approx(iqm_interval(scores)[0])
    assert "mlfs-rl (2 training runs)" in (out / "summary.md").read_text()
    # one run of the two: every cell cached
    ran.clear()
    run_benchmark(suite, "test", policies, 2, out, checkpoint=f"mlfs-rl={paths[0]}",
                  executor=recording, figures=False)  # fmt: skip
    assert ran == []
    # the same path with other weights is another checkpoint: its cells run again
    torch.manual_seed(7)
    save_mlfs(paths[0], MlfsNet(8), {})
    run_benchmark(suite, "test", policies, 2, out, checkpoint=f"mlfs-rl={paths[0]}",
                  executor=recording, figures=False)  # fmt: skip
    assert sorted((s["scenario"], s["seed"]) for s in ran) == [
        ("late-24", 0), ("late-24", 1), ("late-30", 0), ("late-30", 1)
    ]  # fmt: skip
    assert {s["policy"] for s in ran} == {"mlfs-rl"}
    with pytest.raises(InputError, match="the same checkpoint twice"):
        run_benchmark(suite, "test", policies, 1, out, checkpoint=f"mlfs-rl={paths[1]}+{paths[1]}")
