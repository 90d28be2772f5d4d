"""What ``docs/cloud/containers.rst`` shows: namespaces, the GPU stack, image sizes.

The namespaces and the distribution sizes are measured once and stamped
(``aiinfra bench container``: ``docs/_data/bench/container-cpu.json``), so the page
is the same wherever the book is built; the toolkit's injections are sourced data of
:mod:`aiinfra.cloud.container`.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from aiinfra import results
from aiinfra.cloud import container as ct
from aiinfra.report import Table, mark_names

__all__ = [
    "environment_mb",
    "gpu_container_figure",
    "gpu_injection_table",
    "image_sizes_figure",
    "namespace_table",
    "new_namespaces",
    "torch_share",
]


def _measured() -> dict:
    return results.load("container", "cpu")


def namespace_table() -> Table:
    """The measuring process's namespaces (stamped).

    Type, inode, what it isolates, whether the host's.
    """
    res = _measured()
    rows = []
    for kind, inode in res["namespaces"].items():
        first = ct.INITIAL_INODES.get(kind)
        host = "-" if first is None else "yes" if inode == first else "no"
        rows.append([kind, inode, ct.NAMESPACE_ISOLATES[kind], host])
    note = (
        "Read from /proc/self/ns. What it isolates: namespaces(7). Host's: "
        "whether the inode is the fixed one the kernel gives its initial namespace "
        "(include/linux/proc_ns.h); mnt and net have none on older kernels."
    )
    columns = ["namespace", "inode", "what it isolates", "host's"]
    stamp, fields = results.measured_on(res["stamp"])
    return Table(columns, rows, note, stamp=stamp, words=(2, 3), fields=fields)


def new_namespaces() -> int:
    """How many measured namespaces with a fixed initial inode are not the host's."""
    return _measured()["new_namespaces"]


def gpu_injection_table() -> Table:
    """What the NVIDIA Container Toolkit mounts into a GPU container, from where."""
    note = (
        "From NVIDIA's Container Toolkit documentation (driver capabilities and "
        "CDI support) and the CDI spec that nvidia-ctk cdi generate writes: the "
        "device nodes and the driver's libraries and tools come from the host."
    )
    rows = [list(r) for r in ct.GPU_INJECTS]
    columns = ["item", "path in the container", "provided by"]
    return Table(columns, rows, note, words=(0, 2))


def _box(ax, x, y, w, h, text, color, size=10) -> None:  # noqa: ANN001
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.02", fc=color, ec="black", lw=0.8
        )
    )
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def gpu_container_figure() -> Figure:
    """The layers of a GPU container: image, toolkit hook or CDI, host driver."""
    fig = Figure(figsize=(9, 5.2), layout="constrained")
    ax = fig.add_subplot()
    # the host at the bottom, the container on top, the runtime between them
    _box(ax, 0.0, 0.0, 10.0, 1.0, "GPUs", "#d9d2e9")
    _box(ax, 0.0, 1.2, 10.0, 1.0, "host kernel and NVIDIA kernel driver", "#cfe2f3")
    _box(ax, 1.4, 2.4, 3.4, 1.2, "container runtime", "#eeeeee")
    _box(ax, 5.2, 2.4, 3.4, 1.2, "toolkit hook or CDI spec", "#fce5cd")
    ax.add_patch(
        FancyBboxPatch(
            (0.0, 4.2), 10.0, 3.2, boxstyle="round,pad=0.02", fc="white", ec="black"
        )
    )
    ax.text(0.2, 7.1, "container", fontsize=11, va="center", weight="bold")
    image = "from the image: training code, PyTorch, CUDA libraries"
    _box(ax, 0.3, 5.6, 9.4, 1.1, image, "#d9ead3")
    _box(ax, 0.3, 4.4, 4.5, 0.8, "from the host: device nodes", "#fce5cd")
    _box(ax, 5.2, 4.4, 4.5, 0.8, "from the host: driver libraries", "#fce5cd")
    for x in (0.9, 9.1):  # mounted from the host at container start
        ax.annotate(
            "",
            xy=(x, 4.4),
            xytext=(x, 2.2),
            arrowprops={"arrowstyle": "->", "color": "tab:orange", "lw": 1.6},
        )
    ax.text(5.0, 3.9, "mounted at container start", ha="center", fontsize=10)
    ax.set_xlim(-0.2, 10.2)
    ax.set_ylim(-0.2, 7.6)
    ax.axis("off")
    return fig


def _sizes() -> list[tuple[str, int]]:
    return [(name, size) for name, size in _measured()["image"]["sizes"]]


def image_sizes_figure() -> Figure:
    """Installed MB of the training image's largest distributions (stamped)."""
    sizes = _sizes()[::-1]  # largest at the top
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.add_subplot()
    names = [n for n, _ in sizes]
    mb = [b / 1e6 for _, b in sizes]
    colors = ["tab:grey" if n == "other" else "tab:blue" for n in names]
    ax.barh(names, mb, color=colors)
    for y, v in enumerate(mb):
        ax.text(v, y, f" {v:.0f}", va="center", fontsize=9)
    ax.set_xlabel("installed size (MB)")
    ax.set_xlim(0, max(mb) * 1.15)
    ax.tick_params(labelsize=10)
    return mark_names(fig, (n for n in names if n != "other"))


def environment_mb() -> float:
    """Installed MB of every Python distribution of the training image (stamped)."""
    return sum(b for _, b in _sizes()) / 1e6


def torch_share() -> float:
    """The ``torch`` distribution's share of the image's installed bytes."""
    sizes = dict(_sizes())
    return sizes.get("torch", 0) / sum(sizes.values())
