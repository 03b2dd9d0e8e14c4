"""Trained agents as :class:`~marl_sched.policies.Policy` s, and checkpoint loading.

``MarlPolicy`` (name ``marl``) and ``SingleAgentPolicy`` (name ``single-agent``) place
a whole job through ``Policy.place(job, view)`` by running the per-task decisions of
:mod:`agents.single_agent` internally, greedily (the arg-max of the masked logits),
so ``marl-sched simulate --policy marl`` and ``compare --policies marl,...`` use the
trained agents exactly as they acted in training. Inference needs plain torch only,
never Ray.

A checkpoint folder (written by :mod:`agents.training`) holds ``manifest.json`` and
``modules/<module_id>.pt`` (the torch state dict of each module's network). What a
checkpoint can serve, checked by :func:`check_compatible`:

- served: any number of GPU groups, servers and racks per subcluster, other
  oversubscription ratios, link speeds and GPU mixes, and (with shared parameters or
  the central agent) any number of subclusters: the GNN has no size-dependent
  parameter and every feature is a ratio or a small count;
- refused: a different observation layout (feature set version or any feature
  dimension ``Fg, Fs, Fr, Fj, Fp``), per-agent modules with a different number of
  subclusters, a central checkpoint for ``marl`` (or the reverse), and checkpoints
  trained on the ``envs`` environment (its observations are built from the live
  simulator, which a ``Policy`` never sees).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.gnn import HierarchicalGNN, build_gnn
from agents.single_agent import (
    OBS_VERSION,
    ObservationBuilder,
    PlacementSession,
    feature_dims,
    home_agent,
)
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy
from marl_sched.simulator import ClusterView
from marl_sched.topology import Topology

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "marl-sched-agents"
DEFAULT_CHECKPOINT = REPO_ROOT / "checkpoints" / "marl-default"
DIM_KEYS = ("Fg", "Fs", "Fr", "Fj", "Fp", "H")


@dataclass
class TrainedAgents:
    """Networks ready for inference, with the manifest they came with."""

    manifest: dict[str, Any]
    nets: dict[str, HierarchicalGNN]
    path: str = "<memory>"
    module_of: dict[str, str] = field(default_factory=dict)

    @property
    def central(self) -> bool:
        return bool(self.manifest["central"])

    def builder_options(self) -> dict[str, Any]:
        """The :class:`ObservationBuilder` options the networks were trained with:
        :data:`agents.config.BUILDER_OPTIONS` from the manifest's model section (an
        option the checkpoint predates takes its :class:`ModelConfig` default;
        ``central`` is the manifest's own key)."""
        from agents.config import BUILDER_OPTIONS, ModelConfig

        model, default = self.manifest["model"], ModelConfig()
        out = {}
        for key in BUILDER_OPTIONS:
            if key == "central":
                continue
            value, d = model.get(key), getattr(default, key)
            if isinstance(d, tuple):
                out[key] = tuple(value or ())
            else:
                out[key] = type(d)(d if value is None else value)
        return out

    def net_for(self, agent_index: int) -> HierarchicalGNN:
        if self.manifest["share_parameters"] or self.central:
            return next(iter(self.nets.values()))
        return self.nets[self.manifest["agents"][agent_index]]


