"""What ``docs/inference/metrics.rst`` shows (CPU timings: ``aiinfra bench phases``)."""

from __future__ import annotations

from functools import cache

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer import phase_bench as pb
from aiinfra.infer.metrics import RequestRecord, ServingPoint, Slo, goodput, summarize
from aiinfra.infer.metrics import colocated_steady_state as steady_state
from aiinfra.models.flops import matmul_parameters
from aiinfra.models.kv_budget import kv_budget
from aiinfra.models.presets import preset
from aiinfra.models.roofline import Kernel
from aiinfra.report import Table

LLAMA_3_8B = "llama-3-8b"
# The timeline: (step, start ms, end ms, requests it emits a token for); a prefill
# emits its request's first token, a decode step one token for each running one.
ARRIVALS_MS = {"A": 0, "B": 45, "C": 85}
SCHEDULE = [
    ("prefill", 0, 30, "A"),
    ("decode", 30, 40, "A"),
    ("decode", 40, 50, "A"),
    ("prefill", 50, 80, "B"),
    ("decode", 80, 90, "AB"),
    ("prefill", 90, 120, "C"),
    ("decode", 120, 130, "ABC"),
    ("decode", 130, 140, "ABC"),
    ("decode", 140, 150, "BC"),
    ("decode", 150, 160, "C"),
]
EXAMPLE_SLO = Slo(ttft=0.040, tpot=0.020)  # 40 ms to the first token, 20 ms per token
ATTAINMENT = 0.9  # DistServe's example target: the share of requests within the SLO
SHORT_PROMPT = 128  # T of the shortest prefill of the roofline figure
ROOFLINE_PREFILLS = (SHORT_PROMPT, 512, 2048, 8192)  # T of its prefill points
ROOFLINE_BATCHES = (1, 4, 16, 64, 256, 1024)  # B of its decode points
CONTEXTS = (SHORT_CONTEXT, LONG_CONTEXT) = (1024, 8192)  # cached tokens per sequence
TABLE_PREFILL, TABLE_BATCHES, TABLE_CONTEXT = 2048, (1, 16, 64, 256), 2048
IN_TOKENS, OUT_TOKENS = 1024, 256  # the goodput model's requests
SLO = Slo(ttft=0.2, tpot=0.02)  # 200 ms to the first token, then 50 tokens/s
COLOURS = {"prefill": "tab:orange", "decode": "tab:blue"}


@cache
def _example_records() -> tuple[RequestRecord, ...]:
    """The three requests of the timeline, their tokens at the end of their steps."""
    times: dict[str, list[float]] = {r: [] for r in ARRIVALS_MS}
    for _, _, end, who in SCHEDULE:
        for r in who:
            times[r].append(end / 1e3)
    return tuple(RequestRecord(ARRIVALS_MS[r] / 1e3, times[r]) for r in ARRIVALS_MS)


def example(what: str, request: str = "") -> float:
    """A rate of the timeline (/s), a ``request``'s time or the SLO's bound (ms)."""
    records = _example_records()
    if request:
        return 1e3 * getattr(records[list(ARRIVALS_MS).index(request)], what)
    if what.startswith("slo_"):
        return 1e3 * getattr(EXAMPLE_SLO, what[4:])
    if what == "goodput":
        return goodput(records, EXAMPLE_SLO)
    return getattr(summarize(records), what)


