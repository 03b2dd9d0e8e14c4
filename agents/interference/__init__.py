"""The learned interference model's torch side: the MLP, its training and export.

The numpy forward that serves predictions lives in :mod:`marl_sched.interference`;
this package fits the same network in torch and writes the ``.npz`` file it reads.
"""

from agents.interference.fit import FitResult, InterferenceConfig, fit_interference
from agents.interference.model import InterferenceMLP, export_model

__all__ = ["FitResult", "InterferenceConfig", "InterferenceMLP", "export_model", "fit_interference"]
