"""Checkpoint files of the learned baselines, and the topology signature they carry.

A checkpoint is one ``torch.save`` of a plain mapping, readable with
``torch.load(weights_only=True)``::

    {"format": "marl_sched.baseline", "kind": "harmony" | "mlfs-rl",
     "layout_version": int,             # feature layout of the networks
     "metadata": str,                   # JSON: topology signature, config, training
     "state": {name: state_dict, ...}}  # one torch state_dict per network

Every problem reading one (missing, not a torch file, truncated, another kind,
another feature layout, weights that do not fit the network) raises
:class:`~marl_sched.errors.InputError` with ``"<path>: <problem>"``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch

from marl_sched.errors import InputError
from marl_sched.metrics import atomic_write_bytes
from marl_sched.policies.base import Policy
from marl_sched.topology import Topology

FORMAT = "marl_sched.baseline"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT / "checkpoints" / "baselines"


def topology_signature(topology: Topology) -> dict[str, Any]:
    """What a checkpoint records of the cluster it was trained on."""
    cfg = dataclasses.asdict(topology.config)
    blob = json.dumps(cfg, sort_keys=True).encode("utf-8")
    return {
        "sha256": hashlib.sha256(blob).hexdigest()[:16],
        "servers": int(topology.n_servers),
        "gpus": int(topology.n_gpus),
        "describe": topology.describe(),
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
    if not p.is_file():
        raise InputError(f"{p}: checkpoint not found")
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


def check_topology(path: str | Path, metadata: dict[str, Any], topology: Topology) -> None:
    """InputError unless the checkpoint was trained on this topology."""
    want = metadata.get("topology", {})
    have = topology_signature(topology)
    if want.get("sha256") != have["sha256"]:
        raise InputError(
            f"{path}: trained on another topology ({want.get('describe', 'unknown')}; "
            f"signature {want.get('sha256')}), this run's is {have['describe']} (signature "
            f"{have['sha256']}); train on this config with experiments/train_baselines.py, "
            "or construct the policy with strict_topology=False"
        )


def load_network(
    checkpoint: str | Path | None,
    filename: str,
    kind: str,
    layout_version: int,
    build: Callable[[int], torch.nn.Module],
    state_key: str,
) -> tuple[Path, torch.nn.Module, dict[str, Any]]:
    """Resolve, read and check a checkpoint, and rebuild its network in eval mode.

    Returns ``(path, network, metadata)``; ``build(hidden)`` makes the empty network.
    """
    path = resolve_checkpoint(checkpoint, filename)
    state, metadata = load_checkpoint(path, kind, layout_version)
    hidden = metadata.get("hidden")
    if not isinstance(hidden, int) or hidden < 1:
        raise InputError(f"{path}: malformed checkpoint: bad 'hidden' {hidden!r}")
    net = build(hidden)
    load_module_state(path, net, state.get(state_key), state_key)
    net.eval()
    return path, net, metadata


class CheckpointPolicy(Policy):
    """A learned baseline acting with the network of one checkpoint file.

    Subclasses set ``checkpoint_file``, ``kind``, ``layout_version``, ``net_class``
    (built from the checkpoint's ``hidden``) and ``state_key`` (the network's entry in
    the checkpoint's ``state``).

    Args:
        checkpoint: the checkpoint file, a folder holding ``checkpoint_file``, or
            ``None`` for the shipped one in ``checkpoints/baselines/``.
        strict_topology: refuse (``InputError``) a topology other than the one the
            checkpoint was trained on; the networks themselves accept any server count.
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
        strict_topology: bool = True,
        net: torch.nn.Module | None = None,
    ) -> None:
        self.strict_topology = strict_topology
        self.metadata: dict[str, Any] = {}
        if net is not None:
            self.net, self.path = net, None
            return
        self.path, self.net, self.metadata = load_network(
            checkpoint,
            self.checkpoint_file,
            self.kind,
            self.layout_version,
            self.net_class,
            self.state_key,
        )

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        if self.path is not None and self.strict_topology:
            check_topology(self.path, self.metadata, topology)
