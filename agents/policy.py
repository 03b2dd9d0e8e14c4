"""Trained agents: checkpoint loading, the inference API and the ``marl`` policies.

- :func:`load_agents` → :class:`TrainedAgents`, whose ``act(observations)`` gives every
  agent's greedy action with plain torch (no Ray).
- :class:`MarlPolicy` (``marl``) and :class:`SingleAgentPolicy` (``single-agent``) drive
  the environment's own :class:`envs.session.PlacementSession` with the checkpoint's
  options, so they decide as the agents do in the env.

A checkpoint folder holds ``manifest.json`` and ``modules/<module_id>.pt``; a checkpoint
serves other topologies, padding, window and reward, and is refused (exit 2, naming the
option) for another env id or version, decision option, feature dims, or per-agent
modules with another number of subclusters. A v1 manifest has migration off."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.config import RETIRED_MODEL_FIELDS
from agents.gnn import (
    MASKED_LOGIT,
    HierarchicalGNN,
    RegularClusterBatch,
    build_gnn,
    inverse_counts,
    regular_children,
)
from envs.config import (
    DECISION_OPTIONS,
    ENV_ID,
    ENV_ID_V2,
    ENV_NAME,
    ENV_VERSION,
    LATER_OPTIONS,
    MIGRATION_OPTIONS,
    MIGRATION_VERSION,
    EnvConfig,
    drop_retired_options,
    env_id,
)
from envs.observations import OBS_VERSION, ObservationBuilder, feature_dims
from envs.rules import home_agent
from envs.session import MoveBook, PlacementSession
from marl_sched.checkpoints import resolve_checkpoint
from marl_sched.config import REPO_ROOT, drop_retired, parse_section
from marl_sched.errors import InputError
from marl_sched.files import read_input_text
from marl_sched.jobs import Job, Placement
from marl_sched.policies.base import Policy
from marl_sched.policies.load_control import running_job, usable_groups
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

    @property
    def central(self) -> bool:
        return bool(self.manifest["central"])

    def env_options(self) -> dict[str, Any]:
        """The decision options of the environment the networks were trained in
        (``manifest["env"]["options"]``; lists as tuples)."""
        opts = self.manifest["env"]["options"]
        return {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()}

    def check_env(self, env: EnvConfig, where: str = "env") -> None:
        """Refuse (``InputError``, naming the option) an environment whose decision
        options differ from the checkpoint's (module docstring)."""
        check_env_options(self, env.decision_options(), where)

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        """The greedy action of every agent in ``observations`` (agent id → the
        observation ``make_parallel_env`` / ``make_env`` returned for it). An agent
        with nothing to decide gets its no-op (the only legal action of its mask)."""
        out = {}
        for agent, obs in observations.items():
            k = self.agent_index(agent)
            out[agent] = greedy_action(self.net_for(k), obs)
        return out

    def agent_index(self, agent: str) -> int:
        if agent == "central":
            return 0
        if not agent.startswith("sc") or not agent[2:].isdigit():
            raise ValueError(f"unknown agent id {agent!r} (expected 'sc<k>' or 'central')")
        return int(agent[2:])

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


def load_checkpoint(path: str | Path) -> TrainedAgents:
    """Load a checkpoint for inference with plain torch; ``InputError`` if unreadable
    or trained in another environment than ``ClusterPlacement-v1``."""
    ckpt = resolve_checkpoint(path)
    try:
        manifest = json.loads(read_input_text(ckpt / MANIFEST, "json", f"{path}: {MANIFEST}"))
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is {manifest.get('format')!r}, not {MANIFEST_FORMAT!r}")
    except InputError:
        raise
    except Exception as exc:  # unreadable file, bad JSON
        raise _corrupt(path, exc) from None
    if not isinstance(manifest, dict):
        raise InputError(f"{path}: manifest.json: expected a JSON object")
    check_manifest_env(manifest, str(path))
    check_manifest_schema(manifest, str(path))
    try:
        weights = {}
        for module_id in manifest["modules"]:
            weights[module_id] = _module_weights(ckpt / "modules", f"{module_id}.pt")
        agents = agents_from_weights(manifest, weights)
    except Exception as exc:  # unreadable files, bad pickles, mismatched tensors, ...
        raise _corrupt(path, exc) from None
    for module_id, net in agents.nets.items():
        for name, tensor in net.state_dict().items():
            if not torch.isfinite(tensor).all():
                raise InputError(
                    f"{path}: modules/{module_id}.pt: {name}: non-finite weights (NaN or inf)"
                )
    agents.path = str(path)
    return agents


