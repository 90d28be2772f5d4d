"""Measurements the book renders: one folder, one machine stamp, ``write`` and ``load``.

A benchmark's results are measured once, on a stated machine, and committed as a
JSON file that the book's tables and figures read at build time. Each kind of
measurement (:data:`KINDS`) names the ``aiinfra`` command that makes it; the file of a
kind on a backend is ``<data folder>/<kind>-<backend>.json``, e.g.
``docs/_data/bench/collectives-gloo.json``. A file is ``{"stamp": ..., **body}``: the
stamp says where and when (date, CPU or GPU model, core count, load, versions, never
the hostname), the body is whatever the benchmark measured (``config`` and ``rows``
for most). ``nox -s bench`` loops over :data:`KINDS` on the CPU and ``nox -s gpu``
over the GPU kinds; a kind missing on disk is an error that names its command,
except a GPU's (:func:`load_optional`): a page shows it where it exists.

The folder is ``docs/_data/bench/`` in the repository, or ``$AIINFRA_RESULTS_DIR``
when set (:func:`data_dir`): a reader's own runs, or a test's synthetic files (the
book's cache keys on the repository's folder, so the book is built without it).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiinfra

# The book's data folder when the package runs from its repository.
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "docs" / "_data" / "bench"
DATA_ENV = "AIINFRA_RESULTS_DIR"  # another folder, e.g. for a reader's own runs


@dataclass(frozen=True)
class Kind:
    """One kind of measurement and the command that makes it.

    Args:
        name: the kind, e.g. ``"collectives"``; files are ``<name>-<backend>.json``.
        command: the ``aiinfra`` command line, without the backend's own flags.
        backends: backend -> the flags that select it (``--backend gloo
            --world-size 2``); ``gloo``/``cpu`` run on the CPU (``nox -s bench``),
            ``nccl``/``cuda`` on a GPU machine (``nox -s gpu``).
    """

    name: str
    command: tuple[str, ...]
    backends: dict[str, tuple[str, ...]]

    def make_command(self, backend: str, path: Path | None = None) -> list[str]:
        """The full command line that writes this kind's file on ``backend``.

        ``--stamp`` writes the book's file (:func:`results_path`); another
        ``path`` is ``--out path``.
        """
        where = ["--stamp"]
        if path is not None and Path(path) != results_path(self.name, backend):
            where = ["--out", str(path)]
        return [*self.command, *self.backends[backend], *where]


KINDS: dict[str, Kind] = {
    "collectives": Kind(
        "collectives",
        ("aiinfra", "bench", "collectives"),
        {
            "gloo": ("--backend", "gloo", "--world-size", "4"),
            "nccl": ("--backend", "nccl", "--world-size", "8"),  # one 8-GPU node
        },
    ),
    # Our ring against gloo's at one size, five paired runs (bandwidth.rst).
    "ring": Kind(
        "ring",
        (
            *("aiinfra", "bench", "collectives", "--collectives", "all_reduce"),
            *("--algorithms", "ring,ring_pipelined,torch", "--repeats", "5"),
            *("--min-bytes", "16M", "--max-bytes", "16M"),
        ),
        {"gloo": ("--backend", "gloo", "--world-size", "4")},
    ),
    "ddp": Kind(
        "ddp",
        ("aiinfra", "bench", "ddp"),
        {
            "gloo": ("--backend", "gloo", "--world-size", "2"),
            "nccl": ("--backend", "nccl", "--world-size", "1"),  # any one GPU
        },
    ),
    "zero": Kind(
        "zero",
        ("aiinfra", "bench", "zero"),
        {"gloo": ("--backend", "gloo", "--world-size", "2")},
    ),
    "attention": Kind(
        "attention",
        ("aiinfra", "bench", "attention", "--causal", "--passes", "all"),
        {
            "cpu": ("--device", "cpu"),
            "cuda": ("--device", "cuda", "--head-dim", "128"),  # bf16, N 1K-16K
        },
    ),
    # Token loop, masked per-expert loop and grouped experts (moe.rst): CPU only.
    "moe": Kind("moe", ("aiinfra", "bench", "moe"), {"cpu": ()}),
    # Greedy decoding with and without the KV cache, token by token (kv_cache.rst).
    "decode": Kind("decode", ("aiinfra", "bench", "decode"), {"cpu": ()}),
    # Prefill and decode steps against the CPU's roofs (metrics.rst).
    "phases": Kind("phases", ("aiinfra", "bench", "phases"), {"cpu": ()}),
    # The engine: batch sweep, static against continuous, prefix caching (engine.rst).
    "engine": Kind("engine", ("aiinfra", "bench", "engine"), {"cpu": ()}),
    # Speculative decoding per drafted-token count k (speculative.rst).
    "speculative": Kind(
        "speculative", ("aiinfra", "bench", "speculative"), {"cpu": ()}
    ),
    # This machine's roofline: matmul peak, streaming bandwidth, kernels (roofline.rst).
    "roofline": Kind(
        "roofline",
        ("aiinfra", "bench", "roofline"),
        {
            "cpu": (),
            "cuda": (
                *("--device", "cuda", "--dtypes", "bfloat16", "--stream-mib", "1024"),
                *("--square", "2048,4096,8192", "--d-model", "8192", "--d-ff", "28672"),
                # decode's thin rows, and a wave filled, then spilled by one row
                # (m x 8192 x 8192: 1536 rows are 3 waves of the GEMM model on an
                # H100 or H200, 1537 are 4; training/planner.rst)
                *("--skinny", "1,16,64,1536,1537,4096"),
                *("--prefill-tokens", "4096", "--heads", "32", "--head-dim", "128"),
                *("--seq-len", "8192", "--context", "131072"),
            ),
        },
    ),
    # A small model quantized by RTN, AWQ, GPTQ, SmoothQuant: perplexities
    # (quantization_calibrated.rst); training takes minutes.
    "quant-eval": Kind("quant-eval", ("aiinfra", "quantize"), {"cpu": ()}),
    # A small model decoded through a KV cache of fixed budget, as a sliding
    # window and with attention sinks: perplexities (kv_eviction.rst); a few minutes.
    "kv-eviction": Kind("kv-eviction", ("aiinfra", "evict"), {"cpu": ()}),
    # A student distilled from a teacher and one trained on labels (distillation.rst).
    "distillation": Kind("distillation", ("aiinfra", "distill"), {"cpu": ()}),
    # Chinchilla's law refitted to the published runs, with a bootstrap
    # (scaling_laws.rst): the paper's 4,500 starts and 1,000 resamples, minutes.
    "scaling-fit": Kind("scaling-fit", ("aiinfra", "scaling", "--refit"), {"cpu": ()}),
    # Tiny transformers models saved, loaded by Transformer.from_pretrained and
    # compared: logits and greedy tokens (transformer.rst).
    "hf-checkpoints": Kind(
        "hf-checkpoints", ("aiinfra", "bench", "hf-checkpoints"), {"cpu": ()}
    ),
    # Sharded, asynchronous and atomic checkpoints, data loading (checkpoints.rst).
    "storage": Kind("storage", ("aiinfra", "bench", "storage"), {"gloo": ()}),
    # What each reproducible hang prints and how long it takes to fail (hangs.rst).
    "hangs": Kind("hangs", ("aiinfra", "comm", "hangs"), {"gloo": ()}),
    # A worker killed under torchrun: the restart and the resume (cloud/restarts.rst).
    "restart": Kind("restart", ("aiinfra", "bench", "restart"), {"gloo": ()}),
    # Pre-flight checks with an SDC and a straggler planted (cloud/preflight.rst).
    "preflight": Kind(
        "preflight",
        ("aiinfra", "preflight", "--inject", "sdc:1", "slow:2"),
        {"gloo": ("--backend", "gloo", "--ranks", "4")},
    ),
    # Namespaces, and the training image's Python layer replayed (cloud/containers.rst).
    "container": Kind("container", ("aiinfra", "bench", "container"), {"cpu": ()}),
    # The engine against transformers on one checkpoint: offline paths, both
    # servers, the engine's decode-step profile (engine.rst).
    "engine_hf": Kind(
        "engine_hf",
        ("aiinfra", "bench", "engine", "--against", "transformers", "--full"),
        {"cpu": ()},
    ),
}
CPU_BACKENDS = ("gloo", "cpu")
# What ``nox -s gpu`` measures on one GPU (collectives need a node of several).
GPU_RUNS = (("attention", "cuda"), ("ddp", "nccl"), ("roofline", "cuda"))


def commands(runs: tuple[tuple[str, str], ...] | None = None) -> list[list[str]]:
    """The command lines of ``runs`` (default: every CPU kind), for nox."""
    if runs is None:
        runs = tuple(
            (k, b)
            for k, spec in KINDS.items()
            for b in spec.backends
            if b in CPU_BACKENDS
        )
    return [_kind(k, b).make_command(b) for k, b in runs]


def data_dir() -> Path:
    """The folder of results files: ``$AIINFRA_RESULTS_DIR`` or the book's."""
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DATA)


