"""What ``docs/training/planner.rst`` shows: the mesh, the planner's answers.

The real cases are Llama 3 8B on 8 H100s, Llama 3 70B on 64 and on 1,024 H100s
and Llama 3 405B on 16,384 H100s at 8,192-token sequences. The 405B batch is the
paper's, 16M tokens (2^24; Dubey et al. 2024, Table 4); the others are this book's
choice, stated in :data:`PLAN_CASES`. :data:`LLAMA3_TABLE4` copies Table 4's
16K-GPU row: the layout Meta ran, its TFLOP/s per GPU and its BF16 MFU.
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.plan import figures as plan_figures
from aiinfra.plan import gemm
from aiinfra.plan.cost import matmul_efficiency
from aiinfra.plan.job import INTER_NODE, Job, Layout, intra_node_link
from aiinfra.plan.mesh import MeshLayout
from aiinfra.plan.report import plan_table
from aiinfra.plan.search import Plan, plan, valid_layouts
from aiinfra.plan.source import load_model
from aiinfra.plan.stage_profile import stage_work
from aiinfra.report import Table

PLAN_GPU, PLAN_SEQ = "H100", 8192
# case -> (model, GPUs, global batch in tokens)
PLAN_CASES = {
    "8b": ("llama-3-8b", 8, 2**20),
    "70b-64": ("llama-3-70b", 64, 2**22),
    "70b-1024": ("llama-3-70b", 1024, 2**22),
    "405b": ("llama-3-405b", 16384, 2**24),
}
# Gradient layout per case: Llama 3 405B as the paper ran it (Dubey et al. 2024,
# Sec. 3.3.2, "Numerical stability": FP32 gradient accumulation over micro-batches
# and FP32 reduce-scatter across data-parallel workers); the others the default.
PLAN_GRAD_DTYPE = {"405b": "fp32"}
# Dubey et al. 2024, Table 4, second row: 16,384 GPUs, sequence 8,192, batch
# size per DP 16, 16M tokens per batch.
LLAMA3_TABLE4 = {
    "dp": 128,
    "tp": 8,
    "pp": 16,
    "cp": 1,
    "batch_per_dp": 16,  # sequences per DP rank; the table gives no micro-batch size
    "tflops": 400,
    "mfu": 41,
}
# Dubey et al. 2024, Fig. 5: 16 GPUs (two 8-GPU servers), every group of size 2.
PLAN_MESH_EXAMPLE = MeshLayout(dp=2, pp=2, cp=2, tp=2, gpus_per_node=8)
PLAN_EFFICIENCY = Job.__dataclass_fields__["efficiency"].default  # the assumption
PLAN_EXPOSED = Job.__dataclass_fields__["exposed"].default
PLAN_TABLE_CASE, PLAN_TABLE_TOP = "70b-64", 5  # the table of the command's output


def plan_nvlink_gbps() -> float:
    """The H100's NVLink per direction, GB/s (the planner's intra-node link)."""
    return 1 / intra_node_link(PLAN_GPU).beta / 1e9


def plan_nic_gbps() -> float:
    """One 400 Gb/s NIC per GPU, GB/s (the planner's inter-node link)."""
    return 1 / INTER_NODE.beta / 1e9


def plan_mesh_figure() -> Figure:
    """Llama 3's 16-GPU example, each dimension's groups in colour."""
    return plan_figures.mesh_figure(PLAN_MESH_EXAMPLE)


def plan_mesh_group(rank: int, dim: str) -> str:
    """``"0, 1"``: the ranks of ``rank``'s group of ``dim`` in the example."""
    return ", ".join(str(r) for r in PLAN_MESH_EXAMPLE.group_of(rank, dim))


@functools.cache
def _plan_case_job(case: str) -> tuple[str, Job]:
    """The model's name and the job of a case of :data:`PLAN_CASES`."""
    model, gpus, batch = PLAN_CASES[case]
    name, cfg = load_model(model)
    grad_dtype = PLAN_GRAD_DTYPE.get(case, "bf16")
    return name, Job(cfg, PLAN_GPU, gpus, batch, PLAN_SEQ, grad_dtype=grad_dtype)


@functools.cache
def _plan_case_plans(case: str) -> tuple[Plan, ...]:
    """Every feasible plan of a case, best first."""
    return tuple(plan(_plan_case_job(case)[1]))


def plan_case_gpus(case: str) -> int:
    """The GPUs of a case."""
    return PLAN_CASES[case][1]


def plan_case_tokens(case: str) -> int:
    """The global batch of a case, tokens."""
    return PLAN_CASES[case][2]


def plan_head_layers(case: str) -> float:
    """The output head's training FLOPs in layers' worth, a case's model."""
    job = _plan_case_job(case)[1]
    work, _ = stage_work(job, Layout(dp=1, tp=1, pp=1, cp=1, zero=0, micro_batch=1))
    return work[-1] - job.model.n_layers


def plan_hbm_gb() -> float:
    """The planner's GPU's HBM, GB (1e9 bytes): the memory limit."""
    return GPUS[PLAN_GPU].hbm_bytes / 1e9


def plan_case_valid(case: str) -> int:
    """How many layouts of a case are valid (before memory)."""
    return len(valid_layouts(_plan_case_job(case)[1]))


def plan_case_feasible(case: str) -> int:
    """How many of them fit in memory (with the least recomputation that fits)."""
    return len(_plan_case_plans(case))


def _plan_best(case: str) -> Plan:
    """The planner's first choice for a case."""
    return _plan_case_plans(case)[0]


def plan_best_layout(case: str) -> str:
    """``"dp 32 x tp 4 x pp 16 x cp 8"``: the first choice's sizes."""
    lay = _plan_best(case).layout
    return f"dp {lay.dp} x tp {lay.tp} x pp {lay.pp} x cp {lay.cp}"


def plan_best_mfu(case: str) -> float:
    """The first choice's estimated MFU, percent."""
    return 100 * _plan_best(case).time.mfu


def plan_best_memory_gb(case: str) -> float:
    """The first choice's memory per GPU, GB (1e9 bytes)."""
    return _plan_best(case).memory.total / 1e9


def plan_best_term(case: str, term: str) -> float:
    """One term of the first choice's step time, seconds (``"step"``: the sum)."""
    t = _plan_best(case).time
    return t.step if term == "step" else getattr(t, term)


def plan_best_size(case: str, dim: str) -> int:
    """One size of the first choice's layout (``"cp"``: its context-parallel ranks)."""
    return getattr(_plan_best(case).layout, dim)


def _is_table4(p: Plan) -> bool:
    lay = p.layout
    return (lay.dp, lay.tp, lay.pp, lay.cp) == tuple(
        LLAMA3_TABLE4[k] for k in ("dp", "tp", "pp", "cp")
    )


def table4_rank() -> int:
    """Where the best plan with Table 4's sizes ranks among the 405B plans."""
    return next(i for i, p in enumerate(_plan_case_plans("405b"), 1) if _is_table4(p))


def _table4_plan() -> Plan:
    """The planner's best plan with Table 4's sizes (ZeRO, b, v are its choice)."""
    return _plan_case_plans("405b")[table4_rank() - 1]


def table4_mfu() -> float:
    """The model's MFU for the published layout, percent."""
    return 100 * _table4_plan().time.mfu


def table4_memory_gb() -> float:
    """The published layout's memory per GPU in the model, GB (1e9 bytes)."""
    return _table4_plan().memory.total / 1e9


def table4_micro_batches() -> int:
    """Micro-batches k of the planner's best plan with Table 4's sizes."""
    return _table4_plan().layout.micro_batches(_plan_case_job("405b")[1])


def table4_micro_batch_size() -> int:
    """Sequences per micro-batch b the planner picks for Table 4's sizes."""
    return _table4_plan().layout.micro_batch


def table4_term(term: str) -> float:
    """One term of the published layout's estimated step, seconds."""
    t = _table4_plan().time
    return t.step if term == "step" else getattr(t, term)


def _row(case: str, source: str, p: Plan) -> list:
    job, lay, t = _plan_case_job(case)[1], p.layout, p.time
    tflops = t.model_flops / job.gpus / t.step / 1e12
    return [
        source,
        _plan_case_job(case)[0],
        job.gpus,
        f"{lay.dp} x {lay.tp} x {lay.pp} x {lay.cp}",
        lay.zero,
        lay.micro_batch,
        lay.v,
        lay.recompute,
        round(p.memory.total / 1e9, 1),
        round(tflops),
        round(100 * t.mfu, 1),
    ]


def plan_cases_table() -> Table:
    """Each case's first choice; for 405B, Table 4's layout next to it."""
    rows = [_row(case, "planner", _plan_best(case)) for case in PLAN_CASES]
    rows.append(_row("405b", "Table 4 layout, planner's estimate", _table4_plan()))
    rows.append(
        ["Llama 3 paper, Table 4", "llama-3-405b", 16384, "128 x 8 x 16 x 1"]
        + ["", "", "", "none", ""]
        + [LLAMA3_TABLE4["tflops"], LLAMA3_TABLE4["mfu"]]
    )
    columns = ["source", "model", "GPUs", "dp x tp x pp x cp", "ZeRO", "b", "v"]
    columns += ["recompute", "GB/GPU", "TFLOP/s", "MFU (%)"]
    note = (
        "Cost model, not a measurement, except the paper's row (Dubey et al. 2024, "
        "Table 4: measured, BF16 MFU). GB = 1e9 bytes of the busiest stage; "
        "TFLOP/s: model FLOPs per GPU per second. 405B rows: fp32 gradients, "
        "accumulated and reduce-scattered as the paper does (Sec. 3.3.2)."
    )
    cases = list(PLAN_CASES.values())
    stamp = "; ".join(
        f"{{m{i}}}: {{g{i}}} GPUs, {{b{i}}} tokens per step" for i in range(len(cases))
    )
    stamp += "; H100, T = {seq}, compute at {efficiency} of peak, {exposed} of DP "
    stamp += "traffic exposed"
    fields: dict[str, object] = {
        "seq": PLAN_SEQ,
        "efficiency": f"{PLAN_EFFICIENCY:.0%}",
        "exposed": f"{PLAN_EXPOSED:.0%}",
    }
    for i, (model, gpus, batch) in enumerate(cases):
        fields |= {f"m{i}": model, f"g{i}": gpus, f"b{i}": f"{batch:,}"}
    words = (0, columns.index("recompute"))
    return Table(columns, rows, note, stamp, words=words, fields=fields)


def plan_command_table() -> Table:
    """What ``aiinfra plan`` prints for 70B on 64 H100s: the top layouts."""
    name, job = _plan_case_job(PLAN_TABLE_CASE)
    return plan_table(
        list(_plan_case_plans(PLAN_TABLE_CASE)[:PLAN_TABLE_TOP]), job, name
    )


def _label(p: Plan) -> str:
    lay = p.layout
    return (
        f"dp {lay.dp} tp {lay.tp} pp {lay.pp} cp {lay.cp} "
        f"ZeRO-{lay.zero} b {lay.micro_batch} v {lay.v}"
    )


def plan_steps_figure(case: str = "405b", top: int = 5) -> Figure:
    """A case's best plans term by term; for 405B, Table 4's layout below them."""
    plans = list(_plan_case_plans(case)[:top])
    if case == "405b":
        plans.append(_table4_plan())
    return plan_figures.step_terms_figure(plans, [_label(p) for p in plans])


def plan_shared_compute(case: str = "405b", top: int = 5) -> float:
    """Seconds of compute every plan of :func:`plan_steps_figure` spends at least."""
    plans = list(_plan_case_plans(case)[:top])
    if case == "405b":
        plans.append(_table4_plan())
    return min(p.time.compute for p in plans)


def table4_published(field: str) -> float:
    """A number of the paper's Table 4 for 405B on 16K GPUs.

    ``field``: ``dp``, ``tp``, ``pp``, ``cp``, ``batch_per_dp`` (sequences per
    data-parallel rank), ``tflops`` (per GPU) or ``mfu`` (%).
    """
    return LLAMA3_TABLE4[field]


def table4_chunks() -> int:
    """The model chunks per rank v the planner picks for the published layout."""
    return _table4_plan().layout.v


# region gemm
#: The ranking job of the GEMM section: ``aiinfra plan --model llama-3-405b --gpu
#: h100 --gpus 16384 --global-batch 2M --seq 8192``, constant against by shape.
GEMM_JOB = ("llama-3-405b", 16384, 2**21)
GEMM_TOP = 5  # rows of the ranking table (one slide, in both languages)
GEMM_COMPARE_TOP = 16  # the rows of the command: how many of them changed
#: (n, k) of the figure's curves: Llama 3 405B's QKV, W_o and gate-and-up GEMMs
#: on one rank at tp = 8 (h = 16384, (128 + 2 x 8) x 128 / 8 = 2304 outputs,
#: 128 x 128 / 8 = 2048 inputs of W_o, 2 x 53248 / 8 = 13312).
GEMM_CURVES = ((2304, 16384), (16384, 2048), (13312, 16384))


def gemm_ceiling_pct(gpu: str = PLAN_GPU) -> float:
    """The fitted fraction of peak a full wave of full tiles reaches, percent."""
    return 100 * gemm.ceiling(gpu)


def gemm_mamf_tflops(gpu: str = PLAN_GPU) -> float:
    """The published best BF16 matmul of ``gpu``, TFLOP/s (Bekman's table)."""
    return gemm.MAMF[gpu][0] / 1e12


def gemm_mamf_shape(gpu: str = PLAN_GPU) -> str:
    """The shape of that measurement, ``"6144 x 17920 x 2816"`` (m x n x k)."""
    return " x ".join(str(s) for s in gemm.MAMF[gpu][1])


def gemm_tile() -> str:
    """The model's output tile, ``"128 x 256"``."""
    return " x ".join(str(s) for s in gemm.TILE)


def gemm_sms() -> int:
    """The H100's streaming multiprocessors: tiles per wave."""
    return GPUS[PLAN_GPU].sms


def gemm_tiles(m: int, n: int) -> int:
    """Output tiles of an m x n result (:data:`aiinfra.plan.gemm.TILE`)."""
    return gemm.waves(m, n, GPUS[PLAN_GPU].sms)[0]


def gemm_wave_count(m: int, n: int) -> int:
    """Waves those tiles take on the H100's SMs."""
    return gemm.waves(m, n, GPUS[PLAN_GPU].sms)[1]


def gemm_pct(m: int, n: int, k: int) -> float:
    """The modelled efficiency of an (m, n, k) GEMM on the H100, percent."""
    return 100 * gemm.gemm_efficiency(m, n, k, PLAN_GPU)


def gemm_figure() -> Figure:
    """Modelled efficiency against m for the GEMMs of :data:`GEMM_CURVES`."""
    ms = list(range(128, 8192 + 1, 32))
    curves = [
        (
            f"n = {n:,}, k = {k:,}",
            [gemm.gemm_efficiency(m, n, k, PLAN_GPU) for m in ms],
        )
        for n, k in GEMM_CURVES
    ]
    lines = [
        ("fitted ceiling", gemm.ceiling(PLAN_GPU)),
        ("the planner's constant", PLAN_EFFICIENCY),
    ]
    return plan_figures.gemm_efficiency_figure(curves, ms, lines)


def _stamped_gpu(name: str | None) -> str | None:
    """The :data:`~aiinfra.accelerators.GPUS` key a device name contains, or None."""
    found = [g for g in GPUS if name and g.lower() in name.lower()]
    return max(found, key=len) if found else None


def gemm_measured_table() -> Table | None:
    """The model beside a GPU's measured BF16 matmuls, or ``None`` (nothing shown).

    Shown where ``python tools/gpu.py run`` left a stamped roofline file
    (``roofline-cuda.json``) of a GPU the model knows: each BF16 matmul it timed,
    its measured and its modelled TFLOP/s.
    """
    res = results.load_optional("roofline", "cuda")
    gpu = None if res is None else _stamped_gpu(res["stamp"].get("gpu"))
    if gpu is None or gpu not in gemm.MAMF_BORROWED.keys() | gemm.MAMF.keys():
        return None
    rows = []
    for r in res["matmuls"]:
        if r["dtype"] != "bfloat16":
            continue
        m, n, k = r["m"], r["n"], r["k"]
        measured = 2 * m * n * k / r["seconds"]
        model = gemm.gemm_flops(m, n, k, gpu)
        rows.append(
            [
                f"{m} x {n} x {k}",
                round(measured / 1e12, 1),
                round(model / 1e12, 1),
                round(measured / model, 2),
            ]
        )
    on, fields = results.measured_on(res["stamp"])
    return Table(
        ["m x n x k", "measured (TFLOP/s)", "model (TFLOP/s)", "measured / model"],
        rows,
        note="BF16 torch.matmul, the fastest of the repeats, against the model of "
        "aiinfra.plan.gemm for the same GPU.",
        stamp=on,
        fields=fields,
        words=(),
    )


@functools.cache
def _gemm_plans(matmul: str) -> tuple[Plan, ...]:
    """The ranking job's feasible plans, best first, priced ``matmul``."""
    model, gpus, batch = GEMM_JOB
    _, cfg = load_model(model)
    return tuple(plan(Job(cfg, PLAN_GPU, gpus, batch, PLAN_SEQ, matmul=matmul)))


def _gemm_job() -> Job:
    model, gpus, batch = GEMM_JOB
    return Job(load_model(model)[1], PLAN_GPU, gpus, batch, PLAN_SEQ, matmul="shape")


def gemm_rank_table() -> Table:
    """The best layouts by shape, with their place and MFU under the constant."""
    constant = {p.layout: (i, p) for i, p in enumerate(_gemm_plans("constant"), 1)}
    rows = []
    for i, p in enumerate(_gemm_plans("shape")[:GEMM_TOP], 1):
        lay = p.layout
        j, q = constant[lay]
        rows.append(
            [
                i,
                j,
                f"{lay.dp} x {lay.tp} x {lay.pp} x {lay.cp}",
                f"{lay.zero} / {lay.micro_batch} / {lay.v}",
                lay.micro_batch * PLAN_SEQ // lay.cp,
                round(100 * matmul_efficiency(_gemm_job(), lay), 1),
                round(100 * q.time.mfu, 1),
                round(100 * p.time.mfu, 1),
            ]
        )
    columns = ["by shape", "constant", "dp x tp x pp x cp", "ZeRO / b / v"]
    columns += ["tokens per rank", "matmul efficiency (%)"]
    columns += ["MFU constant (%)", "MFU by shape (%)"]
    note = (
        "Cost model, not a measurement. Places: position among all feasible layouts "
        "under each pricing. Matmul efficiency: the step's matmul FLOPs over "
        "their modelled time at dense BF16 peak (linear layers by GEMM shape, "
        "the attention core at the constant)."
    )
    model, gpus, batch = GEMM_JOB
    stamp = "{model} on {gpus} H100, {batch} tokens per step, T = {seq}"
    fields = {"model": model, "gpus": f"{gpus:,}", "batch": f"{batch:,}"}
    return Table(
        columns, rows, note, stamp, words=(), fields=fields | {"seq": PLAN_SEQ}
    )


def gemm_best(matmul: str, field: str) -> object:
    """The ranking job's first choice: ``"layout"``, ``"mfu"`` (%) or ``"eff"``."""
    p = _gemm_plans(matmul)[0]
    lay = p.layout
    if field == "layout":
        return f"dp {lay.dp} x tp {lay.tp} x pp {lay.pp} x cp {lay.cp}"
    if field == "mfu":
        return 100 * p.time.mfu
    return 100 * matmul_efficiency(_gemm_job(), lay)


def gemm_job_tokens() -> int:
    """The ranking job's global batch, tokens."""
    return GEMM_JOB[2]


def gemm_top_changed() -> int:
    """Of the first :data:`GEMM_COMPARE_TOP` layouts by shape, how many are new."""
    top = GEMM_COMPARE_TOP
    old = {p.layout for p in _gemm_plans("constant")[:top]}
    return sum(p.layout not in old for p in _gemm_plans("shape")[:top])


def _gemm_table4(matmul: str) -> tuple[int, Plan]:
    """The best plan with Table 4's sizes in the ranking job, and its place."""
    plans = enumerate(_gemm_plans(matmul), 1)
    return next((i, p) for i, p in plans if _is_table4(p))


def gemm_table4(matmul: str, field: str) -> float:
    """Table 4's sizes in the ranking job: ``"rank"``, ``"k"`` or ``"mfu"`` (%)."""
    i, p = _gemm_table4(matmul)
    if field == "rank":
        return i
    if field == "k":
        return p.layout.micro_batches(_gemm_job())
    return 100 * p.time.mfu


def gemm_table4_eff() -> float:
    """Matmul efficiency of Table 4's layout (dp 128, tp 8, pp 16, b 1), percent."""
    sizes = [LLAMA3_TABLE4[k] for k in ("dp", "tp", "pp", "cp")]
    return 100 * matmul_efficiency(_gemm_job(), Layout(*sizes, zero=1, micro_batch=1))


# endregion
