"""Run a function on N ranks: the launcher behind every distributed example and test.

``torchrun`` starts one process per rank and sets ``RANK``, ``WORLD_SIZE`` and
``MASTER_ADDR``/``MASTER_PORT``; :func:`run_distributed` does the same from inside
Python, so a test or a benchmark can start a small gloo "cluster" on a laptop. Each
rank runs ``fn(*args)`` after ``init_process_group`` and returns a picklable result;
the parent gathers them in rank order. A timeout turns a hang (a mismatched
collective, a rank that died) into an error that names the ranks still running,
instead of a test suite that never ends; when one rank fails, the parent reports it
and kills the others at once rather than waiting for them in a collective that can
no longer complete. :func:`rank_device` tells a rank where its tensors belong: its GPU
under NCCL, the CPU under gloo.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import Backend


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_devices(group: dist.ProcessGroup | None = None) -> dict[str, str]:
    """Which backend of ``group`` communicates the tensors of each device type.

    Read from ``dist.get_backend_config``: ``{"cpu": "gloo", "cuda": "gloo"}`` for
    gloo, ``{"cuda": "nccl"}`` for NCCL, ``{"cpu": "gloo", "cuda": "nccl"}`` for
    ``init_process_group()`` without a backend.

    Args:
        group: the process group; ``None`` is the world.

    Returns:
        Device type -> backend name.
    """
    devices: dict[str, str] = {}
    for item in dist.get_backend_config(group).split(","):
        device_type, _, backend = item.rpartition(":")
        # A bare backend name: the device types torch lists for it.
        for t in [device_type] if device_type else Backend.backend_capability[backend]:
            devices[t] = backend
    return devices


def rank_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """The device on which this rank's tensors for ``group`` live.

    NCCL communicates only CUDA tensors, so a rank whose group sends CUDA tensors
    through NCCL uses its current GPU (the one :func:`run_distributed` selected);
    likewise an NPU under HCCL or an XPU under XCCL (:data:`BACKENDS`; those two are
    written from their libraries' registration, not run here). Every other rank
    uses the CPU. Call it inside a running process group.

    Args:
        group: the process group; ``None`` is the world.

    Returns:
        ``cuda:<current device>`` under NCCL (``npu:...`` under HCCL, ...), else
        ``cpu``.
    """
    for device_type, backend in backend_devices(group).items():
        if device_type != "cpu" and BACKENDS.get(device_type) == backend:
            module = getattr(torch, device_type)  # torch.cuda, torch.npu, torch.xpu
            return torch.device(device_type, module.current_device())
    return torch.device("cpu")


#: The collective backend of each device type, the one place the package decides it:
#: torch's own defaults (``Backend.default_device_backend_map``: cuda -> nccl,
#: xpu -> xccl, cpu -> gloo) and Huawei's ``torch_npu``, which on import registers
#: its ``"hccl"`` backend for the ``"npu"`` device (a PrivateUse1 device type).
BACKENDS = {"cuda": "nccl", "npu": "hccl", "xpu": "xccl", "cpu": "gloo"}


def accelerator_type() -> str:
    """This process's accelerator type (``"cuda"``, ``"npu"``, ...), or ``"cpu"``.

    ``torch.accelerator.current_accelerator(check_available=True)`` where the torch
    version has it (2.6 on), which also sees out-of-tree devices such as
    ``torch_npu``'s NPUs; else CUDA if available. ``"cpu"`` when none is usable.
    """
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_accelerator"):
        try:
            dev = acc.current_accelerator(check_available=True)
        except TypeError:  # torch 2.6 has no check_available
            dev = acc.current_accelerator() if acc.is_available() else None
        return dev.type if dev is not None else "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_backend(device_type: str | None = None) -> tuple[str, str]:
    """The device type and collective backend for this process: one table, one place.

    Args:
        device_type: a key of :data:`BACKENDS`; ``None`` asks
            :func:`accelerator_type`.

    Returns:
        ``(device_type, backend)``: ``("cuda", "nccl")``, ``("npu", "hccl")``,
        ``("xpu", "xccl")`` or ``("cpu", "gloo")``.

    Raises:
        ValueError: a device type without a backend here (``"mps"``, ``"tpu"``).
    """
    device_type = accelerator_type() if device_type is None else device_type
    if device_type not in BACKENDS:
        raise ValueError(
            f"device_type must be one of {sorted(BACKENDS)}, got {device_type!r}"
        )
    return device_type, BACKENDS[device_type]


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    backend: str,
    timeout: float,
    threads: int,
    args: tuple,
    kwargs: dict,
    results: mp.Queue,
    environ: dict[str, str],
    cwd: str,
) -> None:
    # A forked rank starts from the fork server's environment and folder: take the
    # parent's, as a spawned process would.
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    # The same variables torchrun sets, so code written for torchrun runs unchanged.
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(threads)  # N ranks share the cores of one machine
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world_size,
            # Longer than the parent's deadline, so a hang is reported by the parent
            # (which names the stuck ranks) rather than by one rank's own timeout.
            timeout=timedelta(seconds=2 * timeout),
        )
        out = fn(*args, **kwargs)
        # Pickle here: a tensor sent through the queue as-is would travel in shared
        # memory, which breaks once this process exits.
        payload = pickle.dumps(out)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent, never swallowed
        # Report before tearing anything down, and wait until the report is in the
        # pipe to the parent: the peers notice this rank is gone (and fail in turn)
        # only afterwards, so the parent reads this error, the cause, before theirs.
        results.put((rank, False, traceback.format_exc()))
        results.close()
        results.join_thread()
        return  # the parent kills the peers still waiting on this rank
    results.put((rank, True, payload))


# torch._dynamo: every optimizer's first step imports it (seconds of CPU).
PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "aiinfra.distributed")
"""Modules the fork server imports once, so that no rank imports them again.

Read when the server starts (the first :func:`run_distributed` of a process): a
caller that runs the functions of other modules on ranks may add them before."""


def _start_context() -> mp.context.BaseContext:
    """A fork server where the platform has one (Linux, macOS), else spawn.

    Importing torch takes seconds of CPU; a spawned rank pays it every time. The
    fork server is one process, started at the first run and kept, that imports
    :data:`PRELOAD` once and forks each rank from itself: a rank starts in
    milliseconds, and, like a spawned one, shares no state with the caller (the
    server has run no torch code, so no threads or CUDA context are inherited).
    """
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def run_distributed(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout: float = 60.0,
    threads: int | None = None,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(*args, **kwargs)`` on ``world_size`` spawned ranks and gather results.

    Args:
        fn: a module-level (picklable) function; inside it, ``dist.get_rank()`` and
            ``dist.get_world_size()`` work as under ``torchrun``.
        world_size: number of ranks, at least 1.
        *args: positional arguments passed to ``fn`` on every rank.
        backend: ``"gloo"`` (CPU) or ``"nccl"`` (one GPU per rank).
        timeout: seconds for the whole run, start-up included.
        threads: intra-op threads per rank; default shares the cores evenly.
        **kwargs: keyword arguments passed to ``fn``.

    Returns:
        The return values of ``fn``, indexed by rank.

    Raises:
        ValueError: ``world_size`` < 1, ``timeout`` <= 0, or an unknown ``backend``.
        RuntimeError: a rank raised; the message holds that rank's traceback.
        TimeoutError: ranks were still running after ``timeout`` seconds (a hang).
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // world_size)
    ctx = _start_context()
    results: mp.Queue = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(
                fn,
                r,
                world_size,
                port,
                backend,
                timeout,
                threads,
                args,
                kwargs,
                results,
                dict(os.environ),
                os.getcwd(),
            ),
            daemon=True,
        )
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(out) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(world_size)) - set(out))
                raise TimeoutError(
                    f"ranks {missing} of {world_size} still running after {timeout} s "
                    "(a hang: a mismatched or missing collective?)"
                )
            try:
                rank, ok, payload = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [
                    r
                    for r, p in enumerate(procs)
                    if r not in out and p.exitcode not in (None, 0)
                ]
                if dead:
                    raise RuntimeError(
                        f"rank {dead[0]} died with exit code {procs[dead[0]].exitcode} "
                        "before returning a result"
                    ) from None
                continue
            if not ok:
                raise RuntimeError(f"rank {rank} of {world_size} failed:\n{payload}")
            out[rank] = pickle.loads(payload)
    except BaseException:
        # A failed or hung run: the other ranks wait in a collective that will never
        # complete, so end them now instead of waiting for them to time out.
        for p in procs:
            if p.is_alive():
                p.kill()
        raise
    finally:
        for p in procs:
            p.join(timeout=5)  # ranks that returned a result are exiting
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
    return [out[r] for r in range(world_size)]
