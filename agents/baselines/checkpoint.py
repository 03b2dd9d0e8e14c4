"""Checkpoint files of the learned baselines, and the feature layout they carry.

A checkpoint is one ``torch.save`` of a plain mapping, readable with
``torch.load(weights_only=True)``::

    {"format": "marl_sched.baseline", "kind": "harmony" | "mlfs-rl",
     "layout_version": int,             # feature layout of the networks
     "metadata": str,                   # JSON: feature layout, config, training
     "state": {name: state_dict, ...}}  # one torch state_dict per network

Any problem reading one raises :class:`~marl_sched.errors.InputError` ``"<path>:
<problem>"``. A checkpoint serves any topology (per-server networks on capacity
fractions); another feature layout (:func:`layout_signature`) is refused by
:meth:`CheckpointPolicy.check_cluster`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from agents.config import MAX_WIDTH
from marl_sched.catalogue import MODEL_NAMES
from marl_sched.config import shown_value
from marl_sched.errors import InputError
from marl_sched.files import atomic_write_bytes, check_input
from marl_sched.policies.base import Policy
from marl_sched.topology import Topology

FORMAT = "marl_sched.baseline"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT / "checkpoints" / "baselines"


def layout_signature(layout_version: int, features: dict[str, Sequence[str]]) -> dict[str, Any]:
    """What a checkpoint records of the inputs its networks read: the layout version,
    the feature names of each network input, and the model catalogue's names."""
    return {
        "version": int(layout_version),
        "features": {k: list(v) for k, v in sorted(features.items())},
        "models": list(MODEL_NAMES),
    }


