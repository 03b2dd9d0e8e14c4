"""Fixed inputs of the calibration: model lists, published figures, the mappings
between data sets, the interference priors and the targets of the fits."""

from __future__ import annotations

# --------------------------------------------------------------------------- constants

DL2_MODELS = (
    "resnet-50",
    "vgg-16",
    "resnext-110",
    "inception-bn",
    "seq2seq",
    "cnn-text-classification",
    "dssm",
    "wlm",
)
POLLUX_MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

#: DL2 / Harmony published catalogue (PROVENANCE.md): model size MB, compute s/iter
PUBLISHED = {
    "resnet-50": (102.2, 0.449),
    "vgg-16": (553.4, 0.535),
    "resnext-110": (6.92, 0.226),
    "inception-bn": (42.1, 0.815),
    "seq2seq": (36.5, 0.075),
    "cnn-text-classification": (24.0, 0.585),
    "dssm": (6.0, 0.567),
    "wlm": (19.2, 0.154),
}

#: parameter counts of the Pollux models' architectures (fp32 → 4 bytes each)
PARAM_COUNTS = {
    "bert": (110e6, "BERT-base 110M parameters"),
    "cifar10": (11.7e6, "ResNet-18 11.7M parameters"),
    "imagenet": (25.6e6, "ResNet-50 25.6M parameters"),
    "yolov3": (61.9e6, "YOLOv3 61.9M parameters"),
}
#: NeuMF of adaptdl's examples/NCF with its defaults (MovieLens-1M: 6,040 users,
#: 3,706 items, factor_num 32, 3 MLP layers): (6040+3706)·(32+128) embeddings +
#: 32,896 + 8,256 + 2,080 + 65 MLP/predict weights = 1.60M parameters. A cross-check
#: of the sync-fitted size only (the Pollux runs' data set is not recorded).
NCF_PARAMS = (6040 + 3706) * (32 + 128) + 32896 + 8256 + 2080 + 65

#: the batch a 1-GPU Pollux job starts with: the smallest validated batch size of
#: adaptdl osdi21-artifact ``simulator/traces/<model>/validation-*.csv`` (= the
#: simulator's ``init_batch_size``), capped at the largest profiled local batch
POLLUX_INIT_BATCH = {
    "bert": 12,
    "cifar10": 256,
    "deepspeech2": 160,
    "imagenet": 200,
    "ncf": 256,
    "yolov3": 8,
}

#: Pollux model → the same architecture among Gavel's job types (for the T4 speed)
POLLUX_GAVEL_ARCH = {"imagenet": "ResNet-50", "cifar10": "ResNet-18"}

#: Pollux model → DL2 model whose measured CPU use it borrows (same family)
POLLUX_CPU_FROM = {
    "bert": "seq2seq",  # attention NLP model
    "cifar10": "resnext-110",  # CIFAR-10 CNN
    "deepspeech2": "wlm",  # recurrent sequence model
    "imagenet": "resnet-50",  # same architecture
    "ncf": "dssm",  # embedding-based ranking model
    "yolov3": "resnet-50",  # ImageNet-scale CNN backbone
}

#: catalogue model → nearest Gavel job type (interference vectors come from it)
GAVEL_MAP = {
    "resnet-50": "ResNet-50 (batch size 32)",  # same net, DL2 batch 32
    "vgg-16": "ResNet-50 (batch size 32)",  # ImageNet CNN, batch 32
    "resnext-110": "ResNet-18 (batch size 128)",  # CIFAR ResNet, DL2 batch 128
    "inception-bn": "ResNet-50 (batch size 128)",  # ImageNet CNN, DL2 batch 128
    "seq2seq": "Transformer (batch size 64)",  # translation, DL2 batch 64
    "cnn-text-classification": "A3C",  # Harmony: CTC is CPU-heavy; A3C is Gavel's CPU-bound type
    "dssm": "Recommendation (batch size 512)",  # embedding ranking model
    "wlm": "LM (batch size 80)",  # word LM, largest LM batch
    "bert": "Transformer (batch size 16)",  # Pollux local batch 12
    "cifar10": "ResNet-18 (batch size 256)",  # Pollux local batch 256
    "deepspeech2": "LM (batch size 20)",  # recurrent model
    "imagenet": "ResNet-50 (batch size 128)",  # Pollux local batch 200
    "ncf": "Recommendation (batch size 512)",  # Pollux local batch 256
    "yolov3": "ResNet-50 (batch size 16)",  # detection CNN, local batch 8
}

