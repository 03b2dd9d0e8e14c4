"""Shared pytest fixtures, and the test tiers: ``slow`` and ``ray`` marks given here
(:func:`pytest_collection_modifyitems`), so that ``python -m pytest -m "not slow"``
is the quick tier."""

from __future__ import annotations

from pathlib import Path

import pytest

# The real data shipped beside the repo: <repo>/../shared/data (see its PROVENANCE.md).
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the repo; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found: {SHARED_DATA} does not exist")
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="session")
def _resume_key(tmp_path_factory):
    """Run folders signed during the tests use a throwaway key, not the user's."""
    import os

    old = os.environ.get("MARL_SCHED_KEY_FILE")
    os.environ["MARL_SCHED_KEY_FILE"] = str(tmp_path_factory.mktemp("keys") / "resume.key")
    yield
    if old is None:
        os.environ.pop("MARL_SCHED_KEY_FILE", None)
    else:
        os.environ["MARL_SCHED_KEY_FILE"] = old


@pytest.fixture(autouse=True)
def _benchmark_tracks_until_migration(monkeypatch) -> None:
    """Until ``simulation.migration`` exists, the benchmark
    tracks (``marl_sched.benchmark.suite.TRACKS``) run with stand-in overrides of
    another key (placement: backfill on, full: off), so the tracks' plumbing and every
    ``marl-sched benchmark`` call are tested; once the key exists this does nothing
    and the real tracks run."""
    from tests.marl_sched.benchmark_helpers import HAS_MIGRATION

    if not HAS_MIGRATION:
        from marl_sched.benchmark.suite import TRACKS

        monkeypatch.setitem(TRACKS, "placement", ("simulation.backfill=true",))
        monkeypatch.setitem(TRACKS, "full", ("simulation.backfill=false",))


# ------------------------------------------------------------------ test tiers

#: fixtures that start Ray (tests/agents/conftest.py): a test using one, directly or
#: through another fixture, is marked ``ray`` and ``slow``; so is a test marked ``ray``
RAY_FIXTURES = ("ray_session",)

#: the other slow tests, each a file or ``file::test name prefix`` (a prefix takes
#: every parameter of a test). Measured with ``--durations`` on 2 cores shared with
#: other work: each entry took 3.5 s or more (a file: all its tests together). The
#: golden tests stay in the quick tier whatever they take: they guard every refactor.
#: The quick tier ran in 245 s there (load 4 on the 2 cores), before the calibration
#: and baseline entries (26 s of it) were added.
SLOW = (
    # compiled vs eager networks and the fast path on the default cluster: 135 s
    "tests/agents/test_inference_speed.py",
    # every policy of the registry through the simulator's invariants: 110 s
    "tests/agents/test_all_policies.py",
    # the shipped checkpoints rolled out in the env: 88 s
    "tests/agents/test_inference.py::test_the_shipped_warm_start_and_migration_seeds_load",
    "tests/agents/test_inference.py::test_the_shipped_checkpoint_acts_in_the_env_exactly",
    # the recipes' warm-start labels, recomputed: 40 s
    "tests/agents/test_teachers.py::test_the_recipes_warm_start_labels_are_pinned",
    # every rule with migration on: 30 s
    "tests/marl_sched/test_migration.py::test_with_migration_on_every_rule_uses_the_same",
    # the shipped migration seeds in the full track: 15 s
    "tests/agents/test_policy_migration.py::test_the_shipped_migration_seeds_move_jobs",
    # calibration refits and reports: 35 s
    "tests/marl_sched/test_calibration.py::test_calibration_report_last_line_is_the_summary",
    "tests/marl_sched/test_calibration.py::test_shipped_calibration_equals_refit",
    "tests/marl_sched/test_calibration.py::test_heldout_pollux_sync",
    "tests/marl_sched/test_calibration.py::test_heldout_dl2_speed",
    "tests/marl_sched/test_calibration.py::test_gavel_colocation_fit_mre",
    # the published baselines trained a few epochs: 11 s
    "tests/agents/test_baselines.py::test_harmony_improves_over_its_untrained_start",
    "tests/agents/test_baselines.py::test_mlfs_rl_clones_mlf_h_then_improves_over_its_untrained",
    # long env and simulator runs: 4-9 s each
    "tests/envs/test_env_sharing.py::test_env_steps_with_gpu_sharing_and_observations",
    "tests/marl_sched/test_interference.py::test_real_samples_from_shared_data",
    "tests/envs/test_controls.py::test_controls_act_inside_the_masks_and_respect_capacity",
    "tests/envs/test_env_determinism.py::test_same_seed_on_the_default_recipe_is_determ",
    "tests/marl_sched/test_traces_philly.py::test_sample_regenerates_byte_for_byte",
    "tests/agents/test_rl_module.py::test_checkpoint_serves_simulate_without_ray",
)


def _is_slow(nodeid: str) -> bool:
    path, _, name = nodeid.partition("::")
    for entry in SLOW:
        file, _, prefix = entry.partition("::")
        if path == file and name.startswith(prefix):
            return True
    return False


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.get_closest_marker("ray") or set(RAY_FIXTURES) & set(item.fixturenames):
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.slow)
        elif _is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
