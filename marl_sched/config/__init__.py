"""Typed experiment configs, one dataclass per concern, loaded from YAML.

An experiment config is a YAML mapping with these sections::

    topology:    TopologyConfig     the datacenter (see marl_sched.topology)
    workload:    WorkloadConfig     which trace, which window, how missing fields are filled
    simulation:  SimulationConfig   queue ordering, seed
    env:         mapping            the multi-agent environment (validated by envs)
    model:       mapping            the GNN (validated by agents)
    train:       mapping            the RL trainer (validated by agents)
    interference: mapping           the learned interference model (validated by agents)
    planner:     mapping            the online planner's options (validated by
                                    marl_sched.policies.planner)

A file may name parents (``defaults: [../base.yaml]``): :func:`compose_file` merges
them with OmegaConf, the file's own keys on top; :func:`load_config` then applies
command-line ``key=value`` overrides (:func:`apply_overrides`). OmegaConf only
composes a plain mapping; the typed checks validate it.

Every key is checked: an unknown key, a missing required key, a key given twice or a
value of the wrong type or range raises :class:`~marl_sched.errors.InputError` with
one line naming the file (and line) or ``command line`` and the dotted key, e.g.
``configs/x.yaml: topology.racks_per_subcluster: must be >= 1, got 0``. Sections owned
by the heavier packages (env, model, train, interference) or by the policies (planner)
are kept as plain mappings here and parsed with :func:`parse_section` by their owners,
whose parsers :func:`config_from_dict` runs by name (:data:`OWNED_SECTIONS`), so this
package imports nothing from them while every command checks every section.

The package, one idea per module (every public name is importable from here):

    parse        the typed section parser (:func:`parse_section`) and its checks
    schema       the simulator's sections (topology, workload, simulation) and limits
    experiment   :class:`ExperimentConfig`, its paths, :func:`config_from_dict`
    compose      YAML read safely, ``defaults:`` composed, ``${a.b}``, overrides,
                 :func:`load_config`
"""

from __future__ import annotations

from marl_sched.config.compose import (
    DEFAULTS_KEY,
    MAX_DEFAULTS_DEPTH,
    MAX_DEFAULTS_FILES,
    MAX_INTERPOLATION_CHAIN,
    MAX_INTERPOLATION_DEPTH,
    MAX_YAML_NODES,
    OVERRIDES_WHERE,
    apply_overrides,
    compose_file,
    load_config,
    parse_overrides,
    read_value,
    read_yaml,
)
from marl_sched.config.experiment import (
    OWNED_SECTIONS,
    PATH_KEYS,
    REPO_ROOT,
    ExperimentConfig,
    absolute_paths,
    config_from_dict,
    plain,
)
from marl_sched.config.parse import (
    MAX_CONFIG_INT,
    MAX_CONFIG_LIST,
    PHYSICAL_RANGE,
    check,
    check_bounds,
    check_int_range,
    check_physical,
    check_text,
    parse_section,
    shown_value,
)
from marl_sched.config.schema import (
    LOAD_RANGE,
    MAX_GPU_SHARING,
    MAX_GPUS,
    MAX_SERVERS,
    MIGRATION_MODES,
    SERVER_LIMITS,
    ServerTypeConfig,
    SimulationConfig,
    TopologyConfig,
    WorkloadConfig,
    check_load,
)

__all__ = [
    "DEFAULTS_KEY",
    "ExperimentConfig",
    "LOAD_RANGE",
    "MAX_CONFIG_INT",
    "MAX_CONFIG_LIST",
    "MAX_DEFAULTS_DEPTH",
    "MAX_DEFAULTS_FILES",
    "MAX_GPUS",
    "MAX_INTERPOLATION_CHAIN",
    "MAX_INTERPOLATION_DEPTH",
    "MAX_GPU_SHARING",
    "MAX_SERVERS",
    "MAX_YAML_NODES",
    "MIGRATION_MODES",
    "OVERRIDES_WHERE",
    "OWNED_SECTIONS",
    "PATH_KEYS",
    "PHYSICAL_RANGE",
    "REPO_ROOT",
    "SERVER_LIMITS",
    "ServerTypeConfig",
    "SimulationConfig",
    "TopologyConfig",
    "WorkloadConfig",
    "absolute_paths",
    "apply_overrides",
    "check",
    "check_bounds",
    "check_int_range",
    "check_load",
    "check_physical",
    "check_text",
    "compose_file",
    "config_from_dict",
    "load_config",
    "parse_overrides",
    "parse_section",
    "plain",
    "read_value",
    "read_yaml",
    "shown_value",
]
