"""agents/reports.py: the learned baselines' search table reads the search's JSON as
experiments/train_baselines.py writes it, orders points by score and marks the chosen
one and the first search's choice."""

from __future__ import annotations

import json

from agents.reports import baseline_search


def _row(lr, gamma, score, it=5):
    return {"lr": lr, "gamma": gamma, "epsilon_start": 0.5, "best_val_score": score,
            "best_iteration": it, "iterations_run": it + 15, "stop_reason": "patience",
            "wall_s": 40.0}  # fmt: skip


def test_the_search_table_orders_points_and_marks_the_choices(tmp_path):
    folder = tmp_path / "baselines" / "search-s5" / "harmony"
    folder.mkdir(parents=True)
    rows = [_row(3e-4, 0.5, 0.996, 0), _row(1e-4, 0.9, 0.928, 30), _row(1e-4, 0.5, 0.984)]
    (folder / "search_harmony.json").write_text(json.dumps({
        "learner": "harmony", "seed": 1, "grid": {"lr": [1e-4, 3e-4], "gamma": [0.5, 0.9]},
        "fixed": {"entropy_coef": 0.01, "epsilon_start": 0.5, "bc_epochs": 40},
        "rows": rows, "chosen": {"lr": 1e-4, "gamma": 0.9}, "total_wall_s": 120.0,
    }))  # fmt: skip
    text = baseline_search(tmp_path)
    lines = [x for x in text.splitlines() if x.startswith("| lr") or x.startswith("| **")]
    assert [x.split("|")[2].strip() for x in lines] == ["0.928", "0.984", "0.996"]
    assert lines[0].startswith("| **lr 0.0001, gamma 0.9** (chosen)")
    assert "(the first search's choice)" in lines[2]
    assert "epsilon_start 0.5" in text and "3 points in 120 s" in text
    assert "No search results for mlfs-rl" in text


def _runs_csv(path, cells):
    """A benchmark folder's runs.csv with the columns the paired reports read."""
    import csv

    path.mkdir(parents=True)
    with (path / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["scenario", "tier", "policy", "run", "seed", "avg_jct_s"])
        w.writeheader()
        for (sc, tier, policy, run, seed), jct in cells.items():
            w.writerow({"scenario": sc, "tier": tier, "policy": policy, "run": run,
                        "seed": seed, "avg_jct_s": jct})  # fmt: skip


def test_the_selection_power_table_pairs_cells_and_sizes_the_set(tmp_path):
    """Per scenario a known log ratio (the same in every slot and seed): the table's
    paired ratio is their geometric mean, the medium-seed-0 row keeps only those cells,
    and the scenarios needed follow (1.96 sd / log 1.05)^2 with the sample sd."""
    import math

    from agents.reports import scenarios_to_resolve, selection_power

    logs = {"a": 0.10, "b": -0.05, "c": 0.20, "d": 0.0, "e": 0.05, "f": 0.15}
    tiers = {"a": "medium", "b": "medium", "c": "medium", "d": "light", "e": "heavy", "f": "light"}
    tiers["g"], logs["g"] = "heavy", -0.10
    ref, cand = {}, {}
    for sc, lg in logs.items():
        for run in ("0", "1"):
            for seed in ("0", "1", "2"):
                base = 1000.0 + 10 * int(seed) + 100 * int(run)
                ref[sc, tiers[sc], "marl", run, seed] = base
                cand[sc, tiers[sc], "marl", run, seed] = base * math.exp(lg)
                # a seed 1 of scenario a that differs: only the every-seed rows see it
                if sc == "a" and seed == "1":
                    cand[sc, tiers[sc], "marl", run, seed] = base * math.exp(0.4)
    _runs_csv(tmp_path / "cand", cand)
    _runs_csv(tmp_path / "ref", ref)
    table = selection_power("cand", "ref", tmp_path).splitlines()
    rows = {line.split("|")[1].strip(): line.split("|")[2:] for line in table[2:]}
    seed0 = rows["medium tier, seed 0 (the selection set until session 6)"]
    assert seed0[0].strip() == "3 × 1 × 2"
    assert seed0[1].strip().startswith(f"{math.exp((0.10 - 0.05 + 0.20) / 3):.3f} [")
    whole = rows["whole validation split, every seed"]
    assert whole[0].strip() == "7 × 3 × 2"
    a_mean = (0.10 * 2 + 0.4) / 3
    means = [a_mean, -0.05, 0.20, 0.0, 0.05, 0.15, -0.10]
    assert whole[1].strip().startswith(f"{math.exp(sum(means) / 7):.3f} [")
    m = sum(means) / 7
    sd = math.sqrt(sum((v - m) ** 2 for v in means) / 6)
    assert whole[2].strip() == f"{sd:.3f}"
    assert int(whole[3]) == scenarios_to_resolve(sd) == math.ceil((1.96 * sd / math.log(1.05)) ** 2)
    assert scenarios_to_resolve(0.0) == 1 and scenarios_to_resolve(0.1) == 17