def timeline_figure() -> Figure:
    """The server's steps and each request's tokens, its TTFT marked."""
    fig = Figure(figsize=(7.5, 2.6), layout="constrained")
    ax = fig.add_subplot()
    for phase, start, end, _ in SCHEDULE:  # the GPU's row at the bottom
        label = phase if start in (0, 30) else None  # the first of each kind
        ax.barh(-1, end - start, 0.6, start, color=COLOURS[phase], ec="w", label=label)
    for y, r in enumerate(_example_records()):
        times, first = [1e3 * t for t in r.token_times], y == 0
        ax.plot([1e3 * r.arrival, times[0]], [y, y], "r-", lw=4, label="TTFT" * first)
        ax.plot(times, [y] * len(times), "ko-", ms=4, label="tokens" * first)
    ax.set_yticks(range(-1, len(ARRIVALS_MS)), ["GPU", *ARRIVALS_MS])
    ax.set_xlabel("time (ms)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


# Prefill and decode on the roofline (a model of the GPUs of the datasheet table)


def ridge(gpu: str) -> float:
    """Ridge point of a GPU, FLOP per byte (BF16 peak over HBM bandwidth)."""
    return GPUS[gpu].ridge


def _step(phase: str, size: int, context: int = TABLE_CONTEXT) -> list[Kernel]:
    """Kernels of Llama 3 8B's prefill of ``T = size`` or decode step of ``B``."""
    if phase == "prefill":
        return pb.prefill_kernels(preset(LLAMA_3_8B), size)
    return pb.decode_kernels(preset(LLAMA_3_8B), size, context)


def intensity(phase: str, size: int, context: int = TABLE_CONTEXT) -> float:
    """FLOP per byte of that step."""
    return pb.total(_step(phase, size, context)).intensity


def _phase_ms(
    phase: str, size: int, gpu: str = "H100", context: int = TABLE_CONTEXT
) -> float:
    """Model time of that step on ``gpu``, ms."""
    return 1e3 * pb.step_time(_step(phase, size, context), GPUS[gpu])


def _tokens_per_s(phase: str, size: int, gpu: str = "H100") -> float:
    """Tokens per second of that step: ``T`` or ``B`` tokens per step time."""
    return size / (_phase_ms(phase, size, gpu) / 1e3)


def decode_gpu_speedup(gpu: str) -> float:
    """One sequence's decode tokens/s on ``gpu`` over the H100's."""
    return _tokens_per_s("decode", 1, gpu) / _tokens_per_s("decode", 1)


def prefill_over_decode(gpu: str = "H100") -> float:
    """Tokens/s of the table's prefill over one sequence's decode on ``gpu``."""
    prefill = _tokens_per_s("prefill", TABLE_PREFILL, gpu)
    return prefill / _tokens_per_s("decode", 1, gpu)


def decode_ridge_batch_weights(gpu: str = "H100") -> int:
    """Smallest batch at the ridge counting the weights' bytes alone.

    ``2 Psi B`` FLOPs over ``2 Psi`` bf16 bytes: ``B`` FLOPs per byte.
    """
    psi = matmul_parameters(preset(LLAMA_3_8B))
    b = 1
    while 2 * psi * b / (2 * psi) < GPUS[gpu].ridge:
        b += 1
    return b


def decode_ridge_batch(gpu: str = "H100") -> int:
    """Smallest batch whose decode step reaches the ridge, one token cached each.

    Per kernel: each matmul's weights and its activations read and written.
    """
    b = 1
    while intensity("decode", b, 1) < GPUS[gpu].ridge:
        b += 1
    return b


def decode_intensity_limit(context: int = CONTEXTS[0]) -> float:
    """FLOP per byte a decode step approaches as ``B`` grows (each its own cache)."""
    return intensity("decode", 1 << 20, context)


def phase_table() -> Table:
    """Intensity, step time and tokens/s of prefill and decode on the three GPUs."""
    steps = [("prefill", TABLE_PREFILL)] + [("decode", b) for b in TABLE_BATCHES]
    rows = [
        [p, n, round(intensity(p, n)), round(_phase_ms(p, n), 2)]
        + [round(_tokens_per_s(p, n, g)) for g in GPUS]
        for p, n in steps
    ]
    note = (
        "Llama 3 8B, bf16: one prompt of as many tokens, or one token for each of as "
        "many sequences; each kernel at min(peak, intensity x bandwidth) (a model)."
    )
    columns = ["step", "tokens", "FLOP / byte", "H100 ms"]
    columns += [f"{g} tokens/s" for g in GPUS]
    stamp, fields = "decode context = {context} tokens", {"context": TABLE_CONTEXT}
    return Table(columns, rows, note, stamp, fields=fields)


def _roofline_axes(ax: Axes, ylabel: str) -> None:
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))


def phase_roofline_figure() -> Figure:
    """The three rooflines with prefill points and decode paths on the H100's."""
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    xs = [2.0**e for e in range(-1, 15)]
    for gpu, style in zip(GPUS.values(), ("-", "--", ":"), strict=True):
        ys = [gpu.attainable(x) / 1e12 for x in xs]
        ax.loglog(xs, ys, style, color="black", linewidth=1.2, label=gpu.name)
    h100 = GPUS["H100"].attainable
    pre = [intensity("prefill", t) for t in ROOFLINE_PREFILLS]
    ax.loglog(pre, [h100(i) / 1e12 for i in pre], "s", color=COLOURS["prefill"])
    ax.lines[-1].set_label("prefill")
    for context, label in zip(CONTEXTS, ("short", "long"), strict=True):
        dec = [intensity("decode", b, context) for b in ROOFLINE_BATCHES]
        style = "o-" if label == "short" else "^--"
        ax.loglog(dec, [h100(i) / 1e12 for i in dec], style, color=COLOURS["decode"])
        ax.lines[-1].set_label(f"decode, {label} context")
    _roofline_axes(ax, "attainable TFLOP/s (BF16)")
    return fig


# Goodput under a latency target (a model of one H100 serving Llama 3 8B)


def slo_ms(which: str) -> float:
    """The goodput model's ``ttft`` or ``tpot`` bound, ms."""
    return 1e3 * getattr(SLO, which)


def max_batch() -> int:
    """Sequences of ``IN_TOKENS + OUT_TOKENS`` tokens whose KV cache fits one H100."""
    tokens = kv_budget(preset(LLAMA_3_8B), GPUS["H100"]).tokens
    return tokens // (IN_TOKENS + OUT_TOKENS)


