"""The MLP forward pass in numpy (:class:`InterferenceModel`), its ``.npz`` file
format and the shipped model (:func:`load_default`)."""

from __future__ import annotations

import hashlib
import json
import warnings
import zipfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from marl_sched.catalogue import CALIBRATION_FILE, calibration_text
from marl_sched.config import REPO_ROOT
from marl_sched.errors import InputError
from marl_sched.interference.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION, N_FEATURES

# --------------------------------------------------------------------------- the model


#: calibration.json keys read only with GPU sharing (``topology.gpu_sharing`` > 1);
#: the learned model's samples never share a GPU, so its hash leaves them out
SHARING_ONLY_KEYS = ("gpu_share_conflicts",)


def calibration_sha256(path: str | Path = CALIBRATION_FILE) -> str:
    """sha256 of the calibration file without :data:`SHARING_ONLY_KEYS` (and their
    notes): the constants the model's samples depend on."""
    raw = Path(path).read_bytes()
    data = json.loads(raw)
    if not any(key in data for key in SHARING_ONLY_KEYS):
        return hashlib.sha256(raw).hexdigest()

    for key in SHARING_ONLY_KEYS:
        data.pop(key, None)
        data.get("notes", {}).pop(key, None)
    return hashlib.sha256(calibration_text(data).encode("utf-8")).hexdigest()


def default_model_path() -> Path:
    """``checkpoints/interference/model.npz`` in the repository."""
    return REPO_ROOT / "checkpoints" / "interference" / "model.npz"


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda z: np.maximum(z, 0.0),
    "tanh": np.tanh,
    # z·sigmoid(z) with sigmoid = (1 + tanh(z/2)) / 2: no overflow for large |z|
    "silu": lambda z: z * (0.5 + 0.5 * np.tanh(0.5 * z)),
}


