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

``aiinfra kv`` prints how many tokens of KV cache a tensor-parallel serving group
holds next to the weights, for a named model or a ``config.json``, on group sizes
up to ``--gpus`` (:func:`aiinfra.models.kv_budget.kv_budget`)::

    aiinfra kv --model llama-3-70b --gpu h100 --gpus 8 --context 32768

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


#: Bytes per element of the weights and of the cache that ``aiinfra kv`` takes.
KV_DTYPES = {"bf16": 2, "fp8": 1}

KV_NOTE = (
    "GB = 1e9 bytes, KiB = 1024 bytes; free = HBM of the group minus the weights, "
    "nothing reserved for activations or the runtime (an upper bound). KiB / token: "
    "of the whole group, copies included where the group has more GPUs than K/V "
    "heads. Sequences: how many of the stated length fit."
)


def add_kv(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra kv``."""
    from aiinfra.accelerators import GPUS
    from aiinfra.clikit import int_at_least, name_of
    from aiinfra.models.presets import MODEL_NAMES

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        type=name_of(MODEL_NAMES),
        help=f"a named model, any case: {', '.join(MODEL_NAMES)}",
    )
    source.add_argument("--config", help="path to a Hugging Face config.json")
    add = parser.add_argument
    add("--gpu", type=name_of(GPUS), default="H100", help="GPU kind, any case")
    add(
        "--gpus",
        type=int_at_least(1),
        default=8,
        help="largest tensor-parallel group (rows: 1, 2, 4, ... up to it)",
    )
    add("--context", type=int_at_least(1), default=8192, help="tokens per sequence")
    add("--weights", choices=tuple(KV_DTYPES), default="bf16", help="weight dtype")
    add("--cache", choices=tuple(KV_DTYPES), default="bf16", help="KV cache dtype")
    add_output_flags(parser)


def kv_table(args: argparse.Namespace) -> tuple[str, object]:
    """The title and table of ``aiinfra kv`` for parsed flags.

    Raises:
        ValueError: the config cannot be read, or ``--gpus`` cannot split the K/V
            heads evenly.
    """
    from aiinfra.accelerators import GPUS
    from aiinfra.models.config import TransformerConfig
    from aiinfra.models.hf.config import read_json_object
    from aiinfra.models.kv_budget import COLUMNS, kv_budget
    from aiinfra.models.presets import preset
    from aiinfra.report import Table

    if args.model:
        name, cfg = args.model, preset(args.model)
    else:
        try:
            fields = read_json_object(args.config)
        except OSError as err:
            raise ValueError(f"--config cannot be read: {err}") from err
        name, cfg = args.config, TransformerConfig.from_hf_config(fields)
    sizes = [1 << k for k in range(args.gpus.bit_length()) if 1 << k < args.gpus]
    rows = []
    for n in [*sizes, args.gpus]:
        try:
            b = kv_budget(
                cfg,
                GPUS[args.gpu],
                n,
                bytes_per_element=KV_DTYPES[args.cache],
                bytes_per_weight=KV_DTYPES[args.weights],
            )
        except ValueError as err:
            if n == args.gpus:
                raise ValueError(str(err).replace("n_gpus", "--gpus")) from err
            continue  # a smaller group that cannot split the heads: not a layout
        rows.append(
            [
                n,
                round(b.weight_bytes / 1e9, 1),
                round(b.free_bytes / 1e9, 1),
                round(b.bytes_per_token / 1024, 1),
                b.tokens,
                b.tokens // args.context,
            ]
        )
    table = Table(COLUMNS, rows, KV_NOTE)
    title = (
        f"KV cache of {name} on {args.gpu}: {args.weights} weights, {args.cache} "
        f"cache, sequences of {args.context} tokens"
    )
    return title, table


def run_kv(args: argparse.Namespace) -> int:
    """Print the KV budget of each group size."""
    title, table = kv_table(args)
    show(args, {title: table})
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
        "kv",
        None,
        "tokens of KV cache a tensor-parallel serving group holds next to the weights",
        add_kv,
        run_kv,
    ),
    Command(
        "list",
        None,
        "the model and GPU names that every command accepts (any case)",
        add_list,
        run_list,
    ),
)