def _corrupt(path, exc: Exception) -> InputError:
    msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return InputError(f"{path}: corrupt checkpoint: {msg[:200]}")


#: a module's weights file larger than this is refused before it is read (a shipped
#: one is under 1 MB)
MAX_MODULE_BYTES = 256 << 20


def _module_weights(folder: Path, name: str) -> dict:
    """:func:`load_weights` of a regular file of at most :data:`MAX_MODULE_BYTES`, opened
    without blocking (a FIFO or device there is refused, not waited on)."""
    import os
    import stat

    fd = os.open(folder / name, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"modules/{name}: not a regular file")
        if st.st_size > MAX_MODULE_BYTES:
            raise ValueError(f"modules/{name}: {st.st_size} bytes, more than {MAX_MODULE_BYTES}")
        data = fh.read(MAX_MODULE_BYTES + 1)
    return load_weights(data)


def load_weights(data: bytes) -> dict:
    """The tensors of a ``.pt`` file's bytes (``weights_only=True``: no pickled code runs)."""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


@dataclass(frozen=True)
class ManifestKeys:
    """The keys every manifest holds, typed for :func:`marl_sched.config.parse_section`
    (a manifest may hold more, unchecked)."""

    format: str
    env: dict
    obs_version: int
    features: dict
    dims: dict
    central: bool
    share_parameters: bool
    model: dict
    agents: tuple[str, ...]
    modules: tuple[str, ...]
    topology: dict


MANIFEST_KEYS = tuple(f.name for f in fields(ManifestKeys))
_MODULE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_manifest_schema(manifest: Any, path: str) -> None:
    """Refuse (``InputError``, one line) a manifest that lacks a key, holds one of the
    wrong type, names a module file outside ``modules/`` or disagrees with itself
    (``central`` vs its agents, shared parameters vs its modules, dims vs features)."""
    where = f"{path}: manifest.json"
    if not isinstance(manifest, dict):
        raise InputError(f"{where}: expected a JSON object")
    parse_section(ManifestKeys, {k: v for k, v in manifest.items() if k in MANIFEST_KEYS},
                  where, "")  # fmt: skip
    manifest["model"] = drop_retired(manifest["model"], RETIRED_MODEL_FIELDS, where, "model")
    modules, agent_ids = manifest["modules"], manifest["agents"]
    if not modules:
        raise InputError(f"{where}: modules: empty (a checkpoint holds at least one module)")
    for m in modules:
        if not isinstance(m, str) or not _MODULE_ID.match(m):
            raise InputError(f"{where}: modules: {m!r} is not a module name (letters, digits, _ -)")
    if len(set(modules)) != len(modules):
        raise InputError(f"{where}: modules: repeats a name")
    central = manifest["central"]
    if central and agent_ids != ["central"]:
        raise InputError(f"{where}: central is true but agents are {agent_ids}")
    if not central and agent_ids != [f"sc{k}" for k in range(len(agent_ids))]:
        raise InputError(f"{where}: agents: expected sc0..sc<A-1>, got {agent_ids}")
    if manifest["share_parameters"] or central:
        if modules != ["shared"]:
            raise InputError(f"{where}: modules: shared parameters need one module 'shared'")
    elif modules != agent_ids:
        raise InputError(f"{where}: modules: per-agent modules must be named as the agents")
    options = manifest["env"].get("options")
    if isinstance(options, dict) and options.get("central") != central:
        raise InputError(f"{where}: env.options.central disagrees with central")
    for key in DIM_KEYS:
        value = manifest["dims"].get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{where}: dims.{key}: expected an integer >= 0")


def load_agents(path: str | Path) -> TrainedAgents:
    """The inference API: trained agents whose ``act(observations)`` answers the
    observations of ``envs.make_parallel_env`` / ``envs.make_env``."""
    torch.set_num_threads(1)  # small graphs: threads only add latency
    return load_checkpoint(path)