def save_checkpoint(
    path: str | Path,
    kind: str,
    layout_version: int,
    state: dict[str, dict[str, torch.Tensor]],
    metadata: dict[str, Any],
) -> None:
    """Write a checkpoint atomically."""
    payload = {
        "format": FORMAT,
        "kind": kind,
        "layout_version": int(layout_version),
        "metadata": json.dumps(metadata, sort_keys=True),
        "state": {
            k: {n: t.detach().cpu().clone() for n, t in sd.items()} for k, sd in state.items()
        },
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write_bytes(path, buf.getvalue())


def resolve_checkpoint(checkpoint: str | Path | None, filename: str) -> Path:
    """The file to load: the shipped default, a file, or ``filename`` inside a folder."""
    if checkpoint is None:
        return DEFAULT_DIR / filename
    p = Path(checkpoint)
    return p / filename if p.is_dir() else p


def load_checkpoint(
    path: str | Path, kind: str, layout_version: int
) -> tuple[dict[str, dict[str, torch.Tensor]], dict[str, Any]]:
    """Read and check a checkpoint; returns ``(state, metadata)``."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: checkpoint not found")
    check_input(p, "weights")  # a regular file of a bounded size, before torch reads it
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (torch raises many kinds on bad files)
        problem = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise InputError(
            f"{p}: not a readable checkpoint (corrupt or not torch): {problem}"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise InputError(f"{p}: not a marl_sched baseline checkpoint")
    if payload.get("kind") != kind:
        raise InputError(f"{p}: is a {payload.get('kind')!r} checkpoint, expected {kind!r}")
    if payload.get("layout_version") != layout_version:
        raise InputError(
            f"{p}: feature layout version {payload.get('layout_version')}, this code reads "
            f"{layout_version}; retrain with experiments/train_baselines.py"
        )
    try:
        metadata = json.loads(payload["metadata"])
        state = payload["state"]
        if not isinstance(metadata, dict) or not isinstance(state, dict):
            raise TypeError("metadata or state is not a mapping")
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{p}: malformed checkpoint: {exc}") from None
    return state, metadata


def load_module_state(path: str | Path, module: torch.nn.Module, state: Any, name: str) -> None:
    """``module.load_state_dict(state)``, with a mismatch reported as InputError."""
    if not isinstance(state, dict):
        raise InputError(f"{path}: malformed checkpoint: no weights for {name!r}")
    try:
        module.load_state_dict(state)
    except (RuntimeError, KeyError) as exc:
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first[:3])
        raise InputError(f"{path}: weights of {name!r} do not fit the network: {detail}") from None


def check_layout(path: str | Path, metadata: dict[str, Any], want: dict[str, Any]) -> None:
    """InputError unless the checkpoint's recorded feature layout is ``want`` (this
    code's :func:`layout_signature`)."""
    have = metadata.get("layout")
    if have == want:
        return
    if not isinstance(have, dict):
        problem = "records no feature layout (made before layouts were recorded)"
    elif have.get("models") != want["models"]:
        problem = (
            f"made for a model catalogue of {len(have.get('models') or [])} models "
            f"({', '.join(map(str, (have.get('models') or [])[:3]))}, ...), this code's has "
            f"{len(want['models'])}"
        )
    else:
        diff = [
            k
            for k in sorted(set(want["features"]) | set(have.get("features") or {}))
            if (have.get("features") or {}).get(k) != want["features"].get(k)
        ]
        problem = f"made for another feature layout (differs in: {', '.join(diff) or 'version'})"
    raise InputError(f"{path}: {problem}; retrain with experiments/train_baselines.py")


def load_network(
    checkpoint: str | Path | None,
    filename: str,
    kind: str,
    layout_version: int,
    build: Callable[[int], torch.nn.Module],
    state_key: str,
) -> tuple[Path, torch.nn.Module, dict[str, Any], dict[str, Any]]:
    """Resolve, read and check a checkpoint, and rebuild its network in eval mode.
    Returns ``(path, network, metadata, state)``; ``build(hidden)`` makes the empty
    network."""
    path = resolve_checkpoint(checkpoint, filename)
    state, metadata = load_checkpoint(path, kind, layout_version)
    hidden = metadata.get("hidden")
    # the width comes from the file: bounded before the network is allocated
    if isinstance(hidden, bool) or not isinstance(hidden, int) or not 1 <= hidden <= MAX_WIDTH:
        raise InputError(
            f"{path}: malformed checkpoint: 'hidden' must be an integer in [1, {MAX_WIDTH}], "
            f"got {shown_value(hidden)}"
        )
    net = build(hidden)
    load_module_state(path, net, state.get(state_key), state_key)
    net.eval()
    return path, net, metadata, state


class CheckpointPolicy(Policy):
    """A learned baseline acting with the network of one checkpoint file.

    Subclasses set ``checkpoint_file``, ``kind``, ``layout_version``, ``net_class``,
    ``state_key`` and implement :meth:`layout` (the feature names their networks read).

    Args:
        checkpoint: the checkpoint file, a folder holding ``checkpoint_file``, or
            ``None`` for the shipped one in ``checkpoints/baselines/``.
        net: use this network instead of loading one (for training and tests).
    """

    checkpoint_file: ClassVar[str]
    kind: ClassVar[str]
    layout_version: ClassVar[int]
    net_class: ClassVar[Callable[[int], torch.nn.Module]]
    state_key: ClassVar[str]

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        net: torch.nn.Module | None = None,
    ) -> None:
        self.metadata: dict[str, Any] = {}
        self.state: dict[str, Any] = {}
        if net is not None:
            self.net, self.path = net, None
            return
        self.path, self.net, self.metadata, self.state = load_network(
            checkpoint,
            self.checkpoint_file,
            self.kind,
            self.layout_version,
            self.net_class,
            self.state_key,
        )

    @classmethod
    def layout(cls) -> dict[str, Any]:
        """This code's :func:`layout_signature` for the policy's networks."""
        raise NotImplementedError

    def check_cluster(self, topology: Topology, perf: Any) -> None:
        if self.path is not None:
            check_layout(self.path, self.metadata, self.layout())

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.check_cluster(topology, None)
