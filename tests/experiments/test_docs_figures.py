"""The docs' generated tables equal what experiments/make_docs.py renders from the
committed results files (figures generated, never typed)."""

from __future__ import annotations

import csv
import re

import pytest

from experiments import make_docs
from marl_sched.config import REPO_ROOT


def _blocks(text: str) -> dict[str, str]:
    return {m.group(2): m.group(3) for m in make_docs.BLOCK.finditer(text)}


@pytest.mark.parametrize("doc", make_docs.DOCS, ids=lambda p: p.name)
def test_every_generated_block_equals_its_results_files(doc):
    blocks = _blocks(doc.read_text(encoding="utf-8"))
    assert blocks, f"{doc.name}: no generated block"
    for name, text in blocks.items():
        assert text == make_docs.BLOCKS[name](), f"{doc.name}: block {name} is stale"


def test_every_block_make_docs_renders_is_used_by_a_document():
    texts = [doc.read_text(encoding="utf-8") for doc in make_docs.DOCS]
    assert make_docs.unused_blocks(texts) == []
    # the documents without one of them: that block is reported, and only it
    cut = [
        make_docs.BLOCK.sub(lambda m: "" if m.group(2) == "default-window" else m.group(0), t)
        for t in texts
    ]
    assert make_docs.unused_blocks(cut) == ["default-window"]


def test_every_number_in_the_default_window_block_is_in_the_results_file():
    """The block's figures are the results file's, rounded as printed."""
    results_md = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    text = _blocks(results_md)["default-window"]
    with (make_docs.RESULTS / "default-window" / "results.csv").open() as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    shown = re.findall(r"^\| ([\w:@-]+) \| ([\d,]+) \|", text, re.M)
    assert {p for p, _ in shown} == set(rows)
    for policy, jct in shown:
        assert jct == f"{float(rows[policy]['avg_jct_s']):,.0f}"


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_rewrite_replaces_only_between_markers_and_check_catches_a_typed_number(tmp_path):
    root = tmp_path / "results"
    base = {"p50_jct_s": "10", "p95_jct_s": "20", "avg_slowdown": "1.5",
            "checkpoint": "", "checkpoint_sha256": ""}  # fmt: skip
    _write(root / "default-window" / "results.csv", [
        {"policy": "first-fit", "avg_jct_s": "1234.4", "avg_jct_ci95_s": "",
         "ratio_to_best_baseline": "1.0", **base},
        {"policy": "marl", "avg_jct_s": "2000", "avg_jct_ci95_s": "",
         "ratio_to_best_baseline": "1.62", **base, "checkpoint": "checkpoints/m",
         "checkpoint_sha256": "abc123"},
    ])  # fmt: skip
    _write(root / "default-window" / "runs.csv", [{"policy": "first-fit", "seed": "0"}])
    rendered = make_docs.default_window(root)
    assert "| first-fit | 1,234 | — |" in rendered and "1 seed, no interval" in rendered
    assert "marl `checkpoints/m` (abc123)" in rendered
    doc = "intro 1\n<!-- generated:default-window -->\nold 999\n<!-- /generated -->\nend\n"
    new = make_docs.rewrite(doc, {"default-window": rendered})
    assert (
        new == f"intro 1\n<!-- generated:default-window -->\n{rendered}<!-- /generated -->\nend\n"
    )
    assert make_docs.rewrite(new, {"default-window": rendered}) == new
    typed = new.replace("1,234", "1,230")
    assert make_docs.rewrite(typed, {"default-window": rendered}) != typed
    with pytest.raises(KeyError):
        make_docs.rewrite("<!-- generated:nope -->\nx\n<!-- /generated -->", {})


def test_benchmark_block_without_results_says_so_and_with_them_shows_no_fake_interval(tmp_path):
    root = tmp_path / "results"
    assert "No placement-track test-split results" in make_docs.benchmark_test(root)
    row = {"policy": "marl"}
    for m, _ in make_docs.SCORED:
        row.update({f"iqm_{m}": "0.864", f"ci_low_{m}": "", f"ci_high_{m}": ""})
    _write(root / "benchmark-test-full" / "summary.csv", [row])
    _write(root / "benchmark-test-full" / "runs.csv", [{"scenario": "a", "seed": "0"}])
    text = make_docs.benchmark_test(root, "full")
    assert "| marl | 0.864 (no interval) |" in text and "1 scenarios × 1 seeds" in text
    assert "Track `full`" in text and "No placement-track" in make_docs.benchmark_test(root)


def test_several_seeds_give_an_interval_and_name_the_seeds(tmp_path):
    root = tmp_path / "results"
    row = {"policy": "random", "avg_jct_s": "100000", "avg_jct_ci95_s": "6353.2",
           "p50_jct_s": "10", "p95_jct_s": "20", "avg_slowdown": "1.5",
           "ratio_to_best_baseline": "1.0", "checkpoint": "", "checkpoint_sha256": ""}  # fmt: skip
    _write(root / "default-window" / "results.csv", [row])
    _write(root / "default-window" / "runs.csv",
           [{"policy": "random", "seed": str(s)} for s in (3, 4, 5)])  # fmt: skip
    text = make_docs.default_window(root)
    assert "Mean over seeds 3–5" in text and "| random | 100,000 | 6,353 |" in text
    drawn = make_docs.figures(root, tmp_path / "figures")
    assert [p.name for p in drawn] == ["default_window_avg_jct.png"]


def test_the_ledger_block_counts_every_line_of_the_ledger(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(
        '{"id": 1, "date": "2026-11-24T21:36:38+00:00"}\n'
        '{"id": 2, "date": "2026-11-27T18:30:14Z"}\n',
        encoding="utf-8",
    )
    text = make_docs.ledger_reads(ledger)
    assert "read 2 times" in text and "the last on 2026-11-27" in text
    assert make_docs.run_date(2, ledger) == "2026-11-27 18:30 UTC"
    real = make_docs.LEDGER.read_text(encoding="utf-8").splitlines()
    assert f"read {len(real)} times" in make_docs.ledger_reads()
