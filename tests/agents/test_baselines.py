"""Harmony, MLF-H and MLF-RL: capacity, learning, checkpoints, MLF-H's priority."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from agents.baselines.checkpoint import DEFAULT_DIR, save_checkpoint
from agents.baselines.episodes import average_jct
from agents.baselines.harmony import HarmonyNet, HarmonyPolicy, save_harmony
from agents.baselines.harmony_train import HarmonyConfig, train_harmony
from agents.baselines.mlf_h import (
    ORDERING_ENTRY,
    MlfHPolicy,
    mlfs_priority_key,
)
from agents.baselines.mlfs import MlfsNet, MlfsRlPolicy, save_mlfs
from agents.baselines.mlfs_train import MlfsConfig, train_mlfs_rl
from agents.baselines.reward_model import RewardNet
from marl_sched.catalogue import CATALOGUE
from marl_sched.errors import InputError
from marl_sched.jobs import Job
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
    "harmony-shipped": lambda: HarmonyPolicy(strict_topology=False),
    "mlfs-rl-shipped": lambda: MlfsRlPolicy(strict_topology=False),
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


@pytest.mark.xfail(
    strict=True,
    reason="since the performance model's fidelity work (per-model GPU speeds, overlap) the "
    "tiny Harmony run no longer learns: reward-model validation MRE 0.249 (0.153 with 80 "
    "reward epochs) and a trained policy at 0.92-1.00x its untrained start; retraining the "
    "learned baselines fairly is the baselines issue (#24)",
)
def test_harmony_improves_over_its_untrained_start(cluster, jobs):
    topo, perf = cluster
    cfg = HarmonyConfig(
        iterations=16,
        episode_jobs=40,
        eval_every=4,
        eval_jobs=40,
        hidden=16,
        replay_capacity=2000,
        batch_size=64,
        updates_per_episode=4,
        reward_windows=1,
        reward_hidden=16,
        reward_epochs=40,
        lr=3e-3,
        seed=1,
    )
    res = train_harmony(topo, perf, jobs, cfg)
    untrained = res.history[0]["val_avg_jct_s"]
    trained = average_jct(topo, perf, jobs, HarmonyPolicy(net=res.net))
    assert res.reward_fit.val_mre < 0.2  # the reward model predicts speeds
    assert trained < 0.9 * untrained, (trained, untrained)


@pytest.mark.xfail(
    strict=True,
    reason="since the performance model's fidelity work the tiny MLF-RL run improves 8.3 % "
    "over its untrained start (25,964 vs 28,317 s), not the 10 % this asks; the baselines "
    "issue (#24) retrains them with the agents' budget",
)
def test_mlfs_rl_clones_mlf_h_then_improves_over_its_untrained_start(cluster, jobs):
    topo, perf = cluster
    cfg = MlfsConfig(
        iterations=3,
        episode_jobs=40,
        rollouts=2,
        bc_windows=2,
        bc_epochs=30,
        hidden=16,
        eval_every=1,
        eval_jobs=40,
        seed=0,
    )
    res = train_mlfs_rl(topo, perf, jobs, cfg)
    init, bc = res.history[0], res.history[1]
    assert (init["phase"], bc["phase"]) == ("init", "bc")
    assert bc["bc_agreement"] > 0.9
    trained = average_jct(topo, perf, jobs, MlfsRlPolicy(net=res.net))
    assert trained < 0.9 * init["val_avg_jct_s"], (trained, init)
    again = train_mlfs_rl(topo, perf, jobs, cfg)  # seeded: the same run twice
    assert [h["val_avg_jct_s"] for h in again.history] == [h["val_avg_jct_s"] for h in res.history]


# ---------------------------------------------------------------------- checkpoints


def _save_both(tmp_path, topo):
    from agents.baselines.checkpoint import topology_signature

    meta = {"topology": topology_signature(topo)}
    save_harmony(tmp_path / "harmony.pt", HarmonyNet(8), RewardNet(8), meta)
    save_mlfs(tmp_path / "mlfs_rl.pt", MlfsNet(8), meta)


def test_checkpoint_round_trip_and_folder_lookup(tmp_path, cluster):
    topo, _ = cluster
    _save_both(tmp_path, topo)
    for cls in (HarmonyPolicy, MlfsRlPolicy):
        policy = cls(checkpoint=tmp_path)  # a folder: finds its own file
        policy.reset(topo, 0)
    other = tiny_topology(subclusters=1)
    with pytest.raises(InputError, match="trained on another topology"):
        HarmonyPolicy(checkpoint=tmp_path / "harmony.pt").reset(other, 0)
    MlfsRlPolicy(checkpoint=tmp_path, strict_topology=False).reset(other, 0)


@pytest.mark.parametrize("cls, file", [(HarmonyPolicy, "harmony.pt"), (MlfsRlPolicy, "mlfs_rl.pt")])
def test_bad_checkpoints_raise_input_error_naming_the_file(tmp_path, cluster, cls, file):
    topo, _ = cluster
    _save_both(tmp_path, topo)
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
    save_checkpoint(tmp_path / "shape.pt", kind, 1, net, {"hidden": 12})
    with pytest.raises(InputError, match="shape.pt: weights of .* do not fit"):
        cls(checkpoint=tmp_path / "shape.pt")


def test_shipped_checkpoints_load_and_name_their_training_topology():
    for cls, file in ((HarmonyPolicy, "harmony.pt"), (MlfsRlPolicy, "mlfs_rl.pt")):
        assert (DEFAULT_DIR / file).is_file()
        policy = cls()
        assert policy.metadata["topology"]["servers"] == 48
        assert policy.metadata["trained_on"] == "configs/default.yaml"


# ---------------------------------------------------------------------- MLF-H


def _job(i: int, workers: int, iterations: float, model: str = "resnet-50") -> Job:
    ps = 0 if workers == 1 else math.ceil(workers / 4)
    return Job(i, f"j{i}", model, workers, ps, iterations, float(i), 100.0)


def test_mlfs_priority_prefers_less_work_and_smaller_jobs_and_matches_the_entry():
    short, long_ = _job(0, 1, 1e2), _job(1, 1, 1e6)
    small, big = _job(2, 1, 1e4), _job(3, 16, 1e4)
    assert mlfs_priority_key(short) < mlfs_priority_key(long_)
    assert mlfs_priority_key(small) < mlfs_priority_key(big)
    entry = eval("{" + ORDERING_ENTRY + "}", {"math": math, "CATALOGUE": CATALOGUE})
    key = entry["mlfs-priority"]
    rng = np.random.default_rng(0)
    for i in range(50):
        j = _job(
            i,
            int(rng.choice([1, 2, 4, 8, 16])),
            float(rng.uniform(1, 1e7)),
            str(rng.choice(sorted(CATALOGUE))),
        )
        assert key(j) == mlfs_priority_key(j)
        # the simulator's ordering, handed the true length as its estimate (oracle)
        oracle = OrderingContext(est_iterations=lambda job: job.iterations)
        assert ORDERINGS["mlfs-priority"]().key(j, oracle) == mlfs_priority_key(j)


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
