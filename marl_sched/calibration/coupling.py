"""λ_L: the level couplings that scale same-GPU interference down to the levels our
placements share (GPU group, socket, server)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from marl_sched.calibration.constants import (
    GROUP_TO_SERVER,
    PACKED_CEILING,
    SOCKET_TO_SERVER,
    TARGET_SERVER_NEIGHBOUR,
)
from marl_sched.perf import LEVEL_RESOURCES, PS_PRESSURE_MASK

# --------------------------------------------------------------------------- λ_L


def neighbour_slowdown(
    coupling: np.ndarray, sens: np.ndarray, press: np.ndarray, level: str
) -> float:
    """Slowdown of a worker from one other job's worker at ``level`` (nearer levels
    include the farther ones, as perf.py sums them)."""
    levels = {"server": [2], "socket": [1, 2], "group": [0, 1, 2]}[level]
    w = sum(coupling[k] * LEVEL_RESOURCES[k] for k in levels)
    return 1.0 + float(np.sum(sens * w * press))


def packed_server_slowdown(
    coupling: np.ndarray, sens: np.ndarray, press: np.ndarray, with_ps: bool = False
) -> float:
    """A worker on a full default 8-GPU server (2 sockets × 2 groups × 2 GPUs): 1
    neighbour in its group, 3 on its socket, 7 on the server, all workers of other
    jobs of one model; ``with_ps`` puts each neighbour's PS on the server too."""
    extra = press * PS_PRESSURE_MASK if with_ps else np.zeros_like(press)
    group = coupling[0] * LEVEL_RESOURCES[0] * press
    socket = coupling[1] * LEVEL_RESOURCES[1] * 3 * (press + extra)
    server = coupling[2] * LEVEL_RESOURCES[2] * 7 * (press + extra)
    return 1.0 + float(np.sum(sens * (group + socket + server)))


def coupling_stats(
    coupling: np.ndarray, vectors: dict[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, float]:
    """Slowdowns the coupling gives over all (victim, aggressor) catalogue pairs."""
    names = sorted(vectors)
    pairs = [(vectors[a][1], vectors[b][0]) for a in names for b in names if a != b]
    packed = np.array(
        [
            [packed_server_slowdown(coupling, vectors[a][1], vectors[b][0]) for a in names]
            for b in names
        ]
    )  # rows: aggressor, columns: victim
    packed_ps = [
        packed_server_slowdown(coupling, vectors[a][1], vectors[b][0], with_ps=True)
        for a in names
        for b in names
    ]
    heavy = int(np.argmax(np.median(packed, axis=1)))
    out = {
        f"median_{level}_neighbour": statistics.median(
            neighbour_slowdown(coupling, s, p, level) for s, p in pairs
        )
        for level in ("server", "socket", "group")
    }
    out.update(
        {
            "max_server_neighbour": max(
                neighbour_slowdown(coupling, s, p, "server") for s, p in pairs
            ),
            "median_packed_server": float(np.median(packed)),
            "heaviest_packed_server": float(np.median(packed[heavy])),
            "max_packed_server": float(packed.max()),
            "max_packed_server_with_ps": max(packed_ps),
        }
    )
    out["heaviest"] = names[heavy]  # type: ignore[assignment]
    return out


def fit_level_coupling(
    vectors: dict[str, tuple[np.ndarray, np.ndarray]],
) -> tuple[dict[str, float], dict[str, Any]]:
    """λ_group, λ_socket, λ_server (ratios ``GROUP_TO_SERVER : SOCKET_TO_SERVER : 1``):
    the smaller of (a) the λ giving a median one-neighbour server-level slowdown of
    ``TARGET_SERVER_NEIGHBOUR`` and (b) the λ at which a full 8-GPU server of the heaviest
    model slows the median victim by ``PACKED_CEILING`` (``lambda_target``,
    ``lambda_cap``)."""
    ratio = np.array([GROUP_TO_SERVER, SOCKET_TO_SERVER, 1.0])
    unit = coupling_stats(ratio, vectors)
    lam_target = (TARGET_SERVER_NEIGHBOUR - 1.0) / (unit["median_server_neighbour"] - 1.0)
    lam_cap = (PACKED_CEILING - 1.0) / (unit["heaviest_packed_server"] - 1.0)
    lam = min(lam_target, lam_cap)
    c = lam * ratio
    stats = coupling_stats(c, vectors)
    stats["binding"] = "packed-server ceiling" if lam_cap < lam_target else "neighbour target"
    stats["lambda_target"], stats["lambda_cap"] = float(lam_target), float(lam_cap)
    return {"group": float(c[0]), "socket": float(c[1]), "server": float(c[2])}, stats
