"""``aiinfra serve``: the engine behind an OpenAI-compatible server on this machine.

::

    aiinfra serve --model tiny --port 8000
    aiinfra serve --model path/to/checkpoint --max-num-seqs 16 --num-blocks 256

``--model tiny`` is a small random model (its text is noise, its serving is real);
a directory is a Hugging Face checkpoint read by
:meth:`~aiinfra.models.transformer.Transformer.from_pretrained`. The server binds
127.0.0.1 unless ``--allow-remote``; ``--api-key`` makes every request carry it as a
Bearer token. Every mistake a user can make before serving (a path that is not a
checkpoint, a preset name, a busy port) is one line on stderr and exit status 2,
never a traceback; Ctrl-C or SIGTERM stops the server cleanly (exit status 0).
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from types import FrameType

import torch

from aiinfra.clikit import int_at_least
from aiinfra.infer.engine.core import Engine
from aiinfra.infer.engine.server import InferenceServer, check_host
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import PRESETS
from aiinfra.models.transformer import Transformer

TINY = {"d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 88, "max_seq_len": 256}


class ServeError(Exception):
    """A mistake the user can fix before serving: one line, exit status 2."""


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
        ServeError: ``spec`` is a preset name (a shape without weights), not a
            directory, or a directory without a checkpoint; the model's
            vocabulary is smaller than the 256 byte tokens.
    """
    if spec == "tiny":
        return tiny_model(seed)
    if spec.lower() in PRESETS:
        raise ServeError(
            f"--model {spec!r} is a preset of the book's tables: a shape with no "
            "weights, of a size that needs a real checkpoint; pass the directory of "
            "a downloaded Hugging Face checkpoint, or --model tiny for a small "
            "random model"
        )
    if not os.path.isdir(spec):
        raise ServeError(
            f"--model must be 'tiny' or a checkpoint directory; {spec!r} "
            f"{'is a file' if os.path.exists(spec) else 'does not exist'}"
        )
    if not os.path.isfile(os.path.join(spec, "config.json")):
        raise ServeError(
            f"--model {spec!r} has no config.json: it is not a Hugging Face "
            "checkpoint directory (save one with save_pretrained, or use --model tiny)"
        )
    try:
        model = Transformer.from_pretrained(spec)
    except (FileNotFoundError, ValueError) as exc:
        raise ServeError(f"--model {spec!r} cannot be served: {exc}") from None
    if model.config.vocab_size < 256:
        raise ServeError(
            f"the server's tokenizer is UTF-8 bytes: vocab_size must be >= 256, "
            f"got {model.config.vocab_size}"
        )
    return model


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the server as Ctrl-C does


def serve(
    host: str,
    port: int,
    model: str | Transformer,
    *,
    seed: int = 0,
    allow_remote: bool = False,
    name: str | None = None,
    api_key: str | None = None,
    max_pending: int | None = None,
    **engine_options: int | bool,
) -> None:
    """Serve ``model`` at ``http://host:port/v1`` until Ctrl-C or SIGTERM.

    Args:
        host: the address (loopback unless ``allow_remote``).
        port: the port.
        model: a :class:`Transformer`, ``"tiny"`` or a checkpoint directory.
        seed: the tiny model's seed.
        allow_remote: bind a non-loopback address.
        name: the model name clients pass (default: ``model`` as given, or
            ``"aiinfra"`` for a :class:`Transformer`).
        api_key: the Bearer token every request must carry, if any.
        max_pending: requests waiting or running at once (more get 503).
        **engine_options: ``num_blocks``, ``block_size``, ``max_num_seqs``,
            ``max_num_batched_tokens``, ``enable_prefix_caching`` of
            :class:`~aiinfra.infer.engine.core.Engine`.

    Raises:
        ValueError: a bad host or engine size.
        ServeError: see :func:`load_model`; the port is in use.
    """
    check_host(host, allow_remote)
    if name is None:
        name = model if isinstance(model, str) else "aiinfra"
    random = isinstance(model, str) and model == "tiny"
    if isinstance(model, str):
        model = load_model(model, seed)
    limits = {} if max_pending is None else {"max_pending": max_pending}
    try:
        server = InferenceServer(
            Engine(model, **engine_options),
            host,
            port,
            name,
            allow_remote,
            api_key=api_key,
            **limits,
        )
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise ServeError(f"cannot listen on {host}:{port}: {exc}") from None
        raise ServeError(
            f"port {port} on {host} is in use (nox -s book serves the book on 8000 "
            f"too): pick another with --port, e.g. --port {port + 1}, or --port 0 "
            "for any free one"
        ) from None
    previous = signal.signal(signal.SIGTERM, _stop)
    server.loop.start()
    what = " (a random model: its text is noise)" if random else ""
    print(
        f"serving {name!r}{what} at {server.base_url}; Ctrl-C stops it",
        file=sys.stderr,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopping: requests still running get an error", file=sys.stderr)
    finally:
        server.server_close()
        server.loop.stop()
        signal.signal(signal.SIGTERM, previous)


def add_serve(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra serve``."""
    add = parser.add_argument
    add(
        "--model",
        default="tiny",
        help="'tiny' (random) or a Hugging Face checkpoint dir",
    )
    add(
        "--served-model-name",
        help="the model name clients pass (default: --model as given)",
    )
    add("--seed", type=int_at_least(0), default=0, help="seed of the tiny model")
    add(
        "--host", default="127.0.0.1", help="address to bind (loopback only by default)"
    )
    add("--allow-remote", action="store_true", help="allow a non-loopback --host")
    add("--port", type=int_at_least(0), default=8000, help="port (0: any free one)")
    add(
        "--api-key",
        default=os.environ.get("AIINFRA_API_KEY"),
        help="require 'Authorization: Bearer KEY' (default: $AIINFRA_API_KEY, none)",
    )
    add(
        "--max-pending",
        type=int_at_least(1),
        default=1024,
        help="requests waiting or running at once; more get 503 with Retry-After",
    )
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
    """Check the flags (a ValueError is a usage error) and serve until Ctrl-C.

    A :class:`ServeError` (a model that cannot be loaded, a busy port) is printed
    as one line and returns 2.
    """
    check_host(args.host, args.allow_remote)
    if args.port > 65535:
        raise ValueError(f"--port must be <= 65535, got {args.port}")
    try:
        serve(
            args.host,
            args.port,
            args.model,
            seed=args.seed,
            allow_remote=args.allow_remote,
            name=args.served_model_name,
            api_key=args.api_key or None,
            max_pending=args.max_pending,
            num_blocks=args.num_blocks,
            block_size=args.block_size,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            enable_prefix_caching=not args.no_prefix_caching,
        )
    except ServeError as exc:
        print(f"aiinfra serve: error: {exc}", file=sys.stderr)
        return 2
    return 0
