"""The learned interference model's numpy side: features, forward pass, samples.

A learned model predicts each job's **slowdown** from its co-location features::

    slowdown = iteration_time / iteration_time_alone_on_the_same_placement   (>= 1)

Submodules (public names re-exported here): ``features`` (:data:`FEATURE_NAMES`,
:func:`job_features`, :func:`candidate_features`), ``model`` (:class:`InterferenceModel`,
numpy forward from one ``.npz``; :func:`load_default`), ``estimate``
(:func:`estimated_iteration_times`: what a real scheduler could estimate for a placement
not yet made, no call of the performance model's iteration-time functions), ``samples``
(:func:`generate_samples` from the simulator), ``real_data`` (:func:`real_samples` from
``../shared/data/profiles``).

**Feature layout** (schema version :data:`FEATURE_SCHEMA_VERSION`; ``r`` runs over
the resources cpu, pcie, membw, disk, net; ``L`` over the levels group, socket,
server; ``k`` over the link kinds pcie, qpi, nic, rack_uplink, sc_uplink):

=================================  ==========================================================
name                               meaning
=================================  ==========================================================
``own_pressure_r`` (5)             the job's per-task pressure vector (catalogue)
``own_sensitivity_r`` (5)          the job's sensitivity vector (catalogue)
``log_compute_s``                  ln of compute seconds per iteration on the reference GPU
``log_model_mb``                   ln of the model (gradient) size, MB
``gpu_speed``                      relative speed of the job's slowest worker GPU
``workers``, ``ps``                task counts
``groups``, ``servers``,           distinct GPU groups holding workers; distinct servers,
``racks``, ``subclusters``         racks, subclusters holding any task
``nbr_L_r_max``, ``nbr_L_r_mean``  other jobs' summed pressure on resource r at level L
  (30)                             around each of the job's worker groups: max and mean over
                                   those groups (the job's own tasks excluded)
``nbr_L_workers_max/_mean`` (6)    other jobs' workers (busy GPUs) at level L around each
                                   worker group, max and mean over the groups
``link_k_jobs_max`` (5)            most other jobs on any of the job's own links of kind k
``link_k_load_max`` (5)            largest load other jobs put on one of those links
``log_link_k_alone_s`` (5)         ln(1e-4 + t), t = the job's transfer time on its busiest
                                   link of kind k when alone (bytes / bandwidth)
``log_link_k_shared_s`` (5)        the same under the links' current total load ``U``:
                                   ln(1e-4 + max_l bytes / bandwidth · max(1, U_l))
=================================  =========================================================="""

from marl_sched.interference.estimate import estimated_iteration_times
from marl_sched.interference.features import (
    COLOCATION_LEVELS,
    FEATURE_NAMES,
    FEATURE_SCHEMA_VERSION,
    LEVELS,
    N_FEATURES,
    candidate_features,
    colocation_level,
    job_features,
    layout_features,
    true_slowdown,
)
from marl_sched.interference.model import (
    InterferenceModel,
    calibration_sha256,
    default_model_path,
    load_default,
)
from marl_sched.interference.samples import (
    POLICY_MIX,
    Samples,
    generate_samples,
    random_jobs,
    random_topology,
)

__all__ = [
    "COLOCATION_LEVELS",
    "DL2_EFFECTIVE_NIC_BYTES_S",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA_VERSION",
    "GAVEL_MODELS",
    "LEVELS",
    "N_FEATURES",
    "POLICY_MIX",
    "InterferenceModel",
    "Samples",
    "calibration_sha256",
    "candidate_features",
    "colocation_level",
    "default_model_path",
    "estimated_iteration_times",
    "generate_samples",
    "job_features",
    "layout_features",
    "load_default",
    "load_dl2_speeds",
    "load_gavel_colocations",
    "load_pollux_placements",
    "random_jobs",
    "random_topology",
    "real_samples",
    "true_slowdown",
]

#: the real-data readers, imported on first use (PEP 562): they pull in the calibration
#: package, which the environment and the heuristics never need
_REAL_DATA = (
    "DL2_EFFECTIVE_NIC_BYTES_S",
    "GAVEL_MODELS",
    "load_dl2_speeds",
    "load_gavel_colocations",
    "load_pollux_placements",
    "real_samples",
)


def __getattr__(name: str):
    if name in _REAL_DATA:
        from marl_sched.interference import real_data

        return getattr(real_data, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
