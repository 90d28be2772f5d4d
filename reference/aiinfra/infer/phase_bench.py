"""Prefill and decode: their cost on a GPU's roofline, and their speed on this CPU.

Prefill pushes the ``T`` tokens of a prompt through every weight matrix at once:
each matmul has ``T`` rows and does about ``T`` FLOPs per weight byte. A decode step
pushes one token for each of ``B`` sequences: ``B`` rows, and every sequence also
reads its own KV cache for ``H/G`` FLOPs per byte. The kernels of a step are counted
with :mod:`aiinfra.models.roofline` (compulsory bytes) and each is timed by its roof,
``max(FLOPs / F_max, bytes / W)`` (Williams et al. 2009): a model of a GPU, not a
measurement. :func:`run_phase_bench` measures the same two phases with this
package's :class:`~aiinfra.models.transformer.Transformer` and its KV cache, and the
machine's own roofs (a large matmul and a large read); its stamped result is the
kind ``phases`` of :mod:`aiinfra.results`. Notation: ``T`` prompt tokens,
``B`` sequences, ``L`` layers, ``h`` width, ``H`` and ``G`` query and KV heads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from aiinfra import checks, progress, results
from aiinfra.accelerators import Gpu
from aiinfra.infer.step_cost import fused_step, roof_time
from aiinfra.models.config import TransformerConfig
from aiinfra.models.roofline import Kernel, decode_attention, matmul, prefill_attention
from aiinfra.models.transformer import Transformer
from aiinfra.report import Table
from aiinfra.timing import best_seconds, cuda_wall_clock


def _check_dense(c: TransformerConfig) -> None:
    if c.is_mla or c.is_moe or c.mlp != "swiglu":
        raise ValueError("c must be a dense model with GQA/MHA/MQA and a SwiGLU MLP")


def _times(k: Kernel, n: int, name: str) -> Kernel:
    return Kernel(name, k.flops * n, k.bytes * n)


def _layer_matmuls(c: TransformerConfig, rows: int, bpe: int) -> list[Kernel]:
    """The seven weight matmuls of all ``L`` layers, ``rows`` tokens each."""
    h, HD, GD, f = c.d_model, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim, c.d_ff
    shapes = {"W_q": (h, HD), "W_k": (h, GD), "W_v": (h, GD), "W_o": (HD, h)}
    shapes |= {"W_gate": (h, f), "W_up": (h, f), "W_down": (f, h)}
    return [
        _times(matmul(rows, k, n, bpe), c.n_layers, w) for w, (k, n) in shapes.items()
    ]


def prefill_kernels(
    c: TransformerConfig, prompt_len: int, bytes_per_element: int = 2
) -> list[Kernel]:
    """One prompt of ``T`` tokens: all layers (FlashAttention), the last token's logits.

    Attention is counted without the causal mask's saving, as in the roofline page.

    Raises:
        ValueError: ``c`` is not a dense GQA model, or a size is not positive.
    """
    _check_dense(c)
    kernels = _layer_matmuls(c, prompt_len, bytes_per_element)
    head = prefill_attention(prompt_len, c.head_dim, True, bytes_per_element)
    kernels.append(_times(head, c.n_heads * c.n_layers, "attention"))
    kernels.append(matmul(1, c.d_model, c.vocab_size, bytes_per_element))  # logits
    return kernels


def decode_kernels(
    c: TransformerConfig, batch: int, context: int, bytes_per_element: int = 2
) -> list[Kernel]:
    """One decode step of ``B`` sequences of ``context`` cached tokens each.

    Raises:
        ValueError: ``c`` is not a dense GQA model, or a size is not positive.
    """
    _check_dense(c)
    kernels = _layer_matmuls(c, batch, bytes_per_element)
    attn = decode_attention(c, context, bytes_per_element=bytes_per_element)  # 1 layer
    kernels.append(_times(attn, batch * c.n_layers, "attention"))  # own cache each
    kernels.append(matmul(batch, c.d_model, c.vocab_size, bytes_per_element))
    return kernels


def total(kernels: list[Kernel], name: str = "step") -> Kernel:
    """The FLOPs and bytes of a whole step, for its intensity."""
    return Kernel(name, sum(k.flops for k in kernels), sum(k.bytes for k in kernels))


def step_time(kernels: list[Kernel], gpu: Gpu) -> float:
    """Seconds of a step, each kernel at its roof: ``sum max(F / F_max, Q / W)``.

    One kernel, :func:`~aiinfra.infer.step_cost.fused_step`, gives the whole-step
    roof of :class:`~aiinfra.infer.step_cost.RooflineStepCost` instead.
    """
    return sum(roof_time(k, gpu) for k in kernels)


@dataclass(frozen=True)
class PhaseBenchConfig:
    """The timed model (fp32, GQA) and the shapes of each phase.

    The defaults make ~200 MB of weights, more than the CPU's last-level cache, so a
    decode step has to read them from DRAM, as a GPU reads them from HBM.

    Raises:
        ValueError: a size is not a positive integer, or a tuple is empty.
    """

    d_model: int = 1024  # h
    n_layers: int = 4  # L
    n_heads: int = 16  # H
    n_kv_heads: int = 4  # G: four query heads per KV head, as Llama 3 8B
    d_ff: int = 2816  # (8/3) h rounded up to a multiple of 256, as in Llama
    vocab_size: int = 4096
    prompt_lens: tuple[int, ...] = (16, 64, 256)  # T of the timed prefills
    batches: tuple[int, ...] = (1, 4, 16, 64)  # B of the timed decode steps
    context: int = 128  # tokens cached before the timed decode steps
    decode_steps: int = 8
    repeats: int = 5
    threads: int = 1  # a shared machine: one thread
    matmul_size: int = 1024  # n of the n x n x n matmul that measures the FLOP roof
    read_mib: int = 256  # MiB summed to measure the read bandwidth

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, tuple):
                checks.int_list(name, value)
            else:
                checks.positive_int(name, value)

    def model_config(self) -> TransformerConfig:
        """The Transformer's shape, its position limit fitted to the longest run."""
        longest = max(*self.prompt_lens, self.context + self.decode_steps)
        shape = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff")
        return TransformerConfig(
            **{k: getattr(self, k) for k in shape}, max_seq_len=longest
        )


