"""A mutation check (not run in CI): do the tests catch hand-written bugs?

Each mutant is one text replacement in one source file with the tests that should
catch it. The tracked files are copied once to a temporary folder; the tests are run
there unmutated (they must pass), then each mutant is applied alone, its tests run
(``pytest -x``) and the file restored. A mutant is *killed* when its tests fail,
*survived* when they pass (a gap in the tests, or an equivalent mutant: read it).

    python tests/mutants.py            # every mutant
    python tests/mutants.py ledger     # the mutants whose name contains "ledger"
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T = "tests/marl_sched/"
SIM = [
    T + "test_simulator.py",
    T + "test_simulation_events.py",
    T + "test_ordering.py",
    T + "test_golden.py",
]
PERF = [T + "test_perf.py"]
LEDGER = [T + "test_ledger.py"]
INTEGRITY = ["tests/agents/test_integrity.py"]

#: (name, file, text, replacement, tests)
MUTANTS = [
    ("smallest-first LIFO", "marl_sched/ordering.py",
     "(job.num_workers, job.submit_time, job.job_id)",
     "(job.num_workers, -job.submit_time, job.job_id)", [T + "test_ordering.py"]),
    ("IQM trims ceil(k/4)", "marl_sched/benchmark/stats.py",
     "g = (0.25 * k).astype(int)", "g = np.ceil(0.25 * k).astype(int)",
     [T + "test_benchmark_stats.py"]),
    ("restart delay ignored", "marl_sched/simulation/events.py",
     "begin = now if run.paused_until <= now else run.paused_until", "begin = now", SIM),
    ("progress through the restart delay", "marl_sched/simulation/events.py",
     "(now - run.paused_until) / run.iter_time", "(now - run.last_update) / run.iter_time",
     SIM),
    ("no backfill stop", "marl_sched/simulation/queueing.py",
     "                    if not self.backfill:\n                        break",
     "                    pass", SIM),
    ("socket and server levels swapped", "marl_sched/perf.py",
     "p_sock @ w[1] + p_srv @ w[2]", "p_sock @ w[2] + p_srv @ w[1]", PERF),
    ("own socket pressure kept", "marl_sched/perf.py",
     "p_sock = socket_pressure.take(layout.worker_sockets, axis=0) - layout.own_socket_press",
     "p_sock = socket_pressure.take(layout.worker_sockets, axis=0)", PERF),
    ("interference summed over workers", "marl_sched/perf.py",
     "max(float(np.maximum.reduce(weighted)), 0.0)", "max(float(weighted.sum()), 0.0)", PERF),
    ("ledger without +dirty", "marl_sched/benchmark/ledger.py",
     'return head + ("+dirty" if dirty else "")', "return head", LEDGER),
    ("ledger append without a lock", "marl_sched/benchmark/ledger.py",
     "fcntl.flock(fd, fcntl.LOCK_EX)", "pass", LEDGER),
    ("ledger ids unchecked", "marl_sched/benchmark/ledger.py",
     'if entry.get("id") != len(entries) + 1', "if False", LEDGER),
    ("dirty tree recorded", "marl_sched/benchmark/ledger.py",
     'if git_commit(REPO).endswith("+dirty"):', "if False:", LEDGER),
    ("nested state.json unsigned", "agents/integrity.py",
     "if rel != skip:", "if entry.name != skip:", INTEGRITY),
    ("signed tree follows folder links", "agents/integrity.py",
     "            if entry.is_symlink():\n                raise",
     "            if entry.is_symlink() and not entry.is_dir():\n                raise",
     INTEGRITY),
    ("digest over every file", "marl_sched/checkpoints.py",
     "files = [(CHECKPOINT_MANIFEST, \"json\")]",
     "files = [(CHECKPOINT_MANIFEST, \"json\"), (\"README.md\", \"json\")]",
     [T + "test_checkpoint_digest.py"]),
]  # fmt: skip


def _pytest(copy: Path, tests: list[str]) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    return subprocess.run(cmd, cwd=copy, env=env, capture_output=True).returncode


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTANTS if not argv or any(a in m[0] for a in argv)]
    if not chosen:
        names = ", ".join(m[0] for m in MUTANTS)
        print(f"mutants: no mutant's name contains {' or '.join(argv)!r} (names: {names})",
              file=sys.stderr)  # fmt: skip
        return 2
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        copy = Path(tmp)
        for rel in filter(None, files):
            if (ROOT / rel).is_file():
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, copy / rel)
        tests = sorted({t for m in chosen for t in m[4]})
        if _pytest(copy, tests) != 0:
            print(f"the unmutated tests fail ({' '.join(tests)}): fix them first")
            return 1
        survived = 0
        for name, rel, text, new, tests in chosen:
            path = copy / rel
            source = path.read_text(encoding="utf-8")
            if source.count(text) != 1:
                print(f"{'stale':9} {name}: {rel} no longer holds the mutated text once")
                survived += 1
                continue
            path.write_text(source.replace(text, new), encoding="utf-8")
            try:
                killed = _pytest(copy, tests) != 0
            finally:
                path.write_text(source, encoding="utf-8")
            survived += not killed
            print(f"{'killed' if killed else 'SURVIVED':9} {name} ({rel})", flush=True)
        print(f"{len(chosen) - survived} of {len(chosen)} killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
