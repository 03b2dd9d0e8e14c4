"""The clip fraction the PPO learner logs (agents/learner.py)."""

from __future__ import annotations

import math

import pytest
import torch

from agents.learner import clip_fraction


def test_clip_fraction_counts_ratios_outside_the_clip_range():
    old = torch.zeros(4)
    # ratios exp(.) = 1.0, 1.1, 1.3, 0.7 with clip 0.2 -> the last two are clipped
    new = torch.log(torch.tensor([1.0, 1.1, 1.3, 0.7]))
    assert clip_fraction(new, old, 0.2, None).item() == pytest.approx(0.5)
    assert clip_fraction(new, old, 0.5, None).item() == 0.0
    # masked samples (padding) do not count
    mask = torch.tensor([True, False, True, False])
    assert clip_fraction(new, old, 0.2, mask).item() == pytest.approx(0.5)
    assert clip_fraction(new, old, 0.2, torch.tensor([True, True, False, False])).item() == 0.0
    assert not math.isnan(clip_fraction(new, old, 0.2, torch.zeros(4, dtype=torch.bool)).item())


def test_the_prior_kl_is_the_categorical_kl_and_masked_actions_add_nothing():
    """``agents.gnn.categorical_kl`` (the learner's prior term): KL(p ‖ q) of
    softmaxed logits, per row, by hand; zero for equal logits; actions masked in both
    (the GNN's MASKED_LOGIT) change nothing."""
    from agents.gnn import MASKED_LOGIT, categorical_kl

    logits = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]])
    prior = torch.tensor([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    p, q = torch.softmax(logits, -1), torch.softmax(prior, -1)
    want = (p * (p / q).log()).sum(-1)
    torch.testing.assert_close(categorical_kl(logits, prior), want)
    assert categorical_kl(logits, logits).abs().max().item() < 1e-7
    assert (categorical_kl(prior, logits) > 0).all()  # and not symmetric
    assert not torch.allclose(categorical_kl(prior, logits), want)
    masked = torch.full((2, 2), MASKED_LOGIT)
    got = categorical_kl(torch.cat([logits, masked], -1), torch.cat([prior, masked], -1))
    torch.testing.assert_close(got, want)