#: resource profiles (cpu, pcie, membw, disk, net) a priori, by Gavel job family:
#: Harmony — CNNs on images are data-loading (CPU decode + disk) heavy, AlexNet
#: disk-heavy, VGG-16 network-heavy, CTC CPU-heavy; language models press on memory
#: bandwidth; A3C simulates its environment on the CPU; recommendation models do
#: embedding look-ups (memory bandwidth, host↔GPU copies).
FAMILY_PRIOR = {
    "ResNet-18": (0.7, 0.4, 0.4, 0.4, 0.1),
    "ResNet-50": (0.8, 0.4, 0.5, 0.8, 0.1),
    "CycleGAN": (0.6, 0.4, 0.5, 0.5, 0.1),
    "Transformer": (0.3, 0.3, 0.8, 0.1, 0.1),
    "LM": (0.2, 0.3, 0.9, 0.1, 0.1),
    "Recommendation": (0.4, 0.5, 0.8, 0.2, 0.1),
    "A3C": (1.0, 0.2, 0.3, 0.1, 0.1),
}

#: AWS g4dn.12xlarge as a topology: 4 T4 on one PCIe 3.0 host, 50 Gbit/s NIC.
#: One GPU group per GPU, so a placement's workers are in distinct groups.
POLLUX_PCIE_GBPS = 128.0
POLLUX_NIC_GBPS = 50.0
POLLUX_MAX_NODES = 16  # scalability.csv goes up to 16 nodes

#: ridge weight pulling the Gavel factors towards their priors (keeps the columns'
#: meaning: same-GPU pairs alone cannot tell the resources apart). 0.05 fits to MRE
#: 0.07 but scrambles the columns (median cosine to the prior 0.4); 1.0 keeps them
#: (cosine 0.85-0.9) at MRE 0.16; 5 is the prior again (MRE 0.22, cosine 0.99).
ANLS_RIDGE = 1.0
ANLS_ITERS = 300

#: interference targets: the median one-neighbour slowdown at the server level we
#: aim for, and the ceiling of a fully packed 8-GPU server (7 workers of the
#: heaviest job around the median victim); the smaller λ of the two wins
TARGET_SERVER_NEIGHBOUR = 1.10
PACKED_CEILING = 2.0
#: per-unit coupling of the socket and group levels relative to the server level
#: (no data separates them; closer neighbours already hurt more because they share
#: more resources: a same-socket one adds caches/membw, a same-group one PCIe)
SOCKET_TO_SERVER = 1.0
GROUP_TO_SERVER = 1.0

#: catalogue model → where its per-model GPU speeds (P100, K80 relative to V100) come
#: from in Gavel's isolated scale-1 throughputs: ``("type", job type)`` = the same
#: architecture at the nearest batch size; ``("family", prefix)`` = geometric mean
#: over the batch sizes of the nearest Gavel family (a similar network, no exact
#: match); a model absent here falls back to the per-type figure (geometric mean
#: over all 26 job types).
GAVEL_SPEED_MAP = {
    "resnet-50": ("type", "ResNet-50 (batch size 32)"),  # same net, DL2 batch 32
    "imagenet": ("type", "ResNet-50 (batch size 128)"),  # ResNet-50, local batch 200
    "cifar10": ("type", "ResNet-18 (batch size 256)"),  # ResNet-18, local batch 256
    "seq2seq": ("type", "Transformer (batch size 64)"),  # translation, batch 64
    "bert": ("type", "Transformer (batch size 16)"),  # transformer encoder, batch 12
    "wlm": ("type", "LM (batch size 80)"),  # word LM
    "ncf": ("type", "Recommendation (batch size 512)"),  # collaborative filtering
    "resnext-110": ("family", "ResNet-18 ("),  # CIFAR ResNet variant
    "inception-bn": ("family", "ResNet-50 ("),  # ImageNet CNN
    "vgg-16": ("family", "ResNet-50 ("),  # ImageNet CNN
    "yolov3": ("family", "ResNet-50 ("),  # detection on an ImageNet CNN backbone
    "dssm": ("family", "Recommendation ("),  # embedding ranking model
    "deepspeech2": ("family", "LM ("),  # recurrent sequence model
    # cnn-text-classification: no Gavel type is a text CNN → per-type figure
}

#: Gavel's GPU types of the co-location pairs checked through the simulator, in the
#: order of their sample groups (``1_000_000 + index``, :func:`marl_sched.interference.
#: load_gavel_colocations`)
GAVEL_COLOCATION_GPUS = ("k80", "p100", "v100")
