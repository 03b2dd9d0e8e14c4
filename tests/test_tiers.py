"""The test tiers of tests/conftest.py: every ``SLOW`` entry still names a test file
and a test in it, and the marks reach the tests (a Ray fixture: ``ray`` and ``slow``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import RAY_FIXTURES, SLOW

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("entry", SLOW)
def test_every_slow_entry_names_a_test(entry):
    file, _, prefix = entry.partition("::")
    text = (ROOT / file).read_text()
    assert re.search(rf"^def {re.escape(prefix or 'test_')}", text, re.M), entry


class _Item:
    def __init__(self, nodeid, fixturenames=(), marks=()):
        self.nodeid, self.fixturenames, self.marks = nodeid, list(fixturenames), set(marks)

    def get_closest_marker(self, name):
        return name if name in self.marks else None

    def add_marker(self, mark):
        self.marks.add(mark.name)


def test_the_hook_marks_ray_tests_and_the_listed_ones_slow():
    from tests.conftest import pytest_collection_modifyitems

    ray_fixture = _Item("tests/agents/test_x.py::test_a", fixturenames=RAY_FIXTURES)
    ray_marked = _Item("tests/marl_sched/test_x.py::test_b", marks={"ray"})
    file, _, prefix = SLOW[-1].partition("::")
    listed = _Item(f"{file}::{prefix}[param]")
    quick = _Item(f"{file}::test_something_else")
    pytest_collection_modifyitems(None, [ray_fixture, ray_marked, listed, quick])
    assert ray_fixture.marks == ray_marked.marks == {"ray", "slow"}
    assert listed.marks == {"slow"} and quick.marks == set()


def test_the_markers_are_registered(pytestconfig):
    names = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert {"slow", "ray"} <= names
