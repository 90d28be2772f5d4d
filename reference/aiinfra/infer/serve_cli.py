"""``aiinfra serve``: the engine behind an OpenAI-compatible server on this machine.

::

    aiinfra serve --model tiny --port 8000
    aiinfra serve --model path/to/checkpoint --max-num-seqs 16 --num-blocks 256

``--model tiny`` is a small random model (its text is noise, its serving is real);
a directory is a Hugging Face checkpoint read by
:meth:`~aiinfra.models.transformer.Transformer.from_pretrained`. The server binds
127.0.0.1 unless ``--allow-remote``: it has no authentication.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from aiinfra.clikit import int_at_least
from aiinfra.infer.engine.core import Engine
from aiinfra.infer.engine.server import InferenceServer, check_host
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer

TINY = {"d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 88, "max_seq_len": 256}


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float32) -> Transformer:
    """A random byte-level model (``TINY`` shape), the same for the same seed.

    The weights are drawn with scale ``0.5 / sqrt(fan_in)`` (not GPT-2's 0.02) so
    that its greedy tokens vary instead of repeating one byte.
    """
    g = torch.Generator().manual_seed(seed)
    model = Transformer(TransformerConfig(**TINY)).to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g, dtype=dtype)
                * 0.5
                / p.shape[-1] ** 0.5
            )
    return model


def load_model(spec: str, seed: int = 0) -> Transformer:
    """``"tiny"`` (see :func:`tiny_model`) or a checkpoint directory.

    Raises:
        FileNotFoundError: ``spec`` is neither ``"tiny"`` nor a directory.
        ValueError: the model's vocabulary is smaller than the 256 byte tokens.
    """
    if spec == "tiny":
        return tiny_model(seed)
    if not os.path.isdir(spec):
        raise FileNotFoundError(
            f"--model must be 'tiny' or a checkpoint directory, got {spec!r}"
        )
    model = Transformer.from_pretrained(spec)
    if model.config.vocab_size < 256:
        raise ValueError(
            f"the server's tokenizer is UTF-8 bytes: vocab_size must be >= 256, "
            f"got {model.config.vocab_size}"
        )
    return model


def serve(
    host: str,
    port: int,
    model: str | Transformer,
    *,
    seed: int = 0,
    allow_remote: bool = False,
    **engine_options: int | bool,
) -> None:
    """Serve ``model`` at ``http://host:port/v1`` until interrupted.

    Args:
        host: the address (loopback unless ``allow_remote``).
        port: the port.
        model: a :class:`Transformer`, ``"tiny"`` or a checkpoint directory.
        seed: the tiny model's seed.
        allow_remote: bind a non-loopback address.
        **engine_options: ``num_blocks``, ``block_size``, ``max_num_seqs``,
            ``max_num_batched_tokens``, ``enable_prefix_caching`` of
            :class:`~aiinfra.infer.engine.core.Engine`.

    Raises:
        ValueError: a bad host or engine size; see also :func:`load_model`.
    """
    check_host(host, allow_remote)
    name = model if isinstance(model, str) else "aiinfra"
    if isinstance(model, str):
        model = load_model(model, seed)
    server = InferenceServer(
        Engine(model, **engine_options), host, port, name, allow_remote
    )
    server.loop.start()
    print(f"serving {name!r} at {server.base_url}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.loop.stop()


def add_serve(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra serve``."""
    add = parser.add_argument
    add(
        "--model",
        default="tiny",
        help="'tiny' (random) or a Hugging Face checkpoint dir",
    )
    add("--seed", type=int_at_least(0), default=0, help="seed of the tiny model")
    add(
        "--host", default="127.0.0.1", help="address to bind (loopback only by default)"
    )
    add("--allow-remote", action="store_true", help="allow a non-loopback --host")
    add("--port", type=int_at_least(0), default=8000, help="port (0: any free one)")
    add("--max-num-seqs", type=int_at_least(1), default=8, help="sequences per step")
    add(
        "--max-num-batched-tokens",
        type=int_at_least(1),
        default=64,
        help="tokens per step",
    )
    add("--num-blocks", type=int_at_least(1), default=64, help="KV blocks in the pool")
    add("--block-size", type=int_at_least(1), default=16, help="tokens per KV block")
    add(
        "--no-prefix-caching",
        action="store_true",
        help="do not reuse the KV blocks of shared prompt prefixes",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Check the flags (a ValueError is a usage error) and serve until Ctrl-C."""
    check_host(args.host, args.allow_remote)
    if args.port > 65535:
        raise ValueError(f"--port must be <= 65535, got {args.port}")
    serve(
        args.host,
        args.port,
        args.model,
        seed=args.seed,
        allow_remote=args.allow_remote,
        num_blocks=args.num_blocks,
        block_size=args.block_size,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_prefix_caching=not args.no_prefix_caching,
    )
    return 0
