"""Checkpoint sizes: what a training run writes to storage, and how long it takes.

A checkpoint holds what training cannot recompute: the weights and the optimizer's
state. Gradients are not saved (the next step recomputes them) and neither are the
activations. With mixed precision that is the 16-bit weights (2 Psi bytes) and the
K Psi bytes of fp32 optimizer state that the memory calculator counts
(:mod:`aiinfra.memory.model_states`): the master copy of the weights and, for Adam,
momentum and variance (K = 12; Rajbhandari et al. 2020, "ZeRO", Sec. 3.1), so a
training checkpoint is 14 Psi bytes. An inference checkpoint is the weights alone,
2 Psi in bf16. Writing B bytes at a storage bandwidth W takes B / W seconds, time
the training job either stalls for (a synchronous save) or hides behind its steps
(an asynchronous one, :mod:`aiinfra.storage.async_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.memory.model_states import PARAM_BYTES, model_states_bytes
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters

FP32_BYTES = 4
#: Optimizer -> fp32 state tensors kept per parameter: Adam's momentum and
#: variance, SGD's momentum buffer, nothing for plain SGD.
OPTIMIZER_STATES: dict[str, int] = {"adam": 2, "adamw": 2, "sgd-momentum": 1, "sgd": 0}
#: Precision -> (bytes per weight, bytes of fp32 master copy per weight). Mixed
#: precision trains 16-bit weights and keeps an fp32 master; fp32 training keeps
#: the weights themselves in fp32 and needs no master.
PRECISIONS: dict[str, tuple[int, int]] = {
    "bf16-mixed": (PARAM_BYTES, FP32_BYTES),
    "fp16-mixed": (PARAM_BYTES, FP32_BYTES),
    "fp32": (FP32_BYTES, 0),
}


@dataclass(frozen=True)
class CheckpointBytes:
    """Bytes of one checkpoint, by part.

    Attributes:
        n_params: Psi, parameters of the model.
        weights: bytes of the weights the model runs with.
        optimizer: bytes of the fp32 master weights and optimizer states (0 for an
            inference checkpoint).
    """

    n_params: int
    weights: float
    optimizer: float

    @property
    def total(self) -> float:
        """Weights plus optimizer state, bytes."""
        return self.weights + self.optimizer


def optimizer_state_bytes(
    optimizer: str = "adam", precision: str = "bf16-mixed"
) -> int:
    """K: bytes per parameter of fp32 master weights and optimizer states.

    Args:
        optimizer: a key of :data:`OPTIMIZER_STATES`.
        precision: a key of :data:`PRECISIONS`.

    Returns:
        Master bytes plus 4 bytes per state tensor: 12 for mixed-precision Adam.

    Raises:
        ValueError: ``optimizer`` or ``precision`` is unknown.
    """
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(
            f"optimizer must be one of {list(OPTIMIZER_STATES)}, got {optimizer!r}"
        )
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision must be one of {list(PRECISIONS)}, got {precision!r}"
        )
    _, master = PRECISIONS[precision]
    return master + FP32_BYTES * OPTIMIZER_STATES[optimizer]


def _check_config(cfg: TransformerConfig) -> None:
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")


def training_checkpoint_bytes(
    cfg: TransformerConfig, optimizer: str = "adam", precision: str = "bf16-mixed"
) -> CheckpointBytes:
    """Bytes of a training checkpoint: weights, master weights, optimizer states.

    Args:
        cfg: the model; Psi from :func:`~aiinfra.models.params.count_parameters`.
        optimizer: a key of :data:`OPTIMIZER_STATES`.
        precision: a key of :data:`PRECISIONS`.

    Returns:
        The bytes by part; ``.total`` is 14 Psi for mixed-precision Adam.

    Raises:
        TypeError: ``cfg`` is not a :class:`TransformerConfig`.
        ValueError: ``optimizer`` or ``precision`` is unknown.
    """
    _check_config(cfg)
    k = optimizer_state_bytes(optimizer, precision)
    n_params = count_parameters(cfg).total
    # The memory calculator's model states, less the gradients nobody saves.
    states = model_states_bytes(n_params, PRECISIONS[precision][0], 0, k)
    return CheckpointBytes(n_params, states.params, states.optimizer)


def inference_checkpoint_bytes(
    cfg: TransformerConfig, weight_bytes: int = PARAM_BYTES
) -> CheckpointBytes:
    """Bytes of an inference checkpoint: the weights alone.

    Args:
        cfg: the model.
        weight_bytes: bytes per weight: 2 for bf16 (what the Hub ships), 1 for an
            8-bit format.

    Returns:
        The bytes by part (``optimizer`` is 0).

    Raises:
        TypeError: ``cfg`` is not a :class:`TransformerConfig`.
        ValueError: ``weight_bytes`` is not a positive integer.
    """
    _check_config(cfg)
    if not isinstance(weight_bytes, int) or weight_bytes < 1:
        raise ValueError(f"weight_bytes must be an int >= 1, got {weight_bytes!r}")
    n_params = count_parameters(cfg).total
    states = model_states_bytes(n_params, weight_bytes, 0, 0)
    return CheckpointBytes(n_params, states.params, states.optimizer)


def write_seconds(n_bytes: float, bandwidth: float) -> float:
    """Seconds to write ``n_bytes`` at an aggregate storage bandwidth.

    Args:
        n_bytes: bytes of the checkpoint, e.g. ``CheckpointBytes.total``.
        bandwidth: bytes per second that storage accepts from all writers
            together (e.g. ``100e9`` for 100 GB/s).

    Returns:
        ``n_bytes / bandwidth``, in seconds.

    Raises:
        ValueError: ``n_bytes`` is negative or ``bandwidth`` is not positive.
    """
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes!r}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth!r}")
    return n_bytes / bandwidth