def check_manifest_env(manifest: dict[str, Any], path: str) -> None:
    """Refuse a manifest that records no environment, another one, or another version.
    A v1 manifest's options gain the migration options at their defaults (migration
    off: v1 had none)."""
    env = manifest.get("env")
    if not isinstance(env, dict) or not isinstance(env.get("options"), dict):
        raise InputError(
            f"{path}: checkpoint records no environment (manifest 'env' block); it predates "
            f"{ENV_ID}"
        )
    known = {(ENV_ID, ENV_VERSION), (ENV_ID_V2, MIGRATION_VERSION)}
    if (env.get("id"), env.get("version")) not in known:
        raise InputError(
            f"{path}: checkpoint was trained in {env.get('id')!r} (version "
            f"{env.get('version')!r}), this is {ENV_ID} (version {ENV_VERSION}) or "
            f"{ENV_ID_V2} (version {MIGRATION_VERSION})"
        )
    options = drop_retired_options(env["options"], f"{path}: manifest", "env.options")
    env["options"] = {**LATER_OPTIONS, **options}  # options added since
    if env["id"] == ENV_ID:
        env["options"] = {**MIGRATION_OPTIONS, **env["options"]}
        if env["options"]["migration"] is not False:
            raise InputError(f"{path}: manifest env.options.migration: {ENV_ID} has it off")
    elif env["options"].get("migration") is not True:
        raise InputError(f"{path}: manifest env.options.migration: {ENV_ID_V2} has it on")
    unknown = sorted(set(env["options"]) - set(DECISION_OPTIONS))
    missing = sorted(set(DECISION_OPTIONS) - set(env["options"]))
    if unknown or missing:
        what = f"unknown option {unknown[0]}" if unknown else f"option {missing[0]} missing"
        raise InputError(f"{path}: manifest env.options: {what}")


def check_env_options(agents: TrainedAgents, options: dict[str, Any], where: str) -> None:
    """Refuse (``InputError``) when ``options`` (decision options) differ from the
    checkpoint's; the message names the first differing option (``migration`` first;
    the migration cadence options only when migration is on)."""
    mine = agents.manifest["env"]["options"]
    if bool(options.get("migration")) != bool(mine.get("migration")):
        trained = "with" if mine.get("migration") else "without"
        raise InputError(
            f"{where}.migration: is {'on' if options.get('migration') else 'off'} but "
            f"checkpoint {agents.path} was trained {trained} migration "
            f"({env_id(bool(mine.get('migration')))[0]}; a decision option: the checkpoint "
            "cannot serve it)"
        )
    for key in DECISION_OPTIONS:
        if key in MIGRATION_OPTIONS and not mine.get("migration"):
            continue
        theirs = options.get(key)
        theirs = list(theirs) if isinstance(theirs, tuple) else theirs
        if mine.get(key) != theirs:
            raise InputError(
                f"{where}.{key}: is {theirs!r} but checkpoint {agents.path} was trained with "
                f"{mine.get(key)!r} (a decision option: the checkpoint cannot serve it)"
            )


def observation_signature(builder: ObservationBuilder) -> dict[str, int]:
    """Feature dims and padded sizes of a topology's observations."""
    return feature_dims(builder.observation_space)


def _dims_text(dims: dict[str, int]) -> str:
    """``Fg=.., .., H=..``."""
    return ", ".join(f"{k}={dims.get(k, 0)}" for k in DIM_KEYS)


def check_central(agents: TrainedAgents, central: bool) -> None:
    """Refuse (``InputError``) a central checkpoint as ``marl`` or the reverse."""
    if agents.central != central:
        kind = "single-agent (central)" if agents.central else "multi-agent"
        want = "single-agent" if central else "marl"
        raise InputError(f"{agents.path}: checkpoint holds a {kind} policy, not a {want!r} one")


def check_compatible(agents: TrainedAgents, builder: ObservationBuilder, central: bool) -> None:
    """Refuse (``InputError``) a checkpoint that cannot serve this topology."""
    m, path = agents.manifest, agents.path
    check_central(agents, central)
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