def _kind(kind: str, backend: str) -> Kind:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    spec = KINDS[kind]
    if backend not in spec.backends:
        raise ValueError(
            f"backend must be one of {spec.backends} for kind {kind!r}, got {backend!r}"
        )
    return spec


def results_path(kind: str, backend: str = "gloo") -> Path:
    """Where the results of ``kind`` on ``backend`` live.

    Raises:
        ValueError: unknown ``kind``, or a backend that kind is not measured on.
    """
    _kind(kind, backend)
    return data_dir() / f"{kind}-{backend}.json"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_stamp(world_size: int, backend: str) -> dict[str, Any]:
    """Where and when a result was measured: date (UTC), machine, versions; no host.

    Args:
        world_size: ranks (or 1 for a single-process benchmark).
        backend: ``gloo``, ``nccl`` or ``cuda``; a GPU model is recorded for the
            last two when CUDA is available.
    """
    import torch  # here, not above: the calculators never stamp, and start faster

    gpu = backend in ("nccl", "cuda") and torch.cuda.is_available()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),  # the machine may be shared
        "gpu": torch.cuda.get_device_name(0) if gpu else None,
        "os": f"{platform.system()} {platform.machine()}",
        "world_size": world_size,
        "backend": backend,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "aiinfra": aiinfra.__version__,
    }


