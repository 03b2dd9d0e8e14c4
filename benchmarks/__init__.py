"""Benchmark suites (YAML) and the Ray executor of ``marl-sched benchmark``.

This package sits above ``marl_sched`` (which never imports Ray); the command itself
is :mod:`marl_sched.benchmark.command`.
"""
