"""What a container is, read from the kernel: namespaces, cgroup limits, image sizes.

A container is not a virtual machine: it is an ordinary process that the kernel
gives its own *namespaces* (what it can see: mounts, process IDs, the network) and
puts in a *cgroup* (what it may use: CPU time, memory). Both are visible from inside,
in ``/proc/<pid>/ns/*`` (one symbolic link per namespace, ``mnt:[4026531841]``, whose
inode number names the namespace) and in ``/proc/self/cgroup`` with the cgroup v2
files ``cpu.max`` and ``memory.max`` (Linux man pages namespaces(7), cgroups(7)).
This module reads them, lists what the NVIDIA Container Toolkit adds to a GPU
container, and measures what the Python distributions of an image weigh.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

#: What each namespace type isolates, in the words of namespaces(7).
NAMESPACE_ISOLATES = {
    "cgroup": "cgroup root directory",
    "ipc": "System V IPC, POSIX message queues",
    "mnt": "mount points",
    "net": "network devices, stacks, ports",
    "pid": "process IDs",
    "time": "boot and monotonic clocks",
    "user": "user and group IDs",
    "uts": "hostname and NIS domain name",
}

#: The fixed inode of each initial (host) namespace, include/linux/proc_ns.h (since
#: Linux 3.8; time since 5.6). mnt and net have none on older kernels.
INITIAL_INODES = {
    "ipc": 0xEFFFFFFF,
    "uts": 0xEFFFFFFE,
    "user": 0xEFFFFFFD,
    "pid": 0xEFFFFFFC,
    "cgroup": 0xEFFFFFFB,
    "time": 0xEFFFFFFA,
}

#: What the NVIDIA Container Toolkit puts into a GPU container, and from where:
#: (item, path in the container, what provides it). The image carries none of it.
GPU_INJECTS = (
    ("GPU device node", "/dev/nvidia0 ... /dev/nvidiaN", "host kernel driver"),
    ("control device node", "/dev/nvidiactl", "host kernel driver"),
    ("unified memory device", "/dev/nvidia-uvm", "host kernel driver"),
    ("unified memory tools", "/dev/nvidia-uvm-tools", "host kernel driver"),
    ("CUDA driver library", "libcuda.so.1", "host driver, compute capability"),
    ("NVML library", "libnvidia-ml.so.1", "host driver, utility capability"),
    ("management tool", "nvidia-smi", "host driver, utility capability"),
)
#: NVIDIA's documentation of the driver capabilities and of CDI.
GPU_INJECTS_SOURCE = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
    "docker-specialized.html"
)

_NS_LINK = re.compile(r"(?P<type>[a-z_]+):\[(?P<inode>\d+)\]")


def namespaces(pid: int | str = "self", proc: Path = Path("/proc")) -> dict[str, int]:
    """The namespaces of a process: type -> inode, from ``/proc/<pid>/ns``.

    Two processes are in the same namespace of a type exactly when these inodes
    are equal. Types the kernel does not have (``time`` before Linux 5.6) are left
    out.

    Args:
        pid: a process ID >= 1, or ``"self"`` for the calling process.
        proc: where procfs is mounted.

    Returns:
        ``{"mnt": 4026531841, ...}``, one entry per type of NAMESPACE_ISOLATES.

    Raises:
        ValueError: ``pid`` is not >= 1 nor ``"self"``, or a link is malformed.
    """
    if pid != "self" and not (isinstance(pid, int) and pid >= 1):
        raise ValueError(f"pid must be an int >= 1 or 'self', got {pid!r}")
    found = {}
    for kind in NAMESPACE_ISOLATES:
        link = proc / str(pid) / "ns" / kind
        try:
            target = os.readlink(link)
        except FileNotFoundError:
            continue
        m = _NS_LINK.fullmatch(target)
        if m is None or m["type"] != kind:
            raise ValueError(f"{link}: expected '{kind}:[inode]', got {target!r}")
        found[kind] = int(m["inode"])
    return found


def parse_cpu_max(text: str, where: str = "cpu.max") -> float | None:
    """CPU cores a cgroup may use from its ``cpu.max``: ``"$MAX $PERIOD"``.

    ``"max 100000"`` means no limit; ``"200000 100000"`` allows 200 ms of CPU
    time every 100 ms, that is 2 cores.

    Raises:
        ValueError: the line is not two fields, or a field is not a positive int.
    """
    fields = text.split()
    if len(fields) != 2 or not fields[1].isdigit() or int(fields[1]) == 0:
        raise ValueError(
            f"{where}: expected 'max PERIOD' or 'QUOTA PERIOD', got {text!r}"
        )
    if fields[0] == "max":
        return None
    if not fields[0].isdigit():
        raise ValueError(f"{where}: quota must be 'max' or an int, got {text!r}")
    return int(fields[0]) / int(fields[1])


def parse_memory_max(text: str, where: str = "memory.max") -> int | None:
    """Bytes a cgroup may use from its ``memory.max``: ``"max"`` or an int.

    Raises:
        ValueError: the line is neither ``max`` nor a non-negative int.
    """
    value = text.strip()
    if value == "max":
        return None
    if not value.isdigit():
        raise ValueError(f"{where}: expected 'max' or bytes, got {text!r}")
    return int(value)


def _tighter(a: float | None, b: float | None) -> float | None:
    """The smaller of two limits, None meaning no limit."""
    return b if a is None else a if b is None else min(a, b)


def cgroup_limits(
    root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self/cgroup")
) -> dict:
    """The CPU and memory limits of the calling process's cgroup v2.

    The cgroup is the path of the ``0::/path`` line of ``proc``; a limit set on any
    ancestor applies too, so the tightest along the path from ``root`` wins. A
    level without the file (the root cgroup has neither) sets no limit.

    Args:
        root: where the cgroup v2 hierarchy is mounted.
        proc: the process's cgroup file.

    Returns:
        ``{"cgroup": "/path", "cpus": cores or None, "memory_bytes": bytes or None}``.

    Raises:
        ValueError: ``proc`` has no ``0::`` line (a cgroup v1 only system), or a
            ``cpu.max`` / ``memory.max`` line is malformed (naming the file).
    """
    lines = proc.read_text(encoding="utf-8").splitlines()
    v2 = [line for line in lines if line.startswith("0::")]
    if len(v2) != 1 or not v2[0][3:].startswith("/"):
        raise ValueError(
            f"{proc}: expected one '0::/path' line (cgroup v2), got {lines!r}"
        )
    path = v2[0][3:]
    parts = [p for p in path.split("/") if p]
    cpus, memory = None, None
    for depth in range(len(parts) + 1):
        level = root.joinpath(*parts[:depth])
        cpu_file, mem_file = level / "cpu.max", level / "memory.max"
        if cpu_file.is_file():
            cpus = _tighter(cpus, parse_cpu_max(cpu_file.read_text(), str(cpu_file)))
        if mem_file.is_file():
            memory = _tighter(
                memory, parse_memory_max(mem_file.read_text(), str(mem_file))
            )
    return {"cgroup": path, "cpus": cpus, "memory_bytes": memory}


def distribution_sizes(top: int = 8) -> list[tuple[str, int]]:
    """Installed bytes of the largest Python distributions of this environment.

    Each distribution's size is the sum of the sizes of the files its RECORD
    lists (what ``pip install`` wrote); the rest are summed as ``"other"``.

    Args:
        top: how many distributions to name, >= 1.

    Returns:
        ``[(name, bytes), ...]``, largest first, then ``("other", bytes)``.

    Raises:
        ValueError: ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    sizes: dict[str, int] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        total = 0
        for f in dist.files or []:
            path = Path(dist.locate_file(f))
            if path.is_file():
                total += path.stat().st_size
        sizes[name] = sizes.get(name, 0) + total  # a name installed twice adds up
    ranked = sorted(sizes.items(), key=lambda kv: kv[1], reverse=True)
    return ranked[:top] + [("other", sum(v for _, v in ranked[top:]))]


