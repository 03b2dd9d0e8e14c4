"""The benchmark: pre-registered suites of scenarios (:mod:`.suite`), cells and their
resumable store (:mod:`.cells`), interval statistics (:mod:`.stats`), reports
(:mod:`.report`) and the ``marl-sched benchmark`` command (:mod:`.command`)."""

from marl_sched.benchmark.suite import (
    DEFAULT_SUITE,
    SPLITS,
    Scenario,
    Suite,
    check_not_test,
    load_suite,
)

__all__ = ["DEFAULT_SUITE", "SPLITS", "Scenario", "Suite", "check_not_test", "load_suite"]