def test_the_paired_test_pools_every_slot_or_reads_one(tmp_path):
    """Two slots, one a copy of the reference (log ratio 0) and one with a known log
    ratio per scenario: pooled, the ratio is the geometric mean over scenarios of the
    slots' mean log ratio; with ``slot``, that slot's alone, and the line says so."""
    import math

    from agents.reports import paired_test

    logs = {"a": 0.10, "b": -0.04, "c": 0.06}
    ref, cand = {}, {}
    for sc, lg in logs.items():
        for seed in ("0", "1", "2"):
            base = 1000.0 + 10 * int(seed)
            cand[sc, "medium", "first-fit", "0", seed] = 2 * base
            for run in ("0", "1"):
                ref[sc, "medium", "marl", run, seed] = base + 50 * int(run)
                moved = lg if run == "1" else 0.0
                cand[sc, "medium", "marl", run, seed] = (base + 50 * int(run)) * math.exp(moved)
    _runs_csv(tmp_path / "cand", cand)
    _runs_csv(tmp_path / "ref", ref)
    pooled = paired_test("cand", "ref", tmp_path)
    one = paired_test("cand", "ref", tmp_path, slot="1")
    copy = paired_test("cand", "ref", tmp_path, slot="0")
    mean = sum(logs.values()) / 3
    assert f"average JCT {math.exp(mean / 2):.3f} [" in pooled and "(3 scenarios)" in pooled
    assert f"average JCT {math.exp(mean):.3f} [" in one
    assert "(3 scenarios, training-run slot 1 only)" in one
    assert "average JCT 1.000 [1.000, 1.000]" in copy


