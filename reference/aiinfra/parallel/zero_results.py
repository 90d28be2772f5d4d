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

import argparse
import json
import sys
from pathlib import Path

from aiinfra.comm.results import machine_stamp
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.zero_compare import WIDTHS, compare_losses
from aiinfra.report import Table

RESULTS_COMMAND = "aiinfra bench zero --out docs/_data/bench/zero-gloo.json"
# The paper's example (Fig. 1): Psi = 7.5 B parameters on N = 64 GPUs (8 nodes of 8).
# L: a hidden size of 4096 with GPT-2's 50,257-token embedding as the largest layer.
EXAMPLE = {
    "n_params": 7_500_000_000,
    "largest_layer_params": 50_257 * 4096,
    "num_gpus_per_node": 8,
    "num_nodes": 8,
}


def deepspeed_estimates(
    n_params: int, largest_layer_params: int, num_gpus_per_node: int, num_nodes: int
) -> dict[str, dict[str, int]]:
    """DeepSpeed's estimates without offload, bytes: ``{stage: {"gpu", "cpu"}}``."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs,
    )

    nodes = {"num_gpus_per_node": num_gpus_per_node, "num_nodes": num_nodes}
    cpu2, gpu2 = estimate_zero2_model_states_mem_needs(
        n_params, **nodes, cpu_offload=False
    )
    cpu3, gpu3, _ = estimate_zero3_model_states_mem_needs(
        n_params, largest_layer_params, **nodes, cpu_offload=False,
        cpu_offload_params=False, zero_init=True,
    )  # fmt: skip
    return {"2": {"gpu": gpu2, "cpu": cpu2}, "3": {"gpu": gpu3, "cpu": cpu3}}


def collect_zero_results(world_size: int = 2, n_steps: int = 6) -> dict:
    """Losses of every implementation and DeepSpeed's estimates, with a stamp."""
    import deepspeed

    stamp = machine_stamp(world_size, "gloo") | {"deepspeed": deepspeed.__version__}
    return {
        "stamp": stamp,
        "config": {"widths": list(WIDTHS), "n_steps": n_steps, "batch": 24},
        "losses": compare_losses(world_size, WIDTHS, n_steps),
        "estimates": {"model": EXAMPLE, "deepspeed": deepspeed_estimates(**EXAMPLE)},
    }


def load_zero_results(path: str | Path) -> dict:
    """Read a results file; a missing one names the command that writes it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results at {path}: run `{RESULTS_COMMAND}`")
    return json.loads(path.read_text())


def max_loss_gap(path: str | Path) -> float:
    """Largest ``|loss - one process's loss|`` over implementations and steps."""
    losses = load_zero_results(path)["losses"]
    truth = losses["one process"]
    gaps = [abs(a - b) for v in losses.values() for a, b in zip(v, truth, strict=True)]
    return max(gaps)


def loss_table(path: str | Path) -> Table:
    """First and last loss of each implementation and its largest gap to one process."""
    res = load_zero_results(path)
    truth = res["losses"]["one process"]
    rows = [
        [name, f"{v[0]:.6f}", f"{v[-1]:.6f}",
         max(abs(a - b) for a, b in zip(v, truth, strict=True))]
        for name, v in res["losses"].items()
    ]  # fmt: skip
    st = res["stamp"]
    note = (
        f"Loss of the whole batch (mean over {st['world_size']} gloo ranks), AdamW in "
        f"fp32, {res['config']['n_steps']} steps; torch {st['torch']}, DeepSpeed "
        f"{st['deepspeed']}; {st['date']}."
    )
    return Table(
        [
            "implementation",
            "loss, step 1",
            "loss, last step",
            "max |gap| to one process",
        ],
        rows,
        note,
    )


def estimator_table(path: str | Path) -> Table:
    """DeepSpeed's per-GPU estimate beside the paper's formula, GB (10^9 bytes)."""
    est = load_zero_results(path)["estimates"]
    model = est["model"]
    psi, big = model["n_params"], model["largest_layer_params"]
    n = model["num_gpus_per_node"] * model["num_nodes"]
    extra = {2: 4 * psi / n, 3: 2 * psi / n + 4 * big}  # see the module docstring
    rows = []
    for stage in (2, 3):
        paper = zero_model_states_bytes(psi, stage, n).total
        ds = est["deepspeed"][str(stage)]
        rows.append([
            stage, round(paper / 1e9, 3), round(ds["gpu"] / 1e9, 3),
            round((ds["gpu"] - paper) / 1e9, 3), round(extra[stage] / 1e9, 3),
            round(ds["cpu"] / 1e9, 1),
        ])  # fmt: skip
    return Table(
        ["stage", "paper, per GPU", "DeepSpeed, per GPU", "difference",
         "4 Psi/N (2) or 2 Psi/N + 4 L (3)", "DeepSpeed, CPU per node"],
        rows,
        note=f"GB = 10^9 bytes; Psi = {psi:,}, N = {n}, L = {big:,}; no offload.",
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench zero``."""
    parser.add_argument("--world-size", type=int, default=2, help="gloo ranks (2)")
    parser.add_argument("--steps", type=int, default=6, help="AdamW steps (6)")
    parser.add_argument("--out", type=Path, help="write the stamped results JSON here")
    parser.add_argument("--json", action="store_true", help="print JSON, not tables")


def run(args: argparse.Namespace) -> int:
    """Run ``aiinfra bench zero``; returns the exit status (2: bad flags)."""
    if args.world_size < 1 or 24 % args.world_size or args.steps < 1:
        print(
            "aiinfra bench zero: error: --world-size must divide the batch of 24 and "
            "--steps must be >= 1",
            file=sys.stderr,
        )
        return 2
    res = collect_zero_results(args.world_size, args.steps)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        for name, losses in res["losses"].items():
            print(f"{name:>20}  " + " ".join(f"{v:.6f}" for v in losses))
    return 0
