"""The interference model's numpy side: feature layout, forward pass, file format,
sample generation and the real-data loaders."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from marl_sched import interference as itf
from marl_sched.catalogue import CALIBRATION_FILE, CATALOGUE
from marl_sched.config import ServerTypeConfig, TopologyConfig
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.policies import make_policy
from marl_sched.simulator import Simulator
from marl_sched.topology import Topology

# The stored feature layout: changing it must be deliberate (bump the schema version,
# refit the shipped model, update this list).
STORED_FEATURE_NAMES = [
    *(f"own_pressure_{r}" for r in ("cpu", "pcie", "membw", "disk", "net")),
    *(f"own_sensitivity_{r}" for r in ("cpu", "pcie", "membw", "disk", "net")),
    "log_compute_s",
    "log_model_mb",
    "gpu_speed",
    "workers",
    "ps",
    "groups",
    "servers",
    "racks",
    "subclusters",
    *(
        f"nbr_{level}_{r}_{stat}"
        for level in ("group", "socket", "server")
        for r in ("cpu", "pcie", "membw", "disk", "net")
        for stat in ("max", "mean")
    ),
    *(
        f"nbr_{level}_workers_{stat}"
        for level in ("group", "socket", "server")
        for stat in ("max", "mean")
    ),
    *(f"link_{k}_jobs_max" for k in ("pcie", "qpi", "nic", "rack_uplink", "sc_uplink")),
    *(f"link_{k}_load_max" for k in ("pcie", "qpi", "nic", "rack_uplink", "sc_uplink")),
    *(f"log_link_{k}_alone_s" for k in ("pcie", "qpi", "nic", "rack_uplink", "sc_uplink")),
    *(f"log_link_{k}_shared_s" for k in ("pcie", "qpi", "nic", "rack_uplink", "sc_uplink")),
]


def test_feature_names_equal_the_stored_layout():
    assert list(itf.FEATURE_NAMES) == STORED_FEATURE_NAMES
    assert itf.N_FEATURES == 75
    assert itf.FEATURE_SCHEMA_VERSION == 1


def test_every_feature_family_is_documented():
    doc = itf.__doc__
    for name in itf.FEATURE_NAMES:
        family = re.sub(r"_(cpu|pcie|membw|disk|net)(_|$)", r"_r\2", name)
        family = re.sub(r"nbr_(group|socket|server)_", "nbr_L_", family)
        family = re.sub(r"link_(pcie|qpi|nic|rack_uplink|sc_uplink)_", "link_k_", family)
        family = re.sub(r"_(max|mean)$", "", family)
        assert family.split("_r_")[0] in doc, f"{name} ({family}) not in the module docstring"


# --------------------------------------------------------------------------- fixtures


def _topology() -> Topology:
    return Topology.from_config(
        TopologyConfig(
            subclusters=2,
            racks_per_subcluster=1,
            servers_per_rack=2,
            server_types=(
                ServerTypeConfig(name="a", count=3, gpu_type="v100", gpus_per_group=2),
                ServerTypeConfig(name="b", count=1, gpu_type="k80", sockets=1, gpus_per_group=4),
            ),
        )
    )


def _jobs() -> list[Job]:
    spec = [
        ("vgg-16", 4, 1),
        ("resnet-50", 2, 1),
        ("bert", 3, 2),
        ("dssm", 1, 0),
        ("cifar10", 6, 2),
        ("seq2seq", 2, 1),
        ("ncf", 1, 1),
        ("yolov3", 5, 2),
    ]
    return [Job(i, f"j{i}", m, w, p, 1e6, float(i), 100.0) for i, (m, w, p) in enumerate(spec)]


def _busy_simulator(policy: str = "random", seed: int = 0) -> tuple[Simulator, list[Placement]]:
    topo = _topology()
    sim = Simulator(topo, _jobs())
    pol = make_policy(policy)
    pol.reset(topo, seed)
    placed = []
    while (job := sim.next_decision()) is not None and len(placed) < 6:
        placement = pol.place(job, sim.view())
        sim.apply(placement)
        if placement is not None:
            placed.append(placement)
    return sim, placed


# --------------------------------------------------------------------------- features


@pytest.mark.parametrize("policy", ["random", "first-fit", "load-balance"])
def test_candidate_features_equal_job_features_after_apply(policy):
    topo = _topology()
    sim = Simulator(topo, _jobs())
    pol = make_policy(policy)
    pol.reset(topo, 3)
    checked = 0
    while (job := sim.next_decision()) is not None:
        view = sim.view()
        placement = pol.place(job, view)
        if placement is None:
            sim.apply(None)
            continue
        before = itf.candidate_features(view, job, placement.worker_groups, placement.ps_groups)
        sim.apply(placement)
        run = sim.running[job.job_id]
        after = itf.job_features(sim.view(), job, placement, run.layout)
        np.testing.assert_allclose(before, after, rtol=1e-9, atol=1e-9)
        # and without the cached layout
        np.testing.assert_allclose(itf.job_features(sim.view(), job, placement), after)
        checked += 1
    assert checked >= 5


def test_candidate_features_batch_equals_single():
    sim, _ = _busy_simulator()
    view = sim.view()
    job = Job(99, "new", "resnet-50", 2, 1, 1e6, 0.0, 1.0)
    free = np.flatnonzero(np.asarray(view.group_free) > 0)
    cands_w = [(int(free[0]), int(free[-1])), (int(free[-1]), int(free[-1]))]
    cands_p = [(int(free[0]),), (int(free[-1]),)]
    batch = itf.candidate_features(view, job, cands_w, cands_p)
    assert batch.shape == (2, itf.N_FEATURES)
    for i in range(2):
        np.testing.assert_array_equal(
            batch[i], itf.candidate_features(view, job, cands_w[i], cands_p[i])
        )


def test_neighbour_features_see_other_jobs_only():
    topo = _topology()
    a = Job(0, "a", "vgg-16", 2, 1, 1e6, 0.0, 1.0)
    b = Job(1, "b", "resnet-50", 1, 0, 1e6, 0.0, 1.0)
    sim = Simulator(topo, [a, b])
    pa = Placement((0, 0), (0,))
    sim.next_decision()
    sim.apply(pa)
    view = sim.view()
    x = itf.job_features(view, a, pa)
    idx = {n: i for i, n in enumerate(itf.FEATURE_NAMES)}
    assert x[idx["nbr_group_pcie_max"]] == 0.0
    assert x[idx["nbr_server_workers_max"]] == 0.0
    assert itf.colocation_level(x)[0] == 0  # none
    assert itf.true_slowdown(view, a, sim.running[0].layout) == pytest.approx(1.0)
    sim.next_decision()
    sim.apply(Placement((1,), ()))  # same socket, other group
    view = sim.view()
    x = itf.job_features(view, a, pa, sim.running[0].layout)
    assert x[idx["nbr_group_pcie_max"]] == 0.0
    assert x[idx["nbr_socket_cpu_max"]] > 0.0
    assert x[idx["nbr_socket_workers_max"]] == 1.0
    assert itf.colocation_level(x)[0] == 2  # socket
    assert itf.true_slowdown(view, a, sim.running[0].layout) > 1.0


@pytest.mark.parametrize("policy", ["random", "first-fit"])
def test_true_slowdown_is_the_simulators_own_iteration_time(policy):
    sim, _ = _busy_simulator(policy)
    view = sim.view()
    assert len(sim.running) >= 3
    for run in sim.running.values():
        alone = view.perf.alone_iteration_time(CATALOGUE[run.job.model], run.layout, run.job.num_ps)
        slowdown = itf.true_slowdown(view, run.job, run.layout)
        assert slowdown >= 1.0
        assert slowdown * alone == pytest.approx(run.iter_time, rel=1e-12)


def test_samples_are_deterministic_under_a_seed():
    a = itf.generate_samples(150, seed=7)
    b = itf.generate_samples(150, seed=7)
    c = itf.generate_samples(150, seed=8)
    assert a.x.shape == (150, itf.N_FEATURES)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.y, c.y)
    assert np.all(a.y >= 1.0 - 1e-12)
    assert np.all(np.isfinite(a.x))


# --------------------------------------------------------------------------- the model


def _random_model(seed: int = 0, hidden=(16, 8)) -> itf.InterferenceModel:
    rng = np.random.default_rng(seed)
    sizes = [itf.N_FEATURES, *hidden, 1]
    weights = [rng.standard_normal((a, b)) * 0.3 for a, b in zip(sizes, sizes[1:], strict=False)]
    biases = [rng.standard_normal(b) * 0.1 for b in sizes[1:]]
    return itf.InterferenceModel(
        weights,
        biases,
        x_mean=rng.standard_normal(itf.N_FEATURES),
        x_std=rng.uniform(0.5, 2.0, itf.N_FEATURES),
        y_mean=0.3,
        y_std=0.5,
        calibration_sha256=itf.calibration_sha256(),
        metadata={"note": "test"},
    )


def test_batch_prediction_equals_single_predictions():
    model = _random_model()
    x = np.random.default_rng(1).standard_normal((300, itf.N_FEATURES))  # > 2 blocks
    batch = model.predict(x)
    single = np.array([model.predict(x[i : i + 1])[0] for i in range(len(x))])
    np.testing.assert_allclose(batch, single, rtol=1e-6)
    assert np.all(batch >= 1.0)
    with pytest.raises(ValueError):
        model.predict(x[:, :5])


def test_save_load_round_trip(tmp_path):
    model = _random_model()
    path = tmp_path / "m.npz"
    model.save(path)
    back = itf.InterferenceModel.load(path)
    x = np.random.default_rng(2).standard_normal((32, itf.N_FEATURES))
    np.testing.assert_array_equal(model.predict(x), back.predict(x))
    assert back.metadata == {"note": "test"}
    assert back.calibration_sha256 == itf.calibration_sha256()
    with np.load(path, allow_pickle=False) as z:  # no pickled objects inside
        assert "feature_names" in z.files


def _rewrite(src, dst, **changes):
    with np.load(src, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data.update(changes)
    for k, v in list(data.items()):
        if v is None:
            del data[k]
    np.savez(dst, **data)


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"schema_version": np.array(99)}, "schema version 99"),
        ({"feature_names": np.array(["x"] * itf.N_FEATURES)}, "feature names differ"),
        ({"feature_names": np.array(itf.FEATURE_NAMES[:-1])}, "feature names differ"),
        ({"W1": None}, "missing array 'W1'"),
        ({"x_std": np.zeros(itf.N_FEATURES, dtype=np.float32)}, "x_std"),
        ({"b0": np.full(16, np.nan, dtype=np.float32)}, "non-finite"),
        ({"W0": np.zeros((3, 16), dtype=np.float32)}, "layer 0"),
    ],
)
def test_mismatched_model_file_is_an_input_error(tmp_path, change, problem):
    good = tmp_path / "good.npz"
    _random_model().save(good)
    bad = tmp_path / "bad.npz"
    _rewrite(good, bad, **change)
    with pytest.raises(InputError) as err:
        itf.InterferenceModel.load(bad)
    msg = str(err.value)
    assert msg.startswith(f"{bad}: ") and problem in msg and "\n" not in msg


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04garbage"])
def test_corrupt_model_file_is_an_input_error(tmp_path, content):
    bad = tmp_path / "model.npz"
    bad.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(str(bad))):
        itf.InterferenceModel.load(bad)


def test_truncated_model_file_is_an_input_error(tmp_path):
    good = tmp_path / "good.npz"
    _random_model().save(good)
    bad = tmp_path / "cut.npz"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(InputError, match="cut.npz: "):
        itf.InterferenceModel.load(bad)
    with pytest.raises(InputError, match="no such"):
        itf.InterferenceModel.load(tmp_path / "absent.npz")


def test_default_model_path_is_in_the_repo_checkpoints():
    p = itf.default_model_path()
    assert p.parts[-3:] == ("checkpoints", "interference", "model.npz")


# --------------------------------------------------------------------------- real data


def test_dl2_loader_skips_failed_runs_and_reads_a_last_line_without_newline(tmp_path):
    path = tmp_path / "speed.txt"
    path.write_text(
        "('resnet-50', 'dist_sync', 32, 1, 1, [15.0], [1.9], [0.5])\n"
        "('resnet-50', 'dist_sync', 32, 1, 2, [0.0, 0.0], [0.0], [0.0, 0.0])\n"
        "('resnet-50', 'dist_sync', 32, 1, 3, [5.0, 5.0, 5.0], [1.9], [0.3, 0.3, 0.3])",
        encoding="utf-8",
    )
    s = itf.load_dl2_speeds(path)
    assert len(s) == 1  # w=1 is the reference, w=2 failed, w=3 kept
    assert s.y[0] == pytest.approx(15.0 / (3 * 5.0))  # global batch split over 3
    assert 0.0 < s.reference[0] < 3.0
    bad = tmp_path / "bad.txt"
    bad.write_text("('resnet-50', 'dist_sync', 32\n", encoding="utf-8")
    with pytest.raises(InputError, match="bad.txt:1: "):
        itf.load_dl2_speeds(bad)


def test_pollux_loader_compares_spread_with_consolidated(tmp_path):
    d = tmp_path / "imagenet"
    d.mkdir()
    (d / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n"
        "4,32,0.20,0.01\n22,32,0.25,0.02\n1111,32,0.30,0.03\n13,32,0.22,0.02\n",
        encoding="utf-8",
    )
    s = itf.load_pollux_placements(tmp_path)
    assert sorted(np.round(s.y, 6).tolist()) == [1.1, 1.25, 1.5]
    assert np.all(s.reference >= 1.0)  # the simulator also finds spreading slower
    assert set(s.source.tolist()) == {"pollux"}


@pytest.mark.shared_data
def test_real_samples_from_shared_data(shared_data):
    s = itf.real_samples(shared_data)
    sources = set(s.source.tolist())
    assert sources == {"gavel", "pollux", "dl2"}
    gavel = s.subset(np.flatnonzero(s.source == "gavel"))
    assert len(gavel) > 500
    assert np.all(gavel.level == 1)  # mapped to same-GPU-group co-locations
    assert np.all(gavel.simulated >= 1.0)
    assert np.all(np.isfinite(s.x)) and np.all(s.y > 0)


def test_shipped_model_matches_the_calibration_it_is_served_with():
    """No stale-model warning: the calibration's hash leaves out the keys only GPU
    sharing reads (the samples never share a GPU), so adding them kept the model valid."""
    assert itf.load_default().calibration_sha256 == itf.calibration_sha256()


def test_calibration_hash_ignores_sharing_only_keys_and_nothing_else(tmp_path):
    data = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    shipped = itf.calibration_sha256()
    sharing = dict(data, gpu_share_conflicts={"v100": [["cifar10", "ncf"]]})
    (tmp_path / "a.json").write_text(json.dumps(sharing, indent=1, ensure_ascii=False) + "\n")
    assert itf.calibration_sha256(tmp_path / "a.json") == shipped
    coupled = dict(data, level_coupling={k: 2 * v for k, v in data["level_coupling"].items()})
    (tmp_path / "b.json").write_text(json.dumps(coupled, indent=1, ensure_ascii=False) + "\n")
    assert itf.calibration_sha256(tmp_path / "b.json") != shipped


def test_candidate_features_equal_those_of_full_layouts():
    """The candidates' light layouts give the same feature bits as JobLayout's."""
    from marl_sched.config import REPO_ROOT
    from marl_sched.interference.features import candidate_features, layout_features
    from tests.helpers import partly_occupied

    topo, perf, sim = partly_occupied(str(REPO_ROOT / "configs" / "tiny.yaml"), decisions=20)
    view = sim.view()
    rng = np.random.default_rng(0)
    free = np.flatnonzero(np.asarray(view.group_free) > 0)
    ws, ps = [], []
    for k in range(40):
        n = int(rng.integers(1, 9))
        ws.append(tuple(int(g) for g in rng.choice(free, n)))
        ps.append(tuple(int(g) for g in rng.choice(topo.n_groups, k % 4)))
    ia = make_policy("interference-aware")
    ia.reset(topo, 0)
    for workers in (1, 2, 4):
        job = Job(1, "probe", "resnet-50", workers, 1, 100.0, 0.0, 10.0)
        plan = ia.place(job, view)
        if plan is not None:
            ws.append(plan.worker_groups)
            ps.append(plan.ps_groups)
    for model in ("resnet-50", "vgg-16", "bert"):
        job = Job(1, "probe", model, 4, 2, 100.0, 0.0, 10.0)
        got = candidate_features(view, job, ws, ps)
        spec = CATALOGUE[model]
        layouts = [perf.layout(spec, w, p) for w, p in zip(ws, ps, strict=True)]
        assert np.array_equal(got, layout_features(view, job, layouts))