def test_the_rollout_rounds_table_reads_each_seeds_rounds_and_selection_runs(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from agents.reports import rollout_rounds

    rounds = {0: [(3, 100, 0.5), (1, 120, 0.25)], 1: [(0, 90, 0.0), (7, 110, 0.125)]}
    for seed, figures in rounds.items():
        run = tmp_path / "soft" / f"train-seed{seed}"
        writer = SummaryWriter(str(run / "tb"))
        steps = 0
        for moved, played, kl in figures:
            steps += 1000
            for tag, value in (("improved", moved), ("decisions", played),
                               ("kl_from_round_start", kl)):  # fmt: skip
                writer.add_scalar(f"improve/{tag}", value, steps)
        writer.close()
        scores = {"iter_000000": 4000.0, "iter_000001": 4100.0, "iter_000002": 3800.0 + seed}
        (run / "state.json").write_text(json.dumps({"iteration": 2, "scores": scores}))
    rows = rollout_rounds("soft", tmp_path).splitlines()[2:]
    assert rows == [
        "| 0 | 3 / 100 · 1 / 120 | 0.50 · 0.25 | 4,000 → 3,800 (-5.0%) |",
        "| 1 | 0 / 90 · 7 / 110 | 0.00 · 0.12 | 4,000 → 3,801 (-5.0%) |",
    ]
    # a run with train.improve_futures: the labels its futures turned down too
    run = tmp_path / "soft" / "train-seed0"
    writer = SummaryWriter(str(run / "tb"))
    for step, value in ((1000, 2), (2000, 0)):
        writer.add_scalar("improve/unconfirmed", value, step)
    writer.close()
    row = rollout_rounds("soft", tmp_path).splitlines()[2]
    assert row.startswith("| 0 | 3 (+2 unconfirmed) / 100 · 1 (+0 unconfirmed) / 120 |")


def test_the_selection_curve_reads_every_evaluated_iteration_of_each_seed(tmp_path):
    from agents.reports import selection_curve

    for seed, scores in ((0, [5000.0, 5100.0, 4750.0]), (1, [4000.0, 3900.0])):
        run = tmp_path / "job" / f"train-seed{seed}"
        run.mkdir(parents=True)
        named = {f"iter_{3 * i:06d}": v for i, v in enumerate(scores)}
        (run / "state.json").write_text(json.dumps({"iteration": 3, "scores": named}))
    lines = selection_curve("job", tmp_path).splitlines()
    assert lines[0] == (
        "| training seed | iteration 0 | iteration 3 | iteration 6 | last over the warm start |"
    )
    assert lines[2:] == [
        "| 0 | 5,000 | 5,100 | 4,750 | -5.0% |",
        "| 1 | 4,000 | 3,900 | — | -2.5% |",
    ]


def test_the_label_futures_table_summarises_each_warm_start_and_the_pool(tmp_path):
    from agents.reports import label_futures_table

    runs = {
        "seed0": [{"real": 0.02, "futures": [0.01, -0.01]}, {"real": 0.01, "futures": []}],
        "seed1": [{"real": 0.04, "futures": [0.03, 0.01]}],
    }
    for name, labels in runs.items():
        (tmp_path / f"{name}.json").write_text(
            json.dumps({"checkpoint": f"ck/{name}", "margin": 0.001, "labels": labels})
        )
    rows = label_futures_table(tmp_path).splitlines()[2:]
    assert rows[0].startswith("| ck/seed0 | 1 (1) | 2.00% | 2 | +0.00% ± 1.00% | 50% | 50% | 0% |")
    assert rows[1].startswith(
        "| ck/seed1 | 1 (0) | 4.00% | 2 | +2.00% ± 1.00% | 100% | 0% | 100% |"
    )
    assert rows[2].startswith("| pooled | 2 (1) | 3.00% | 4 | +1.00% ± 0.82% | 75% | 25% | 50% |")


def test_two_policies_of_one_run_are_paired_cell_by_cell(tmp_path):
    """Per scenario a known log ratio of one policy over the other, the same at every
    seed: the line's ratio is the geometric mean over scenarios; a policy over itself
    is exactly 1, and P(lower) counts its ties half."""
    import math

    from agents.reports import policies_paired

    logs = {"a": 0.12, "b": -0.03, "c": 0.03}
    cells = {}
    for sc, lg in logs.items():
        for seed in ("0", "1", "2"):
            base = 900.0 + 30 * int(seed)
            cells[sc, "light", "first-fit", "", seed] = 2 * base
            cells[sc, "light", "masked:lookahead", "", seed] = base * math.exp(lg)
            cells[sc, "light", "masked:interference-aware", "", seed] = base
    _runs_csv(tmp_path / "val", cells)
    line = policies_paired("val", "masked:lookahead", "masked:interference-aware", tmp_path)
    assert line.startswith("`masked:lookahead` over `masked:interference-aware` in `val`")
    assert f"average JCT {math.exp(sum(logs.values()) / 3):.3f} [" in line
    assert "(3 scenarios)" in line
    same = policies_paired("val", "masked:lookahead", "masked:lookahead", tmp_path)
    assert "average JCT 1.000 [1.000, 1.000]; P(lower) 0.50" in same  # ties count half


def test_the_over_policy_table_pairs_every_slot_with_the_policys_one_checkpoint(tmp_path):
    """The policy's cells (one checkpoint) are paired with every training slot's at the
    same scenario and seed: slots at x1 and x4 of the policy pool to x2 (a geometric
    mean); a network set equal to the policy is exactly 1."""
    import math

    from agents.reports import over_policy_table

    probe, cand, same = {}, {}, {}
    for sc in ("a", "b", "c"):
        for seed in ("0", "1"):
            base = 100.0 * (1 + int(seed)) * (2 if sc == "b" else 1)
            probe[sc, "medium", "first-fit", "0", seed] = 2 * base
            probe[sc, "medium", "masked:lookahead", "0", seed] = base
            for run, factor in (("0", 1.0), ("1", 4.0)):
                cand[sc, "medium", "marl", run, seed] = base * factor
                same[sc, "medium", "marl", run, seed] = base
    _runs_csv(tmp_path / "probe", probe)
    _runs_csv(tmp_path / "cand", cand)
    _runs_csv(tmp_path / "same", same)
    rows = over_policy_table(
        [("x", "cand"), ("y", "same")], "probe", "masked:lookahead", tmp_path
    ).splitlines()
    assert (
        rows[0] == "| networks | scenarios | over `masked:lookahead` [95 % interval] | P(lower) |"
    )
    assert rows[2].startswith(f"| x | 3 | {math.exp((math.log(1) + math.log(4)) / 2):.3f} [")
    assert rows[3].startswith("| y | 3 | 1.000 [1.000, 1.000] | 0.50")


def test_the_probe_table_pairs_the_probe_with_mlfs_rl_and_the_pooled_warm_starts(tmp_path):
    from agents.reports import probe_table

    def write(folder, rows):
        (tmp_path / folder).mkdir()
        lines = ["scenario,policy,run,seed,avg_jct_s"] + [",".join(map(str, r)) for r in rows]
        (tmp_path / folder / "runs.csv").write_text("\n".join(lines) + "\n")

    probe, warm = [], []
    for sc in ("a", "b", "c"):
        for seed in (0, 1):
            probe += [(sc, "first-fit", 0, seed, 10.0), (sc, "mlfs-rl", 0, seed, 5.0),
                      (sc, "masked:mlfs-rl", 0, seed, 4.5)]  # fmt: skip
            # three training slots whose geometric mean is 9.0 (3 · 9 · 27 = 9³)
            warm += [(sc, "marl", slot, seed, v) for slot, v in enumerate((3.0, 9.0, 27.0))]
    write("probe", probe)
    write("warm", warm)
    rows = probe_table("probe", "warm", tmp_path).splitlines()[2:]
    assert rows[0].startswith("| `masked:mlfs-rl` over `mlfs-rl` (what the masks cost) | 3 | 0.900")
    assert rows[1].startswith("| `mlfs-rl` over the warm starts | 3 | 0.556 ")
    assert rows[2].startswith("| `masked:mlfs-rl` over the warm starts | 3 | 0.500 ")


def test_the_agreement_table_renders_the_diagnostics_summary(tmp_path):
    from experiments.diag_agreement import SUMMARY, summarize, write_csv

    from agents.reports import agreement_table

    def row(mode, workers, used, same, hits, t_s, t_t):
        return {"mode": mode, "workers": workers, "est_work_s": 10.0 * workers,
                "gpu_used_frac": used, "teacher_waits": 0, "student_waits": 0,
                "same_groups": same, "same_servers": same, "forced_decisions": 2,
                "forced_hits": hits, "slot_labels": 1, "slot_hits": min(hits, 1),
                "forward_labels": 1, "forward_hits": max(hits - 1, 0), "follow_labels": 0,
                "follow_hits": 0, "t_student": t_s, "t_teacher": t_t}  # fmt: skip

    queued = {"teacher_waits": 1, "student_waits": 1}
    big = row("teacher", 4, 0.9, 0, 0, 2.0, 1.0)
    rows = [row("teacher", 1, 0.2, 1, 2, 1.0, 1.0), big, {**big, **queued}]
    folder = tmp_path / "diag"
    write_csv(folder / "summary.csv", summarize(rows), SUMMARY)
    text = agreement_table("diag", tmp_path).splitlines()
    everyone = next(line for line in text if "| all jobs |" in line)
    # the queued attempt is not a decision: 2 jobs; per decision 2 of 4 agree
    assert "| teacher places | all jobs | 2 | 1.00 | 0.50 | 0.50 (0.50 / 0.50 / —) |" in everyone
    assert everyone.endswith(f"| {2**0.5:.2f} | 0.50 |")  # geomean of 1 and 2; one slower
    line = next(line for line in text if "3-8 workers" in line)
    assert "| 1 | 0.80 | 0.00 | 0.00 (0.00 / 0.00 / —) | 2.00 | 1.00 |" in line


def test_the_hybrid_table_measures_each_driver_against_the_teacher(tmp_path):
    import csv
    import math

    from agents.reports import hybrid_table

    folder = tmp_path / "hyb"
    folder.mkdir()
    jct = {"teacher": (100.0, 200.0), "student": (121.0, 242.0), "teacher-slots": (110.0, 220.0)}
    with (folder / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "seed", "mode", "avg_jct_s"])
        for mode, (a, b) in jct.items():
            w.writerow(["a", 0, mode, a])
            w.writerow(["b", 0, mode, b])
    text = hybrid_table("hyb", tmp_path)
    slots = next(line for line in text.splitlines() if line.startswith("| teacher-slots"))
    # 1.1 in both scenarios: half the student's gap (1.21) on the log scale
    assert slots.startswith("| teacher-slots | 2 | 1.100")
    assert slots.endswith(f"| {1 - math.log(1.1) / math.log(1.21):.2f} |") and "0.50" in slots
    assert "| student | 2 | 1.210" in text and "teacher |" not in text.split("\n", 2)[2]


