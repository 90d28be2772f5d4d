"""The inference chapter's commands: bench, quantize, evict, distill, serve.

The benches are ``decode``, ``engine``, ``phases`` and ``speculative``
(:mod:`.bench_cli`). ``aiinfra bench decode`` times greedy decoding with and without
the KV cache, token by token (:mod:`aiinfra.infer.kv.decode_bench`); ``--stamp``
stores the result as the book's ``decode-cpu.json``::

    aiinfra bench decode --new-tokens 512 --repeats 2

``aiinfra serve`` runs the engine (:mod:`aiinfra.infer.engine.core`) behind an
OpenAI-compatible HTTP API on 127.0.0.1 (:mod:`aiinfra.infer.serve_cli`)::

    aiinfra serve --model tiny --port 8000
"""

from __future__ import annotations

import argparse

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    save,
    show,
)
from aiinfra.infer.bench_cli import (
    add_bench_decode,
    add_bench_engine,
    add_bench_phases,
    add_bench_speculative,
    run_bench_decode,
    run_bench_engine,
    run_bench_phases,
    run_bench_speculative,
)


def add_quantize(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra quantize``."""
    from aiinfra.infer.quant import evaluate as quant_eval

    add_config_flags(
        parser,
        quant_eval.QuantEvalConfig,
        helps={"steps": "training steps", "seed": "seed of the language and model"},
        choices={"scheme": quant_eval.SCHEMES},
    )
    add_output_flags(parser, measures=True)


def run_quantize(args: argparse.Namespace) -> int:
    """Train the small model, quantize it every way, print (and store) the ppl."""
    from aiinfra.infer.quant import evaluate as quant_eval
    from aiinfra.report import Table

    cfg = config_from(args, quant_eval.QuantEvalConfig)
    body = quant_eval.run_quant_eval(cfg)
    res = save(args, quant_eval.KIND, body, backend="cpu", world_size=1)
    columns = ["key", "ppl", *quant_eval.ERRORS]
    table = Table(
        ["run", "held-out perplexity", "weight error", "output error"],
        [[r[c] for c in columns] for r in res["rows"]],
        note=f"The language's own perplexity (the floor): {res['floor_ppl']:.4f}. "
        "Errors: relative Frobenius norms, mean over the layers.",
    )
    layers = Table(
        ["run", "layer", "weight error", "output error"],
        [
            [run, r["layer"], r["weight_err"], r["output_err"]]
            for run, rows in res["layers"].items()
            for r in rows
        ],
        note="Relative Frobenius errors of each quantized layer, on held-out inputs.",
    )
    show(
        args,
        {"Perplexity of each quantized model": table, "Error of each layer": layers},
        res,
    )
    return 0


def add_evict(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra evict``."""
    from aiinfra.infer.kv import streaming_eval

    add_config_flags(
        parser,
        streaming_eval.StreamingEvalConfig,
        helps={
            "steps": "training steps",
            "seed": "seed of the language and model",
            "budgets": "cache budgets N, tokens",
        },
    )
    add_output_flags(parser, measures=True)


def run_evict(args: argparse.Namespace) -> int:
    """Train the small model, decode it under every cache budget, print the ppl."""
    from aiinfra.infer.kv import streaming_eval
    from aiinfra.report import Table

    cfg = config_from(args, streaming_eval.StreamingEvalConfig)
    body = streaming_eval.run_streaming_eval(cfg)
    res = save(args, streaming_eval.KIND, body, backend="cpu", world_size=1)
    table = Table(
        ["cache budget", "sink tokens", "held-out loss", "held-out perplexity"],
        [[r["budget"], r["sinks"], r["nll"], r["ppl"]] for r in res["rows"]],
        note="Nats per token. Full cache: {full}; the language's own loss "
        "(the floor): {floor}.",
        words=(),
        fields={
            "full": f"{res['full']['nll']:.4f}",
            "floor": f"{res['floor_nll']:.4f}",
        },
    )
    show(args, {"Held-out loss under each cache budget": table}, res)
    return 0


def add_distill(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra distill``."""
    from aiinfra.infer.distill import train as distill_train

    add_config_flags(parser, distill_train.DistillRunConfig)
    add_output_flags(parser, measures=True)


def run_distill(args: argparse.Namespace) -> int:
    """Train a teacher, then a student on labels and one by distillation; print."""
    from aiinfra.infer.distill import train as distill_train
    from aiinfra.report import Table

    cfg = config_from(args, distill_train.DistillRunConfig)
    body = distill_train.run_distillation(cfg)
    res = save(args, distill_train.KIND, body, backend="cpu", world_size=1)
    runs = ("teacher", "labels", "distilled")
    size = {"teacher": "teacher", "labels": "student", "distilled": "student"}
    table = Table(
        ["run", "final held-out loss", "best held-out loss", "parameters"],
        [
            [r, res["final"][r], res["best"][r], res["parameters"][size[r]]]
            for r in runs
        ],
        note=f"Nats per token; the language's own loss (the floor) is "
        f"{res['source_loss']:.4f}. labels: the student trained on the labels "
        "alone; distilled: on the teacher's soft targets too.",
    )
    every = res["config"]["eval_every"]
    longest = max(len(c) for c in res["curves"].values())
    curves = Table(
        ["step", *runs],
        [
            [
                i * every,
                *(
                    res["curves"][r][i] if i < len(res["curves"][r]) else ""
                    for r in runs
                ),
            ]
            for i in range(longest)
        ],
        note="Held-out loss, nats per token, while each model trains.",
    )
    show(
        args,
        {
            "Held-out loss of the teacher and the two students": table,
            "Held-out loss while training": curves,
        },
        res,
    )
    return 0


def add_serve(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra serve`` (:mod:`aiinfra.infer.serve_cli`)."""
    from aiinfra.infer import serve_cli

    serve_cli.add_serve(parser)


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted (:func:`aiinfra.infer.serve_cli.run_serve`)."""
    from aiinfra.infer import serve_cli

    return serve_cli.run_serve(args)


def _decode_runs(args: argparse.Namespace) -> str:
    """What ``bench decode`` runs; 512 tokens 3 times take about 15 s on one core."""
    seconds = max(1, round(15 * args.new_tokens * args.repeats / (512 * 3)))
    return (
        f"{args.new_tokens} tokens decoded with and without the cache, "
        f"{args.repeats} repeats; about {seconds} s on one core"
    )


COMMANDS = (
    Command(
        "bench",
        "decode",
        "greedy decoding with and without the KV cache, timed token by token",
        add_bench_decode,
        run_bench_decode,
        runs=_decode_runs,
    ),
    Command(
        "bench",
        "engine",
        "the engine on the CPU: batch sweep, static vs continuous, prefix caching",
        add_bench_engine,
        run_bench_engine,
        runs=lambda a: (
            f"{a.requests} requests served at {len(a.batch_sizes)} batch "
            "sizes, static and continuous, then a prefix-caching run; about 2 minutes "
            "with the defaults"
        ),
    ),
    Command(
        "bench",
        "phases",
        "prefill and decode steps on the CPU against its matmul and memory roofs",
        add_bench_phases,
        run_bench_phases,
        runs="3 prefills, 4 decode batches and the CPU's two roofs, 5 repeats "
        "each; about 30 s",
    ),
    Command(
        "bench",
        "speculative",
        "speculative decoding on the CPU: acceptance, tokens per call, speed-up per k",
        add_bench_speculative,
        run_bench_speculative,
        runs="trains a target and a draft, then decodes with 6 values of k; about "
        "a minute",
    ),
    Command(
        "distill",
        None,
        "distil a small student from a teacher and from labels alone",
        add_distill,
        run_distill,
        runs="trains a teacher and two students on a synthetic language; under a "
        "minute",
    ),
    Command(
        "evict",
        None,
        "train a small model, decode it with a windowed and a sink KV cache, print ppl",
        add_evict,
        run_evict,
        runs="trains a small model 600 steps, then decodes it under 14 cache "
        "policies; a few minutes",
    ),
    Command(
        "quantize",
        None,
        "train a small model, quantize it (RTN, SmoothQuant, AWQ, GPTQ, FP8): ppl",
        add_quantize,
        run_quantize,
        runs="trains a small model 600 steps, then quantizes it 15 ways; a few minutes",
    ),
    Command(
        "serve",
        None,
        "serve a model with an OpenAI-compatible API on 127.0.0.1",
        add_serve,
        run_serve,
    ),
)
