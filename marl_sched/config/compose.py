"""Reading config files: YAML loaded safely, ``defaults:`` composed, ``${a.b}``
references resolved, command-line ``key=value`` overrides applied, and
:func:`load_config`, which does all of it and checks the result."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from marl_sched.config.experiment import (
    REPO_ROOT,
    ExperimentConfig,
    absolute_paths,
    config_from_dict,
)
from marl_sched.config.parse import shown_value
from marl_sched.errors import InputError

#: the key a config file names its parents with (a list of files, relative to it)
DEFAULTS_KEY = "defaults"

#: the most YAML nodes (mappings, lists, scalars) one config or suite file may hold
MAX_YAML_NODES = 100_000
#: how deep ``defaults:`` may nest (a file, its parent, the parent's parent, ...)
MAX_DEFAULTS_DEPTH = 32
#: the most files one composed config may read
MAX_DEFAULTS_FILES = 64


class _YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (libyaml's when available) that refuses a key given twice in
    one mapping and aliases (``*name``, ``<<: *name``: "billion laughs"), and caps the
    node tree at :data:`MAX_YAML_NODES` before anything is built."""

    def construct_document(self, node):
        _check_node_tree(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {first})",
                    key_node.start_mark)  # fmt: skip
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_node_tree(root: yaml.Node) -> None:
    """Refuse a node reached twice (an alias: the parser hands the anchored node itself
    to every ``*name``) and a tree of more than :data:`MAX_YAML_NODES` nodes."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) and merges (<<: *name) are not allowed: "
                "write the values out", node.start_mark)  # fmt: skip
        seen.add(id(node))
        if len(seen) > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_YAML_NODES:,} values", node.start_mark
            )
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value


def read_yaml(path: str | Path, where: str | None = None, what: str = "config") -> Any:
    """One YAML file (a regular file within the size of its kind, ``what``: ``config``
    or ``suite``; :mod:`marl_sched.files`), safely loaded, duplicate keys and aliases
    refused; every problem is an ``InputError`` naming ``where`` (default: the path)
    and the line."""
    from marl_sched.files import read_input_text

    where = str(path) if where is None else where
    text = read_input_text(path, what, where)
    try:
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{at}: invalid YAML: {problem}") from None
    except ValueError as exc:  # an integer of more than 4,300 digits, say
        raise InputError(f"{where}: invalid YAML: {_first_line(exc)}") from None


def _find(path: str | Path) -> Path:
    """``path``, or, relative and absent, the same path under the repo root."""
    p = Path(path)
    if not p.exists() and not p.is_absolute() and (REPO_ROOT / p).exists():
        return REPO_ROOT / p
    return p


def compose_file(path: str | Path, where: str | None = None) -> dict[str, Any]:
    """The mapping a config file stands for: its parents (``defaults: [a.yaml, ...]``,
    relative to the file, composed the same way) merged in order, the file's own keys
    on top (mappings merge key by key; a list or value replaces; an empty section adds
    nothing). A parent's path keys (:data:`~marl_sched.config.experiment.PATH_KEYS`) keep
    naming the file the parent meant. A file reached twice is refused; at most
    :data:`MAX_DEFAULTS_DEPTH` deep and :data:`MAX_DEFAULTS_FILES` files."""
    where = str(path) if where is None else where
    top = ExperimentConfig(source=str(path))
    return _plain_dict(_compose(_find(path), where, (), set(), top), where)


#: the most references one ``${a.b}`` may be followed through, and the most dotted parts
#: one may name (an uncapped chain costs its length squared)
MAX_INTERPOLATION_CHAIN = 16
MAX_INTERPOLATION_DEPTH = 16

#: a whole-value reference to another key, the one interpolation a config may hold
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)\}")


def _check_interpolations(data: Any, where: str) -> None:
    """Allow only ``${a.b}`` as a whole value naming a plain value (a number, a
    string, ...) of the config: resolvers (``${oc.env:SECRET}`` would copy an
    environment variable into ``config.yaml`` and stdout, ``${oc.decode:...}`` parse
    text), text built from several pieces (``"${a}${a}"``: doubling per level) and
    references to whole sections or lists (copied at every use) are refused."""

    def lookup(dotted: str) -> Any:
        node: Any = data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def checked(target: str, key: str) -> str:
        if target.count(".") >= MAX_INTERPOLATION_DEPTH:
            raise InputError(
                f"{where}: {key}: interpolation {shown_value('${' + target + '}')} names a "
                f"key more than {MAX_INTERPOLATION_DEPTH} levels deep"
            )
        return target

    def walk(node: Any, key: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{key}[{i}]")
        elif isinstance(node, str) and "${" in node:
            match = _REFERENCE.fullmatch(node.strip())
            if match is None:
                raise InputError(
                    f"{where}: {key}: interpolation {shown_value(node)} is not allowed: "
                    "only a whole value ${section.key} naming another plain value "
                    "(no resolvers such as oc.env, no text around it)"
                )
            target, chain = match.group(1), {key}
            value = lookup(checked(target, key))
            while isinstance(value, str) and _REFERENCE.fullmatch(value.strip()):
                if target in chain:
                    raise InputError(
                        f"{where}: {key}: interpolation ${{{target}}} refers to itself"
                    )
                if len(chain) > MAX_INTERPOLATION_CHAIN:
                    raise InputError(
                        f"{where}: {key}: interpolation chain longer than "
                        f"{MAX_INTERPOLATION_CHAIN} references (a: ${{b}}, b: ${{c}}, ...)"
                    )
                chain.add(target)
                target = _REFERENCE.fullmatch(value.strip()).group(1)
                value = lookup(checked(target, key))
            if isinstance(value, dict | list):
                raise InputError(
                    f"{where}: {key}: interpolation ${{{target}}} names a section or a "
                    "list; only a plain value may be referenced"
                )

    walk(data, "")


_MISSING = object()


def _plain_dict(conf, where: str) -> dict[str, Any]:
    """An OmegaConf mapping as plain Python, ``${a.b}`` references resolved (the only
    interpolation allowed: :func:`_check_interpolations`)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        _check_interpolations(OmegaConf.to_container(conf, resolve=False), where)
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        at = f"{where}: {key}" if key else where
        raise InputError(f"{at}: cannot resolve an interpolation: {_first_line(exc)}") from None


