r"""The models chapter's commands: ``bench attention``, ``bench moe`` and ``list``.

``aiinfra bench attention`` times standard, tiled (PyTorch), Triton and SDPA
attention over sequence lengths (:mod:`aiinfra.models.flash.bench`)::

    aiinfra bench attention --device cuda --causal --head-dim 128 \
        --passes forward,forward+backward --impl triton sdpa --out attention.json

``aiinfra bench hf-checkpoints`` saves a tiny ``transformers`` model of each family,
loads it with ``Transformer.from_pretrained`` and compares logits and greedy tokens
(:mod:`aiinfra.models.hf.checkpoint_check`).

``aiinfra bench moe`` times the token loop, the masked per-expert loop and the
grouped expert computation of a MoE layer (:mod:`aiinfra.models.moe.bench`).
Both print their tables; ``--stamp`` stores the result as the book's data,
``--out`` elsewhere.

``aiinfra list`` prints the names every command accepts: the models of
:data:`aiinfra.models.presets.MODEL_NAMES` and the GPUs of
:data:`aiinfra.accelerators.GPUS` (any case, everywhere).
"""

from __future__ import annotations

import argparse

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    names,
    save,
    show,
)


def add_bench_attention(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench attention`` (defaults depend on the device)."""
    from aiinfra.models.flash import bench

    add_config_flags(
        parser,
        bench.AttentionBenchConfig,
        flags={"impls": "impl"},
        parse={"passes": names(bench.PASSES)},
        choices={
            "device": ("auto", "cpu", "cuda"),
            "dtype": sorted(bench.DTYPES),
            "impls": bench.IMPLEMENTATIONS,
        },
        helps={
            "impls": "implementations (default: all that run on the device)",
            "seq_lens": "sequence lengths T (default 128 256 512 on the CPU, 1024 "
            ".. 16384 on a GPU)",
            "heads": "heads H (default 2 on the CPU, 16 on a GPU)",
            "dtype": "element type (default float32 CPU, bfloat16 GPU)",
            "passes": "forward, forward+backward, or all",
            "batch": "batch size B",
            "head_dim": "head dimension d",
        },
    )
    add_output_flags(parser, measures=True)


def run_bench_attention(args: argparse.Namespace) -> int:
    """Run the benchmark; print a table (or JSON) and store it if asked."""
    from aiinfra.models.flash import bench

    cfg = config_from(args, bench.AttentionBenchConfig)
    body = bench.run_bench(cfg)
    backend = "cuda" if cfg.device == "cuda" else "cpu"
    res = save(args, "attention", body, backend=backend, world_size=1)
    show(args, {"Attention: time, memory, throughput": bench.attention_table(res)}, res)
    return 0


def add_bench_moe(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench moe``."""
    from aiinfra.models.moe import bench as moe_bench

    add_config_flags(
        parser,
        moe_bench.MoEBenchConfig,
        helps={
            "tokens": "batch sizes T",
            "d_model": "hidden width h",
            "n_experts": "experts E",
            "top_k": "experts per token K",
            "d_expert": "expert width d_e",
            "repeats": "timed runs",
        },
    )
    add_output_flags(parser, measures=True)


def run_bench_moe(args: argparse.Namespace) -> int:
    """Time the three expert computations; print a table, store it if asked."""
    from aiinfra.models.moe import bench as moe_bench

    cfg = config_from(args, moe_bench.MoEBenchConfig)
    res = save(args, "moe", moe_bench.run_bench(cfg), backend="cpu", world_size=1)
    show(
        args, {"MoE experts: loop against grouped": moe_bench.moe_bench_table(res)}, res
    )
    return 0


def add_bench_hf_checkpoints(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench hf-checkpoints``: the output flags only."""
    add_output_flags(parser, measures=True)


def run_bench_hf_checkpoints(args: argparse.Namespace) -> int:
    """Save, load and compare a tiny model per family; print, store if asked."""
    import transformers

    from aiinfra.models.hf import checkpoint_check as check

    res = save(
        args,
        check.KIND,
        check.run_check(),
        backend="cpu",
        world_size=1,
        extra_stamp={"transformers": transformers.__version__},
    )
    show(args, {"Checkpoints against transformers": check.equivalence_table(res)}, res)
    return 0


def add_list(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra list``."""
    add_output_flags(parser)


def run_list(args: argparse.Namespace) -> int:
    """Print the model and GPU names that every command accepts."""
    from aiinfra.accelerators import GPUS
    from aiinfra.models.params import count_parameters
    from aiinfra.models.presets import MODEL_NAMES, is_moe, model_fields, preset
    from aiinfra.report import Table

    rows = []
    for name in MODEL_NAMES:
        fields, c = model_fields(name), preset(name)
        kind = "mixture of experts" if is_moe(fields) else "dense"
        rows.append([name, kind, c.n_layers, round(count_parameters(c).total / 1e9, 2)])
    models = Table(
        ["model", "MLP", "layers", "parameters (B)"],
        rows,
        note="--model of aiinfra memory and aiinfra plan takes these names in any "
        "case; both model dense MLPs only.",
        words=(1,),
    )
    gpus = Table(
        ["GPU", "HBM (GB)", "dense BF16 TFLOP/s"],
        [[k, g.hbm_bytes / 1e9, g.bf16_flops / 1e12] for k, g in GPUS.items()],
        note="--gpu of aiinfra plan and aiinfra budget takes these names in any case.",
    )
    show(args, {"Models": models, "GPUs": gpus})
    return 0


def _moe_runs(args: argparse.Namespace) -> str:
    """What ``bench moe`` runs; its defaults take about 30 s."""
    sizes = ", ".join(map(str, args.tokens))
    return (
        f"three ways to compute {args.n_experts} experts at T = {sizes}, "
        f"{args.repeats} repeats; about 30 s with the defaults"
    )


COMMANDS = (
    Command(
        "bench",
        "attention",
        "time and memory of naive, tiled, Triton and SDPA attention",
        add_bench_attention,
        run_bench_attention,
        runs=lambda a: (
            "each implementation at each sequence length "
            f"({' '.join(map(str, a.seq_lens or ('128', '256', '512')))}) and pass, "
            f"{a.repeats} repeats; seconds to a minute on a CPU"
        ),
    ),
    Command(
        "bench",
        "moe",
        "token loop, masked per-expert loop and grouped MoE experts on the CPU",
        add_bench_moe,
        run_bench_moe,
        runs=_moe_runs,
    ),
    Command(
        "bench",
        "hf-checkpoints",
        "tiny transformers models saved and loaded here: logits and greedy tokens",
        add_bench_hf_checkpoints,
        run_bench_hf_checkpoints,
        runs="one tiny model per family saved with save_pretrained, loaded with "
        "Transformer.from_pretrained and compared; under a minute",
    ),
    Command(
        "list",
        None,
        "the model and GPU names that every command accepts (any case)",
        add_list,
        run_list,
    ),
)
