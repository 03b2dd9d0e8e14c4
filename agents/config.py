"""The ``model:`` and ``train:`` sections of an experiment config.

Both are parsed with :func:`marl_sched.config.parse_section`, so an unknown key or a
value of the wrong type or range raises :class:`~marl_sched.errors.InputError` with
one line naming the file and the dotted key (``configs/x.yaml: train.lr: must be > 0,
got -1``), which the CLI turns into exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marl_sched.config import ExperimentConfig, check, check_bounds, parse_section
from marl_sched.errors import InputError

SELECT_RULES = ("mean", "dominate")
#: the algorithms of RLlib's new API stack (its registry, ``ray.rllib.algorithms.registry``)
#: that train our RLModule on the multi-agent env with its discrete masked actions
#: (train.algorithm): each one's Learner needs only the APIs
#: :class:`agents.rl_module.HierarchicalGNNModule` implements (``ValueFunctionAPI``,
#: ``TargetNetworkAPI``; RLlib's ``Learner.rl_module_required_apis``)
ALGORITHMS = ("PPO", "APPO", "IMPALA")
_OFFLINE = "offline: it learns from recorded episodes, not from the environment"
_Q = (
    "its Learner needs Q-networks (RLlib's QNetAPI); our RLModule outputs masked policy "
    "logits and a state value"
)
#: the registry's other algorithms, and why train.algorithm refuses each
#: (tests/agents/test_algorithm.py checks both tables against RLlib's own registry)
REFUSED_ALGORITHMS = {
    "DQN": _Q,
    "SAC": _Q,
    "BC": _OFFLINE,
    "MARWIL": _OFFLINE,
    "CQL": _OFFLINE,
    "IQL": _OFFLINE,
    "DreamerV3": "it trains its own world-model RLModule, not ours",
}
#: how the policy gradient's advantages are computed (train.advantage)
ADVANTAGES = ("gae", "group", "job")
#: how each training window's advantages are weighed (train.advantage_scale;
#: agents.group_baseline, "Weighing the windows")
ADVANTAGE_SCALES = ("batch", "window")
#: what the value function sees (train.critic): the actor's observation, or that and
#: training-time input the actor never sees (agents.rl_module)
CRITICS = ("plain", "privileged")
#: message-passing layers of the GNN (model.gnn.layer): today's hierarchy blocks, or a
#: torch-geometric layer over the cluster tree (agents.gnn.TreeConvBlock)
GNN_LAYERS = ("hierarchy", "GraphConv", "SAGEConv", "GATv2Conv")


@dataclass(frozen=True)
class GNNConfig:
    """The message-passing layer of the network (``model.gnn``).

    Attributes:
        layer: ``hierarchy`` (the default, :class:`agents.gnn.HierarchyBlock`: groups,
            servers and racks each updated from their parent, siblings and children),
            or a torch-geometric layer, ``GraphConv``, ``SAGEConv`` or ``GATv2Conv``,
            applied ``model.layers`` times over the cluster tree (groups, servers and
            racks as one graph, edges group–server, server–rack and rack–rack;
            :class:`agents.gnn.TreeConvBlock`).
    """

    layer: str = "hierarchy"

    def validate(self, where: str, key: str) -> None:
        check(
            self.layer in GNN_LAYERS,
            where,
            f"{key}.layer",
            f"must be one of {', '.join(GNN_LAYERS)}, got {self.layer!r}",
        )


@dataclass(frozen=True)
class ModelConfig:
    """The hierarchical GNN (see :mod:`agents.gnn`).

    Attributes:
        hidden: width of every node, subcluster and peer embedding.
        layers: hierarchy blocks (each: groups ← siblings + server, servers ← groups +
            rack, racks ← servers); 2 lets information go up and back down twice.
        exchange: mix the subcluster embeddings of all agents with attention
            (false = each agent sees only its own summary: an ablation).
        share_parameters: one module for all agents (``policy_mapping_fn`` → "shared");
            false = one module per agent.
        gnn: the message-passing layer (:class:`GNNConfig`).
        raw_head: also score every GPU group from its own raw features, its server's,
            its rack's and the job's, with one small MLP shared by every group, added
            to the group head's score (and, averaged over a plan's groups, to a follow
            action's): a per-node path beside the message passing, the way MLF-RL
            scores servers (:mod:`agents.gnn`, step 6). Off for every checkpoint
            trained before the option.
    """

    hidden: int = 64
    layers: int = 2
    exchange: bool = True
    share_parameters: bool = True
    gnn: GNNConfig = field(default_factory=GNNConfig)
    raw_head: bool = False

    def validate(self, where: str, key: str) -> None:
        # checked before torch allocates anything: a width of 1e23 is no network
        check_bounds(self, {"hidden": (4, MAX_WIDTH), "layers": (1, MAX_LAYERS)}, where, key)


#: the widest layer and the deepest stack a network of this package may have (the
#: shipped ones use 64 and 2): a 4,096-wide layer holds 16 M weights, 64 MB
MAX_WIDTH = 4096
MAX_LAYERS = 64


@dataclass(frozen=True)
class TrainWindow:
    """A trace window mixed into the training episodes (``train.extra_windows``).

    Attributes:
        trace: trace file (relative paths: to the repository root, like
            ``workload.trace``).
        start: first job of the window.
        max_jobs: jobs in the window (null = to the end of the trace).
        load: arrival-rate multiplier (null = the config's ``workload.load``).
        share: relative weight of the window when an episode picks its source (the
            config's own workload weighs ``train.workload_share``).
    """

    trace: str
    start: int = 0
    max_jobs: int | None = None
    load: float | None = None
    share: float = 1.0

    def validate(self, where: str, key: str) -> None:
        check(self.start >= 0, where, f"{key}.start", f"must be >= 0, got {self.start}")
        if self.max_jobs is not None:
            check(self.max_jobs >= 1, where, f"{key}.max_jobs", "must be >= 1 or null")
        if self.load is not None:
            check(self.load > 0, where, f"{key}.load", "must be > 0 or null")
        check(self.share > 0, where, f"{key}.share", f"must be > 0, got {self.share}")


@dataclass(frozen=True)
class RLlibConfig:
    """Any ``AlgorithmConfig`` setting, passed through to RLlib (``train.rllib``).

    Each mapping goes to the setter of the same name (``config.training(**training)``,
    ``config.env_runners(...)``, ``config.learners(...)``) after the settings the
    ``train:`` keys make, so a key here wins over its ``train:`` counterpart (e.g. an
    ``lr`` schedule, ``[[0, 1e-3], [20000, 1e-4]]``, for ``train.lr``). RLlib's own
    setters and ``AlgorithmConfig.validate()`` check them when the command starts
    (:func:`agents.algorithm.apply_rllib`): an unknown key or a bad value exits 2 with
    one line naming ``train.rllib.<setter>.<key>``.

    Attributes:
        training: e.g. ``vtrace_clip_rho_threshold`` (APPO/IMPALA), ``kl_target``,
            ``use_critic``, ``entropy_coeff`` schedules.
        env_runners: e.g. ``rollout_fragment_length``, ``batch_mode``
            (``num_env_runners`` is ``train.num_env_runners``: Tune sizes each trial's
            CPUs from it).
        learners: e.g. ``num_learners``, ``num_gpus_per_learner``.
    """

    training: dict[str, Any] = field(default_factory=dict)
    env_runners: dict[str, Any] = field(default_factory=dict)
    learners: dict[str, Any] = field(default_factory=dict)

    def validate(self, where: str, key: str) -> None:
        check(
            "num_env_runners" not in self.env_runners,
            where,
            f"{key}.env_runners.num_env_runners",
            "set train.num_env_runners instead (Tune reserves a CPU per env runner from it)",
        )


#: ``train:`` fields added after runs were signed, with the behaviour those runs had:
#: a resumed run signed before one existed resumes as it ran
#: (:func:`agents.run_folder.check_config_data`), as ``envs.config.LATER_OPTIONS`` does
#: for decision options
LATER_TRAIN_FIELDS = {
    "prior_kl": 0.0,
    "job_gamma": 0.9,
    "split_share": 0.0,
    "advantage_scale": "batch",
}
#: ``model:`` fields added after runs were signed, likewise
LATER_MODEL_FIELDS = {"raw_head": False}


@dataclass(frozen=True)
class TrainConfig:
    """Multi-agent PPO on RLlib's new API stack, and the run's bookkeeping.

    Attributes:
        algorithm: the RLlib algorithm (:data:`ALGORITHMS`): ``PPO``, ``APPO``
            (asynchronous PPO with a target network; with ``num_env_runners: 0`` it
            samples in the driver) or ``IMPALA`` (v-trace actor-critic). Settings an
            algorithm lacks (IMPALA: ``gae_lambda``, ``clip_param``, ``kl_coeff``;
            APPO and IMPALA: ``vf_clip_param``) are refused when the config sets them.
            The registry's other algorithms are refused with the reason
            (:data:`REFUSED_ALGORITHMS`).
        iterations: PPO iterations (``algo.train()`` calls) of a run.
        lr: Adam learning rate.
        gamma: discount per decision.
        gae_lambda: GAE λ.
        advantage: the policy gradient's advantages: ``gae`` (RLlib's GAE on the
            learned value) or ``group`` (PPO only: the return-to-go against the mean of
            the other rollouts of the same episode window, aligned by simulated time;
            :mod:`agents.group_baseline`) or ``job`` (PPO only: the same groups, each
            decision credited with its job's share of the team return and the
            ``job_gamma``-discounted shares of the jobs after it, against the same job
            in the other rollouts: MLF-RL's credit; :class:`agents.group_baseline.
            JobBaselineAdvantages`).
        group_size: with ``advantage: group`` or ``job``, rollouts of each training
            window in a row (K of Mao et al.'s input-dependent baseline; >= 2).
        job_gamma: with ``advantage: job``, the discount per job in arrival order
            (0.9, MLF-RL's authors' ``gama``; in [0, 1]).
        advantage_scale: with ``advantage: group`` or ``job``, how each window's
            advantages are weighed before the batch's standardisation: ``batch`` (the
            default: in seconds of average JCT, so the heaviest window of a batch
            dominates) or ``window`` (divided by the window's mean ``|team return|``:
            relative changes, every window alike, as the benchmark's geometric mean
            weighs scenarios; :mod:`agents.group_baseline`).
        critic: what the value function sees (PPO only): ``plain`` (the default, the
            actor's observation) or ``privileged``: also the env's training-only
            ``critic_x`` — the queue, the running jobs' true remaining work and the
            next ``critic_jobs`` arrivals (:func:`envs.observations.critic_features`).
            The actor's logits never depend on it; checkpoints keep the actor and
            the plain value head, so inference needs no ``critic_x``. With ``gae``
            the advantages are GAE on the privileged value; with ``group`` that
            critic is only trained (:mod:`agents.rl_module`).
        critic_jobs: with ``critic: privileged``, the upcoming arrivals ``critic_x``
            describes (1..256).
        critic_lr: Adam learning rate of the value heads (the GNN's and, with
            ``privileged``, the privileged critic's); null (the default) = ``lr``.
        prior_kl: ``β`` of a term ``β · KL(π ‖ π₀)`` added to PPO's loss, ``π₀`` the
            run's warm start, frozen (behaviour-regularised RL: the update leaves the
            imitation policy only where the return pays for it;
            :class:`agents.learner.ClipFractionPPOLearner`); 0 (the default) = off.
            Needs PPO and a warm start (``bc_teacher``); the run folder keeps the
            prior (``prior/``), so a resumed run continues with it.
        train_batch_size: env steps (decisions, all agents) per iteration.
        minibatch_size: SGD minibatch, in env steps.
        num_epochs: SGD passes over each train batch.
        entropy_coeff: entropy bonus.
        clip_param: PPO ratio clip.
        vf_loss_coeff: weight of the value loss.
        vf_clip_param: clip of the value loss (in reward units).
        grad_clip: global gradient-norm clip (null = none).
        kl_coeff: weight of the KL penalty to the sampling policy in the loss. The KL
            is computed and logged (``losses/approx_kl``) either way; 0 (the default)
            leaves the loss as plain clipped PPO.
        eval_interval: evaluate every this many iterations (0 = only at the end).
        checkpoint_interval: checkpoint every this many iterations (the last one is
            always checkpointed).
        keep_checkpoints: keep only this many checkpoints, those with the lowest
            validation average JCT, plus the newest (Tune's ``CheckpointConfig``
            ``num_to_keep``, scored by the validation metric); 0 = keep all.
        seed: seed of the environment's episode sampling and of torch.
        num_env_runners: RLlib env runners (0 = sample in the driver; with
            ``--ray-address`` set it to the number of remote workers wanted).
        num_envs_per_env_runner: vectorised envs per runner.
        episode_jobs: jobs per training episode (``env.window_jobs`` of the training
            env: a random slice of the config's
            workload window, or of one of ``extra_windows``; a window shorter than
            that is one whole episode).
        episode_warmup_jobs: ``env.window_warmup_jobs`` of the training env: up to
            this many jobs before each slice are placed by the agents, unscored, so
            that the scored jobs meet a loaded cluster as the benchmark's windows do
            (0: slices start from an empty cluster).
        extra_windows: more trace windows to train on (:class:`TrainWindow`); each
            episode picks its source with probability proportional to its share.
        workload_share: the share of the config's own workload among the sources.
        split_share: the share among the sources of the benchmark's train-split
            scenarios (``benchmarks/default.yaml``: the windows Harmony and MLF-RL
            train on, each at its own load, warm-up jobs included), split evenly
            between them (:func:`split_windows`); 0 = none. Only scenarios on the
            ``default`` topology: the training env runs the config's cluster.
        eval_trace: trace of the evaluation window (null = the config's trace).
        eval_start: first job of the evaluation window (null = right after the
            training window); must not overlap the training window on the same trace.
        eval_max_jobs: jobs in the evaluation window.
        eval_load: arrival-rate multiplier of the evaluation window (null = the
            config's).
        eval_extra_windows: more validation windows (:class:`TrainWindow`; ``share``
            unused). The validation figure that selects the best checkpoint is then
            the average JCT over the jobs of all validation windows (each rolled out
            on its own). None may overlap a training window.
        eval_loads: arrival-rate multipliers at which every validation window is
            rolled out (each window once per load; empty = once, at the window's own
            load). The validation figure is the average over the jobs of all runs.
        select_rule: how a new checkpoint becomes ``best``. ``mean``: its validation
            average JCT is the lowest so far. ``dominate``: that, and on no single
            validation run (window × load) is it worse than the current best by more
            than ``select_tolerance`` (a fraction of the best's figure on that run);
            a later checkpoint must be better on the whole and no worse anywhere.
        select_tolerance: the relative slack of ``dominate`` on each run (ties of a
            second or two on an uncontended window do not block).
        bc_teacher: whose placements warm-start the policy by behaviour cloning
            before PPO (a heuristic-guided start, in the spirit of Harmony's guided
            exploration): ``lookahead`` (per job, the heuristic placement with the
            lowest predicted iteration time, :class:`agents.teachers.LookaheadTeacher`),
            ``rollout`` (per job, the heuristic placement whose simulated future has
            the lowest total JCT, :class:`agents.teachers.RolloutTeacher`), a
            heuristic's name, a masked policy's (``masked:<heuristic>``, or
            ``masked:mlfs-rl``: MLF-RL's placement inside the agents' masks, the
            action-space probe of docs/agents.md), or null (start from scratch).
        bc_margin: the ``rollout`` teacher keeps its base heuristic's (``bc_base``)
            own placement unless another proposal's estimated total JCT is lower by
            more than this fraction (0 = always the lowest;
            :class:`agents.teachers.RolloutTeacher`).
        bc_base: the ``rollout`` teacher's base: the registered heuristic (e.g.
            ``resident-aware``) that places every later job of a rollout and whose
            placement ``bc_margin`` keeps.
        bc_protect: with ``rollout``, one more proposal: interference-aware with its
            cost also counting the harm to resident jobs weighted by their size,
            ``bc_protect`` times (its ``protect``; 0 = no such proposal).
        bc_speed: with ``rollout``, one more proposal: interference-aware with its
            cost also counting how much slower each GPU type runs the job's compute,
            ``bc_speed`` times (its ``speed``; 0 = no such proposal).
        bc_episodes: teacher episodes (of ``episode_jobs`` jobs) to imitate.
        bc_epochs: passes of supervised training over the teacher's decisions.
        bc_weight_power: each decision's imitation loss is weighted by its job's GPU
            work (workers × iterations × compute per iteration) to this power, scaled
            to mean 1 (:func:`agents.training.imitation_weights`); 0 = every decision
            alike.
        dagger_rounds: after behaviour cloning, rounds of DAgger relabelling (0 =
            none): the network acts greedily on ``bc_episodes`` fresh training
            episodes, the teacher labels every state it visits, the labels are added
            to the dataset and the network trains ``bc_epochs`` more passes on it all.
        rllib: any other RLlib setting (:class:`RLlibConfig`).
    """

    algorithm: str = "PPO"
    iterations: int = 40
    lr: float = 3e-5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    advantage: str = "gae"
    group_size: int = 4
    job_gamma: float = 0.9
    advantage_scale: str = "batch"
    critic: str = "plain"
    critic_jobs: int = 8
    critic_lr: float | None = None
    prior_kl: float = 0.0
    train_batch_size: int = 2000
    minibatch_size: int = 250
    num_epochs: int = 4
    entropy_coeff: float = 0.0
    clip_param: float = 0.1
    vf_loss_coeff: float = 0.5
    vf_clip_param: float = 10.0
    grad_clip: float | None = 1.0
    kl_coeff: float = 0.0
    eval_interval: int = 5
    checkpoint_interval: int = 5
    keep_checkpoints: int = 0
    seed: int = 0
    num_env_runners: int = 0
    num_envs_per_env_runner: int = 1
    episode_jobs: int = 200
    episode_warmup_jobs: int = 0
    extra_windows: tuple[TrainWindow, ...] = ()
    workload_share: float = 1.0
    split_share: float = 0.0
    eval_trace: str | None = None
    eval_start: int | None = None
    eval_max_jobs: int = 200
    eval_load: float | None = None
    eval_extra_windows: tuple[TrainWindow, ...] = ()
    eval_loads: tuple[float, ...] = ()
    select_rule: str = "mean"
    select_tolerance: float = 0.001
    bc_teacher: str | None = "lookahead"
    bc_margin: float = 0.0
    bc_base: str = "interference-aware"
    bc_protect: float = 0.0
    bc_speed: float = 0.0
    bc_episodes: int = 20
    bc_epochs: int = 12
    bc_weight_power: float = 0.0
    dagger_rounds: int = 0
    rllib: RLlibConfig = field(default_factory=RLlibConfig)

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, TRAIN_BOUNDS, where, key)
        for name in (
            "iterations",
            "train_batch_size",
            "minibatch_size",
            "num_epochs",
            "episode_jobs",
            "eval_max_jobs",
            "num_envs_per_env_runner",
        ):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        for name in (
            "eval_interval",
            "checkpoint_interval",
            "num_env_runners",
            "seed",
            "dagger_rounds",
            "keep_checkpoints",
            "kl_coeff",
        ):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        check(
            self.algorithm not in REFUSED_ALGORITHMS,
            where,
            f"{key}.algorithm",
            f"{self.algorithm} cannot train this agent: "
            f"{REFUSED_ALGORITHMS.get(self.algorithm)} (use one of {', '.join(ALGORITHMS)})",
        )
        check(
            self.algorithm in ALGORITHMS,
            where,
            f"{key}.algorithm",
            f"must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}",
        )
        for name in ("lr", "clip_param", "vf_clip_param", "workload_share"):
            value = getattr(self, name)
            check(value > 0, where, f"{key}.{name}", f"must be > 0, got {value}")
        check(
            0 <= self.split_share <= 1e6,
            where,
            f"{key}.split_share",
            f"must be in [0, 1e6], got {self.split_share}",
        )
        for name, choices, other in (
            ("advantage", ADVANTAGES, "gae"),
            ("critic", CRITICS, "plain"),
        ):
            value = getattr(self, name)
            check(
                value in choices,
                where,
                f"{key}.{name}",
                f"must be one of {', '.join(choices)}, got {value!r}",
            )
            if value != other:
                check(self.algorithm == "PPO", where, f"{key}.{name}", f"{value} needs PPO")
        if self.advantage in ("group", "job"):
            check(
                self.group_size >= 2,
                where,
                f"{key}.group_size",
                f"must be >= 2 with {self.advantage}",
            )
        check(
            self.advantage_scale in ADVANTAGE_SCALES,
            where,
            f"{key}.advantage_scale",
            f"must be one of {', '.join(ADVANTAGE_SCALES)}, got {self.advantage_scale!r}",
        )
        if self.advantage_scale != "batch":
            check(
                self.advantage in ("group", "job"),
                where,
                f"{key}.advantage_scale",
                f"{self.advantage_scale} needs advantage: group or job, got {self.advantage}",
            )
        check(
            0 <= self.job_gamma <= 1,
            where,
            f"{key}.job_gamma",
            f"must be in [0, 1], got {self.job_gamma}",
        )
        if self.critic_lr is not None:
            check(self.critic_lr > 0, where, f"{key}.critic_lr", "must be > 0 or null")
        prior = f"{key}.prior_kl"
        check(0 <= self.prior_kl <= 1e3, where, prior, f"must be in [0, 1000], got {self.prior_kl}")
        if self.prior_kl:
            check(self.algorithm == "PPO", where, prior, "needs PPO")
            check(bool(self.bc_teacher), where, prior, "needs a warm start (bc_teacher)")
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            check(0 <= value <= 1, where, f"{key}.{name}", f"must be in [0, 1], got {value}")
        check(
            self.entropy_coeff >= 0,
            where,
            f"{key}.entropy_coeff",
            f"must be >= 0, got {self.entropy_coeff}",
        )
        check(
            self.minibatch_size <= self.train_batch_size,
            where,
            f"{key}.minibatch_size",
            f"must be <= train_batch_size ({self.train_batch_size}), got {self.minibatch_size}",
        )
        if self.grad_clip is not None:
            check(self.grad_clip > 0, where, f"{key}.grad_clip", "must be > 0 or null")
        if self.eval_start is not None:
            check(self.eval_start >= 0, where, f"{key}.eval_start", "must be >= 0")
        check(0.0 <= self.bc_margin < 1.0, where, f"{key}.bc_margin", "must be in [0, 1)")
        for name in ("bc_protect", "bc_speed", "bc_weight_power"):
            value = getattr(self, name)
            check(value >= 0, where, f"{key}.{name}", f"must be >= 0, got {value}")
        for name in ("bc_episodes", "bc_epochs"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        if self.bc_teacher is not None:
            from marl_sched.policies import control_names, heuristic_names

            names = ["lookahead", "rollout"]
            # the masked policies act inside the agents' masks themselves; the probe of
            # the action space (masked:mlfs-rl) sees no future and no true length either
            names += heuristic_names() + control_names() + ["masked:mlfs-rl"]
            check(
                self.bc_teacher in names,
                where,
                f"{key}.bc_teacher",
                f"must be one of {', '.join(names)} or null, got {self.bc_teacher!r}",
            )
        from marl_sched.policies.heuristics import hint_names

        check(
            self.bc_base in hint_names(),
            where,
            f"{key}.bc_base",
            f"must be one of {', '.join(hint_names())}, got {self.bc_base!r}",
        )
        if self.eval_load is not None:
            check(self.eval_load > 0, where, f"{key}.eval_load", "must be > 0")
        for i, load in enumerate(self.eval_loads):
            check(load > 0, where, f"{key}.eval_loads[{i}]", f"must be > 0, got {load}")
        check(
            self.select_rule in SELECT_RULES,
            where,
            f"{key}.select_rule",
            f"must be one of {', '.join(SELECT_RULES)}, got {self.select_rule!r}",
        )
        check(
            self.select_tolerance >= 0,
            where,
            f"{key}.select_tolerance",
            f"must be >= 0, got {self.select_tolerance}",
        )


#: the range of each count of ``train:`` (the low end repeats the checks above, so the
#: message names both limits), checked before Ray starts
TRAIN_BOUNDS = {
    "iterations": (1, 10**7),
    "train_batch_size": (1, 10**7),
    "minibatch_size": (1, 10**7),
    "num_epochs": (1, 10**4),
    "eval_interval": (0, 10**7),
    "checkpoint_interval": (0, 10**7),
    "keep_checkpoints": (0, 10**5),
    "seed": (0, 2**32 - 1),
    "num_env_runners": (0, 1024),
    "num_envs_per_env_runner": (1, 1024),
    "critic_jobs": (1, 256),  # envs.observations.MAX_CRITIC_JOBS
    "episode_jobs": (1, 10**7),
    "episode_warmup_jobs": (0, 10**7),
    "eval_max_jobs": (1, 10**7),
    "eval_start": (0, 10**9),
    "bc_episodes": (1, 10**6),
    "bc_epochs": (1, 10**5),
    "dagger_rounds": (0, 10**4),
}

#: ``train:`` fields of a study that no longer ships (one round of rollout policy
#: improvement per iteration), with the value that meant "off". A signed config that
#: carries one at that value reads as if it did not; any other value is refused, naming
#: the git tag that keeps the study's code.
RETIRED_TRAIN_FIELDS = {
    "update": "ppo",
    "improve_episodes": 8,
    "improve_branches": 24,
    "improve_alternatives": 2,
    "improve_margin": 0.01,
    "improve_epochs": 4,
    "improve_lr": 0.0003,
    "improve_weight": 10.0,
    "improve_target": "hard",
    "improve_futures": 0,
}
ARCHIVE_TAG = "studies-archive"


def drop_retired(train: Any, where: str) -> Any:
    """``train`` without the :data:`RETIRED_TRAIN_FIELDS` set to their "off" value;
    ``InputError`` naming the first set to anything else (and the tag that has it)."""
    if not isinstance(train, dict):
        return train
    for key, off in RETIRED_TRAIN_FIELDS.items():
        if key in train and train[key] != off:
            raise InputError(
                f"{where}: train.{key}: {train[key]!r} belongs to a study that no longer "
                f"ships; its code is kept at git tag {ARCHIVE_TAG}"
            )
    return {k: v for k, v in train.items() if k not in RETIRED_TRAIN_FIELDS}


def model_config(cfg: ExperimentConfig) -> ModelConfig:
    """Parse ``cfg.model``; a bad key raises ``InputError`` naming ``model.<key>``."""
    return parse_section(ModelConfig, cfg.model, cfg.source, "model")


def train_config(cfg: ExperimentConfig) -> TrainConfig:
    """Parse ``cfg.train`` and check that no validation window overlaps a training one."""
    tc = parse_section(TrainConfig, drop_retired(cfg.train, cfg.source), cfg.source, "train")
    wl = cfg.workload
    same_trace = tc.eval_trace is None or tc.eval_trace == wl.trace
    if same_trace and tc.eval_start is None:
        check(
            wl.max_jobs is not None,
            cfg.source,
            "train.eval_start",
            "the training window runs to the end of the trace: set train.eval_start "
            "or train.eval_trace",
        )
    _check_windows_apart(cfg, tc)
    return tc


def _end(start: int, n: int | None) -> int | str:
    return "end" if n is None else start + n


def _overlap(a: int, n: int | None, b: int, m: int | None) -> bool:
    """Do job ranges ``[a, a+n)`` and ``[b, b+m)`` share a job (None = to the end)?"""
    return (m is None or a < b + m) and (n is None or b < a + n)


def _check_windows_apart(cfg: ExperimentConfig, tc: TrainConfig) -> None:
    """No training or validation window may touch the benchmark's test split
    (``marl_sched.benchmark.check_not_test``), and no validation window may share a job
    with a training window. The key blamed is the extra training window's, or else
    the validation window's."""
    wl = cfg.workload
    trains = [("workload", wl.trace, wl.start, wl.max_jobs)]
    trains += [
        (f"train.extra_windows[{i}]", w.trace, w.start, w.max_jobs)
        for i, w in enumerate(tc.extra_windows)
    ]
    trains += [("train.split_share", w.trace, w.start, w.max_jobs) for w in split_windows(tc)]
    evals = [("train.eval_start", tc.eval_trace or wl.trace, eval_window(cfg, tc)["start"],
              tc.eval_max_jobs)]  # fmt: skip
    evals += [
        (f"train.eval_extra_windows[{i}]", w.trace, w.start, w.max_jobs)
        for i, w in enumerate(tc.eval_extra_windows)
    ]
    from marl_sched.benchmark import check_not_test

    # the benchmark's test split is never trained on or selected on (docs/benchmark.md)
    for i, (key, trace, start, n) in enumerate(trains + evals):
        warm = wl.warmup_jobs if i == 0 else 0
        check_not_test(cfg.resolve_path(trace), start, n, warmup_jobs=warm,
                       where=f"{cfg.source}: {key}")  # fmt: skip
    for t_key, t_trace, t_start, t_n in trains:
        for e_key, e_trace, e_start, e_n in evals:
            same = cfg.resolve_path(t_trace) == cfg.resolve_path(e_trace)
            check(
                not (same and _overlap(t_start, t_n, e_start, e_n)),
                cfg.source,
                e_key if t_key == "workload" else t_key,
                f"training window [{t_start}, {_end(t_start, t_n)}) of {t_trace} overlaps "
                f"the evaluation window [{e_start}, {_end(e_start, e_n)}) of {e_trace}",
            )


def split_windows(tc: TrainConfig) -> tuple[TrainWindow, ...]:
    """``train.split_share``'s training windows: every train-split scenario of the
    default benchmark suite on the ``default`` topology, from its first warm-up job to
    its last job, at its own load, the share split evenly (traces resolved as the suite
    resolves them). Empty when the share is 0."""
    if not tc.split_share:
        return ()
    from marl_sched.benchmark import DEFAULT_SUITE, load_suite
    from marl_sched.benchmark.suite import resolve

    scenarios = [sc for sc in load_suite(DEFAULT_SUITE).split("train") if sc.topology == "default"]
    return tuple(
        TrainWindow(
            trace=str(resolve(sc.trace)),
            start=sc.first_job,
            max_jobs=sc.start - sc.first_job + sc.max_jobs,
            load=sc.load,
            share=tc.split_share / len(scenarios),
        )
        for sc in scenarios
    )


def eval_windows(cfg: ExperimentConfig, tc: TrainConfig) -> list[dict]:
    """Trace options of every validation window: the main one, then the extra ones."""
    out = [eval_window(cfg, tc)]
    for w in tc.eval_extra_windows:
        out.append(
            {
                "trace": str(cfg.resolve_path(w.trace)),
                "trace_format": None,
                "start": w.start,
                "max_jobs": w.max_jobs,
                "load": w.load,
                "seed": None,
            }
        )
    return out


def eval_window(cfg: ExperimentConfig, tc: TrainConfig) -> dict:
    """Trace options (``marl_sched.runner.TraceOptions`` fields) of the eval window."""
    wl = cfg.workload
    start = tc.eval_start
    if start is None:
        start = wl.start + (wl.max_jobs or 0) if tc.eval_trace is None else 0
    trace = str(cfg.resolve_path(tc.eval_trace)) if tc.eval_trace else None
    return {
        "trace": trace,
        "trace_format": None,
        "start": start,
        "max_jobs": tc.eval_max_jobs,
        "load": tc.eval_load,
        "seed": None,
    }


@dataclass(frozen=True)
class InterferenceConfig:
    """The ``interference:`` section of an experiment config.

    Attributes:
        samples: simulated samples to generate (train + validation + test).
        seed: root seed of sample generation, the split and the initial weights.
        hidden: widths of the MLP's hidden layers.
        activation: hidden activation, ``silu``, ``relu`` or ``tanh``.
        epochs: maximum passes over the training samples.
        patience: stop after this many epochs without a better validation loss.
        lr: Adam learning rate (halved when the validation loss stalls).
        batch_size: samples per gradient step.
        weight_decay: Adam weight decay.
        val_fraction: share of simulations held out for early stopping.
        test_fraction: share of simulations held out for the reported accuracy.
        config_topology_fraction: share of simulations run on the experiment
            config's topology; the rest use random small topologies.
        real_data: folder with ``profiles/`` of real measurements, relative to the
            repo root (empty = skip the real evaluation).
    """

    samples: int = 100000
    seed: int = 0
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "silu"
    epochs: int = 200
    patience: int = 20
    lr: float = 2e-3
    batch_size: int = 512
    weight_decay: float = 0.0
    val_fraction: float = 0.1
    test_fraction: float = 0.15
    config_topology_fraction: float = 0.25
    real_data: str = "../shared/data"

    def validate(self, where: str, key: str) -> None:
        check_bounds(self, {"samples": (50, MAX_SAMPLES)}, where, key)
        check(
            1 <= len(self.hidden) <= MAX_LAYERS,
            where,
            f"{key}.hidden",
            f"needs 1 to {MAX_LAYERS} layers, got {len(self.hidden)}",
        )
        for i, h in enumerate(self.hidden):
            check(h >= 1, where, f"{key}.hidden[{i}]", f"must be >= 1, got {h}")
            check(h <= MAX_WIDTH, where, f"{key}.hidden[{i}]", f"must be <= {MAX_WIDTH}, got {h}")
        check_bounds(
            self,
            {"epochs": (1, 10**5), "patience": (1, 10**5), "batch_size": (1, 10**6),
             "seed": (0, 2**32 - 1)},
            where,
            key,
        )  # fmt: skip
        check(
            self.activation in ("silu", "relu", "tanh"),
            where,
            f"{key}.activation",
            f"must be one of silu, relu, tanh, got {self.activation!r}",
        )
        for name in ("epochs", "patience", "batch_size"):
            value = getattr(self, name)
            check(value >= 1, where, f"{key}.{name}", f"must be >= 1, got {value}")
        check(self.lr > 0, where, f"{key}.lr", f"must be > 0, got {self.lr}")
        check(self.weight_decay >= 0, where, f"{key}.weight_decay", "must be >= 0")
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            check(0 < value < 0.5, where, f"{key}.{name}", f"must be in (0, 0.5), got {value}")
        check(
            0 <= self.config_topology_fraction <= 1,
            where,
            f"{key}.config_topology_fraction",
            f"must be in [0, 1], got {self.config_topology_fraction}",
        )


#: the most samples ``interference fit`` may simulate (the shipped model: 100,000)
MAX_SAMPLES = 10_000_000


def interference_config(cfg: ExperimentConfig) -> InterferenceConfig:
    """Parse ``cfg.interference``; a bad key raises ``InputError`` naming
    ``interference.<key>``."""
    return parse_section(InterferenceConfig, cfg.interference, cfg.source, "interference")
