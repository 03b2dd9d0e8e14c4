"""marl_sched.metrics: an experiment's report files."""

from __future__ import annotations

import csv

from marl_sched.metrics import write_report


def test_write_report_writes_the_table_and_the_rows_by_column(tmp_path):
    out = tmp_path / "new" / "folder"  # created on demand
    rows = [{"window": "a", "jct": 1.5, "extra": "ignored"}, {"window": "b"}]
    write_report(out, "demo", "| a |\n", rows, ["window", "jct"])
    assert (out / "demo.md").read_text() == "| a |\n"
    with open(out / "demo.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert got == [{"window": "a", "jct": "1.5"}, {"window": "b", "jct": ""}]
    assert sorted(p.name for p in out.iterdir()) == ["demo.csv", "demo.md"]  # no temp left