def agents_from_weights(manifest: dict[str, Any], weights: dict[str, dict]) -> TrainedAgents:
    """Build networks from a manifest and ``{module_id: state_dict}``."""
    nets = {}
    for module_id, state in weights.items():
        net = build_gnn(manifest["dims"], manifest["model"])
        state = {k.removeprefix("gnn."): torch.as_tensor(np.asarray(v)) for k, v in state.items()}
        net.load_state_dict(state)
        net.eval()
        nets[module_id] = net
    return TrainedAgents(manifest=manifest, nets=nets)


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a checkpoint, a run folder or a pointer file
    (``checkpoints/latest``, ``checkpoints/best``)."""
    p = Path(path)
    if not p.exists() and not p.is_absolute() and (REPO_ROOT / p).exists():
        p = REPO_ROOT / p
    if (target := _pointer_target(p)) is not None:
        return target
    for cand in (p, p / "checkpoints"):
        if (cand / MANIFEST).is_file():
            return cand
        if (target := _pointer_target(cand / "latest")) is not None:
            return target
    raise InputError(f"{path}: not a checkpoint (no {MANIFEST} and no checkpoints/latest)")


def _pointer_target(p: Path) -> Path | None:
    """The checkpoint a pointer file (a sibling folder's name) names, if ``p`` is one."""
    if not p.is_file() or p.stat().st_size >= 256:
        return None
    name = p.read_bytes().decode("utf-8", errors="replace").strip()
    if name and "/" not in name and (p.parent / name / MANIFEST).is_file():
        return p.parent / name
    return None


def load_checkpoint(path: str | Path) -> TrainedAgents:
    """Load a checkpoint for inference with plain torch; ``InputError`` if unreadable."""
    ckpt = resolve_checkpoint(path)
    try:
        manifest = json.loads((ckpt / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is {manifest.get('format')!r}, not {MANIFEST_FORMAT!r}")
        weights = {}
        for module_id in manifest["modules"]:
            weights[module_id] = torch.load(
                ckpt / "modules" / f"{module_id}.pt", map_location="cpu", weights_only=True
            )
        agents = agents_from_weights(manifest, weights)
    except Exception as exc:  # unreadable files, bad pickles, mismatched tensors, ...
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise InputError(f"{path}: corrupt checkpoint: {msg[:200]}") from None
    agents.path = str(path)
    return agents


def observation_signature(builder: ObservationBuilder) -> dict[str, int]:
    """Feature dims and padded sizes of a topology's observations."""
    return feature_dims(builder.observation_space)


def _dims_text(dims: dict[str, int]) -> str:
    """``Fg=.., .., H=..`` (a dim a manifest lacks counts as 0: checkpoints from before
    heuristic hints have no ``H``)."""
    return ", ".join(f"{k}={dims.get(k, 0)}" for k in DIM_KEYS)


def check_compatible(agents: TrainedAgents, builder: ObservationBuilder, central: bool) -> None:
    """Refuse (``InputError``) a checkpoint that cannot serve this topology."""
    m, path = agents.manifest, agents.path
    if m.get("env_backend", "builtin") != "builtin":
        raise InputError(
            f"{path}: checkpoint was trained on the {m['env_backend']!r} environment, whose "
            "observations need the live simulator: use `marl-sched evaluate` for it"
        )
    if bool(m["central"]) != central:
        kind = "single-agent (central)" if m["central"] else "multi-agent"
        want = "single-agent" if central else "marl"
        raise InputError(f"{path}: checkpoint holds a {kind} policy, not a {want!r} one")
    exp, got = _dims_text(m["dims"]), _dims_text(observation_signature(builder))
    if m.get("obs_version") != OBS_VERSION or exp != got:
        raise InputError(
            f"{path}: checkpoint expects observation layout v{m.get('obs_version')} with "
            f"{exp} but config gives v{OBS_VERSION} with {got}"
        )
    names = m.get("features")
    if names is not None and names != {k: list(v) for k, v in builder.features.items()}:
        raise InputError(f"{path}: checkpoint's feature names differ from this version's")
    if not m["share_parameters"] and not central and len(m["agents"]) != builder.n_agents:
        raise InputError(
            f"{path}: checkpoint has {len(m['agents'])} per-agent modules but config gives "
            f"{builder.n_agents} subclusters (train with model.share_parameters: true to "
            "serve other agent counts)"
        )


ENVS_OBS = "ClusterPlacement-v0"


def envs_signature(cfg) -> dict[str, int]:
    """Feature dims of the ``envs`` environment's observations for ``cfg``."""
    import envs

    return feature_dims(envs.make_env(cfg).observation_space)


def check_envs_compatible(agents: TrainedAgents, cfg) -> None:
    """Refuse an ``envs``-trained checkpoint whose feature dims differ from ``cfg``'s."""
    exp, got = _dims_text(agents.manifest["dims"]), _dims_text(envs_signature(cfg))
    if exp != got:
        raise InputError(f"{agents.path}: checkpoint expects {exp} but config gives {got}")
    if not agents.manifest["share_parameters"]:
        n = cfg.topology.subclusters
        if len(agents.manifest["agents"]) != n:
            raise InputError(
                f"{agents.path}: checkpoint has {len(agents.manifest['agents'])} per-agent "
                f"modules but config gives {n} subclusters"
            )


def rollout_in_envs(agents: TrainedAgents, cfg, jobs, trace_path: str):
    """Greedy rollout of an ``envs``-trained checkpoint over ``jobs`` in the ``envs``
    environment (one episode = the whole window); returns (metrics, records)."""
    import envs

    env = envs.make_env(
        cfg,
        env={"window_jobs": None, "window_sampling": "first", "window_starts": [],
             "max_sim_time": None, "max_placed_jobs": None},
        jobs=jobs,
    )  # fmt: skip
    obs, _ = env.reset(seed=0)
    index = {a: k for k, a in enumerate(env.possible_agents)}
    while True:
        agent = env.acting_agent
        action = greedy_action(agents.net_for(index[agent]), obs[agent])
        obs, _, terminated, truncated, _ = env.step({agent: action})
        if terminated["__all__"] or truncated["__all__"]:
            break
    metrics = dict(env.metrics(), policy="marl", trace=trace_path)
    return metrics, env._sim.result()  # the env exposes no public records accessor yet


def greedy_action(net: HierarchicalGNN, obs: dict[str, np.ndarray]) -> int:
    """The arg-max of the masked logits for one observation."""
    batch = {k: torch.from_numpy(np.ascontiguousarray(v))[None] for k, v in obs.items()}
    with torch.inference_mode():
        logits, _ = net.forward_padded(batch)
    return int(torch.argmax(logits[0]))


class MarlPolicy(Policy):
    """One hierarchical-GNN agent per subcluster, cooperating task by task.

    Args:
        checkpoint: checkpoint folder, run folder or ``latest`` pointer (default:
            ``checkpoints/marl-default``).
        agents: already loaded agents (takes precedence over ``checkpoint``).
    """

    name = "marl"
    description = "trained hierarchical-GNN agents, one per subcluster (checkpoint)"
    central = False

    def __init__(
        self, checkpoint: str | Path | None = None, agents: TrainedAgents | None = None
    ) -> None:
        self.agents = (
            agents if agents is not None else load_checkpoint(checkpoint or DEFAULT_CHECKPOINT)
        )
        self.builder: ObservationBuilder | None = None
        torch.set_num_threads(1)  # small graphs: threads only add latency

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.builder = None

    def _builder_for_topology(self, topology: Topology, perf) -> ObservationBuilder:
        """The observation builder of ``topology``; refuses an incompatible checkpoint."""
        if self.builder is None or self.builder.topology is not topology:
            self.builder = ObservationBuilder(
                topology, perf, central=self.central, **self.agents.builder_options()
            )
            check_compatible(self.agents, self.builder, self.central)
        return self.builder

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        builder = self._builder_for_topology(view.topology, view.perf)
        session = PlacementSession(builder, job, view, home_agent(job, builder.n_agents))
        if session.waits():
            return None
        while not session.done:
            if not session.feasible():
                return None
            obs = builder.observe(session, session.agent)
            session.act(greedy_action(self.agents.net_for(session.agent), obs))
        return session.placement()


class SingleAgentPolicy(MarlPolicy):
    """One centralised hierarchical-GNN agent over the whole datacenter."""

    name = "single-agent"
    description = "one trained centralised hierarchical-GNN agent (checkpoint)"
    central = True


def manifest_for(
    builder: ObservationBuilder,
    model: dict[str, Any],
    module_ids: list[str],
    *,
    env_backend: str = "builtin",
    dims: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a checkpoint of networks trained on ``builder``'s observations
    (or, with ``env_backend="envs"``, on the ``envs`` observations of dims ``dims``)."""
    topo = builder.topology
    builtin = env_backend == "builtin"
    return {
        "format": MANIFEST_FORMAT,
        "obs_version": OBS_VERSION if builtin else f"envs:{ENVS_OBS}",
        "features": {k: list(v) for k, v in builder.features.items()} if builtin else None,
        "dims": observation_signature(builder) if builtin else dict(dims or {}),
        "central": builder.central,
        "share_parameters": bool(model.get("share_parameters", True)),
        "model": dict(model),
        "agents": list(builder.agent_ids),
        "modules": list(module_ids),
        "env_backend": env_backend,
        "topology": {
            "subclusters": topo.n_subclusters,
            "racks": topo.n_racks,
            "servers": topo.n_servers,
            "groups": topo.n_groups,
            "gpus": topo.n_gpus,
        },
        **(extra or {}),
    }


def save_modules(folder: Path, weights: dict[str, dict], manifest: dict[str, Any]) -> None:
    """Write ``modules/<id>.pt`` and ``manifest.json`` (the manifest last)."""
    from marl_sched.metrics import write_json

    (folder / "modules").mkdir(parents=True, exist_ok=True)
    for module_id, state in weights.items():
        tensors = {k: torch.as_tensor(np.asarray(v)).clone() for k, v in state.items()}
        torch.save(tensors, folder / "modules" / f"{module_id}.pt")
    write_json(folder / MANIFEST, manifest)
