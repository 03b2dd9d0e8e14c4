"""``model.raw_head``: the per-node path that scores every GPU group from raw features
(:mod:`agents.gnn`, step 6). No Ray, no simulator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.gnn import MASKED_LOGIT, HierarchicalGNN, build_gnn, from_padded
from tests.agents.test_gnn import DIMS, batch, make_obs

HINTS = 2


def pair(hints: int = 0) -> tuple[HierarchicalGNN, HierarchicalGNN]:
    """The same network with and without the raw path (shared weights elsewhere)."""
    dims = dict(DIMS, Fg=DIMS["Fg"] + hints)
    torch.manual_seed(0)
    with_raw = HierarchicalGNN(*dims.values(), hidden=16, hints=hints, raw_head=True)
    torch.nn.init.normal_(with_raw.raw_group_head[-1].weight, std=0.5)
    without = HierarchicalGNN(*dims.values(), hidden=16, hints=hints)
    missing, unexpected = without.load_state_dict(with_raw.state_dict(), strict=False)
    assert not missing and all(k.startswith("raw_group_head.") for k in unexpected)
    return with_raw.eval(), without.eval()


def with_hints(obs: dict, rng: np.random.Generator, n_groups: int) -> dict:
    """``obs`` with ``HINTS`` plan columns on its groups and follow actions allowed."""
    g_max = obs["group_x"].shape[0]
    plans = np.zeros((g_max, HINTS), np.float32)
    plans[:n_groups, 0] = rng.integers(0, 3, n_groups)  # hint 0: several tasks
    plans[1, 1] = 1.0  # hint 1: one task on group 1
    out = dict(obs, group_x=np.concatenate([obs["group_x"], plans], axis=1))
    out["action_mask"] = np.concatenate([obs["action_mask"], np.ones(HINTS, np.float32)])
    return out


def raw_mlp(net: HierarchicalGNN, obs: dict) -> torch.Tensor:
    """``MLP([x_g ‖ x_s(g) ‖ x_r(g) ‖ x_job])`` per real group, by concatenation."""
    b, _ = from_padded(batch([obs]))
    rack = b.server_rack[b.group_server]
    x = torch.cat(
        [b.group_x, b.server_x[b.group_server], b.rack_x[rack], b.job_x[b.group_batch]], dim=-1
    )
    return net.raw_group_head(x).squeeze(-1)


def test_slot_score_is_the_head_plus_the_raw_mlp():
    rng = np.random.default_rng(0)
    obs = make_obs(rng, n_groups=6, n_servers=3, n_racks=2)
    with_raw, without = pair()
    a, va = with_raw.forward_padded(batch([obs]))
    b, vb = without.forward_padded(batch([obs]))
    allowed = obs["action_mask"][:6] > 0.5
    r = raw_mlp(with_raw, obs)
    torch.testing.assert_close(a[0, :6][allowed], (b[0, :6] + r)[allowed], atol=1e-5, rtol=1e-5)
    assert (a[0, :6][~allowed] == MASKED_LOGIT).all()
    # the forwards and the value do not read the raw path
    torch.testing.assert_close(a[0, 8:], b[0, 8:])
    torch.testing.assert_close(va, vb)
    assert r.abs().max() > 0.1  # the path is not silent


def test_raw_score_reads_only_its_own_group_server_rack_and_job():
    rng = np.random.default_rng(1)
    obs = make_obs(rng, n_groups=6, n_servers=3, n_racks=2)
    net, _ = pair()
    before = raw_mlp(net, obs)
    # change group 0's features: only group 0's raw score moves
    changed = dict(obs, group_x=obs["group_x"].copy())
    changed["group_x"][0] += 1.0
    after = raw_mlp(net, changed)
    assert after[0] != before[0]
    torch.testing.assert_close(after[1:], before[1:])
    # change server 1: only its groups (1 and 4: group g sits on server g % 3) move
    changed = dict(obs, server_x=obs["server_x"].copy())
    changed["server_x"][1] += 1.0
    moved = (raw_mlp(net, changed) != before).nonzero().flatten().tolist()
    assert moved == [1, 4]


def test_follow_score_adds_the_mean_raw_score_of_its_plan():
    rng = np.random.default_rng(2)
    obs = with_hints(make_obs(rng, n_groups=6), rng, 6)
    with_raw, without = pair(HINTS)
    a, _ = with_raw.forward_padded(batch([obs]))
    b, _ = without.forward_padded(batch([obs]))
    r = raw_mlp(with_raw, obs)
    w = torch.as_tensor(obs["group_x"][:6, -HINTS:])
    expected = (w * r[:, None]).sum(0) / w.sum(0)
    torch.testing.assert_close(a[0, -HINTS:] - b[0, -HINTS:], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a[0, -HINTS + 1] - b[0, -HINTS + 1], r[1], atol=1e-5, rtol=1e-5)


def test_a_hint_without_a_plan_gets_no_raw_score():
    rng = np.random.default_rng(3)
    obs = with_hints(make_obs(rng, n_groups=6), rng, 6)
    obs["group_x"][:, -1] = 0.0  # hint 1 plans nothing here
    with_raw, without = pair(HINTS)
    a, _ = with_raw.forward_padded(batch([obs]))
    b, _ = without.forward_padded(batch([obs]))
    torch.testing.assert_close(a[0, -1], b[0, -1])
    assert torch.isfinite(a[0, -1])


@pytest.mark.parametrize("model, has", [({}, False), ({"raw_head": False}, False),
                                        ({"raw_head": True}, True)])  # fmt: skip
def test_build_gnn_reads_the_option_and_old_manifests_have_none(model, has):
    net = build_gnn(DIMS, {"hidden": 8, **model})
    assert net.raw_head is has and hasattr(net, "raw_group_head") is has


def test_weights_load_only_into_a_manifest_with_the_same_option():
    from agents.policy import agents_from_weights

    net = build_gnn(DIMS, {"hidden": 8, "raw_head": True})
    state = {f"gnn.{k}": v for k, v in net.state_dict().items()}
    loaded = agents_from_weights({"dims": DIMS, "model": {"hidden": 8, "raw_head": True}},
                                 {"shared": state}).nets["shared"]  # fmt: skip
    rng = np.random.default_rng(5)
    obs = batch([make_obs(rng)])
    torch.testing.assert_close(loaded.forward_padded(obs)[0], net.eval().forward_padded(obs)[0])
    with pytest.raises(RuntimeError, match="raw_group_head"):
        agents_from_weights({"dims": DIMS, "model": {"hidden": 8}}, {"shared": state})


@pytest.mark.parametrize("override, trained, refused", [
    ("model.raw_head=true", {}, True),
    ("model.raw_head=false", {"raw_head": True}, True),
    ("model.raw_head=true", {"raw_head": True}, False),
    ("model.hidden=64", {"raw_head": True}, False),  # a config silent on it: the checkpoint's
])  # fmt: skip
def test_a_config_naming_raw_head_must_match_the_checkpoint(override, trained, refused):
    from agents.commands import check_model
    from marl_sched.config import REPO_ROOT, load_config
    from marl_sched.errors import InputError

    cfg = load_config(REPO_ROOT / "configs" / "learn.yaml", [override])
    manifest = {"model": {"hidden": 64, **trained}}
    if refused:
        with pytest.raises(InputError, match=r"model\.raw_head: .* but checkpoint ck was"):
            check_model(manifest, cfg, "ck")
    else:
        check_model(manifest, cfg, "ck")
