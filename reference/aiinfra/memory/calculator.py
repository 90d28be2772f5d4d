"""Where the memory goes: model states and activations of one training rank.

The per-rank bytes of training a model with mixed-precision Adam are the sum of two
parts. Model states grow with the parameters: (2 + 2 + K) Psi bytes, divided by the
tensor-parallel ranks t and, for the parts ZeRO partitions, by the data-parallel
ranks N_d (:mod:`aiinfra.memory.model_states`). Activations grow with the tokens in
flight: L layers of the bytes one layer saves for backward at sequence length s and
micro-batch b (:mod:`aiinfra.memory.layer_terms`: Korthikanti et al.'s count, read
for the layer the config describes). The model is a
:class:`~aiinfra.models.config.TransformerConfig` (a preset of
:mod:`aiinfra.models.presets` or any ``config.json``) read in the paper's notation:
h = ``d_model``, L = ``n_layers``, a = ``n_heads``, and Psi from
:func:`~aiinfra.models.params.count_parameters`. The activations are those of the
config's own layer: its K/V heads, its MLP (GELU or SwiGLU) and width ``d_ff``,
dropout for the GPT family; with ``attention="materialised"`` in eager kernels (the
paper's GPT layer gives its Table 2), with ``"flash"`` in fused ones
(FlashAttention, Megatron's fused SwiGLU, no dropout). Multi-head latent attention
and experts are counted as the package's own layers save them, dense layers before
``first_dense_layers`` apart. Expert parallelism is not modelled: every rank holds
all experts' weights (Psi counts them all), and the routed activations are each
token's K assignments, the average an EP rank holds under balanced routing. The
output layer and the loss (the fp32 logits, V per
token) are counted apart, and so is what recomputation costs: the FLOPs of its
second forward (:mod:`aiinfra.memory.recompute_cost`); ``grad_dtype`` chooses 16,
18 or 20 bytes of model states per parameter. Not counted: the embedding
activations, temporary buffers, fragmentation and the framework's own workspace.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.memory.activations import output_layer_bytes
from aiinfra.memory.layer_terms import model_activation_bytes
from aiinfra.memory.model_states import gradient_layout, zero_model_states_bytes
from aiinfra.memory.recompute_cost import recompute_overhead
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.report import Table

GiB = 2**30  # binary: what nvidia-smi and PyTorch report
GB = 10**9  # decimal: what GPU datasheets print ("H100 80 GB")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes on one rank, by part.

    Attributes:
        n_params: Psi, parameters of the whole model.
        params, grads, optimizer: model states per rank.
        activations: bytes of activations per rank, all layers.
        logits: bytes the output layer and the loss keep (fp32 logits).
        grad_dtype: the gradient layout of the model states.
        recompute_flops: the FLOPs recomputation adds, a fraction of the step's
            model FLOPs (:mod:`aiinfra.memory.recompute_cost`).
    """

    n_params: int
    params: float
    grads: float
    optimizer: float
    activations: float
    logits: float = 0.0
    grad_dtype: str = "bf16"
    recompute_flops: float = 0.0

    @property
    def total(self) -> float:
        """Model states plus activations, bytes per rank."""
        states = self.params + self.grads + self.optimizer
        return states + self.activations + self.logits