class InterferenceModel:
    """A small MLP mapping standardised features to log slowdown, in numpy.

    ``z = MLP((x - x_mean) / x_std) · y_std + y_mean`` is the predicted
    ``ln(slowdown)``; :meth:`predict` returns ``max(exp(z), 1)``.

    Args:
        weights, biases: per layer, ``W`` of shape (in, out) and ``b`` of shape (out,).
        x_mean, x_std: feature standardisation, (F,).
        y_mean, y_std: target (log slowdown) scale.
        activation: hidden activation, a key of ``relu``, ``tanh``, ``silu``.
        calibration_sha256: sha256 of the calibration file the samples came from.
        metadata: training metadata (JSON-able).
    """

    def __init__(
        self,
        weights: Sequence[np.ndarray],
        biases: Sequence[np.ndarray],
        x_mean: np.ndarray,
        x_std: np.ndarray,
        y_mean: float,
        y_std: float,
        activation: str = "silu",
        calibration_sha256: str = "",
        metadata: dict | None = None,
    ) -> None:
        self.weights = [np.asarray(w, dtype=np.float32) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float32) for b in biases]
        self.x_mean = np.asarray(x_mean, dtype=np.float32)
        self.x_std = np.asarray(x_std, dtype=np.float32)
        # from the stored float32 std, so a saved and reloaded model is bit-identical
        self.x_scale = (1.0 / self.x_std.astype(np.float64)).astype(np.float32)
        self.y_mean = float(y_mean)
        self.y_std = float(y_std)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}")
        self.activation = activation
        self._act = _ACTIVATIONS[activation]
        self.calibration_sha256 = calibration_sha256
        self.metadata = dict(metadata or {})

    @property
    def n_features(self) -> int:
        return int(self.weights[0].shape[0])

    #: rows per matrix product: larger blocks make OpenBLAS start its threads, which
    #: on a busy machine ran 100x slower (10k vs 1.5M rows/s measured with 2 cores
    #: shared by training jobs); blocks of 128 stay single-threaded and fast
    block_rows = 128

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Predicted ln(slowdown), (n,), before clamping; ``x`` is (n, F) raw features."""
        x = np.asarray(x, dtype=np.float32)
        if len(x) <= self.block_rows:
            return self._forward_block(x)
        out = np.empty(len(x), dtype=np.float32)
        for start in range(0, len(x), self.block_rows):
            stop = start + self.block_rows
            out[start:stop] = self._forward_block(x[start:stop])
        return out

    def _forward_block(self, x: np.ndarray) -> np.ndarray:
        h = (x - self.x_mean) * self.x_scale
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < last:
                h = self._act(h)
        return h[:, 0] * np.float32(self.y_std) + np.float32(self.y_mean)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted slowdown (>= 1) of each row of ``x`` (n, F) → (n,) float64."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected features of shape (n, {self.n_features}), got {x.shape}")
        return np.maximum(np.exp(self.forward(x).astype(np.float64)), 1.0)

    # ------------------------------------------------------------------ file format

    def save(self, path: str | Path) -> None:
        """Write the one-file ``.npz`` format (no pickled objects)."""
        arrays = {
            "schema_version": np.array(FEATURE_SCHEMA_VERSION, dtype=np.int64),
            "feature_names": np.array(FEATURE_NAMES),
            "n_layers": np.array(len(self.weights), dtype=np.int64),
            "activation": np.array(self.activation),
            "x_mean": self.x_mean,
            "x_std": self.x_std,
            "y_scale": np.array([self.y_mean, self.y_std], dtype=np.float64),
            "calibration_sha256": np.array(self.calibration_sha256),
            "metadata_json": np.array(json.dumps(self.metadata, sort_keys=True)),
        }
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"W{i}"], arrays[f"b{i}"] = w, b
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> InterferenceModel:
        """Read a model file; :class:`InputError` ``"<path>: <problem>"`` if unusable."""
        where = str(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise InputError(f"{where}: no such interference model file") from None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise InputError(f"{where}: not a readable interference model: {problem}") from None
        return cls._from_arrays(data, where)

    @classmethod
    def _from_arrays(cls, data: dict[str, np.ndarray], where: str) -> InterferenceModel:
        def need(key: str) -> np.ndarray:
            if key not in data:
                raise InputError(f"{where}: not an interference model: missing array {key!r}")
            return data[key]

        version = int(need("schema_version"))
        if version != FEATURE_SCHEMA_VERSION:
            raise InputError(
                f"{where}: feature schema version {version}, this code reads "
                f"{FEATURE_SCHEMA_VERSION}: refit with `marl-sched interference fit`"
            )
        names = tuple(str(n) for n in need("feature_names"))
        if names != FEATURE_NAMES:
            pairs = enumerate(zip(names, FEATURE_NAMES, strict=False))
            diff = next(
                (f"#{i}: {a!r} != {b!r}" for i, (a, b) in pairs if a != b),
                f"{len(names)} features, expected {N_FEATURES}",
            )
            raise InputError(f"{where}: feature names differ from this code ({diff}): refit")
        n_layers = int(need("n_layers"))
        weights = [need(f"W{i}") for i in range(n_layers)]
        biases = [need(f"b{i}") for i in range(n_layers)]
        dim = N_FEATURES
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            if w.ndim != 2 or w.shape[0] != dim or b.shape != (w.shape[1],):
                raise InputError(
                    f"{where}: layer {i}: weight shape {w.shape} / bias "
                    f"{b.shape} do not chain from {dim} inputs"
                )
            dim = w.shape[1]
        if dim != 1:
            raise InputError(f"{where}: last layer has {dim} outputs, expected 1")
        x_mean, x_std, y_scale = need("x_mean"), need("x_std"), need("y_scale")
        if x_mean.shape != (N_FEATURES,) or x_std.shape != (N_FEATURES,) or y_scale.shape != (2,):
            raise InputError(f"{where}: normalisation arrays have the wrong shape")
        for key, arr in [
            ("x_mean", x_mean),
            ("x_std", x_std),
            ("y_scale", y_scale),
            *((f"W{i}", w) for i, w in enumerate(weights)),
            *((f"b{i}", b) for i, b in enumerate(biases)),
        ]:
            if not np.all(np.isfinite(arr)):
                raise InputError(f"{where}: {key}: contains non-finite values")
        if np.any(x_std <= 0):
            raise InputError(f"{where}: x_std: must be > 0")
        activation = str(need("activation"))
        if activation not in _ACTIVATIONS:
            raise InputError(f"{where}: unknown activation {activation!r}")
        try:
            metadata = json.loads(str(need("metadata_json")))
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: metadata_json: invalid JSON: {exc.msg}") from None
        return cls(
            weights,
            biases,
            x_mean,
            x_std,
            float(y_scale[0]),
            float(y_scale[1]),
            activation=activation,
            calibration_sha256=str(need("calibration_sha256")),
            metadata=metadata,
        )


@lru_cache(maxsize=1)
def load_default() -> InterferenceModel:
    """The shipped model (:func:`default_model_path`), loaded once; ``UserWarning``
    when it was fitted on another calibration."""
    path = default_model_path()
    model = InterferenceModel.load(path)
    if model.calibration_sha256 != calibration_sha256():
        warnings.warn(
            f"{path}: fitted on another calibration.json than the current one; "
            "refit with `marl-sched interference fit`",
            stacklevel=2,
        )
    return model
