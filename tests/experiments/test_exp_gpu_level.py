"""experiments/exp_gpu_level.py: the physical-file refit keeps holdout.py's split (no
held-out pair is fitted or chooses the ridge), on a small subset of Gavel's pairs."""

from __future__ import annotations

import copy
import importlib.util
import sys

import numpy as np
import pytest

from marl_sched.calibration.constants import GAVEL_MAP
from marl_sched.calibration.data import load_gavel
from marl_sched.calibration.holdout import gavel_pair_held_out
from marl_sched.config import REPO_ROOT

SCRIPT = REPO_ROOT / "experiments" / "exp_gpu_level.py"
PHYSICAL = "gavel_physical_cluster_throughputs.json"
#: a subset of Gavel's job types (11 of 26): those the catalogue models map to, which
#: the catalogue vectors need
SUBSET = tuple(sorted(set(GAVEL_MAP.values())))


def _module():
    spec = importlib.util.spec_from_file_location("exp_gpu_level", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    return module


def _subset(gavel: dict) -> dict:
    """Gavel's table restricted to :data:`SUBSET` (rows and their partners)."""
    out = {}
    for gpu, table in gavel.items():
        out[gpu] = {
            key: {o: v for o, v in row.items() if o is None or o[0] in SUBSET}
            for key, row in table.items()
            if key[0] in SUBSET
        }
    return out


def _scale_held_out(gavel: dict, factor: float) -> dict:
    """A copy whose held-out pairs' co-located throughputs are ``factor`` times theirs."""
    out = copy.deepcopy(gavel)
    for table in out.values():
        for (job, _), row in table.items():
            for other, value in row.items():
                if other is not None and gavel_pair_held_out(job, other[0]):
                    row[other] = [value[0] * factor, value[1] * factor]
    return out


def _keep(a: str, b: str) -> bool:
    return not gavel_pair_held_out(a, b)


@pytest.fixture(scope="module")
def mod():
    return _module()


@pytest.fixture
def phys(shared_data):
    return _subset(load_gavel(shared_data, PHYSICAL))


@pytest.mark.parametrize("per_gpu", [False, True])
def test_refit_fits_exactly_the_fit_pairs(mod, phys, per_gpu):
    fit = mod.refit(phys, _keep, 1.0, per_gpu)
    _, every, _ = mod.physical_pairs(phys)
    held = [(i, j) for i, j, _ in every if gavel_pair_held_out(fit.types[i], fit.types[j])]
    assert held, "the subset must hold some held-out pairs for the check to mean anything"
    assert fit.pairs and not any(gavel_pair_held_out(a, b) for _, a, b in fit.pairs)
    assert len(fit.pairs) == len(every) - len(held)
    assert {g for g, _, _ in fit.pairs} == set(mod.REFIT_GPUS)  # pooled over GPU types
    assert fit.scales["v100"] == 1.0
    if per_gpu:
        assert all(c > 0 for c in fit.scales.values())
    else:
        assert set(fit.scales.values()) == {1.0}


@pytest.mark.parametrize("per_gpu", [False, True])
def test_held_out_measurements_never_reach_the_fit(mod, phys, per_gpu):
    base = mod.refit(phys, _keep, 1.0, per_gpu)
    moved = mod.refit(_scale_held_out(phys, 0.5), _keep, 1.0, per_gpu)
    assert np.array_equal(base.s_mat, moved.s_mat) and np.array_equal(base.p_mat, moved.p_mat)
    assert base.scales == moved.scales
    # the same change reaches a fit that is allowed to see every pair
    seen = mod.refit(phys, None, 1.0, per_gpu)
    seen_moved = mod.refit(_scale_held_out(phys, 0.5), None, 1.0, per_gpu)
    assert not np.array_equal(seen.s_mat, seen_moved.s_mat)


def test_per_gpu_scale_is_one_on_identical_gpus(mod, phys):
    same = {gpu: copy.deepcopy(phys["v100"]) for gpu in mod.REFIT_GPUS}
    fit = mod.refit(same, None, 1.0, per_gpu=True)
    assert fit.scales == {gpu: 1.0 for gpu in mod.REFIT_GPUS}
    pooled = mod.refit(same, None, 1.0, per_gpu=False)
    assert np.allclose(fit.s_mat, pooled.s_mat) and np.allclose(fit.p_mat, pooled.p_mat)


def test_per_gpu_scale_recovers_a_gpu_twice_as_harsh(mod, phys):
    # every GPU type given V100's pairs, K80's with twice V100's slowdown - 1
    harsh = {gpu: copy.deepcopy(phys["v100"]) for gpu in mod.REFIT_GPUS}
    for (_, _), row in harsh["k80"].items():
        for other, value in row.items():
            if other is not None and value[0] > 0:
                slow = row[None] / value[0]
                row[other] = [row[None] / (2.0 * slow - 1.0), value[1]]
    fit = mod.refit(harsh, None, 1.0, per_gpu=True)
    assert fit.scales["p100"] == 1.0
    assert fit.scales["k80"] == pytest.approx(2.0, rel=1e-9)


def test_ridge_is_chosen_without_held_out_pairs(mod, phys, shared_data):
    rows = [r for r in mod.pair_rows(shared_data) if r["a"] in SUBSET and r["b"] in SUBSET]
    assert any(r["held"] for r in rows) and any(not r["held"] for r in rows)
    folds = {mod.inner_fold(r["a"], r["b"]) for r in rows if not r["held"]}
    assert len(folds) > 1  # the inner split does split the FIT pairs
    cv = mod.cross_validated_mre(phys, rows, 1.0, per_gpu=False)
    assert np.isfinite(cv) and cv > 0
    # held-out measurements changed, in the data and in the rows: the same criterion
    moved_rows = [
        {**r, "measured": 2.0 * r["measured"]} if r["held"] else r for r in rows
    ]  # fmt: skip
    assert mod.cross_validated_mre(_scale_held_out(phys, 0.5), moved_rows, 1.0, False) == cv


def test_pairs_run_through_the_simulator_with_the_refit_vectors(mod, phys, shared_data):
    # one row per GPU type and model pair: the GPU level makes a lone same-GPU
    # neighbour cost exactly 1 + s_a . p_b of the vectors the run was given
    rows = list({(r["gpu"], r["ma"], r["mb"]): r for r in mod.pair_rows(shared_data)}.values())
    fit = mod.refit(phys, _keep, 1.0, per_gpu=False)
    cal, _ = mod.refit_calibration(fit)
    net = mod.RESOURCES.index("net")
    for calibration in (mod.CALIBRATION, cal):
        lo, hi = mod.simulated_slowdowns(rows, calibration)
        _, hi_no_net = mod.simulated_slowdowns(rows, calibration, same_gpu_net=False)
        for r, low, high, high_no_net in zip(rows, lo, hi, hi_no_net, strict=True):
            s = calibration.models[r["ma"]].sensitivity
            p = calibration.models[r["mb"]].pressure
            assert high == pytest.approx(1.0 + float(s @ p), rel=1e-12)
            assert 1.0 < low < high
            gpu_net = (1.0 - calibration.level_coupling["server"]) * s[net] * p[net]
            assert high_no_net == pytest.approx(high - gpu_net, rel=1e-12)
    # the refit vectors, not the shipped ones, priced the second run
    assert not np.allclose(mod.simulated_slowdowns(rows)[1], hi)