def _compose(p: Path, where: str, chain: tuple[Path, ...], read: set[Path], top: ExperimentConfig):
    """``p`` composed with its parents; ``chain``: the files that include it, ``read``:
    every file read so far, ``top``: the file composed (whose folder its paths are read
    against)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    read.add(p.resolve())
    data = read_yaml(p, where, "config")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping of sections, got {type(data).__name__}")
    parents = data.pop(DEFAULTS_KEY, None) or []
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(x, str) for x in parents):
        raise InputError(f"{where}: {DEFAULTS_KEY}: expected a list of config files")
    for section, value in list(data.items()):
        if value is None:  # an empty section adds nothing to its parents'
            del data[section]
        elif not isinstance(value, dict):
            raise InputError(
                f"{where}: {section}: expected a mapping of keys, got {shown_value(value)}"
            )
    if chain:  # a parent's relative paths are relative to the parent, not to its child
        data = absolute_paths(data, ExperimentConfig(source=str(p)), top)
    if parents and len(chain) + 1 >= MAX_DEFAULTS_DEPTH:
        raise InputError(
            f"{where}: {DEFAULTS_KEY}: nested more than {MAX_DEFAULTS_DEPTH} files deep"
        )
    layers = []
    for name in parents:
        parent = (p.parent / name).resolve()
        if parent in chain or parent == p.resolve():
            raise InputError(f"{where}: {DEFAULTS_KEY}: {name}: includes itself")
        if parent in read:
            raise InputError(
                f"{where}: {DEFAULTS_KEY}: {name}: composed twice (a config reads each "
                "file once; a diamond of defaults is refused)"
            )
        if len(read) >= MAX_DEFAULTS_FILES:
            raise InputError(
                f"{where}: {DEFAULTS_KEY}: {name}: more than {MAX_DEFAULTS_FILES} files"
            )
        if not parent.is_file():
            raise InputError(f"{where}: {DEFAULTS_KEY}: {name}: no such config file")
        layers.append(_compose(parent, _shown(parent), (*chain, p.resolve()), read, top))
    try:
        return OmegaConf.merge(*layers, OmegaConf.create(data))
    except OmegaConfBaseException as exc:
        raise InputError(f"{where}: cannot merge with its defaults: {_first_line(exc)}") from None


def _shown(path: Path) -> str:
    """A path for messages: relative to the repo when inside it."""
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]


# --------------------------------------------------------------------------- overrides

#: a dotted key of an override: names separated by dots (no list indices: give the
#: whole list, ``env.hints=[a,b]``)
_OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")


def parse_overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    """``key=value`` command-line overrides as (dotted key, value): the value is read
    the way OmegaConf reads a dotlist (YAML, so ``1e-4`` is a float, ``[a,b]`` a list,
    ``null`` unsets). A malformed item raises ``InputError`` naming it."""

    out = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise InputError(f"override {item!r}: expected key=value")
        if not _OVERRIDE_KEY.fullmatch(key):
            raise InputError(f"override {item!r}: {key!r} is not a dotted key like train.lr")
        if not value.strip():
            raise InputError(f"{key}: override {item!r} has no value (write {key}=null to unset)")
        out.append((key, read_value(value, f"{key}: override {item!r}")))
    return out


def read_value(text: str, where: str) -> Any:
    """A command-line value read the way OmegaConf reads a dotlist (YAML: ``1e-4`` a
    float, ``[a,b]`` a list, ``null`` None); ``InputError`` naming ``where``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist([f"value={text}"]))["value"]
    except (OmegaConfBaseException, yaml.YAMLError) as exc:
        raise InputError(f"{where}: cannot read the value: {_first_line(exc)}") from None


