"""The ZeRO comparison's results file: loss curves and DeepSpeed's memory estimates.

The book is built without DeepSpeed, so what needs it is measured once by
``aiinfra bench zero`` (run by ``nox -s bench``) and committed; the book's tables read
the file. DeepSpeed's estimators ``estimate_zero2_model_states_mem_needs_all_live``
and ``estimate_zero3_model_states_mem_needs_all_live`` take a model, *print* a table
(in GiB, labelled GB) and return ``None``; they call
``estimate_zero{2,3}_model_states_mem_needs``, which return bytes, and those are what
we store. Without offload their per-GPU formulas are 2 Psi + 18 Psi / N (stage 2) and
4 L + 18 Psi / N (stage 3, L the parameters of the largest layer), against the
paper's 2 Psi + 14 Psi / N and 16 Psi / N (Rajbhandari et al. 2020, Fig. 1): the 18
bytes add a 4-byte fp32 gradient to the paper's 2 + K = 14. The per-node CPU figure
is the fp32 model loaded by every process times a buffer factor of 1.5.
"""

from __future__ import annotations

from typing import Any

from aiinfra import results
from aiinfra.clikit import require
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.zero.compare import WIDTHS, compare_losses
from aiinfra.parallel.zero.memory import measure_zero
from aiinfra.report import Table

MEMORY_RANKS = 4  # the memory table's data-parallel ranks
# The paper's example (Fig. 1): Psi = 7.5 B parameters on N = 64 GPUs (8 nodes of 8).
# L: a hidden size of 4096 with GPT-2's 50,257-token embedding as the largest layer.
EXAMPLE = {
    "n_params": 7_500_000_000,
    "largest_layer_params": 50_257 * 4096,
    "num_gpus_per_node": 8,
    "num_nodes": 8,
}
BATCH = 24  # global batch of the loss comparison; world sizes must divide it


def deepspeed_estimates(
    n_params: int, largest_layer_params: int, num_gpus_per_node: int, num_nodes: int
) -> dict[str, dict[str, int]]:
    """DeepSpeed's estimates without offload, bytes: ``{stage: {"gpu", "cpu"}}``.

    Raises:
        MissingDependency: DeepSpeed is not installed.
    """
    require("deepspeed", "parallel")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs,
    )

    nodes = {"num_gpus_per_node": num_gpus_per_node, "num_nodes": num_nodes}
    cpu2, gpu2 = estimate_zero2_model_states_mem_needs(
        n_params, **nodes, cpu_offload=False
    )
    cpu3, gpu3, _ = estimate_zero3_model_states_mem_needs(
        n_params,
        largest_layer_params,
        **nodes,
        cpu_offload=False,
        cpu_offload_params=False,
        zero_init=True,
    )
    return {"2": {"gpu": gpu2, "cpu": cpu2}, "3": {"gpu": gpu3, "cpu": cpu3}}


def collect_zero_results(world_size: int = 2, n_steps: int = 6) -> dict[str, Any]:
    """Losses of every implementation and DeepSpeed's estimates (a results body).

    Raises:
        ValueError: ``world_size`` does not divide the batch, or ``n_steps`` < 1.
        MissingDependency: DeepSpeed is not installed.
    """
    if world_size < 1 or BATCH % world_size:
        raise ValueError(
            f"world_size must divide the batch of {BATCH}, got {world_size}"
        )
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    require("deepspeed", "parallel")
    return {
        "config": {"widths": list(WIDTHS), "n_steps": n_steps, "batch": BATCH},
        "losses": compare_losses(world_size, WIDTHS, n_steps),
        "estimates": {"model": EXAMPLE, "deepspeed": deepspeed_estimates(**EXAMPLE)},
        # Bytes each stage holds on rank 0 of 4 (zero.rst's table): measured here, so
        # the book's build spawns no ranks.
        "memory": measure_zero(MEMORY_RANKS),
    }


def max_loss_gap() -> float:
    """Largest ``|loss - one process's loss|`` over implementations and steps."""
    losses = results.load("zero")["losses"]
    truth = losses["one process"]
    gaps = [abs(a - b) for v in losses.values() for a, b in zip(v, truth, strict=True)]
    return max(gaps)


def loss_table() -> Table:
    """First and last loss of each implementation and its largest gap to one process."""
    res = results.load("zero")
    truth = res["losses"]["one process"]
    rows = [
        [
            name,
            f"{v[0]:.6f}",
            f"{v[-1]:.6f}",
            max(abs(a - b) for a, b in zip(v, truth, strict=True)),
        ]
        for name, v in res["losses"].items()
    ]
    st = res["stamp"]
    note = "Loss of the whole batch (the mean over the ranks), AdamW in fp32."
    stamp = "{ranks} gloo ranks, {steps} steps; torch {torch}, DeepSpeed {ds}; {date}"
    fields = {
        "ranks": st["world_size"],
        "steps": res["config"]["n_steps"],
        "torch": st["torch"],
        "ds": st["deepspeed"],
        "date": str(st["date"])[:10],
    }
    columns = [
        "implementation",
        "loss, step 1",
        "loss, last step",
        "max |gap| to one process",
    ]
    return Table(columns, rows, note, stamp, fields=fields)


def estimator_table() -> Table:
    """DeepSpeed's per-GPU estimate beside the paper's formula, GB (10^9 bytes)."""
    est = results.load("zero")["estimates"]
    model = est["model"]
    psi, big = model["n_params"], model["largest_layer_params"]
    n = model["num_gpus_per_node"] * model["num_nodes"]
    extra = {2: 4 * psi / n, 3: 2 * psi / n + 4 * big}  # see the module docstring
    rows = []
    for stage in (2, 3):
        paper = zero_model_states_bytes(psi, stage, n).total
        ds = est["deepspeed"][str(stage)]
        gb = [paper, ds["gpu"], ds["gpu"] - paper, extra[stage]]
        rows.append(
            [stage, *(round(x / 1e9, 3) for x in gb), round(ds["cpu"] / 1e9, 1)]
        )
    columns = [
        "stage",
        "paper, per GPU",
        "DeepSpeed, per GPU",
        "difference",
        "4 Psi/N (2) or 2 Psi/N + 4 L (3)",
        "DeepSpeed, CPU per node",
    ]
    note = "GB = 10^9 bytes; no offload."
    stamp = f"Psi = {psi:,}, N = {n}, L = {big:,}"
    return Table(columns, rows, note, stamp)