def dockerfile_pip_installs(text: str) -> list[list[str]]:
    """The arguments of each ``RUN pip install`` of a Dockerfile, in order.

    An ``--index-url`` (a build argument such as ``"${TORCH_INDEX}"``) is dropped:
    the replay takes the index of the machine that runs it. Quotes are removed.

    Args:
        text: the Dockerfile.

    Raises:
        ValueError: the Dockerfile has no ``RUN pip install`` line.
    """
    installs = []
    for line in text.splitlines():
        words = line.replace('"', "").split()
        if words[:3] != ["RUN", "pip", "install"]:
            continue
        args, rest = [], iter(words[3:])
        for word in rest:
            if word == "--index-url":
                next(rest, None)
            elif not word.startswith("--index-url="):
                args.append(word)
        installs.append(args)
    if not installs:
        raise ValueError("the Dockerfile has no 'RUN pip install' line to replay")
    return installs


def image_distribution_sizes(
    dockerfile: Path, context: Path, top: int = 8, python: str | None = None
) -> dict:
    """Replay a Dockerfile's ``pip install`` lines in a new venv and weigh them.

    The distributions are measured as :func:`distribution_sizes` does. This is
    the image's Python layer without Docker: the same ``python -m venv``,
    the same installs in the same order (``./`` is the build context), on the
    machine's own index (the CPU wheel of torch where pip finds that one).

    Args:
        dockerfile: the Dockerfile whose installs are replayed.
        context: the build context that ``./`` names.
        top: how many distributions to name, >= 1.
        python: the interpreter that makes the environment (default: this one).

    Returns:
        ``{"installs": [[arg, ...], ...], "sizes": [[name, bytes], ...]}``.

    Raises:
        ValueError: ``top`` < 1, or the Dockerfile installs nothing.
        FileNotFoundError: ``dockerfile`` or ``context`` does not exist.
        RuntimeError: an install failed (pip's output is in the message).
    """
    import json
    import subprocess
    import sys
    import tempfile

    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    for name, path in (("dockerfile", dockerfile), ("context", context)):
        if not Path(path).exists():
            raise FileNotFoundError(f"{name} {path} does not exist")
    installs = dockerfile_pip_installs(Path(dockerfile).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="aiinfra-image-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python or sys.executable, "-m", "venv", str(venv)], check=True)
        py = str(venv / "bin" / "python")
        for args in installs:
            # ./ is the context; ./[cloud] the context with an extra.
            ctx = str(Path(context).resolve())
            args = [ctx + a[2:] if a.startswith("./") else a for a in args]
            cmd = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            proc = subprocess.run(
                [*cmd, *args], capture_output=True, text=True, check=False
            )
            if proc.returncode:
                raise RuntimeError(
                    f"pip install {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"
                )
        # The environment measures itself with this module's own function.
        code = (
            "import json, importlib.util, sys; "
            "spec = importlib.util.spec_from_file_location('c', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(json.dumps(m.distribution_sizes(int(sys.argv[2]))))"
        )
        out = subprocess.run(
            [py, "-c", code, __file__, str(top)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return {"installs": installs, "sizes": [list(p) for p in json.loads(out)]}


def measure(dockerfile: Path, context: Path, top: int = 8) -> dict:
    """What the containers page shows, measured once and stamped.

    Returns:
        A dict: ``namespaces``, this process's namespaces (``{type: inode}``);
        ``new_namespaces``, how many of those with a fixed initial inode are not
        the host's; ``cgroup``, its cgroup limits (``None`` where the machine has no
        cgroup v2); and ``image``, :func:`image_distribution_sizes`.
    """
    ours = namespaces()
    fixed = [k for k in INITIAL_INODES if k in ours]
    try:
        limits = cgroup_limits()
    except (OSError, ValueError):
        limits = None
    return {
        "namespaces": ours,
        "new_namespaces": sum(ours[k] != INITIAL_INODES[k] for k in fixed),
        "cgroup": limits,
        "image": {
            "dockerfile": Path(dockerfile).name,
            **image_distribution_sizes(dockerfile, context, top),
        },
    }