def machine_label(stamp: dict[str, Any]) -> str:
    """A short description of the stamp's machine: the GPU, or the CPU and cores."""
    return stamp.get("gpu") or f"{stamp['cpu']} ({stamp['cpu_count']} cores)"


#: Where and when, as a table's stamp template (:class:`aiinfra.report.Table`): the
#: words are translated once, the machine and the date filled in.
MEASURED_ON = "{machine} ({cores} cores), {date}"
MEASURED_ON_GPU = "{machine}, {date}"


def run_on(stamp: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """:func:`measured_on` with the machine's load and the torch version.

    Returns:
        The template ``MEASURED_ON + "; load {load}; torch {torch}"`` and its fields.
    """
    template, fields = measured_on(stamp)
    template += "; load {load}; torch {torch}"
    return template, {**fields, "load": stamp["load_1min"], "torch": stamp["torch"]}


def measured_on(stamp: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A stamp's machine and day as a template and its fields, for a table.

    Returns:
        ``(MEASURED_ON, {"machine", "cores", "date"})`` for a CPU,
        ``(MEASURED_ON_GPU, {"machine", "date"})`` for a GPU.
    """
    day = str(stamp["date"])[:10]
    if stamp.get("gpu"):
        return MEASURED_ON_GPU, {"machine": stamp["gpu"], "date": day}
    return MEASURED_ON, {
        "machine": stamp["cpu"],
        "cores": stamp["cpu_count"],
        "date": day,
    }


def write(
    kind: str,
    body: dict[str, Any],
    *,
    backend: str,
    world_size: int,
    path: str | Path | None = None,
    extra_stamp: dict[str, Any] | None = None,
) -> Path:
    """Write ``{"stamp": ..., **body}`` as JSON (folders made) and return the path.

    Args:
        kind: a key of :data:`KINDS`.
        body: what was measured (``config``, ``rows``, ...); no key ``stamp``.
        backend: where it ran (one of the kind's backends).
        world_size: ranks, for the stamp.
        path: another file than :func:`results_path` (``--out``).
        extra_stamp: more stamp entries (a library's version).

    Raises:
        ValueError: unknown kind or backend, or ``body`` has a ``stamp`` key.
    """
    default = results_path(kind, backend)
    if "stamp" in body:
        raise ValueError("body must not have a 'stamp' key: write() adds it")
    stamp = machine_stamp(world_size, backend) | (extra_stamp or {})
    out = Path(path) if path is not None else default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"stamp": stamp, **body}, indent=1) + "\n")
    return out


def load(
    kind: str, backend: str = "gloo", path: str | Path | None = None
) -> dict[str, Any]:
    """Read the results of ``kind`` on ``backend`` (or the file at ``path``).

    Raises:
        ValueError: unknown kind or backend.
        FileNotFoundError: no file; the message names the command that writes it.
    """
    spec = _kind(kind, backend)
    file = Path(path) if path is not None else results_path(kind, backend)
    if not file.is_file():
        command = " ".join(spec.make_command(backend, file))
        session = "bench" if backend in CPU_BACKENDS else "gpu"
        raise FileNotFoundError(
            f"no {kind} results on {backend} at {file}: run `{command}` (or "
            f"`nox -s {session}`, which runs every kind of its machine) to measure "
            "them"
        )
    return json.loads(file.read_text())


def load_optional(
    kind: str, backend: str, path: str | Path | None = None
) -> dict[str, Any] | None:
    """:func:`load`, or ``None`` when the file does not exist.

    For the results only some machines make (a GPU's, :data:`GPU_RUNS`): a book
    page shows them beside the CPU's where the stamped file is committed and says
    nothing extra where it is not.

    Raises:
        ValueError: unknown kind or backend.
    """
    _kind(kind, backend)
    file = Path(path) if path is not None else results_path(kind, backend)
    return load(kind, backend, file) if file.is_file() else None
