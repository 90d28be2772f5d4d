"""The inference chapter's commands: ``bench``, ``quantize``, ``distill``, ``serve``.

The benches are ``decode``, ``engine`` (both in :mod:`.bench_cli`), ``phases`` and
``speculative``.

``aiinfra bench decode`` times greedy decoding with and without the KV cache, token
by token (:mod:`aiinfra.infer.kv.decode_bench`), and stamps the result into
``docs/_data/bench/decode-cpu.json`` (or ``--out``)::

    aiinfra bench decode --new-tokens 512 --repeats 2

``aiinfra serve`` runs the engine (:mod:`aiinfra.infer.engine.core`) behind an
OpenAI-compatible HTTP API on 127.0.0.1 (:mod:`aiinfra.infer.engine.server`)::

    aiinfra serve --model tiny --port 8000
"""

from __future__ import annotations

import argparse
import json
import sys

from aiinfra import results
from aiinfra.clikit import Command, int_at_least, int_list, positive_float
from aiinfra.infer import phase_bench, serve_cli
from aiinfra.infer.bench_cli import (
    add_bench_decode,
    add_bench_engine,
    run_bench_decode,
    run_bench_engine,
)
from aiinfra.infer.distill import train as distill_train
from aiinfra.infer.quant import evaluate as quant_eval
from aiinfra.infer.speculative import bench as speculative_bench