def estimate_memory(
    cfg: TransformerConfig,
    seq: int = 4096,
    micro_batch: int = 1,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    zero: int = 0,
    dp: int = 1,
    attention: str = "materialised",
    grad_dtype: str = "bf16",
) -> MemoryEstimate:
    """Estimate the training memory of one rank.

    Args:
        cfg: the model: h = ``d_model``, L = ``n_layers``, a = ``n_heads``, its
            K/V heads or MLA latents, MLP and ``d_ff`` or experts.
        seq: s, tokens per sequence.
        micro_batch: b, sequences per micro-batch.
        tp: t, tensor-parallel ranks; must divide ``n_heads`` and ``n_kv_heads``.
        sp: sequence parallelism (needs ``tp`` to divide ``seq``).
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        zero: ZeRO stage 0-3 over the ``dp`` data-parallel ranks.
        dp: N_d, data-parallel ranks.
        attention: ``"materialised"`` (the paper's softmax and dropout) or
            ``"flash"`` (a fused kernel, no dropout).
        grad_dtype: a :data:`~aiinfra.memory.model_states.GRADIENT_LAYOUTS` key:
            ``"bf16"`` (16 bytes per parameter), ``"fp32"`` (18), ``"bf16+fp32"`` (20).

    Returns:
        Bytes per rank by part.

    Raises:
        TypeError: ``cfg`` is not a :class:`TransformerConfig`.
        ValueError: a size is not positive, ``tp`` does not divide the heads (or
            the experts' widths, or the sequence with ``sp``), or ``zero``,
            ``recompute``, ``attention`` or ``grad_dtype`` is unknown.
    """
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
    for name, value in [("seq", seq), ("micro_batch", micro_batch), ("tp", tp)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if cfg.n_kv_heads % tp or cfg.n_heads % tp:
        raise ValueError(
            f"tp = {tp} must divide n_heads = {cfg.n_heads} and "
            f"n_kv_heads = {cfg.n_kv_heads} (heads are split across TP ranks)"
        )
    grad_bytes, k = gradient_layout(grad_dtype)
    activations = model_activation_bytes(
        cfg, seq, micro_batch, tp, sp, recompute, attention
    )
    logits = output_layer_bytes(seq, micro_batch, cfg.d_model, cfg.vocab_size, tp)
    n_params = count_parameters(cfg).total
    # Tensor parallelism splits the weights t ways (norms, replicated, are ignored).
    states = zero_model_states_bytes(n_params // tp, zero, dp, k, grad_bytes)
    return MemoryEstimate(
        n_params=n_params,
        params=states.params,
        grads=states.grads,
        optimizer=states.optimizer,
        activations=activations,
        logits=logits,
        grad_dtype=grad_dtype,
        recompute_flops=recompute_overhead(cfg, seq, recompute),
    )


def memory_table(est: MemoryEstimate, title: str = "") -> Table:
    """The estimate as a table in bytes, GiB (2^30) and GB (10^9).

    Args:
        est: an estimate from :func:`estimate_memory`.
        title: a line for the note (model and settings).

    Returns:
        One row per part and a total row.
    """
    fp32_copy = " + fp32 gradient" if est.grad_dtype == "bf16+fp32" else ""
    grads = "fp32" if est.grad_dtype == "fp32" else "bf16"
    parts = [
        ("parameters (bf16)", est.params),
        (f"gradients ({grads})", est.grads),
        (f"optimizer: fp32 master + Adam m, v{fp32_copy}", est.optimizer),
        ("activations (layers)", est.activations),
        ("logits + cross-entropy (fp32)", est.logits),
        ("total", est.total),
    ]
    rows = [[name, int(b), round(b / GiB, 2), round(b / GB, 2)] for name, b in parts]
    note = "Bytes per GPU; GiB = 2^30 bytes, GB = 10^9 bytes."
    stamp = ("{title}; " if title else "") + "Psi = {psi} parameters"
    fields = {"psi": f"{est.n_params:,}", **({"title": title} if title else {})}
    if est.recompute_flops:
        stamp += "; recomputation adds {extra} to the step's FLOPs"
        fields["extra"] = f"{est.recompute_flops:.1%}"

    return Table(
        columns=["part", "bytes", "GiB", "GB"],
        rows=rows,
        note=note,
        stamp=stamp,
        fields=fields,
    )


def memory_report(
    cfg: TransformerConfig, name: str = "model", **settings: int | bool | str
) -> Table:
    """Estimate and tabulate in one call: what ``aiinfra memory`` prints.

    Args:
        cfg: the model.
        name: the model's label in the note (a preset name, a file name).
        **settings: keyword arguments of :func:`estimate_memory` (``seq``,
            ``micro_batch``, ``tp``, ``sp``, ``recompute``, ``zero``, ``dp``,
            ``attention``, ``grad_dtype``).

    Returns:
        :func:`memory_table` of the estimate, its note naming model and settings.

    Raises:
        ValueError: as :func:`estimate_memory`.
    """
    est = estimate_memory(cfg, **settings)
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    return memory_table(est, f"{name}: {shown}" if shown else name)