def test_the_family_table_groups_scenarios_and_training_slots_against_the_teacher(tmp_path):
    """Known log ratios per scenario and training slot against one teacher checkpoint:
    each group's figure is the geometric mean of its scenarios' ratios, a topology
    variant is its own group (one scenario: a point, no interval), each slot row
    pools that slot's cells only, and ``all`` pools everything."""
    import csv
    import math

    from agents.reports import family_table

    logs = {
        ("philly-1", "default"): (0.2, 0.4),
        ("philly-2", "default"): (0.0, 0.2),
        ("sia-1", "default"): (-0.1, -0.1),
        ("philly-3", "oversubscribed"): (0.3, 0.5),
    }
    cols = ["scenario", "topology", "policy", "run", "seed", "avg_jct_s"]

    def row(*values) -> dict:
        return dict(zip(cols, values, strict=True))

    for folder in ("probe", "cand"):
        (tmp_path / folder).mkdir()
    with (tmp_path / "probe" / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for (sc, topo), _ in logs.items():
            for seed in ("0", "1"):
                w.writerow(row(sc, topo, "masked:mlfs-rl", "0", seed, 100.0 + int(seed)))
                w.writerow(row(sc, topo, "mlfs-rl", "0", seed, 1.0))  # not read
    with (tmp_path / "cand" / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for (sc, topo), per_run in logs.items():
            for run, lg in enumerate(per_run):
                for seed in ("0", "1"):
                    jct = (100.0 + int(seed)) * math.exp(lg)
                    w.writerow(row(sc, topo, "marl", str(run), seed, jct))
    table = family_table([("c", "cand")], "probe", tmp_path).splitlines()
    assert table[0] == "| scenarios | n | c over `masked:mlfs-rl` |"
    rows = {line.split("|")[1].strip(): line.split("|")[2:4] for line in table[2:]}
    assert list(rows) == ["oversubscribed", "philly", "sia", "training slot 0",
                          "training slot 1", "all"]  # fmt: skip

    def point(cell: str) -> float:
        return float(cell.strip().split(" ")[0])

    assert rows["oversubscribed"] == [" 1 ", f" {math.exp(0.4):.3f} "]
    assert rows["philly"][0].strip() == "2"
    assert point(rows["philly"][1]) == round(math.exp((0.2 + 0.4 + 0.0 + 0.2) / 4), 3)
    assert point(rows["training slot 0"][1]) == round(math.exp((0.2 + 0.0 - 0.1 + 0.3) / 4), 3)
    assert point(rows["training slot 1"][1]) == round(math.exp((0.4 + 0.2 - 0.1 + 0.5) / 4), 3)
    assert rows["all"][0].strip() == "4"
    assert point(rows["all"][1]) == round(math.exp(sum(sum(v) for v in logs.values()) / 8), 3)
    assert "[" in rows["all"][1]


def test_the_fit_table_renders_each_network_per_kind_and_size(tmp_path):
    import csv

    from agents.reports import fit_table

    (tmp_path / "f").mkdir()
    cols = ["network", "episodes", "kind", "size", "labels", "hits", "accuracy"]
    with (tmp_path / "f" / "fit.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for net, hits in (("a", 1), ("fit:plain", 2)):
            for episodes in ("trained-on", "fresh"):
                for kind in ("slot", "forward", "follow"):
                    for size in ("1 worker", "2+ workers"):
                        n = 0 if (kind, size) == ("forward", "2+ workers") else 4
                        w.writerow([net, episodes, kind, size, n, min(hits, n), min(hits, n) / 4])
                w.writerow([net, episodes, "all", "all", 20, 5 * min(hits, 4), hits / 4])
    text = fit_table("f", tmp_path).splitlines()
    assert text[0].startswith("| network (trained-on episodes) | all (20) | slot, 1 worker (4) |")
    assert text[2] == "| `a` | 0.250 | 0.250 | 0.250 | 0.250 | — | 0.250 | 0.250 |"
    assert text[3] == "| `fit:plain` | 0.500 | 0.500 | 0.500 | 0.500 | — | 0.500 | 0.500 |"
    assert text[4] == "" and text[5].startswith("| network (fresh episodes) |")
    assert len(text) == 9


def test_the_window_share_table_reads_each_runs_tensorboard(tmp_path):
    """Medians over every iteration of a run's seeds, and the share of iterations where
    one window carries ≥ 0.99 of the squared advantages, before and after weighing."""
    from torch.utils.tensorboard import SummaryWriter

    from agents.reports import window_share_table

    values = {
        0: ([1.0, 0.5, 0.995], [1.0, 0.4, 0.9], [100, 300, 200]),
        1: ([0.6, 0.7], [0.3, 0.2], [400, 500]),
    }
    for seed, (raw, weighed, length) in values.items():
        w = SummaryWriter(str(tmp_path / "learning" / "run" / f"train-seed{seed}" / "tb"))
        for step, (a, b, c) in enumerate(zip(raw, weighed, length, strict=True)):
            w.add_scalar("losses/top_window_share_raw", a, step)
            w.add_scalar("losses/top_window_share", b, step)
            w.add_scalar("charts/episode_length", c, step)
        w.close()
    table = window_share_table(["learning/run"], root=tmp_path)
    # raw: 1.0, 0.5, 0.995, 0.6, 0.7 -> median 0.7, 2 of 5 >= 0.99; weighed: median 0.4, 1 of 5
    assert "| `run` | 5 | 0.700 (40%) | 0.400 (20%) | 300 |" in table
