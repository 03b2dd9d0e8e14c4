"""The hierarchical GNN: GPU groups → servers → racks → subcluster, plus the exchange.

One agent's observation is a small tree (:mod:`envs.cluster_env` documents its
features): GPU groups under servers under racks, the job being placed, and one
summary row per peer agent. The network, for ``h`` the hidden width:

1. **embed** every node with the job: ``h_g = MLP([x_g ‖ x_job])`` (likewise servers,
   racks); peers ``e_k = MLP(x_k)``.
2. ``layers`` × :class:`HierarchyBlock` = :class:`GroupLayer` (siblings in the
   server + the parent server), :class:`ServerLayer` (children pooled, rack siblings,
   the parent rack), :class:`RackLayer` (children pooled, the other racks).
3. :class:`Readout`: the subcluster embedding ``z`` from pooled groups, servers,
   racks and the job.
4. :class:`PeerExchange`: ``z`` attends over the peer embeddings.
5. heads: a score per GPU-group slot ``MLP([h_g ‖ h_s(g) ‖ z])``, a score per
   forward target ``MLP([e_k ‖ z])``, with heuristic hints (``H > 0``) a score per
   follow action ``MLP([Σ_g w_gi h_g ‖ z ‖ u_i])`` — the group embeddings pooled with
   the weights of hint ``i``'s plan (the last ``H`` columns of ``group_x``) and a
   learned embedding ``u_i`` of the hint: a score of the whole remaining plan — and a
   value ``MLP(z)``; masked actions get :data:`MASKED_LOGIT`.

Aggregations are scatters over parent indices (permutation-equivariant, blind to
padding, no size-dependent parameter). Input paths agreeing to float precision:
:func:`from_padded` (RLlib's padded observations) and :func:`from_pyg` / :func:`to_pyg`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch_geometric.data import Batch, Data
from torch_geometric.utils import scatter

#: logit of a masked action: its probability underflows to exactly 0
MASKED_LOGIT = -1e9


@dataclass
class ClusterBatch:
    """A batch of observations with only real nodes, indices flat over the batch.

    Shapes: ``group_x (Ng, Fg)``, ``server_x (Ns, Fs)``, ``rack_x (Nr, Fr)``;
    ``group_server (Ng,)`` indexes ``server_x``; ``server_rack (Ns,)`` indexes
    ``rack_x``; ``*_batch`` give each node's graph; ``job_x (B, Fj)``, ``peers_x (B,
    A, Fp)``, ``peers_mask (B, A)``; ``group_allowed (Ng,)``, ``forward_allowed
    (B, A)`` and ``hint_allowed (B, H)`` are the action mask split in three.
    """

    group_x: Tensor
    server_x: Tensor
    rack_x: Tensor
    group_server: Tensor
    server_rack: Tensor
    group_batch: Tensor
    server_batch: Tensor
    rack_batch: Tensor
    job_x: Tensor
    peers_x: Tensor
    peers_mask: Tensor
    group_allowed: Tensor
    forward_allowed: Tensor
    hint_allowed: Tensor
    _inverse_counts: dict[str, Tensor] = field(default_factory=dict, init=False, repr=False)

    @property
    def num_graphs(self) -> int:
        return self.job_x.size(0)

    #: parent index → the field whose rows are the parents (else: the graphs)
    _PARENTS = {"group_server": "server_x", "server_rack": "rack_x"}

    def parents(self, by: str) -> int:
        """How many parents the index ``by`` (``group_server``, ``server_rack`` or a
        ``*_batch``) points into."""
        rows = self._PARENTS.get(by)
        return self.num_graphs if rows is None else getattr(self, rows).size(0)

    def mean(self, x: Tensor, by: str) -> Tensor:
        """``(parents, h)``: the mean of the rows ``x`` per parent under index ``by``
        (0 for a parent without children); the child counts are computed once per
        batch, as every layer pools over the same indices."""
        index, size = getattr(self, by), self.parents(by)
        if size == 1 and x.size(0) > 0:  # one parent (a lone observation): a plain mean
            return x.mean(0, keepdim=True)
        inverse = self._inverse_counts.get(by)
        if inverse is None:
            count = torch.bincount(index, minlength=size).clamp_(min=1)
            inverse = count.reciprocal().to(x.dtype).unsqueeze(-1)
            self._inverse_counts[by] = inverse
        return x.new_zeros(size, x.size(-1)).index_add_(0, index, x) * inverse

    def max(self, x: Tensor, by: str) -> Tensor:
        """``(parents, h)``: the elementwise max of the rows ``x`` per parent."""
        size = self.parents(by)
        if size == 1 and x.size(0) > 0:
            return x.amax(0, keepdim=True)
        return scatter(x, getattr(self, by), 0, dim_size=size, reduce="max")


@dataclass
class RegularClusterBatch(ClusterBatch):
    """A :class:`ClusterBatch` whose parents have equally many children, laid out
    consecutively (``[0]*k + [1]*k + ...``): ``children`` maps such an index to ``k``,
    and :meth:`mean` / :meth:`max` over it are a reshape and one reduction (the same
    values as the scatter)."""

    children: dict[str, int] = field(default_factory=dict)

    def mean(self, x: Tensor, by: str) -> Tensor:
        k = self.children.get(by)
        if k is None or x.size(0) == 0:
            return super().mean(x, by)
        return x.view(-1, k, x.size(-1)).sum(1) * self._inverse_counts[by]

    def max(self, x: Tensor, by: str) -> Tensor:
        k = self.children.get(by)
        if k is None or x.size(0) == 0:
            return super().max(x, by)
        return x.view(-1, k, x.size(-1)).amax(1)


def regular_children(index: Tensor, parents: int) -> int | None:
    """``k`` when ``index`` is ``[0]*k + [1]*k + ... + [parents-1]*k`` (k >= 1), else None."""
    n = index.numel()
    if parents < 1 or n == 0 or n % parents:
        return None
    k = n // parents
    expected = torch.arange(parents, dtype=index.dtype).repeat_interleave(k)
    return k if torch.equal(index, expected) else None


def inverse_counts(index: Tensor, parents: int) -> Tensor:
    """``(parents, 1)``: 1 / the number of children of each parent (1 for none), as
    :meth:`ClusterBatch.mean` caches it."""
    count = torch.bincount(index, minlength=parents).clamp_(min=1)
    return count.reciprocal().to(torch.float32).unsqueeze(-1)


def regular_padded(obs: dict[str, Tensor]) -> RegularClusterBatch | None:
    """Padded observations (``B > 1``) without padding, all of one hierarchy with every
    level regular, as a :class:`RegularClusterBatch` (:func:`from_padded`'s rows, same
    order, without its gathers); else None."""
    gm, sm, rm = (obs[k] for k in ("group_mask", "server_mask", "rack_mask"))
    (n, g), s, r = gm.shape, sm.size(1), rm.size(1)
    if n < 2 or not ((gm > 0.5).all() and (sm > 0.5).all() and (rm > 0.5).all()):
        return None
    group_server, server_rack = obs["group_server"].long(), obs["server_rack"].long()
    kg, ks = regular_children(group_server[0], s), regular_children(server_rack[0], r)
    same = (group_server == group_server[0]).all() and (server_rack == server_rack[0]).all()
    if kg is None or ks is None or not same:
        return None
    mask, a_end = obs["action_mask"], g + obs["peers_x"].size(1)
    children = {"group_server": kg, "server_rack": ks, "group_batch": g,
                "server_batch": s, "rack_batch": r}  # fmt: skip
    parents = {"group_server": n * s, "server_rack": n * r, "group_batch": n,
               "server_batch": n, "rack_batch": n}  # fmt: skip
    index = {by: torch.arange(p).repeat_interleave(children[by]) for by, p in parents.items()}
    b = RegularClusterBatch(
        group_x=obs["group_x"].reshape(n * g, -1),
        server_x=obs["server_x"].reshape(n * s, -1),
        rack_x=obs["rack_x"].reshape(n * r, -1),
        job_x=obs["job_x"],
        peers_x=obs["peers_x"],
        peers_mask=obs["peers_mask"],
        group_allowed=mask[:, :g].reshape(-1),
        forward_allowed=mask[:, g:a_end],
        hint_allowed=mask[:, a_end:],
        children=children,
        **index,
    )
    b._inverse_counts.update({by: inverse_counts(index[by], parents[by]) for by in index})
    return b


def from_padded(obs: dict[str, Tensor]) -> tuple[ClusterBatch, tuple[Tensor, Tensor]]:
    """Flatten padded observations (``group_x (B, G_max, Fg)`` ...); also return the
    (batch, slot) of every group."""
    gm, sm, rm = (obs[k] > 0.5 for k in ("group_mask", "server_mask", "rack_mask"))
    gb, gi = gm.nonzero(as_tuple=True)
    sb, si = sm.nonzero(as_tuple=True)
    rb, ri = rm.nonzero(as_tuple=True)
    server_id = torch.full(sm.shape, -1, dtype=torch.long, device=sm.device)
    server_id[sb, si] = torch.arange(sb.numel(), device=sm.device)
    rack_id = torch.full(rm.shape, -1, dtype=torch.long, device=rm.device)
    rack_id[rb, ri] = torch.arange(rb.numel(), device=rm.device)
    g_max = gm.size(1)
    a_end = g_max + obs["peers_x"].size(1)
    batch = ClusterBatch(
        group_x=obs["group_x"][gb, gi],
        server_x=obs["server_x"][sb, si],
        rack_x=obs["rack_x"][rb, ri],
        group_server=server_id[gb, obs["group_server"][gb, gi].long()],
        server_rack=rack_id[sb, obs["server_rack"][sb, si].long()],
        group_batch=gb,
        server_batch=sb,
        rack_batch=rb,
        job_x=obs["job_x"],
        peers_x=obs["peers_x"],
        peers_mask=obs["peers_mask"],
        group_allowed=obs["action_mask"][:, :g_max][gb, gi],
        forward_allowed=obs["action_mask"][:, g_max:a_end],
        hint_allowed=obs["action_mask"][:, a_end:],
    )
    return batch, (gb, gi)


class ClusterGraph(Data):
    """One observation as a PyG graph with only its real nodes (see :func:`to_pyg`).

    ``group_server`` / ``server_rack`` are incremented by the number of servers /
    racks when batched; ``job_x``, ``peers_x``, ``peers_mask``, ``forward_allowed``
    and ``hint_allowed`` are stacked along a new batch dimension.
    """

    def __inc__(self, key, value, *args, **kwargs):
        if key == "group_server":
            return self.server_x.size(0)
        if key == "server_rack":
            return self.rack_x.size(0)
        return super().__inc__(key, value, *args, **kwargs)

    def __cat_dim__(self, key, value, *args, **kwargs):
        if key in ("job_x", "peers_x", "peers_mask", "forward_allowed", "hint_allowed"):
            return None
        return super().__cat_dim__(key, value, *args, **kwargs)


def to_pyg(obs: dict) -> ClusterGraph:
    """One padded observation (arrays or tensors, no batch dim) → :class:`ClusterGraph`."""
    t = {k: torch.as_tensor(v) for k, v in obs.items()}
    gm, sm, rm = (t[k] > 0.5 for k in ("group_mask", "server_mask", "rack_mask"))
    server_id = torch.cumsum(sm.long(), 0) - 1
    rack_id = torch.cumsum(rm.long(), 0) - 1
    g_max = gm.numel()
    a_end = g_max + t["peers_x"].size(0)
    return ClusterGraph(
        group_x=t["group_x"][gm],
        server_x=t["server_x"][sm],
        rack_x=t["rack_x"][rm],
        group_server=server_id[t["group_server"][gm].long()],
        server_rack=rack_id[t["server_rack"][sm].long()],
        job_x=t["job_x"],
        peers_x=t["peers_x"],
        peers_mask=t["peers_mask"],
        group_allowed=t["action_mask"][:g_max][gm],
        forward_allowed=t["action_mask"][g_max:a_end],
        hint_allowed=t["action_mask"][a_end:],
        num_nodes=int(gm.sum()),
    )


def from_pyg(batch: Batch) -> ClusterBatch:
    """A :class:`~torch_geometric.data.Batch` of :class:`ClusterGraph` → :class:`ClusterBatch`.

    Build it with ``Batch.from_data_list(graphs, follow_batch=FOLLOW_BATCH)``.
    """
    return ClusterBatch(
        group_x=batch.group_x,
        server_x=batch.server_x,
        rack_x=batch.rack_x,
        group_server=batch.group_server,
        server_rack=batch.server_rack,
        group_batch=batch.group_x_batch,
        server_batch=batch.server_x_batch,
        rack_batch=batch.rack_x_batch,
        job_x=batch.job_x,
        peers_x=batch.peers_x,
        peers_mask=batch.peers_mask,
        group_allowed=batch.group_allowed,
        forward_allowed=batch.forward_allowed,
        hint_allowed=batch.hint_allowed,
    )


FOLLOW_BATCH = ("group_x", "server_x", "rack_x")


def mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    """``Linear → ReLU → Linear``."""
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


def _reset(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear | nn.LayerNorm):
            m.reset_parameters()


def linear_cat(lin: nn.Linear, rows: Tensor, *parents: tuple[Tensor, Tensor]) -> Tensor:
    r"""``lin([rows ‖ x_1[i_1] ‖ x_2[i_2] ‖ ...])`` without building the concatenation.

    ``W_0 r + b + Σ_k (W_k x_k)[i_k]`` with ``W = [W_0 | W_1 | ...]``: each parent row is
    multiplied once, not once per child (equal up to float rounding).

    Args:
        lin: the layer, ``in_features`` = the widths of ``rows`` and every ``x_k``.
        rows: ``(N, d_0)``.
        parents: ``(x_k, i_k)`` pairs, ``x_k (M_k, d_k)`` and ``i_k (N,)`` indexing it.

    Shapes:
        - output: ``(N, lin.out_features)``
    """
    w = lin.weight
    d = rows.size(-1)
    out = nn.functional.linear(rows, w[:, :d], lin.bias)
    for x, index in parents:
        part = nn.functional.linear(x, w[:, d : d + x.size(-1)])
        # in place (no backward reads it); one parent row broadcasts as the gather would
        out.add_(part if part.size(0) == 1 else part.index_select(0, index))
        d += x.size(-1)
    if d != w.size(1):
        raise ValueError(f"linear_cat: inputs are {d} wide, the layer takes {w.size(1)}")
    return out


class GroupLayer(nn.Module):
    r"""GPU groups exchange messages inside their server and hear their server.

    .. math::
        h_g \leftarrow \mathrm{LN}\Big(h_g + \mathrm{ReLU}\big(W\,[h_g \,\|\,
        \tfrac{1}{|s(g)|}\textstyle\sum_{g' \in s(g)} h_{g'} \,\|\, h_{s(g)}]\big)\Big)

    Args:
        hidden (int): node width ``h``.

    Shapes:
        - input: groups ``(Ng, h)``, servers ``(Ns, h)``, the :class:`ClusterBatch`
        - output: groups ``(Ng, h)``
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lin = nn.Linear(3 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def reset_parameters(self) -> None:
        _reset(self)

    def forward(self, h_g: Tensor, h_s: Tensor, b: ClusterBatch) -> Tensor:
        server = torch.cat([b.mean(h_g, "group_server"), h_s], dim=-1)  # both per server
        msg = linear_cat(self.lin, h_g, (server, b.group_server))
        return self.norm(h_g + torch.relu(msg))


class ServerLayer(nn.Module):
    r"""Servers pool their GPU groups, hear the servers of their rack and the rack.

    .. math::
        h_s \leftarrow \mathrm{LN}\Big(h_s + \mathrm{ReLU}\big(W\,[h_s \,\|\,
        \mathrm{mean}_{g \in s} h_g \,\|\, \max_{g \in s} h_g \,\|\,
        \mathrm{mean}_{s' \in r(s)} h_{s'} \,\|\, h_{r(s)}]\big)\Big)

    Args:
        hidden (int): node width ``h``.

    Shapes:
        - input: groups ``(Ng, h)``, servers ``(Ns, h)``, racks ``(Nr, h)``, the
          :class:`ClusterBatch`
        - output: servers ``(Ns, h)``
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lin = nn.Linear(5 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def reset_parameters(self) -> None:
        _reset(self)

    def forward(self, h_g: Tensor, h_s: Tensor, h_r: Tensor, b: ClusterBatch) -> Tensor:
        own = torch.cat([h_s, b.mean(h_g, "group_server"), b.max(h_g, "group_server")], -1)
        rack = torch.cat([b.mean(h_s, "server_rack"), h_r], dim=-1)  # per rack
        msg = linear_cat(self.lin, own, (rack, b.server_rack))
        return self.norm(h_s + torch.relu(msg))


class RackLayer(nn.Module):
    r"""Racks pool their servers and hear the other racks of the subcluster.

    .. math::
        h_r \leftarrow \mathrm{LN}\Big(h_r + \mathrm{ReLU}\big(W\,[h_r \,\|\,
        \mathrm{mean}_{s \in r} h_s \,\|\, \max_{s \in r} h_s \,\|\,
        \mathrm{mean}_{r'} h_{r'}]\big)\Big)

    Args:
        hidden (int): node width ``h``.

    Shapes:
        - input: servers ``(Ns, h)``, racks ``(Nr, h)``, the :class:`ClusterBatch`
        - output: racks ``(Nr, h)``
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def reset_parameters(self) -> None:
        _reset(self)

    def forward(self, h_s: Tensor, h_r: Tensor, b: ClusterBatch) -> Tensor:
        own = torch.cat([h_r, b.mean(h_s, "server_rack"), b.max(h_s, "server_rack")], dim=-1)
        msg = linear_cat(self.lin, own, (b.mean(h_r, "rack_batch"), b.rack_batch))
        return self.norm(h_r + torch.relu(msg))


class HierarchyBlock(nn.Module):
    """One pass over the hierarchy: :class:`GroupLayer` → :class:`ServerLayer` →
    :class:`RackLayer` (messages go down to the groups first, then back up).

    Args:
        hidden (int): node width.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.groups = GroupLayer(hidden)
        self.servers = ServerLayer(hidden)
        self.racks = RackLayer(hidden)

    def reset_parameters(self) -> None:
        for m in (self.groups, self.servers, self.racks):
            m.reset_parameters()

    def forward(
        self, h_g: Tensor, h_s: Tensor, h_r: Tensor, b: ClusterBatch
    ) -> tuple[Tensor, Tensor, Tensor]:
        h_g = self.groups(h_g, h_s, b)
        h_s = self.servers(h_g, h_s, h_r, b)
        h_r = self.racks(h_s, h_r, b)
        return h_g, h_s, h_r


class Readout(nn.Module):
    r"""The subcluster embedding from its pooled levels and the job.

    .. math::
        z = \mathrm{MLP}\big([\mathrm{mean}_g h_g \,\|\, \max_g h_g \,\|\,
        \mathrm{mean}_s h_s \,\|\, \mathrm{mean}_r h_r \,\|\, h_{job}]\big)

    Args:
        hidden (int): width.

    Shapes:
        - output: ``(B, h)``
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.mlp = mlp(5 * hidden, hidden, hidden)

    def reset_parameters(self) -> None:
        _reset(self)

    def forward(
        self, h_g: Tensor, h_s: Tensor, h_r: Tensor, h_job: Tensor, b: ClusterBatch
    ) -> Tensor:
        pooled = [
            b.mean(h_g, "group_batch"),
            b.max(h_g, "group_batch"),
            b.mean(h_s, "server_batch"),
            b.mean(h_r, "rack_batch"),
            h_job,
        ]
        return self.mlp(torch.cat(pooled, dim=-1))


class PeerExchange(nn.Module):
    r"""The agent's embedding attends over every agent's exchanged summary.

    .. math::
        c = \sum_k \mathrm{softmax}_k\Big(\frac{(W_q z)^\top W_k e_k}{\sqrt h}\Big)
        W_v e_k, \qquad z \leftarrow \mathrm{LN}\big(z + \mathrm{ReLU}(W [z \,\|\, c])\big)

    over the peers with ``peers_mask = 1``. With ``enabled=False``, ``c = 0`` (the
    agent ignores what the others exchanged).

    Args:
        hidden (int): width.
        enabled (bool, default True): mix the peers in.

    Shapes:
        - input: z ``(B, h)``, peers ``(B, A, h)``, peers_mask ``(B, A)``
        - output: ``(B, h)``
    """

    def __init__(self, hidden: int, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.lin = nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def reset_parameters(self) -> None:
        _reset(self)

    def forward(self, z: Tensor, peers: Tensor, peers_mask: Tensor) -> Tensor:
        if self.enabled:
            score = torch.einsum("bh,bah->ba", self.query(z), self.key(peers))
            score = score / math.sqrt(z.size(-1))
            score = score.masked_fill(peers_mask < 0.5, MASKED_LOGIT)
            attn = torch.softmax(score, dim=-1) * (peers_mask > 0.5)
            context = torch.einsum("ba,bah->bh", attn, self.value(peers))
        else:
            context = torch.zeros_like(z)
        return self.norm(z + torch.relu(self.lin(torch.cat([z, context], dim=-1))))


class HierarchicalGNN(nn.Module):
    """The whole network: embed → hierarchy blocks → readout → exchange → heads.

    Args:
        group_dim (int): ``Fg``.
        server_dim (int): ``Fs``.
        rack_dim (int): ``Fr``.
        job_dim (int): ``Fj``.
        peer_dim (int): ``Fp``.
        hidden (int, default 64): width of every embedding.
        layers (int, default 2): hierarchy blocks.
        exchange (bool, default True): see :class:`PeerExchange`.
        hints (int, default 0): ``H``, follow actions (the last ``H`` columns of
            ``group_x`` are their plans' weights).

    Shapes:
        - :meth:`forward`: :class:`ClusterBatch` → group scores ``(Ng,)`` (masked),
          forward then follow scores ``(B, A + H)`` (masked), values ``(B,)``
        - :meth:`forward_padded`: padded observations → logits ``(B, G_max + A + H)``,
          values ``(B,)``
    """

    def __init__(
        self,
        group_dim: int,
        server_dim: int,
        rack_dim: int,
        job_dim: int,
        peer_dim: int,
        hidden: int = 64,
        layers: int = 2,
        exchange: bool = True,
        hints: int = 0,
    ) -> None:
        super().__init__()
        self.hints = hints
        self.job = mlp(job_dim, hidden, hidden)
        self.embed_group = mlp(group_dim + job_dim, hidden, hidden)
        self.embed_server = mlp(server_dim + job_dim, hidden, hidden)
        self.embed_rack = mlp(rack_dim + job_dim, hidden, hidden)
        self.embed_peer = mlp(peer_dim, hidden, hidden)
        self.blocks = nn.ModuleList(HierarchyBlock(hidden) for _ in range(layers))
        self.readout = Readout(hidden)
        self.exchange = PeerExchange(hidden, exchange)
        self.group_head = mlp(3 * hidden, hidden, 1)
        self.forward_head = mlp(2 * hidden, hidden, 1)
        self.value_head = mlp(hidden, hidden, 1)
        if hints:
            self.hint_embed = nn.Embedding(hints, hidden)
            self.hint_head = mlp(3 * hidden, hidden, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset(self)
        # start near uniform over the allowed actions, as PPO likes
        heads = [self.group_head, self.forward_head]
        if self.hints:
            heads.append(self.hint_head)
        for head in heads:
            nn.init.normal_(head[-1].weight, std=0.01)
            nn.init.zeros_(head[-1].bias)

    def forward(self, b: ClusterBatch) -> tuple[Tensor, Tensor, Tensor]:
        job = b.job_x
        h_g = mlp_cat(self.embed_group, b.group_x, (job, b.group_batch))
        h_s = mlp_cat(self.embed_server, b.server_x, (job, b.server_batch))
        h_r = mlp_cat(self.embed_rack, b.rack_x, (job, b.rack_batch))
        for block in self.blocks:
            h_g, h_s, h_r = block(h_g, h_s, h_r, b)
        z = self.readout(h_g, h_s, h_r, self.job(job), b)
        peers = self.embed_peer(b.peers_x)
        z = self.exchange(z, peers, b.peers_mask)
        parents = (h_s, b.group_server), (z, b.group_batch)
        group_scores = mlp_cat(self.group_head, h_g, *parents).squeeze(-1)
        z_peers = z.unsqueeze(1).expand(-1, peers.size(1), -1)
        forward_scores = self.forward_head(torch.cat([peers, z_peers], dim=-1)).squeeze(-1)
        group_scores = group_scores.masked_fill(b.group_allowed < 0.5, MASKED_LOGIT)
        forward_scores = forward_scores.masked_fill(b.forward_allowed < 0.5, MASKED_LOGIT)
        if self.hints:
            hint_scores = self._hint_scores(h_g, z, b)
            hint_scores = hint_scores.masked_fill(b.hint_allowed < 0.5, MASKED_LOGIT)
            forward_scores = torch.cat([forward_scores, hint_scores], dim=-1)
        return group_scores, forward_scores, self.value_head(z).squeeze(-1)

    def _hint_scores(self, h_g: Tensor, z: Tensor, b: ClusterBatch) -> Tensor:
        """``(B, H)``: each hint's remaining plan scored from its pooled groups."""
        w = b.group_x[:, -self.hints :]  # (Ng, H) planned tasks left per group
        k = getattr(b, "children", {}).get("group_batch")
        if z.size(0) == 1:  # a lone graph: the weighted sums are one (H, Ng) @ (Ng, h)
            pooled = (w.t() @ h_g).unsqueeze(0)
        elif k is not None:  # a regular batch (regular_padded): one matrix product per graph
            n = z.size(0)
            pooled = torch.bmm(w.view(n, k, -1).transpose(1, 2), h_g.view(n, k, -1))
        else:
            pooled = z.new_zeros(z.size(0), self.hints, z.size(1))
            pooled.index_add_(0, b.group_batch, w.unsqueeze(-1) * h_g.unsqueeze(1))
        z_h = z.unsqueeze(1).expand(-1, self.hints, -1)
        u = self.hint_embed.weight.unsqueeze(0).expand(z.size(0), -1, -1)
        return self.hint_head(torch.cat([pooled, z_h, u], dim=-1)).squeeze(-1)

    def forward_padded(self, obs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Logits ``(B, G_max + A + H)`` over the padded action space, and values ``(B,)``."""
        g_max = obs["group_mask"].size(1)
        regular = regular_padded(obs)
        if regular is not None:  # every slot a real group, in slot order
            group_scores, forward_scores, values = self(regular)
            logits = group_scores.view(regular.num_graphs, g_max)
            return torch.cat([logits, forward_scores], dim=-1), values
        b, (gb, gi) = from_padded(obs)
        group_scores, forward_scores, values = self(b)
        logits = group_scores.new_full((b.num_graphs, g_max), MASKED_LOGIT)
        logits[gb, gi] = group_scores
        return torch.cat([logits, forward_scores], dim=-1), values

    def values_padded(self, obs: dict[str, Tensor], rows: int = 256) -> Tensor:
        """The values ``(B,)`` of :meth:`forward_padded`, ``rows`` observations at a time
        (a whole train batch at once runs 1.7x slower, out of cache)."""
        n = obs["group_mask"].size(0)
        if n <= rows:
            return self.forward_padded(obs)[1]
        chunks = ({k: v[i : i + rows] for k, v in obs.items()} for i in range(0, n, rows))
        return torch.cat([self.forward_padded(chunk)[1] for chunk in chunks])


def mlp_cat(net: nn.Sequential, rows: Tensor, *parents: tuple[Tensor, Tensor]) -> Tensor:
    """An :func:`mlp` applied to ``[rows ‖ x_1[i_1] ‖ ...]``, its first layer by
    :func:`linear_cat`."""
    first, act, last = net
    return last(act(linear_cat(first, rows, *parents)))


def build_gnn(dims: dict[str, int], model_config: dict) -> HierarchicalGNN:
    """The network for feature dims ``dims`` (``Fg, Fs, Fr, Fj, Fp``, optional ``H``) and a
    :class:`agents.config.ModelConfig`-like mapping (``hidden``, ``layers``, ``exchange``)."""
    return HierarchicalGNN(
        group_dim=dims["Fg"],
        server_dim=dims["Fs"],
        rack_dim=dims["Fr"],
        job_dim=dims["Fj"],
        peer_dim=dims["Fp"],
        hidden=int(model_config.get("hidden", 64)),
        layers=int(model_config.get("layers", 2)),
        exchange=bool(model_config.get("exchange", True)),
        hints=int(dims.get("H", 0)),
    )
