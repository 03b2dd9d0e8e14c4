"""Iteration times a real scheduler could estimate for placements not yet made.

``estimate = profiled alone time × the learned model's predicted slowdown``, where

- the **profiled alone time** is ``compute_s / speed + comm_alone``: the model's
  compute per iteration on the reference GPU (catalogue) over its profiled speed on
  the slowest GPU type among the placement's workers (catalogue, per model), plus the
  bytes per iteration on the placement's busiest link over that link's bandwidth
  (the model's size, the traffic pattern and the topology's bandwidths). Compute and
  communication are simply added (no overlap is assumed, and no per-iteration
  synchronisation overhead): those are the performance model's fitted form, not
  something a scheduler profiles per placement;
- the **predicted slowdown** is the shipped learned interference model
  (:func:`marl_sched.interference.load_default`) on the placement's features, built
  as :func:`~marl_sched.interference.features.candidate_features` builds them, from
  the view's state (residents' pressures, busy GPUs, link use).

What it reads: the catalogue (pressure, sensitivity, compute, size, per-type speed),
the topology (groups, sockets, servers, links and bandwidths), the view's state, and
:meth:`~marl_sched.perf.PerformanceModel.layout` for the placement's geometry only
(its groups, the job's own summed catalogue pressures, the bytes on each link of its
traffic, the slowest worker's catalogue speed). It never calls the performance model's
iteration-time functions (``iteration_time``, ``alone_iteration_time``,
``isolated_iteration_time``).

One feature input is approximated: the layout's ``link_util`` (the share of each link
the job would use alone, bytes / bandwidth over its alone iteration time) comes from
the performance model's alone time on that placement, so it is replaced by bytes /
bandwidth over the profiled alone time above. It enters the features
``log_link_<kind>_shared_s`` (the job's transfer time under the links' total load,
its own included); every other feature is exactly the training features' formula.

With GPU sharing (``topology.gpu_sharing`` > 1) the learned model's samples never
shared a GPU, so the estimate does not see the contention of two jobs on one GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from marl_sched.catalogue import CATALOGUE, ModelSpec
from marl_sched.interference.features import layout_features
from marl_sched.jobs import Job, Placement
from marl_sched.perf import JobLayout
from marl_sched.simulator import ClusterView


def profiled_alone_s(spec: ModelSpec, layout: JobLayout) -> float:
    """``compute_s / speed + comm_alone`` (module docstring)."""
    return spec.compute_s / layout.speed + layout.comm_alone


def estimated_layout(view: ClusterView, job: Job, placement: Placement) -> JobLayout:
    """The placement's geometry with ``link_util`` from the profiled alone time."""
    spec = CATALOGUE[job.model]
    lay = view.perf.layout(spec, placement.worker_groups, placement.ps_groups)
    return replace(lay, link_util=lay.link_cost / profiled_alone_s(spec, lay))


def load_predictor():
    """The shipped learned interference model, or None when its file is absent."""
    from marl_sched.interference.model import default_model_path, load_default

    return load_default() if default_model_path().exists() else None


def estimated_iteration_times(
    view: ClusterView, job: Job, placements: Sequence[Placement], model=None
) -> np.ndarray:
    """``(K,)`` estimated seconds per iteration of ``job`` on each placement, placed
    on ``view`` (which does not hold the job): the profiled alone time times the
    learned model's predicted slowdown (1 without a ``model``)."""
    if not placements:
        return np.zeros(0)
    spec = CATALOGUE[job.model]
    layouts = [estimated_layout(view, job, p) for p in placements]
    alone = np.array([profiled_alone_s(spec, lay) for lay in layouts])
    if model is None:
        return alone
    return alone * model.predict(layout_features(view, job, layouts))


def without_job(view: ClusterView, job: Job, placement: Placement) -> ClusterView:
    """``view`` with a running ``job``'s own pressure and estimated link use taken
    out (the catalogue pressures of its tasks; its links' estimated shares, one job
    fewer on each), so its current and other placements are scored alike by
    :func:`estimated_iteration_times`. GPUs, cores and memory are left as ``view``
    has them (a released view already gives them back)."""
    lay = estimated_layout(view, job, placement)
    gp = np.array(view.group_pressure)
    gp[lay.groups] -= lay.group_press
    sp = np.array(view.socket_pressure)
    sp[lay.sockets] -= lay.socket_press
    vp = np.array(view.server_pressure)
    vp[lay.servers] -= lay.server_press
    load = np.array(view.link_load)
    load[lay.link_ids] = np.maximum(load[lay.link_ids] - lay.link_util, 0.0)
    jobs = np.array(view.link_jobs)
    jobs[lay.link_ids] = np.maximum(jobs[lay.link_ids] - 1, 0)
    out = [np.where(a < 1e-9, 0.0, a) for a in (gp, sp, vp)]  # rounding: none below 0
    return replace(view, group_pressure=out[0], socket_pressure=out[1], server_pressure=out[2],
                   link_load=load, link_jobs=jobs)  # fmt: skip
