"""marl_sched core: topology, workload, performance model, simulator, heuristics.

This package imports no gymnasium, ray or torch (a test enforces it).
"""

__version__ = "0.1.0"