def _time_forward(
    model: Transformer,
    x: torch.Tensor,
    start: int,
    steps: int,
    repeats: int,
    clock: Callable[[], float],
) -> float:
    """Seconds per forward pass of ``x``, ``steps`` in a row from ``start`` cached."""
    caches = model.new_caches(x.shape[0], start + steps * x.shape[1])

    def rewind() -> None:
        for cache in caches:  # as if `start` tokens were cached: the values
            cache.length = start  # in the buffers do not change the time

    def run() -> None:
        for _ in range(steps):
            model(x, caches)  # (B, T, V)

    return best_seconds(run, repeats, rewind, clock) / steps


def run_phase_bench(
    cfg: PhaseBenchConfig, device: str | torch.device = "cpu", seed: int = 0
) -> dict[str, Any]:
    """Time prefill and decode, and the machine's roofs; returns the JSON body.

    Args:
        cfg: what to time.
        device: where (``"cpu"``; the code runs unchanged on ``"cuda"``).
        seed: of the weights and tokens.

    Returns:
        ``{"config", "roofs", "rows"}``: the matmul FLOP/s and read bytes/s, and one
        row per phase and size: seconds, tokens/s, FLOPs and bytes read (weights
        and, for decode, the KV cache).
    """
    c, S = cfg.model_config(), cfg.decode_steps
    g = torch.Generator(device).manual_seed(seed)
    clock = time.thread_time if torch.device(device).type == "cpu" else cuda_wall_clock
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)  # the weights' init
        model = Transformer(c).to(device).eval()
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    n, rows = cfg.matmul_size, []
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.no_grad():
            a, b = torch.randn(2, n, n, generator=g, device=device)  # (n, n) each
            big = torch.ones(cfg.read_mib * 2**18, device=device)  # fp32: MiB * 2^18
            matmul_s = best_seconds(lambda: a @ b, cfg.repeats, None, clock)
            read_s = best_seconds(big.sum, cfg.repeats, None, clock)
            roofs = {
                "flops": 2 * n**3 / matmul_s,
                "read_bytes_per_s": 4 * big.numel() / read_s,
            }
            mean_kv = cfg.context + (S + 1) / 2  # keys a decode step attends to, mean
            runs = [("prefill", T, (1, T), 0, 1, T * T) for T in cfg.prompt_lens]
            runs += [
                ("decode", B, (B, 1), cfg.context, S, B * mean_kv) for B in cfg.batches
            ]
            for phase, size, shape, start, steps, pairs in progress.track(
                runs, "prefill and decode shapes"
            ):  # size: T or B
                x = torch.randint(c.vocab_size, shape, generator=g, device=device)
                s = _time_forward(model, x, start, steps, cfg.repeats, clock)
                # pairs: (query, key) per layer, the masked ones of a prefill too
                # (the model scores T x T); a decode step reads its cache, fp32
                kv = 0 if phase == "prefill" else pairs
                step = fused_step(c, size, pairs, kv, 4, None, 4, 4)
                row = {"phase": phase, "size": size, "seconds": s, "flops": step.flops}
                rows.append(row | {"bytes": step.bytes, "tokens_per_s": size / s})
    finally:
        torch.set_num_threads(threads)
    config = asdict(cfg) | {"dtype": "float32", "weights": weights}
    return {"config": config, "roofs": roofs, "rows": rows}


def phase_bench_table(res: dict[str, Any]) -> Table:
    """Measured time, tokens/s, FLOP/s and bandwidth of each phase."""
    rows = [
        [r["phase"], r["size"], round(1e3 * r["seconds"], 1), round(r["tokens_per_s"])]
        + [round(r["flops"] / r["bytes"], 1), round(r["flops"] / r["seconds"] / 1e9, 1)]
        + [round(r["bytes"] / r["seconds"] / 1e9, 2)]
        for r in res["rows"]
    ]
    note = (
        "One prefill of as many tokens, or one decode step of as many sequences; "
        "fp32, one thread, the fastest repeat in the thread's CPU time. FLOPs from "
        "the model's shapes; bytes: the weights once and the KV cache read."
    )
    st, c = res["stamp"], res["config"]
    on, fields = results.run_on(st)
    stamp = (
        "h = {width}, L = {layers}, H = {heads}, G = {kv_heads}, {context} tokens "
        "cached; {repeats} repeats on " + on
    )
    fields |= {
        "width": c["d_model"],
        "layers": c["n_layers"],
        "heads": c["n_heads"],
        "kv_heads": c["n_kv_heads"],
        "context": c["context"],
        "repeats": c["repeats"],
    }
    columns = ["step", "tokens", "ms", "tokens/s", "FLOP / byte", "GFLOP/s", "GB/s"]
    return Table(columns, rows, note, stamp, fields=fields)