def add_bench_speculative(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench speculative``."""
    add = parser.add_argument
    d = speculative_bench.SpeculativeBenchConfig()
    add("--ks", type=int_list, default=d.ks, help="drafted tokens per call, e.g. 1,2,4")
    add("--new-tokens", type=int_at_least(1), default=d.new_tokens)
    add("--prompts", type=int_at_least(1), default=d.prompts)
    add("--repeats", type=int_at_least(1), default=d.repeats, help="timed runs")
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--target-steps", type=int_at_least(1), default=d.target_steps)
    add("--draft-steps", type=int_at_least(1), default=d.draft_steps)
    add("--temperature", type=positive_float, default=d.temperature)
    add("--out", help="write the stamped JSON here (default: the book's file)")


def run_bench_speculative(args: argparse.Namespace) -> int:
    """Train a target and a draft, time speculative decoding per k, stamp it."""
    cfg = speculative_bench.SpeculativeBenchConfig(
        ks=tuple(args.ks),
        new_tokens=args.new_tokens,
        prompts=args.prompts,
        repeats=args.repeats,
        threads=args.threads,
        target_steps=args.target_steps,
        draft_steps=args.draft_steps,
        temperature=args.temperature,
    )
    body = speculative_bench.run_speculative_bench(cfg)
    threads = {"threads": body["config"]["threads"]}
    path = results.write(
        "speculative",
        body,
        backend="cpu",
        world_size=1,
        path=args.out,
        extra_stamp=threads,
    )
    print(f"wrote {path}", file=sys.stderr)
    res = results.load("speculative", "cpu", path)
    print(json.dumps(res["rows"], indent=1))
    return 0


def add_quantize(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra quantize``."""
    add = parser.add_argument
    d = quant_eval.QuantEvalConfig()
    add("--steps", type=int_at_least(1), default=d.steps, help="training steps")
    add("--seed", type=int, default=d.seed, help="seed of the language and model")
    add(
        "--no-quantize-head",
        action="store_true",
        help="keep the output head in float (as GPTQ and AWQ do)",
    )
    add("--out", help="write the stamped JSON here (default: the book's file)")


def run_quantize(args: argparse.Namespace) -> int:
    """Train the small model, quantize it every way, stamp the perplexities."""
    cfg = quant_eval.QuantEvalConfig(
        steps=args.steps, seed=args.seed, quantize_head=not args.no_quantize_head
    )
    body = quant_eval.run_quant_eval(cfg)
    path = results.write(
        quant_eval.KIND, body, backend="cpu", world_size=1, path=args.out
    )
    print(f"wrote {path}", file=sys.stderr)
    res = results.load(quant_eval.KIND, "cpu", path)
    print(f"floor (the language's own law): {res['floor_ppl']:.4f}")
    for row in res["rows"]:
        print(f"{row['key']:22s} ppl {row['ppl']:.4f}")
    return 0


def add_bench_phases(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench phases`` (each a field of the config)."""
    add = parser.add_argument
    d = phase_bench.PhaseBenchConfig()
    add("--d-model", type=int_at_least(1), default=d.d_model, help="hidden width h")
    add("--layers", dest="n_layers", type=int_at_least(1), default=d.n_layers)
    add("--heads", dest="n_heads", type=int_at_least(1), default=d.n_heads)
    add("--kv-heads", dest="n_kv_heads", type=int_at_least(1), default=d.n_kv_heads)
    add("--d-ff", type=int_at_least(1), default=d.d_ff, help="MLP width")
    add("--vocab", dest="vocab_size", type=int_at_least(1), default=d.vocab_size)
    add(
        "--prompt-lens",
        type=int_list,
        default=d.prompt_lens,
        help="prefill T, e.g. 16,64",
    )
    add("--batches", type=int_list, default=d.batches, help="decode B, e.g. 1,4,16")
    add("--context", type=int_at_least(1), default=d.context, help="cached tokens")
    add("--decode-steps", type=int_at_least(1), default=d.decode_steps)
    add("--repeats", type=int_at_least(1), default=d.repeats, help="timed runs")
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--matmul-size", type=int_at_least(1), default=d.matmul_size)
    add("--read-mib", type=int_at_least(1), default=d.read_mib)
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")


def run_bench_phases(args: argparse.Namespace) -> int:
    """Time prefill and decode steps and the CPU's roofs; print and stamp them."""
    fields = phase_bench.PhaseBenchConfig.__dataclass_fields__
    cfg = phase_bench.PhaseBenchConfig(**{k: getattr(args, k) for k in fields})
    body = phase_bench.run_phase_bench(cfg, device="cpu")
    if args.no_write:
        res = {"stamp": results.machine_stamp(1, "cpu"), **body}
    else:
        path = results.write("phases", body, backend="cpu", world_size=1, path=args.out)
        print(f"wrote {path}", file=sys.stderr)
        res = results.load("phases", "cpu", path)
    table = phase_bench.phase_bench_table(res)
    print(table.to_json() if args.json else table.to_text())
    return 0


def add_distill(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra distill``."""
    parser.add_argument(
        "--out", help="write the stamped JSON here (default: the book's file)"
    )


def run_distill(args: argparse.Namespace) -> int:
    """Train a teacher, then a student on labels and one by distillation; stamp."""
    body = distill_train.run_distillation()
    path = results.write(
        distill_train.KIND, body, backend="cpu", world_size=1, path=args.out
    )
    print(f"wrote {path}", file=sys.stderr)
    res = results.load(distill_train.KIND, "cpu", path)
    print(json.dumps({k: v for k, v in res.items() if k != "curves"}, indent=1)[:2000])
    return 0


COMMANDS = (
    Command(
        "bench",
        "decode",
        "greedy decoding with and without the KV cache, timed token by token",
        add_bench_decode,
        run_bench_decode,
    ),
    Command(
        "bench",
        "engine",
        "the engine on the CPU: batch sweep, static vs continuous, prefix caching",
        add_bench_engine,
        run_bench_engine,
    ),
    Command(
        "bench",
        "phases",
        "prefill and decode steps on the CPU against its matmul and memory roofs",
        add_bench_phases,
        run_bench_phases,
    ),
    Command(
        "bench",
        "speculative",
        "speculative decoding on the CPU: acceptance, tokens per call, speed-up per k",
        add_bench_speculative,
        run_bench_speculative,
    ),
    Command(
        "distill",
        None,
        "distil a small student from a teacher and from labels alone; stamp the losses",
        add_distill,
        run_distill,
    ),
    Command(
        "quantize",
        None,
        "train a small model, quantize it (RTN, SmoothQuant, AWQ, GPTQ), stamp ppl",
        add_quantize,
        run_quantize,
    ),
    Command(
        "serve",
        None,
        "serve a model with an OpenAI-compatible API on 127.0.0.1",
        serve_cli.add_serve,
        serve_cli.run_serve,
    ),
)