def apply_overrides(data: dict[str, Any], items: Sequence[str]) -> dict[str, Any]:
    """``data`` with the overrides merged in (OmegaConf), a new mapping."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    merged = OmegaConf.create(data)
    for key, value in parse_overrides(items):
        parts = key.split(".")
        node: Any = data
        for depth, part in enumerate(parts[:-1]):  # a value where the key needs a mapping
            node = node.get(part) if isinstance(node, dict) else None
            if node is not None and not isinstance(node, dict):
                where = ".".join(parts[: depth + 1])
                raise InputError(f"{key}: override: {where} is a value, not a section")
        try:
            OmegaConf.update(merged, key, value, merge=False, force_add=True)
        except OmegaConfBaseException as exc:
            raise InputError(f"{key}: override: {_first_line(exc)}") from None
    return _plain_dict(merged, OVERRIDES_WHERE)


#: where the command line's overrides are named in messages
OVERRIDES_WHERE = "command line"


def load_config(
    path: str | Path | ExperimentConfig, overrides: Sequence[str] = ()
) -> ExperimentConfig:
    """Load and validate an experiment config from a YAML file (composed with its
    ``defaults``: :func:`compose_file`), then apply ``key=value`` overrides.

    ``path`` may also be an already-loaded :class:`ExperimentConfig`, returned as is
    without overrides. Relative paths that do not exist are also tried against the
    repo root, so ``configs/default.yaml`` works from any directory. The file is
    validated alone first, so a problem of the file names the file; then with the
    overrides, whose problems name the ``command line`` and the key.
    """
    if isinstance(path, ExperimentConfig):
        if not overrides:
            return path
        data, where = path.to_dict(), path.source
    else:
        where = str(path)
        data = compose_file(path, where)
        if not overrides:
            return config_from_dict(data, where)
        config_from_dict(data, where)
    merged = apply_overrides(data, overrides)
    cfg = config_from_dict(merged, OVERRIDES_WHERE)
    return dataclasses.replace(cfg, source=where)