def goodput_ms(phase: str) -> float:
    """The model's prefill of one request, or a decode step at batch 1, ms."""
    return _phase_ms("prefill", IN_TOKENS) if phase == "prefill" else 1e3 * _decode_s(1)


@cache
def _decode_s(batch: int) -> float:
    return _phase_ms("decode", batch, "H100", IN_TOKENS + OUT_TOKENS // 2) / 1e3


def _serving_points() -> tuple[ServingPoint, ...]:
    t_p = _phase_ms("prefill", IN_TOKENS) / 1e3
    return tuple(
        steady_state(b, OUT_TOKENS, t_p, _decode_s(b))
        for b in sorted({*range(1, max_batch(), 4), max_batch()})
    )


def best(by: str, what: str) -> float:
    """A value (``tpot_ms``, ``goodput``, ...) at the highest ``by`` of the model."""
    key = {"throughput": lambda p: p.throughput, "goodput": lambda p: p.goodput(SLO)}
    p = max(_serving_points(), key=key[by])
    values = {"goodput": p.goodput(SLO), "tpot_ms": 1e3 * p.tpot}
    return values[what] if what in values else getattr(p, what)


def stall_free_batch() -> int:
    """Largest batch whose decode steps alone stay within the TPOT bound."""
    return max(b for b in range(1, max_batch() + 1) if _decode_s(b) <= SLO.tpot)


def goodput_figure() -> Figure:
    """Requests/s and goodput against batch size; TPOT against its bound."""
    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    rate, tpot = fig.subplots(1, 2)
    pts = _serving_points()
    bs = [p.batch for p in pts]
    rate.plot(bs, [p.request_rate for p in pts], color="black", label="requests/s")
    goodputs = [p.goodput(SLO) for p in pts]
    rate.plot(bs, goodputs, color="tab:green", linewidth=2.5, label="goodput")
    rate.set_ylabel("requests / s")
    tpot.plot(bs, [1e3 * p.tpot for p in pts], color="black", label="with prefills")
    tpot.plot(bs, [1e3 * _decode_s(b) for b in bs], "--", label="decode steps only")
    tpot.axhline(1e3 * SLO.tpot, color="tab:red", linewidth=1, label="TPOT bound")
    tpot.set_ylabel("TPOT (ms)")
    for ax in (rate, tpot):
        ax.axvline(max_batch(), color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("batch size")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="upper left")
    return fig


def cpu(what: str) -> float:
    """A value of the CPU measurement (the keys below)."""
    res = results.load("phases", "cpu")
    roofs, c = res["roofs"], res["config"]
    rows = {(r["phase"], r["size"]): r for r in res["rows"]}
    T, B = max(c["prompt_lens"]), max(c["batches"])
    tps = {k: r["tokens_per_s"] for k, r in rows.items()}
    flops = {k: r["flops"] / r["seconds"] / 1e9 for k, r in rows.items()}
    ridge = roofs["flops"] / roofs["read_bytes_per_s"]
    return {
        "gflops": roofs["flops"] / 1e9,  # the matmul roof
        "gbs": roofs["read_bytes_per_s"] / 1e9,  # the read roof
        "ridge": ridge,
        "ridge_batch": 2 * ridge,  # fp32 decode: 2B FLOPs per 4-byte weight
        "weights_mb": 4 * c["weights"] / 1e6,
        "longest_prefill": T,
        "largest_batch": B,
        "prefill_gflops": flops["prefill", T],
        "decode_gflops": flops["decode", 1],
        "decode_gbs": rows["decode", 1]["bytes"] / rows["decode", 1]["seconds"] / 1e9,
        "prefill_over_decode": tps["prefill", T] / tps["decode", 1],
        "decode_gain": tps["decode", B] / tps["decode", 1],
        "four_over_one": rows["decode", 4]["seconds"] / rows["decode", 1]["seconds"],
    }[what]


def cpu_table() -> Table:
    """Measured time, tokens/s, FLOP/s and bandwidth of each phase on the CPU."""
    return pb.phase_bench_table(results.load("phases", "cpu"))


def cpu_roofline_figure() -> Figure:
    """The CPU's measured roofs and the measured steps on them."""
    res = results.load("phases", "cpu")
    peak, bw = cpu("gflops"), cpu("gbs")
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.add_subplot()
    xs = sorted([2.0**e for e in range(-3, 10)] + [peak / bw])  # the ridge too
    ax.loglog(xs, [min(peak, x * bw) for x in xs], color="black", label="CPU roofs")
    for phase, marker in (("prefill", "s-"), ("decode", "o-")):
        rows = [r for r in res["rows"] if r["phase"] == phase]
        xs = [r["flops"] / r["bytes"] for r in rows]
        ys = [r["flops"] / r["seconds"] / 1e9 for r in rows]
        ax.loglog(xs, ys, marker, color=COLOURS[phase], label=phase)
    _roofline_axes(ax, "GFLOP/s (fp32)")
    return fig
