"""The hierarchical GNN on tiny hand-built observations (no Ray, no simulator)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from agents.gnn import (
    FOLLOW_BATCH,
    MASKED_LOGIT,
    HierarchicalGNN,
    from_padded,
    from_pyg,
    linear_cat,
    regular_padded,
    to_pyg,
)

DIMS = {"Fg": 5, "Fs": 4, "Fr": 3, "Fj": 6, "Fp": 4}


def make_obs(
    rng: np.random.Generator,
    n_groups: int = 6,
    n_servers: int = 3,
    n_racks: int = 2,
    pad: tuple[int, int, int] = (8, 4, 3),
    n_agents: int = 3,
    self_agent: int = 0,
) -> dict[str, np.ndarray]:
    """One synthetic observation with the environment's keys, padded to ``pad``."""
    g_max, s_max, r_max = pad
    obs = {
        "group_x": np.zeros((g_max, DIMS["Fg"]), np.float32),
        "group_mask": np.zeros(g_max, np.float32),
        "group_server": np.zeros(g_max, np.int64),
        "server_x": np.zeros((s_max, DIMS["Fs"]), np.float32),
        "server_mask": np.zeros(s_max, np.float32),
        "server_rack": np.zeros(s_max, np.int64),
        "rack_x": np.zeros((r_max, DIMS["Fr"]), np.float32),
        "rack_mask": np.zeros(r_max, np.float32),
        "job_x": rng.normal(size=DIMS["Fj"]).astype(np.float32),
        "peers_x": rng.normal(size=(n_agents, DIMS["Fp"])).astype(np.float32),
        "peers_mask": np.ones(n_agents, np.float32),
        "action_mask": np.zeros(g_max + n_agents, np.float32),
    }
    obs["group_x"][:n_groups] = rng.normal(size=(n_groups, DIMS["Fg"]))
    obs["group_mask"][:n_groups] = 1
    obs["group_server"][:n_groups] = np.arange(n_groups) % n_servers
    obs["server_x"][:n_servers] = rng.normal(size=(n_servers, DIMS["Fs"]))
    obs["server_mask"][:n_servers] = 1
    obs["server_rack"][:n_servers] = np.arange(n_servers) % n_racks
    obs["rack_x"][:n_racks] = rng.normal(size=(n_racks, DIMS["Fr"]))
    obs["rack_mask"][:n_racks] = 1
    obs["action_mask"][:n_groups] = rng.random(n_groups) < 0.7
    obs["action_mask"][0] = 1
    forward = np.ones(n_agents, np.float32)
    forward[self_agent] = 0
    obs["action_mask"][g_max:] = forward
    return obs


def batch(obs_list) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.stack([o[k] for o in obs_list])) for k in obs_list[0]}


@pytest.fixture
def net() -> HierarchicalGNN:
    torch.manual_seed(0)
    model = HierarchicalGNN(
        DIMS["Fg"], DIMS["Fs"], DIMS["Fr"], DIMS["Fj"], DIMS["Fp"], hidden=16, layers=2
    )
    # give the heads real weight so that differences show in the outputs
    for head in (model.group_head, model.forward_head):
        torch.nn.init.normal_(head[-1].weight, std=0.5)
    return model.eval()


def test_shapes(net):
    rng = np.random.default_rng(0)
    obs = batch([make_obs(rng), make_obs(rng, n_groups=8, n_servers=4, n_racks=3)])
    logits, values = net.forward_padded(obs)
    assert logits.shape == (2, 8 + 3)
    assert values.shape == (2,)
    assert torch.isfinite(values).all()


def test_masked_actions_get_zero_probability(net):
    rng = np.random.default_rng(1)
    obs = batch([make_obs(rng, self_agent=1) for _ in range(4)])
    logits, _ = net.forward_padded(obs)
    mask = obs["action_mask"] > 0.5
    assert (logits[~mask] <= MASKED_LOGIT / 2).all()
    assert (logits[mask] > MASKED_LOGIT / 2).all()
    probs = torch.softmax(logits, dim=-1)
    assert probs[~mask].max().item() == 0.0
    assert torch.allclose(probs.sum(-1), torch.ones(4))
    # padding slots are never chosen, even when the mask says 1 there
    obs["action_mask"][:, 6:8] = 1
    logits, _ = net.forward_padded(obs)
    assert (logits[:, 6:8] <= MASKED_LOGIT / 2).all()


