"""How well does a network copy its teacher's decisions in training windows? A diagnostic.

The config's teacher (``train.bc_teacher``) is rolled out through the training env as
the warm start rolls it (:func:`agents.warm_start.teacher_decisions`): on the episodes a
warm start of ``--seed`` S is taught on (``--episodes`` N: episode seeds ``S*1000 +
0..N-1``) and on fresh episodes of the same windows (``--fresh`` M, from episode 500).
Each network's greedy action on every labelled state is compared with the teacher's
label, per kind of label (a GPU-group slot, a forward, a follow action) and per job size
(one worker; more), and one row is written per network, set of episodes, kind and size.

Networks: ``--checkpoint`` folders (as trained; any number), and ``--fit`` variants
trained here from scratch on the N episodes the way the warm start fits them
(:func:`agents.warm_start.imitation_epoch`, ``train.bc_epochs`` passes, no DAgger round):
``plain`` (the config's model) and ``raw`` (the same with ``model.raw_head``).

    python experiments/diag_fit.py --config configs/learn.yaml --seed 0 --episodes 64 \\
        --fresh 16 --fit plain,raw --checkpoint checkpoints/marl-norules/clone64-ms/seed0 \\
        --out results/learning/diagnostics/fit-clones/fit.csv \\
        env.model_speed=true train.bc_teacher=masked:mlfs-rl train.bc_episodes=64

Reads training windows only (the config's own checks refuse a test-split window).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

FIELDS = ("network", "episodes", "kind", "size", "labels", "hits", "accuracy")
FITS = ("plain", "raw")
KINDS = ("slot", "forward", "follow")


def label_rows(name: str, episodes: str, net, data: dict, actions, kinds, one_worker) -> list:
    """The rows of one network on one set of episodes: per kind and size, how many
    labels and how many of the network's greedy actions equal them (then ``all``)."""
    import numpy as np
    import torch

    with torch.no_grad():
        pred = torch.cat([
            net.forward_padded({k: v[i : i + 512] for k, v in data.items()})[0].argmax(-1)
            for i in range(0, len(actions), 512)
        ]).numpy()  # fmt: skip
    hit = pred == np.asarray(actions)
    groups = [(k, size, (kinds == k) & m) for k in KINDS
              for size, m in (("1 worker", one_worker), ("2+ workers", ~one_worker))]  # fmt: skip
    groups.append(("all", "all", np.ones(len(hit), bool)))
    rows = []
    for kind, size, m in groups:
        n = int(m.sum())
        rows.append({"network": name, "episodes": episodes, "kind": kind, "size": size,
                     "labels": n, "hits": int(hit[m].sum()),
                     "accuracy": float(hit[m].mean()) if n else float("nan")})  # fmt: skip
    return rows


def tensors(decisions, tc, builder):
    """(:func:`agents.warm_start.imitation_tensors` of the teacher's decisions, each
    label's kind, the one-worker mask): the observations are stacked once, for the
    fits and for the figures."""
    import numpy as np

    from agents.credit_signal import label_kind
    from agents.warm_start import imitation_tensors

    stacked = imitation_tensors(*decisions, tc.bc_weight_power)
    kinds = np.array([label_kind(int(a), builder) for a in decisions[1]])
    # job_x column 0 is log2(workers) / 6 (envs.observations.FEATURES)
    one_worker = np.round(2 ** (stacked[0]["job_x"][:, 0].numpy() * 6)).astype(int) == 1
    return stacked, kinds, one_worker


def fit_variant(variant: str, mc, tc, builder, stacked, seed: int):
    """A network trained from scratch on the teacher's decisions (``stacked``:
    :func:`agents.warm_start.imitation_tensors`) as the warm start trains one."""
    import numpy as np
    import torch

    from agents.gnn import build_gnn
    from agents.warm_start import imitation_epoch
    from envs.observations import feature_dims

    torch.manual_seed(seed)
    model = {**dataclasses.asdict(mc), "raw_head": variant == "raw"}
    net = build_gnn(feature_dims(builder.observation_space), model)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    data, act, ret, weight = stacked
    for _ in range(tc.bc_epochs):
        imitation_epoch(net, opt, data, act, ret, weight, rng)
    return net.eval()


def run(args, overrides) -> list[dict]:
    from agents.commands import _load_train_config
    from agents.policy import load_checkpoint
    from agents.warm_start import env_setup, teacher_decisions
    from envs.config import env_config

    cfg, mc, tc = _load_train_config(args.config, overrides)
    nets = {}
    for path in args.checkpoint:
        agents = load_checkpoint(path)  # InputError (exit 2) before any rollout
        agents.check_env(env_config(cfg), f"{path}")
        nets[str(path)] = next(iter(agents.nets.values())).eval()
    _, _, builder = env_setup(cfg, mc, tc, args.seed)
    t0 = time.perf_counter()
    trained = teacher_decisions(cfg, mc, dataclasses.replace(tc, bc_episodes=args.episodes),
                                args.seed)  # fmt: skip
    fresh = teacher_decisions(cfg, mc, dataclasses.replace(tc, bc_episodes=args.fresh),
                              args.seed, first_episode=500)  # fmt: skip
    print(f"teacher: {len(trained[1])} + {len(fresh[1])} decisions, "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)  # fmt: skip
    sets = {"trained-on": tensors(trained, tc, builder), "fresh": tensors(fresh, tc, builder)}
    for variant in args.fit:
        nets[f"fit:{variant}"] = fit_variant(
            variant, mc, tc, builder, sets["trained-on"][0], args.seed
        )
    rows = []
    for name, net in nets.items():
        for episodes, ((data, actions, _, _), kinds, one) in sets.items():
            rows += label_rows(name, episodes, net, data, actions, kinds, one)
    return rows


def main(argv=None) -> int:
    import pandas as pd

    from marl_sched.cli import prepare_out
    from marl_sched.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=64, help="taught-on episodes (1..256)")
    ap.add_argument("--fresh", type=int, default=16, help="fresh episodes (1..256)")
    ap.add_argument("--checkpoint", action="append", default=[], type=Path)
    ap.add_argument("--fit", default="", help=f"comma-separated of {', '.join(FITS)}")
    ap.add_argument("--out", required=True, type=Path, help="the rows (CSV)")
    args, overrides = ap.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o]
    if bad:
        ap.error(f"unrecognised argument {bad[0]!r}")
    for name in ("episodes", "fresh"):
        if not 1 <= getattr(args, name) <= 256:
            ap.error(f"--{name}: 1..256")
    args.fit = [f for f in args.fit.split(",") if f]
    if unknown := [f for f in args.fit if f not in FITS]:
        ap.error(f"--fit: {unknown[0]!r} is not one of {', '.join(FITS)}")
    if not args.checkpoint and not args.fit:
        ap.error("nothing to measure: give --checkpoint or --fit")
    try:
        prepare_out(args.out.parent)
        rows = run(args, overrides)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(FIELDS)).to_csv(args.out, index=False)
    print(f"{len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
