"""A whole experiment config (:class:`ExperimentConfig`), where its paths resolve,
and :func:`config_from_dict`, which checks every section of a loaded mapping (the
sections owned by envs and agents by their owners' parsers, named by string)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from marl_sched.config.parse import _coerce, parse_section
from marl_sched.config.schema import SimulationConfig, TopologyConfig, WorkloadConfig
from marl_sched.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: one section per concern, plus where it came from."""

    topology: TopologyConfig = field(default_factory=TopologyConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    env: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    interference: dict[str, Any] = field(default_factory=dict)
    planner: dict[str, Any] = field(default_factory=dict)
    source: str = "<defaults>"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested mapping (YAML-ready: lists, not tuples), without ``source``."""
        out = plain(dataclasses.asdict(self))
        out.pop("source")
        return out

    def to_yaml(self) -> str:
        """The config as YAML that :func:`load_config` reads back, from any folder, to an
        equal config with every path absolute (:func:`absolute_paths`; the
        ``config.yaml`` every run folder holds)."""
        return yaml.dump(absolute_paths(self.to_dict(), self), Dumper=_PlainDumper, sort_keys=False)

    def resolve_path(self, path: str) -> Path:
        """A path from the config: relative ones resolve against the folder of the
        config file (``source``), or, for a config file inside the repo, also against
        the repo root (never for a config elsewhere); a config that is not a file
        resolves against the repo root."""
        p = Path(path)
        if p.is_absolute():
            return p
        source = Path(self.source)
        if not source.is_file():
            return REPO_ROOT / p
        here = source.resolve().parent / p
        if here.exists() or not source.resolve().is_relative_to(REPO_ROOT):
            return here
        return REPO_ROOT / p


#: keys whose string values in a config are file paths (``workload.trace``, the train
#: windows' ``trace``, ``train.eval_trace``, ``interference.real_data``)
PATH_KEYS = ("trace", "eval_trace", "real_data")


def absolute_paths(data: Any, cfg: ExperimentConfig, reader: ExperimentConfig | None = None) -> Any:
    """``data`` (a config mapping or any part of one, plain) with every relative path
    under a key of :data:`PATH_KEYS` resolved by ``cfg``
    (:meth:`ExperimentConfig.resolve_path`) to an absolute one: what a run folder's
    ``config.yaml`` records, so that it reads the same files from anywhere. A
    ``${a.b}`` reference is left to name the path it refers to. With ``reader``, a
    path that ``reader`` resolves to the same file is left as written."""

    def path(v: str) -> str:
        p = cfg.resolve_path(v)
        return v if reader is not None and reader.resolve_path(v) == p else str(p)

    if isinstance(data, dict):
        return {
            k: path(v) if k in PATH_KEYS and isinstance(v, str) and v and not v.startswith("${")
            else absolute_paths(v, cfg, reader)
            for k, v in data.items()
        }  # fmt: skip
    if isinstance(data, list):
        return [absolute_paths(v, cfg, reader) for v in data]
    return data


class _PlainDumper(yaml.SafeDumper):
    """``yaml.safe_dump`` that never writes an anchor or alias (a value shared by two
    keys is written twice), so ``config.yaml`` reads back through :func:`read_yaml`."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def plain(obj: Any) -> Any:
    """Nested dicts and lists only (tuples become lists)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    return obj


_SECTIONS = (
    "topology", "workload", "simulation", "env", "model", "train", "interference", "planner",
)  # fmt: skip

#: the sections whose schema lives in a heavier package (or, for ``planner``, beside the
#: policy registry it checks ``planner.base`` against, which imports this package), and
#: the parser that checks each (``"module:function"`` taking the :class:`ExperimentConfig`).
#: They are named by string and imported only when a config has the section, the way the
#: CLI names its lazy commands, so this module imports nothing from envs/agents/policies
#: while every command (``simulate`` included) still refuses an unknown or ill-typed key
#: in any section.
OWNED_SECTIONS = {
    "env": "envs.config:env_config",
    "model": "agents.config:model_config",
    "train": "agents.config:train_config",
    "interference": "agents.config:interference_config",
    "planner": "marl_sched.policies.planner:planner_config",
}


def _check_owned_sections(cfg: ExperimentConfig) -> None:
    """Run the owners' parsers over every owned section the config has."""
    import importlib

    for section, target in OWNED_SECTIONS.items():
        if not getattr(cfg, section):
            continue
        module, _, func = target.partition(":")
        try:
            parser = getattr(importlib.import_module(module), func)
        except ModuleNotFoundError as exc:
            if exc.name != module.partition(".")[0]:
                raise
            continue  # an install without that layer: nothing there reads the section
        parser(cfg)


def _section(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    """An owned section as a mapping: absent or null is empty; anything else that is
    not a mapping (``env: []``, ``model: 0``) is refused, never read as empty."""
    value = data.get(name)
    return {} if value is None else _coerce(value, dict, where, name)


def config_from_dict(data: Any, where: str = "<config>") -> ExperimentConfig:
    """Validate a loaded mapping into an :class:`ExperimentConfig` (every section,
    the owned ones by their owners' parsers: :data:`OWNED_SECTIONS`)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping of sections, got {type(data).__name__}")
    for key in data:
        if key not in _SECTIONS:
            raise InputError(f"{where}: {key}: unknown section (known: {', '.join(_SECTIONS)})")
    cfg = ExperimentConfig(
        topology=parse_section(TopologyConfig, data.get("topology"), where, "topology"),
        workload=parse_section(WorkloadConfig, data.get("workload"), where, "workload"),
        simulation=parse_section(SimulationConfig, data.get("simulation"), where, "simulation"),
        env=_section(data, "env", where),
        model=_section(data, "model", where),
        train=_section(data, "train", where),
        interference=_section(data, "interference", where),
        planner=_section(data, "planner", where),
        source=where,
    )
    _check_owned_sections(cfg)
    return cfg
