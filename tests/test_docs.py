"""The docs as a reference: every relative Markdown link resolves, the two entry pages
stay short, and no tracked file but the history page and the ledger names development
sessions or issue numbers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from marl_sched.config import REPO_ROOT

#: the only files that may tell the project's development history
HISTORY_FILES = {"docs/history.md", "benchmarks/ledger.jsonl"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
#: the word session or issue followed by a number (plural, and "#" before the number,
#: allowed), and "#" with a number standing alone in prose (not a colour, an HTML entity, a linter
#: directive or part of a word)
HISTORY = re.compile(
    r"\bsessions? \d+|\bissues? #?\d+|(?<![\w&#/])#\d{1,4}\b(?![\w-])", re.IGNORECASE
)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return [p for p in out.stdout.splitlines() if (REPO_ROOT / p).is_file()]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def broken_links(path: Path, text: str) -> list[str]:
    """The relative links of a Markdown text (outside code blocks) whose file does not
    exist, anchors ignored."""
    bad = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            bad.append(target)
    return bad


def history_mentions(text: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(text)]


def test_every_relative_link_resolves():
    bad = {}
    for rel in _tracked():
        if rel.endswith(".md"):
            path = REPO_ROOT / rel
            if found := broken_links(path, path.read_text(encoding="utf-8")):
                bad[rel] = found
    assert bad == {}


def test_link_check_catches_a_missing_file_and_ignores_urls_anchors_and_code(tmp_path):
    (tmp_path / "there.md").write_text("x")
    text = (
        "[a](there.md#part) [b](https://example.com/x) [c](#local) [d](missing.md)\n"
        "```\n[e](also-missing.md)\n```\n"
    )
    assert broken_links(tmp_path / "page.md", text) == ["missing.md"]


def test_the_entry_pages_stay_short():
    assert len((REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 120
    agents = REPO_ROOT / "docs" / "agents.md"
    assert len(agents.read_text(encoding="utf-8").splitlines()) <= 600


def test_history_pattern_finds_sessions_and_issues_and_not_code():
    # the examples are assembled, so this file does not itself match the pattern
    session, issue, h = "sess" + "ion", "iss" + "ue", "#"
    text = f"in {session} 12 and {session}s 14-16"
    assert history_mentions(text) == [f"{session} 12", f"{session}s 14"]
    assert history_mentions(f"see {issue} 34, I{issue[1:]} {h}24 and ledger {h}18.") == [
        f"{issue} 34",
        f"I{issue[1:]} {h}24",
        f"{h}18",
    ]
    code = 'x = 1  # noqa: E501\ncolor="#1f77b4"; c = "#123abc"; s = "&#38;"; a/#2x #1-2 ##3'
    assert history_mentions(code) == []


def test_no_file_but_the_history_names_sessions_or_issues():
    found = {}
    for rel in _tracked():
        if rel in HISTORY_FILES:
            continue
        text = _text(REPO_ROOT / rel)
        if text is not None and (hits := history_mentions(text)):
            found[rel] = hits[:3]
    assert found == {}
