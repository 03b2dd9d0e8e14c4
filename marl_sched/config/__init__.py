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

Parents (``defaults:``) are composed by :func:`compose_file`, overrides applied by
:func:`load_config`; every key is checked, a bad one raising
:class:`~marl_sched.errors.InputError` naming the file (and line) and the dotted key
(docs/inputs.md). Owned sections are parsed by their owners' parsers, run by name
(:data:`OWNED_SECTIONS`). Modules: ``parse`` (:func:`parse_section`), ``schema`` (the
simulator's sections), ``experiment`` (:class:`ExperimentConfig`), ``compose`` (YAML,
``defaults:``, ``${a.b}``, overrides); every public name is importable from here.
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
    ARCHIVE_TAG,
    MAX_CONFIG_INT,
    MAX_CONFIG_LIST,
    PHYSICAL_RANGE,
    check,
    check_bounds,
    check_int_range,
    check_physical,
    check_text,
    drop_retired,
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
    "ARCHIVE_TAG",
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
    "drop_retired",
    "load_config",
    "parse_overrides",
    "parse_section",
    "plain",
    "read_value",
    "read_yaml",
    "shown_value",
]