def test_permuting_group_slots_permutes_logits(net):
    rng = np.random.default_rng(2)
    obs = make_obs(rng, n_groups=6, pad=(6, 4, 3))
    perm = rng.permutation(6)
    permuted = dict(obs)
    for k in ("group_x", "group_mask", "group_server"):
        permuted[k] = obs[k][perm]
    permuted["action_mask"] = np.concatenate([obs["action_mask"][:6][perm], obs["action_mask"][6:]])
    (a, va), (b, vb) = (net.forward_padded(batch([o])) for o in (obs, permuted))
    torch.testing.assert_close(b[0, :6], a[0, :6][perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b[0, 6:], a[0, 6:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(vb, va, atol=1e-5, rtol=1e-5)


def test_permuting_servers_with_their_indices_changes_nothing(net):
    rng = np.random.default_rng(3)
    obs = make_obs(rng, n_servers=4, pad=(8, 4, 3))
    perm = np.array([2, 0, 3, 1])  # new slot i holds old server perm[i]
    inverse = np.argsort(perm)
    permuted = dict(obs)
    permuted["server_x"] = obs["server_x"][perm]
    permuted["server_rack"] = obs["server_rack"][perm]
    permuted["group_server"] = inverse[obs["group_server"]]
    (a, va), (b, vb) = (net.forward_padded(batch([o])) for o in (obs, permuted))
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(va, vb, atol=1e-5, rtol=1e-5)


def test_padded_and_pyg_paths_agree(net):
    rng = np.random.default_rng(4)
    shapes = [(6, 3, 2), (8, 4, 3), (3, 1, 1), (7, 2, 1)]
    obs_list = [make_obs(rng, g, s, r) for g, s, r in shapes]
    logits, values = net.forward_padded(batch(obs_list))
    pyg = Batch.from_data_list([to_pyg(o) for o in obs_list], follow_batch=FOLLOW_BATCH)
    group_scores, forward_scores, pyg_values = net(from_pyg(pyg))
    flat, (gb, gi) = from_padded(batch(obs_list))
    assert flat.group_x.shape == pyg.group_x.shape
    torch.testing.assert_close(group_scores, logits[gb, gi], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(forward_scores, logits[:, 8:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pyg_values, values, atol=1e-5, rtol=1e-5)


def test_more_padding_same_outputs(net):
    rng = np.random.default_rng(5)
    small = make_obs(rng, 6, 3, 2, pad=(6, 3, 2))
    big = make_obs(np.random.default_rng(5), 6, 3, 2, pad=(20, 9, 5))
    a, va = net.forward_padded(batch([small]))
    b, vb = net.forward_padded(batch([big]))
    torch.testing.assert_close(b[0, :6], a[0, :6], atol=1e-5, rtol=1e-5)
    assert (b[0, 6:20] <= MASKED_LOGIT / 2).all()
    torch.testing.assert_close(b[0, 20:], a[0, 6:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(vb, va, atol=1e-5, rtol=1e-5)


def test_exchange_off_ignores_other_agents_summaries():
    torch.manual_seed(0)
    net = HierarchicalGNN(*DIMS.values(), hidden=16, layers=1, exchange=False).eval()
    rng = np.random.default_rng(6)
    obs = make_obs(rng)
    other = dict(obs, peers_x=obs["peers_x"] + 1.0)
    (_, va), (_, vb) = (net.forward_padded(batch([o])) for o in (obs, other))
    torch.testing.assert_close(va, vb)


def test_gradients_reach_every_parameter(net):
    rng = np.random.default_rng(7)
    logits, values = net.forward_padded(batch([make_obs(rng) for _ in range(3)]))
    loss = torch.log_softmax(logits, -1)[:, 0].sum() + values.sum()
    loss.backward()
    missing = [n for n, p in net.named_parameters() if p.grad is None]
    assert not missing


def test_linear_cat_is_the_layer_on_the_concatenation():
    torch.manual_seed(8)
    lin = torch.nn.Linear(3 + 4 + 2, 5)
    rows = torch.randn(7, 3)
    servers, jobs = torch.randn(3, 4), torch.randn(2, 2)
    i_s, i_j = torch.tensor([0, 0, 1, 2, 2, 2, 1]), torch.tensor([0, 0, 0, 1, 1, 1, 1])
    expected = lin(torch.cat([rows, servers[i_s], jobs[i_j]], dim=-1))
    torch.testing.assert_close(linear_cat(lin, rows, (servers, i_s), (jobs, i_j)), expected)
    with pytest.raises(ValueError, match="8 wide, the layer takes 9"):
        linear_cat(lin, rows, (servers, i_s), (jobs[:, :1], i_j))


def test_batch_mean_and_max_per_parent():
    rng = np.random.default_rng(9)
    obs = [make_obs(rng, 6, 3, 2), make_obs(rng, 3, 4, 2)]  # server 3 of graph 2: no group
    b, _ = from_padded(batch(obs))
    x = b.group_x
    assert (torch.bincount(b.group_server, minlength=b.parents("group_server")) == 0).sum() == 1
    for parent in range(b.parents("group_server")):
        rows = x[b.group_server == parent]
        mean = rows.mean(0) if len(rows) else torch.zeros(x.size(1))
        torch.testing.assert_close(b.mean(x, "group_server")[parent], mean)
        if len(rows):
            torch.testing.assert_close(b.max(x, "group_server")[parent], rows.max(0).values)
    assert b.parents("group_batch") == 2 and b.parents("server_rack") == 4
    # the counts are cached per index: a second call with other rows still divides right
    torch.testing.assert_close(b.mean(2 * x, "group_batch"), 2 * b.mean(x, "group_batch"))


def test_an_observation_alone_and_in_a_batch_agree(net):
    # a lone observation takes the one-parent shortcut of ClusterBatch.mean / max
    rng = np.random.default_rng(10)
    obs = [make_obs(rng, 6, 3, 2), make_obs(rng, 4, 2, 1)]
    both, v_both = net.forward_padded(batch(obs))
    for i, o in enumerate(obs):
        alone, v_alone = net.forward_padded(batch([o]))
        torch.testing.assert_close(alone[0], both[i], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(v_alone[0], v_both[i], atol=1e-5, rtol=1e-5)


def regular_obs(rng: np.random.Generator, hints: int) -> dict[str, np.ndarray]:
    """An observation without padding of 8 groups, 2 per server, 2 servers per rack, whose
    last ``hints`` group columns are plan weights and whose mask ends in ``hints`` follows."""
    obs = make_obs(rng, 8, 4, 2, pad=(8, 4, 2))
    obs["group_server"] = np.repeat(np.arange(4), 2)
    obs["server_rack"] = np.repeat(np.arange(2), 2)
    if hints:
        obs["group_x"][:, -hints:] = rng.integers(0, 3, size=(8, hints))
        obs["action_mask"] = np.concatenate([obs["action_mask"], np.ones(hints, np.float32)])
    return obs


@pytest.mark.parametrize("hints", [0, 2])
def test_regular_batches_give_the_scatter_paths_outputs_and_gradients(monkeypatch, hints):
    """A batch of same-shaped observations without padding takes the reshape path
    (:func:`regular_padded`); its logits, values and every gradient are the scatter
    path's to float rounding (sums in another order: 1e-5)."""
    torch.manual_seed(0)
    net = HierarchicalGNN(*DIMS.values(), hidden=16, layers=2, hints=hints)
    for head in (net.group_head, net.forward_head):
        torch.nn.init.normal_(head[-1].weight, std=0.5)
    rng = np.random.default_rng(11)
    obs = batch([regular_obs(rng, hints) for _ in range(5)])
    assert regular_padded(obs) is not None
    assert regular_padded({k: v[:1] for k, v in obs.items()}) is None  # one observation
    assert regular_padded(batch([make_obs(rng), make_obs(rng)])) is None  # padded

    def run():
        net.zero_grad()
        logits, values = net.forward_padded(obs)
        (torch.log_softmax(logits, -1)[:, :3].sum() + (values**2).sum()).backward()
        return logits, values, {n: p.grad.clone() for n, p in net.named_parameters()}

    fast = run()
    monkeypatch.setattr("agents.gnn.regular_padded", lambda obs: None)
    scatter = run()
    torch.testing.assert_close(fast[0], scatter[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[1], scatter[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[2], scatter[2], atol=1e-5, rtol=1e-5)


def test_values_a_few_rows_at_a_time_are_the_batchs(net):
    rng = np.random.default_rng(12)
    obs = batch([make_obs(rng) for _ in range(5)])
    _, values = net.forward_padded(obs)
    for rows in (2, 5):
        torch.testing.assert_close(net.values_padded(obs, rows=rows), values)
