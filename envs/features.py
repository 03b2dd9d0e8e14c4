"""The features a placement session gives its observations beyond the cluster's own
(:mod:`envs.observations` lays them out; documented in :mod:`envs.cluster_env`): the job's
``job_x`` row, the running jobs' state for ``env.migration`` and the harm the current
task would do to the resident jobs (``env.resident_features``).

:class:`SessionFeatures` is a part of :class:`envs.session.PlacementSession`: it reads the
session's draft (``builder``, ``job``, ``spec``, ``view``, ``job_groups``, ``task``,
``hops``, ``is_worker``, ``workers_left``, ``moving``, ``moves``) and keeps what is fixed
for the job; a worker's harm to the residents is kept in the hints' shared cache
(``_candidates``, :mod:`envs.hints`), where the protecting heuristics read the same term.
"""

from __future__ import annotations

import math

import numpy as np

from marl_sched.policies.levers import remaining_work_s
from marl_sched.simulator import harm_to_residents

#: a running job's slowdown is capped here in the features (an unbounded one is not)
MAX_SLOWDOWN = 100.0


class SessionFeatures:
    """The job's and the residents' features of a placement session (module docstring)."""

    def _init_features(self) -> None:
        """The caches fixed for the job (the running jobs do not change while it is placed)."""
        self._harm: dict[bool, np.ndarray] = {}  # task kind (is PS) -> per-group harm
        self._residents: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def resident_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a load controller reads of the running jobs (:meth:`ClusterView.running`):
        per GPU group, ln of the worker-weighted mean slowdown of the running jobs with
        a worker there and ``log10(1 + their mean attained GPU-s per worker) / 7``;
        per server, ln of the worker-weighted mean slowdown of the jobs with a worker
        on it (MLF-H's overload signal, ``agents.baselines.load_control``); 0 where
        none runs. The running jobs do not change while a session is open."""
        if self._residents is None:
            t = self.builder.topology
            groups, slow, attained = [], [], []
            for info in self.view.running():
                g = info.placement.worker_groups
                groups.extend(g)
                slow.extend([min(info.slowdown, MAX_SLOWDOWN)] * len(g))
                attained.extend([info.attained_gpu_s / max(info.num_workers, 1)] * len(g))
            g = np.asarray(groups, dtype=np.int64)
            n, srv = t.n_groups, t.group_server
            w = np.bincount(g, minlength=n).astype(np.float64)
            s_sum = np.bincount(g, weights=np.asarray(slow), minlength=n)
            a_sum = np.bincount(g, weights=np.asarray(attained), minlength=n)
            mean = np.divide(s_sum, w, out=np.ones(n), where=w > 0)
            att = np.divide(a_sum, w, out=np.zeros(n), where=w > 0)
            sw = np.bincount(srv, weights=w, minlength=t.n_servers)
            ss = np.bincount(srv, weights=s_sum, minlength=t.n_servers)
            srv_mean = np.divide(ss, sw, out=np.ones(t.n_servers), where=sw > 0)
            self._residents = (np.log(mean), np.log10(1.0 + att) / 7.0, np.log(srv_mean))
        return self._residents

    def mover_groups(self) -> np.ndarray:
        """Per GPU group (global): the moving job's current workers there over its
        workers (0 for an arriving job)."""
        n = self.builder.topology.n_groups
        if self.moving is None:
            return np.zeros(n)
        g = np.asarray(self.moving.placement.worker_groups, dtype=np.int64)
        return np.bincount(g, minlength=n) / max(len(g), 1)

    def harm_to_residents(self) -> np.ndarray:
        """Per GPU group (whole datacenter), the size-weighted slowdown the current
        task would add to the resident jobs near it
        (:func:`marl_sched.simulator.harm_to_residents`). The residents do not change
        while a job is placed, so one array per task kind."""
        ps = not self.is_worker
        if ps not in self._harm:
            # a worker's harm is the term the protecting hints compute on the same
            # exposures (envs.hints, the job's shared cache): computed once for both
            shared = None if ps else self._candidates.get(("harm",))
            if shared is None:
                shared = harm_to_residents(self.view, self.spec.pressure, ps=ps)
                shared.setflags(write=False)
                if not ps:
                    self._candidates[("harm",)] = shared
            self._harm[ps] = shared
        return self._harm[ps]

    def job_features(self, agent: int, agrees: np.ndarray | None = None) -> np.ndarray:
        """``agent``'s ``job_x`` row; ``agrees``: the hints' agreement columns, if any."""
        job, s = self.job, self.spec
        n = job.num_tasks
        in_scope = self.job_groups[self.builder.scopes[agent].groups].sum() / n
        comm = min(2.0 * s.model_bytes / max(s.compute_s, 1e-6) / 1e10, 4.0)
        return np.concatenate(
            [
                [
                    math.log2(job.num_workers) / 6.0,
                    job.num_ps / 4.0,
                    float(self.is_worker),
                    self.task / n,
                    self.workers_left / job.num_workers,
                    min(s.compute_s, 4.0),
                    s.model_mb / 1000.0,
                    comm,
                    self.hops / max(self.builder.n_agents, 1),
                    in_scope,
                ],
                s.sensitivity,
                s.pressure,
                [_log_work(job.work_s)] * self.builder.job_length,
                self._move_features() if self.builder.migration else [],
                self._upgrade_features() if self.builder.upgrade_features else [],
                agrees if agrees is not None else [],
            ]
        ).astype(np.float32)

    def _move_features(self) -> list[float]:
        """``is_move, log_slowdown, attained, moves`` of the job (0 for an arrival)."""
        m = self.moving
        if m is None:
            return [0.0, 0.0, 0.0, 0.0]
        per_worker = m.attained_gpu_s / max(m.num_workers, 1)
        slow = math.log(max(min(m.slowdown, MAX_SLOWDOWN), 1e-9))
        return [1.0, slow, math.log10(1.0 + per_worker) / 7.0, float(self.moves)]

    def _upgrade_features(self) -> list[float]:
        """``upgrade_gain, log10_remaining_s/7`` of a move (0, 0 for an arrival)."""
        m = self.moving
        if m is None:
            return [0.0, 0.0]
        gain = min(max(self.gain, -1.0), 1.0)
        return [gain, _log_work(max(remaining_work_s(self.job, m), 0.0))]


def _log_work(work_s: float) -> float:
    """``log10(1 + work)/7`` of the estimated work; 0 when no estimate exists (nan)."""
    return math.log10(1.0 + work_s) / 7.0 if math.isfinite(work_s) else 0.0
