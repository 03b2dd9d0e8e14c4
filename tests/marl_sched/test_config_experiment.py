"""A whole experiment config: its paths, its saved copy, every section checked."""

from __future__ import annotations

from pathlib import Path

import yaml

from marl_sched.config import REPO_ROOT, absolute_paths, load_config


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_round_trip_to_dict(tmp_path):
    import yaml

    cfg = load_config(REPO_ROOT / "configs/default.yaml")
    # relative paths resolve against the config's folder: a copy elsewhere records them absolute
    p = _write(tmp_path, yaml.safe_dump(absolute_paths(cfg.to_dict(), cfg)))
    again = load_config(p)
    assert again.topology == cfg.topology
    assert again.workload.trace == str(cfg.resolve_path(cfg.workload.trace))


def test_the_saved_config_reads_back_to_the_same_experiment(tmp_path):
    cfg = load_config(REPO_ROOT / "configs/train_tiny.yaml", ["train.lr=0.0001"])
    saved = tmp_path / "config.yaml"
    saved.write_text(cfg.to_yaml())
    back = load_config(saved)
    assert back.to_dict() == absolute_paths(cfg.to_dict(), cfg) and back.train["lr"] == 0.0001
    assert back.to_yaml() == cfg.to_yaml()


def test_checking_every_section_loads_neither_torch_nor_ray():
    """The owned sections' parsers (env, model, train, interference) are torch-free, so
    ``simulate`` checks them without loading the training stack."""
    import subprocess
    import sys

    code = (
        "import sys; from marl_sched.config import load_config;"
        f"load_config({str(REPO_ROOT / 'configs/default.yaml')!r});"
        "print(','.join(m for m in ('torch', 'ray', 'torch_geometric') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_relative_path_resolves_against_the_config_files_folder(tmp_path):
    """A copied config must not read the original checkout's trace."""
    import shutil

    sample = REPO_ROOT / "configs" / "traces" / "philly_sample.csv"
    shipped = load_config(REPO_ROOT / "configs" / "tiny.yaml")
    assert shipped.resolve_path(shipped.workload.trace) == sample  # repo-relative, in the repo
    raw = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    raw["workload"]["trace"] = "traces/philly_sample.csv"
    copy = tmp_path / "exp" / "tiny.yaml"
    copy.parent.mkdir()
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    # a copy elsewhere never falls back to the checkout
    assert cfg.resolve_path(cfg.workload.trace) == tmp_path / "exp" / "traces" / "philly_sample.csv"
    raw["workload"]["trace"] = "configs/traces/philly_sample.csv"  # the checkout's layout
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    assert (
        cfg.resolve_path(cfg.workload.trace)
        == tmp_path / "exp" / "configs" / "traces" / sample.name
    )
    (tmp_path / "exp" / "traces").mkdir()
    shutil.copy(sample, tmp_path / "exp" / "traces" / sample.name)
    raw["workload"]["trace"] = "traces/philly_sample.csv"
    copy.write_text(yaml.safe_dump(raw))
    cfg = load_config(copy)
    assert cfg.resolve_path(cfg.workload.trace) == tmp_path / "exp" / "traces" / sample.name
    assert cfg.resolve_path(str(sample)) == sample  # absolute: as is
    assert load_config(cfg).source == str(copy)


def test_a_run_folder_records_the_trace_it_read_as_an_absolute_path(tmp_path):
    from marl_sched.cli import main

    out = tmp_path / "run"
    argv = ["simulate", "--config", str(REPO_ROOT / "configs" / "tiny.yaml"), "--max-jobs", "5",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    saved = load_config(out / "config.yaml")
    assert saved.workload.trace == str(REPO_ROOT / "configs" / "traces" / "philly_sample.csv")
    assert Path(saved.workload.trace).is_absolute()


def test_absolute_paths_resolves_every_path_key_and_nothing_else():
    from marl_sched.config import absolute_paths

    cfg = load_config(REPO_ROOT / "configs" / "default.yaml")
    data = {"workload": {"trace": "configs/traces/philly_sample.csv", "start": 200},
            "train": {"extra_windows": [{"trace": "configs/traces/pollux/workload-2.csv",
                                         "share": 0.25}],
                      "eval_trace": None, "algorithm": "PPO"},
            "interference": {"real_data": "/abs/data"}}  # fmt: skip
    out = absolute_paths(data, cfg)
    assert out["workload"] == {"trace": str(REPO_ROOT / "configs/traces/philly_sample.csv"),
                               "start": 200}  # fmt: skip
    window = out["train"]["extra_windows"][0]
    assert window == {"trace": str(REPO_ROOT / "configs/traces/pollux/workload-2.csv"),
                      "share": 0.25}  # fmt: skip
    assert out["train"]["eval_trace"] is None and out["train"]["algorithm"] == "PPO"
    assert out["interference"]["real_data"] == "/abs/data"
