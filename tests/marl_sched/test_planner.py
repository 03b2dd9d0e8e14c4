"""The planner (model-predictive control) and its oracle: what they may read, defer, options."""

from __future__ import annotations

from dataclasses import replace

import pytest

from marl_sched.duration import DurationPredictor
from marl_sched.errors import InputError
from marl_sched.perf import PerformanceModel
from marl_sched.policies import make_policy
from marl_sched.policies.base import heuristic_names, policy_entries
from marl_sched.policies.planner import OraclePolicy, PlannerPolicy
from marl_sched.simulator import Simulator
from marl_sched.workload_model import WorkloadModel
from tests.helpers import random_jobs, tiny_topology

TOPO = tiny_topology(subclusters=1, racks=2, servers=2)
PERF = PerformanceModel(TOPO)


def drive(policy, jobs, seed: int = 0) -> Simulator:
    """Run ``policy`` over ``jobs`` as ``marl-sched simulate`` does (noisy estimates)."""
    pred = DurationPredictor("noisy", seed=0)
    sim = Simulator(TOPO, jobs, perf=PERF, estimate=pred.est_iterations)
    policy.reset(TOPO, seed)
    while (job := sim.next_decision()) is not None:
        sim.apply(policy.place(pred.visible_job(job), sim.view()))
    return sim


def jobs(n: int = 12, seed: int = 3):
    return random_jobs(PERF, n, seed, max_workers=8, mean_gap=150.0)


def test_planner_on_the_true_future_is_the_oracle():
    a = PlannerPolicy(k=1, horizon_s=600.0, future="true")
    b = OraclePolicy(horizon_s=600.0)
    drive(a, jobs())
    drive(b, jobs())
    assert a.decisions and a.decisions == b.decisions


def test_planner_never_reads_the_true_future():
    base = jobs(14)
    t = base[6].submit_time
    other = base[:7] + [
        replace(j, model="bert" if j.model != "bert" else "ncf", num_workers=1,
                num_ps=0, iterations=j.iterations * 7.0, submit_time=j.submit_time + 90.0,
                name=f"other{j.job_id}")
        for j in base[7:]
    ]  # fmt: skip
    a, b = PlannerPolicy(k=2, horizon_s=600.0), PlannerPolicy(k=2, horizon_s=600.0)
    drive(a, base)
    drive(b, other)
    before = [d for d in a.decisions if d[0] <= t]
    assert before and before == [d for d in b.decisions if d[0] <= t]


class AlwaysDefer(PlannerPolicy):
    """Defer wins whenever it is a candidate (no playouts)."""

    def _best(self, job, sim, options):
        return None if None in options else options[0]


def test_a_deferred_job_is_placed_eventually():
    pol = AlwaysDefer(k=1, horizon_s=300.0)
    work = jobs(10)
    sim = drive(pol, work)
    assert any(p is None for _, _, p in pol.decisions)
    assert len(sim.records) == len(work) and not sim.unplaceable


@pytest.mark.parametrize(
    ("options", "key"),
    [({"k": 0}, "k"), ({"k": 1.5}, "k"), ({"horizon_s": 0}, "horizon_s"),
     ({"horizon_s": -5.0}, "horizon_s"), ({"horizon_s": float("nan")}, "horizon_s")],
)  # fmt: skip
def test_bad_options_name_the_key(options, key):
    with pytest.raises(InputError, match=rf"^{key}: must be") as err:
        make_policy("planner", **options)
    assert "\n" not in str(err.value)


def test_registered_in_no_enumeration():
    entries = policy_entries()
    assert entries["planner"].kind == entries["oracle"].kind == "planner"
    assert "never a policy claim" in entries["oracle"].description
    assert not {"planner", "oracle"} & set(heuristic_names())


def test_workload_model_draws():
    import numpy as np

    model = WorkloadModel.load()
    rng = np.random.default_rng(0)
    assert model.rate_per_h > 0 and len(model.jobs) > 100
    assert model.true_total(100.0, 250.0, rng) > 250.0
    future = model.sample_future(jobs(5), 10.0, model.rate(3, 600.0), rng)
    times = [j.submit_time for j in future]
    assert times == sorted(times) and times[0] > 10.0
    assert [j.job_id for j in future] == list(range(5))


def test_without_defer_every_decision_places():
    pol = PlannerPolicy(k=1, horizon_s=300.0, defer=False)
    drive(pol, jobs(8))
    assert pol.decisions and all(p is not None for _, _, p in pol.decisions)
    with pytest.raises(InputError, match=r"^future: must be"):
        PlannerPolicy(future="past")