def masked_logits(net: HierarchicalGNN, obs: dict[str, np.ndarray]) -> torch.Tensor:
    """The masked logits for one (padded) observation."""
    batch = {k: torch.from_numpy(np.ascontiguousarray(v))[None] for k, v in obs.items()}
    with torch.inference_mode():
        logits, _ = net.forward_padded(batch)
    return logits[0]


def greedy_action(net: HierarchicalGNN, obs: dict[str, np.ndarray]) -> int:
    """The arg-max of the masked logits for one observation."""
    return int(torch.argmax(masked_logits(net, obs)))


class ScopeInput:
    """The fixed part of one agent's network input on a topology (its scope's sizes,
    hierarchy indices, child counts); :meth:`batch` adds an observation, unpadded."""

    def __init__(self, builder: ObservationBuilder, agent: int) -> None:
        sc = builder.scopes[agent]
        g, s, r = len(sc.groups), len(sc.servers), len(sc.racks)
        self.sizes = (g, s, r)
        self.g_max = builder.pad[0]
        self.n_agents = builder.n_agents
        group_server = torch.as_tensor(sc.group_server, dtype=torch.long)
        server_rack = torch.as_tensor(sc.server_rack, dtype=torch.long)
        self.index = {
            "group_server": group_server,
            "server_rack": server_rack,
            "group_batch": torch.zeros(g, dtype=torch.long),
            "server_batch": torch.zeros(s, dtype=torch.long),
            "rack_batch": torch.zeros(r, dtype=torch.long),
        }
        self.inverse = {
            "group_server": inverse_counts(group_server, s),
            "server_rack": inverse_counts(server_rack, r),
        }
        self.children = {
            by: k
            for by, index, parents in (
                ("group_server", group_server, s),
                ("server_rack", server_rack, r),
            )  # fmt: skip
            if (k := regular_children(index, parents)) is not None
        }

    def batch(self, obs: dict[str, np.ndarray]) -> RegularClusterBatch:
        """The network input of one observation of this scope (no copies of the features)."""
        g, s, r = self.sizes
        t = torch.from_numpy
        mask = t(obs["action_mask"])
        a_end = self.g_max + self.n_agents
        b = RegularClusterBatch(
            group_x=t(obs["group_x"][:g]),
            server_x=t(obs["server_x"][:s]),
            rack_x=t(obs["rack_x"][:r]),
            job_x=t(obs["job_x"])[None],
            peers_x=t(obs["peers_x"])[None],
            peers_mask=t(obs["peers_mask"])[None],
            group_allowed=mask[:g],
            forward_allowed=mask[self.g_max : a_end][None],
            hint_allowed=mask[a_end:][None],
            children=self.children,
            **self.index,
        )
        b._inverse_counts.update(self.inverse)
        return b


def scope_logits(
    net: HierarchicalGNN, scope: ScopeInput, obs: dict[str, np.ndarray]
) -> torch.Tensor:
    """``(G_max + A + H,)``: the logits ``net.forward_padded`` gives the padded
    observation ``obs`` of ``scope``'s agent, computed through :meth:`ScopeInput.batch`."""
    g = scope.sizes[0]
    with torch.inference_mode():
        group_scores, other_scores, _ = net(scope.batch(obs))
        logits = torch.full((len(obs["action_mask"]),), MASKED_LOGIT)
        logits[:g] = group_scores
        logits[scope.g_max :] = other_scores[0]
    return logits


def greedy_scope_action(net: HierarchicalGNN, scope: ScopeInput, obs: dict[str, np.ndarray]) -> int:
    """:func:`greedy_action` for an observation of ``scope``'s agent: the arg-max of
    :func:`scope_logits` (the same logits, so the same action)."""
    return int(torch.argmax(scope_logits(net, scope, obs)))


#: Inductor options of the compiled networks: no buffer reuse, which Inductor (torch
#: 2.13, CPU) otherwise miscompiles for the exchange-less default (docs/agents.md, "A
#: miscompile")
COMPILE_OPTIONS = {"inplace_buffers": False, "allow_buffer_reuse": False}


