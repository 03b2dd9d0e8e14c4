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
