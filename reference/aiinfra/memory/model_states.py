"""Model states: the bytes of parameters, gradients and optimizer states.

Mixed-precision training with Adam keeps, for each of the Psi parameters, a 16-bit
parameter (2 bytes) and a 16-bit gradient (2 bytes) for the forward and backward
passes, and K = 12 bytes of optimizer state in fp32: the master copy of the
parameter, Adam's momentum and its variance (Rajbhandari et al. 2020, "ZeRO",
Sec. 3.1). That is (2 + 2 + K) Psi = 16 Psi bytes, before a single activation. ZeRO
(Sec. 5) partitions these states over the N_d data-parallel ranks: stage 1 the
optimizer states, stage 2 also the gradients, stage 3 also the parameters.

The 16 Psi is the paper's accounting. Frameworks keep gradients in fp32 to
accumulate micro-batches without rounding, and so count 18 Psi (Megatron's bf16
parameters with an fp32 gradient buffer) or 20 Psi (a 16-bit gradient plus an fp32
copy that lives with the optimizer: Megatron's fp16 row, DeepSpeed's estimator):
:data:`GRADIENT_LAYOUTS` names the three.
"""

from __future__ import annotations

from dataclasses import dataclass

PARAM_BYTES = 2  # fp16/bf16 parameter used by forward and backward
GRAD_BYTES = 2  # fp16/bf16 gradient
ADAM_STATE_BYTES = 12  # K: fp32 master parameter + momentum + variance
#: Gradient layout -> (bytes per gradient element, K). "bf16": the ZeRO paper's
#: 16-bit gradient (16 Psi in all). "fp32": the gradient kept and reduced in fp32, as
#: Megatron's bf16 training does (18 Psi). "bf16+fp32": a 16-bit gradient and an fp32
#: copy sharded with the optimizer states (K = 16; 20 Psi), as Megatron's fp16 row
#: and DeepSpeed's estimator count (Megatron Core, "Distributed Optimizer" table).
GRADIENT_LAYOUTS: dict[str, tuple[int, int]] = {
    "bf16": (GRAD_BYTES, ADAM_STATE_BYTES),
    "fp32": (4, ADAM_STATE_BYTES),
    "bf16+fp32": (GRAD_BYTES, ADAM_STATE_BYTES + 4),
}


@dataclass(frozen=True)
class ModelStateBytes:
    """Bytes of model states on one rank.

    Attributes:
        params: bytes of the parameters used by forward and backward.
        grads: bytes of their gradients.
        optimizer: bytes of optimizer states (master weights, momentum, variance).
    """

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        """The sum params + grads + optimizer, in bytes."""
        return self.params + self.grads + self.optimizer


def model_states_bytes(
    n_params: int,
    param_bytes: int = PARAM_BYTES,
    grad_bytes: int = GRAD_BYTES,
    optimizer_bytes: int = ADAM_STATE_BYTES,
) -> ModelStateBytes:
    """Bytes of model states without any partitioning.

    The defaults are mixed-precision Adam (2 + 2 + 12 bytes per parameter); plain fp32
    Adam is ``param_bytes=4, grad_bytes=4, optimizer_bytes=8`` (momentum, variance).

    Args:
        n_params: Psi, the number of parameters.
        param_bytes: bytes per parameter.
        grad_bytes: bytes per gradient element.
        optimizer_bytes: bytes of optimizer state per parameter.

    Returns:
        The bytes by part.

    Raises:
        ValueError: a count is negative.
    """
    for name, value in [
        ("n_params", n_params),
        ("param_bytes", param_bytes),
        ("grad_bytes", grad_bytes),
        ("optimizer_bytes", optimizer_bytes),
    ]:
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
    return ModelStateBytes(
        params=param_bytes * n_params,
        grads=grad_bytes * n_params,
        optimizer=optimizer_bytes * n_params,
    )


def gradient_layout(name: str) -> tuple[int, int]:
    """Bytes per gradient element and K of a :data:`GRADIENT_LAYOUTS` entry.

    Raises:
        ValueError: ``name`` is not a layout.
    """
    if name not in GRADIENT_LAYOUTS:
        raise ValueError(
            f"grad_dtype must be one of {list(GRADIENT_LAYOUTS)}, got {name!r}"
        )
    return GRADIENT_LAYOUTS[name]


def zero_model_states_bytes(
    n_params: int,
    stage: int,
    dp: int,
    k: int = ADAM_STATE_BYTES,
    grad_bytes: int = GRAD_BYTES,
) -> ModelStateBytes:
    """Per-rank bytes of model states under ZeRO (Rajbhandari et al., Sec. 5).

    ====== ======================= ==========================
    stage  partitioned             bytes per rank
    ====== ======================= ==========================
    0      nothing (DDP)           (2 + G + K) Psi
    1      optimizer states        (2 + G) Psi + K Psi / N_d
    2      + gradients             2 Psi + (G + K) Psi / N_d
    3      + parameters            (2 + G + K) Psi / N_d
    ====== ======================= ==========================

    G = ``grad_bytes``: 2 in the paper.

    Args:
        n_params: Psi, the number of parameters of the whole model.
        stage: ZeRO stage, 0 (no partitioning) to 3.
        dp: N_d, the number of data-parallel ranks that share the states.
        k: K, bytes of optimizer state per parameter (12 for mixed-precision Adam).
        grad_bytes: G, bytes per gradient element (2 in the paper, 4 for an fp32
            gradient buffer; see :data:`GRADIENT_LAYOUTS`).

    Returns:
        Bytes per rank by part; ``.total`` is the paper's formula. Partitioned parts
        are exact fractions (the paper's count; real code pads to a multiple of N_d).

    Raises:
        ValueError: ``stage`` is not 0-3, ``dp`` is not positive, or ``n_params``,
            ``k`` or ``grad_bytes`` is negative.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage}")
    if dp < 1:
        raise ValueError(f"dp (data-parallel ranks) must be >= 1, got {dp}")
    # region zero-partition
    full = model_states_bytes(n_params, PARAM_BYTES, grad_bytes, k)
    per_rank = ModelStateBytes(
        params=full.params / dp if stage >= 3 else full.params,
        grads=full.grads / dp if stage >= 2 else full.grads,
        optimizer=full.optimizer / dp if stage >= 1 else full.optimizer,
    )
    # endregion
    return per_rank