class MarlPolicy(Policy):
    """One hierarchical-GNN agent per subcluster, cooperating task by task.

    Args:
        checkpoint: checkpoint folder, run folder (its ``best``) or pointer (default:
            ``checkpoints/marl-default``).
        agents: already loaded agents (takes precedence over ``checkpoint``).
        compile: decide through ``torch.compile``'d networks (:data:`COMPILE_OPTIONS`);
            each agent's first decision checks them against eager and falls back to eager,
            with a warning, on a mismatch (:meth:`_check_compiled`). Off by default.
    """

    name = "marl"
    description = "trained hierarchical-GNN agents, one per subcluster (checkpoint)"
    central = False

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        agents: TrainedAgents | None = None,
        compile: bool = False,
    ) -> None:
        self.agents = (
            agents if agents is not None else load_checkpoint(checkpoint or DEFAULT_CHECKPOINT)
        )
        self.builder: ObservationBuilder | None = None
        self.scope_inputs: dict[int, ScopeInput] = {}  # per agent, on self.builder
        self.compile = compile
        self._compiled: dict[int, torch.nn.Module] = {}  # id(network) -> its compiled module
        torch.set_num_threads(1)  # small graphs: threads only add latency

    def reset(self, topology: Topology, seed: int = 0) -> None:
        super().reset(topology, seed)
        self.builder = None
        self.book: MoveBook | None = None  # the run's moves (a v2 checkpoint), per topology
        self.placed: dict[int, Job] = {}  # running job -> the job as placed (a v2 checkpoint)

    @property
    def migrates(self) -> bool:
        """True for a checkpoint trained with ``env.migration: on`` (v2): it has a
        :meth:`rebalance` rule."""
        return bool(self.agents.env_options().get("migration"))

    def _builder_for_topology(self, topology: Topology, perf) -> ObservationBuilder:
        """The environment core on ``topology`` with the checkpoint's decision options;
        refuses an incompatible checkpoint."""
        if self.builder is None or self.builder.topology is not topology:
            check_central(self.agents, self.central)  # before building with its options
            self.builder = ObservationBuilder(
                topology, perf, EnvConfig(**self.agents.env_options())
            )
            check_compatible(self.agents, self.builder, self.central)
            self.scope_inputs = {}
            self.book = MoveBook(self.builder)
            self.placed = {}
        return self.builder

    def decide(self, session: PlacementSession) -> int:
        """The acting agent's greedy action in ``session``."""
        return self.greedy(session.agent, self.builder.observe(session, session.agent))

    def greedy(self, agent: int, obs: dict[str, np.ndarray]) -> int:
        """``agent``'s greedy action for ``obs`` (:func:`greedy_action`'s, through its
        :class:`ScopeInput`)."""
        scope = self.scope_inputs.get(agent)
        if scope is None:
            scope = self.scope_inputs[agent] = ScopeInput(self.builder, agent)
            if self.compile:
                self._check_compiled(agent, scope, obs)
        return greedy_scope_action(self.network(agent), scope, obs)

    def _check_compiled(self, agent: int, scope: ScopeInput, obs: dict[str, np.ndarray]) -> None:
        """On ``agent``'s first decision, compare its compiled network's logits with the
        eager ones (atol, rtol 1e-4); on a mismatch decide eagerly from then on, with a
        warning."""
        net = self.agents.net_for(agent)
        if self._compiled.get(id(net)) is net:
            return  # already found wrong: eager
        want = scope_logits(net, scope, obs)
        got = scope_logits(self.network(agent), scope, obs)
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            import warnings

            warnings.warn(
                f"marl: torch.compile gave logits off by {float((got - want).abs().max()):.3g} "
                f"for agent {agent}'s network ({self.agents.path}); it decides eagerly",
                RuntimeWarning,
                stacklevel=3,
            )
            self._compiled[id(net)] = net

    def network(self, agent: int) -> torch.nn.Module:
        """``agent``'s network as it decides: the eager module, or its compiled
        counterpart (one per network, shared by the agents that share it)."""
        net = self.agents.net_for(agent)
        if not self.compile:
            return net
        compiled = self._compiled.get(id(net))
        if compiled is None:
            compiled = self._compiled[id(net)] = torch.compile(
                net, dynamic=False, options=COMPILE_OPTIONS
            )
        return compiled

    def check_cluster(self, topology: Topology, perf) -> None:
        self._builder_for_topology(topology, perf)

    def check_config(self, cfg) -> None:
        """Refuse (``InputError`` naming the key) a run config whose ``env`` decision
        options the checkpoint was not trained with."""
        from envs.config import env_config

        self.agents.check_env(env_config(cfg), f"{cfg.source}: env")

    def _complete(self, session: PlacementSession) -> bool:
        """Let the agents act in ``session`` until it is done (True) or the rest of
        the job no longer fits (False)."""
        while not session.done:
            session.act(self.decide(session))
            if not session.done and not session.feasible():
                return False
        return True

    def place(self, job: Job, view: ClusterView) -> Placement | None:
        builder = self._builder_for_topology(view.topology, view.perf)
        session = PlacementSession(builder, job, view, home_agent(job, builder.n_agents))
        if not session.feasible() or session.waits() or not self._complete(session):
            return None
        placement = session.placement()
        if builder.migration:
            self.book.placed(job.job_id, placement)
            self.placed[job.job_id] = job
        return placement

    def rebalance(self, view: ClusterView):
        """The agents' moves after a batch of completions (a v2 checkpoint), offered as
        the env offers them (:class:`envs.session.MoveBook`); a generator
        (:func:`marl_sched.runner.rebalance`) sent the view after each move."""
        if not self.migrates:
            return []
        return self._moves(view)

    def _moves(self, view: ClusterView):
        self._builder_for_topology(view.topology, view.perf)
        book = self.book
        running = view.running()
        ids = {info.job_id for info in running}
        done = [jid for jid in book.scopes if jid not in ids]
        for jid in done:
            self.placed.pop(jid, None)
        agents = book.finished(done)
        if not running:
            return
        for agent in sorted(agents):
            info = book.pick(view, agent, self.placed.get)  # placed elsewhere: unknown
            if info is None:
                continue
            jid = info.job_id
            job = self.placed.get(jid) or running_job(info)  # placed elsewhere: no length
            session = book.session(view, info, job, agent, usable_groups(view, info))
            if self._complete(session) and session.moved():
                placement = session.placement()
                view = yield jid, placement
                after = next((i for i in view.running() if i.job_id == jid), None)
                if after is not None and after.migrations > info.migrations:  # not declined
                    book.moved(jid, placement, view.now)


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
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a checkpoint of networks trained on ``builder``'s environment."""
    topo = builder.topology
    options = {k: getattr(builder, k) for k in DECISION_OPTIONS}
    if not builder.migration:  # v1: no migration options (older code reads it too)
        options = {k: v for k, v in options.items() if k not in MIGRATION_OPTIONS}
    eid, version = env_id(builder.migration)
    return {
        "format": MANIFEST_FORMAT,
        "env": {
            "id": eid,
            "name": ENV_NAME,
            "version": version,
            "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
        },
        "obs_version": OBS_VERSION,
        "features": {k: list(v) for k, v in builder.features.items()},
        "dims": observation_signature(builder),
        "central": builder.central,
        "share_parameters": bool(model.get("share_parameters", True)),
        "model": dict(model),
        "agents": list(builder.agent_ids),
        "modules": list(module_ids),
        "topology": {
            "subclusters": topo.n_subclusters,
            "racks": topo.n_racks,
            "servers": topo.n_servers,
            "groups": topo.n_groups,
            "gpus": topo.n_gpus,
        },
        **(extra or {}),
    }


def save_weights(folder: Path, weights: dict[str, dict]) -> None:
    """Write ``<id>.pt`` per module in ``folder``: its tensors only (plain torch, read
    back with ``weights_only=True``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for module_id, state in weights.items():
        tensors = {k: torch.as_tensor(np.asarray(v)).clone() for k, v in state.items()}
        # serialised in memory first: a write error is then an OSError naming the file
        buf = io.BytesIO()
        torch.save(tensors, buf)
        path = folder / f"{module_id}.pt"
        try:
            with open(path, "wb") as fh:
                fh.write(buf.getbuffer())
        except OSError as exc:  # write() names no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc


def save_modules(folder: Path, weights: dict[str, dict], manifest: dict[str, Any]) -> None:
    """Write ``modules/<id>.pt`` and ``manifest.json`` (the manifest last)."""
    from marl_sched.metrics import write_json

    save_weights(folder / "modules", weights)
    write_json(folder / MANIFEST, manifest)
