"""What ``torch.autocast`` runs in which dtype, measured.

Autocast does not cast a model: it casts the inputs of each op as the op is called,
from per-device lists (PyTorch's "Automatic Mixed Precision" documentation). Ops in
the lower-precision list (matmuls, linear, convolutions) run in bf16 or fp16, where
tensor cores are fast and the fp32 accumulation inside them keeps the sum accurate;
ops in the fp32 list (on CUDA: softmax, log-softmax, norms, sums, exp/log, the
losses) run in fp32, because they sum many terms or grow small differences; every
other op runs in the dtype of its inputs, with the usual type promotion (``add``
of a bf16 activation and an fp32 bias gives fp32 though ``add`` is on no list). The
CUDA lists are read from torch's own source (:func:`torch_autocast_lists`). The lists
differ by device: on CPU the fp32 list holds the losses but not softmax or the norms.
Here each op gets the bf16 output of a linear layer, as in a model, and the output
dtype it produces under autocast is read back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from aiinfra.report import Table

# Where each op stands in the CUDA autocast lists, as torch's own source defines
# them (ATen/autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
# AT_FORALL_FP32_SET_OPT_DTYPE; :func:`torch_autocast_lists` reads them).
# cross_entropy is on no list itself: it runs log_softmax and nll_loss, both fp32.
# relu and add are on no list: they run in their inputs' dtype, and bf16 + fp32
# gives fp32 by ordinary type promotion.
CUDA_LIST = {
    "linear": "low precision",
    "matmul": "low precision",
    "conv1d": "low precision",
    "softmax": "float32",
    "log_softmax": "float32",
    "layer_norm": "float32",
    "sum": "float32",
    "exp": "float32",
    "cross_entropy": "float32 through the ops it calls",
    "mse_loss": "float32",
    "relu": "on no list: the input dtype",
    "add (fp32 bias)": "on no list: type promotion",
}
#: The ATen ops behind a row whose op autocast sees by another name.
ATEN_OPS = {"cross_entropy": ("log_softmax", "nll_loss"), "add (fp32 bias)": ("add",)}
#: The macros of ATen/autocast_mode.h that list the ops, by policy.
AUTOCAST_MACROS = {
    "low precision": ("AT_FORALL_LOWER_PRECISION_FP",),
    "float32": ("AT_FORALL_FP32", "AT_FORALL_FP32_SET_OPT_DTYPE"),
    "promote": ("AT_FORALL_PROMOTE",),
}


def torch_autocast_lists(header: Path | None = None) -> dict[str, frozenset[str]]:
    """The op lists of torch's autocast, read from the installed ATen header.

    Args:
        header: ``ATen/autocast_mode.h``; default: the one shipped with torch.

    Returns:
        Policy (``"low precision"``, ``"float32"``, ``"promote"``) to op names.

    Raises:
        FileNotFoundError: the header is not installed.
    """
    if header is None:
        header = Path(torch.__file__).parent / "include/ATen/autocast_mode.h"
    text = header.read_text()
    out = {}
    for policy, macros in AUTOCAST_MACROS.items():
        ops: set[str] = set()
        for macro in macros:
            body = re.search(rf"#define {macro}\(_\)(.*?)\n\n", text, re.S)
            if body is None:
                raise ValueError(f"{header} has no {macro}")
            ops |= set(re.findall(r"_\((\w+)", body.group(1)))
        out[policy] = frozenset(ops)
    return out


def _ops(device: str) -> dict[str, Callable[[], torch.Tensor]]:
    """The ops of :data:`CUDA_LIST`, each fed what a model would feed it."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 16, generator=g).to(device)  # (T, C) fp32 activations
    w = torch.randn(16, 16, generator=g).to(device)  # (C, C) fp32 weight
    kernel = torch.randn(16, 16, 3, generator=g).to(device)  # (C_out, C_in, k)
    target = torch.randint(0, 16, (4,), generator=g).to(device)  # (T,)
    bias = torch.randn(16, generator=g).to(device)  # (C,) fp32

    def h() -> torch.Tensor:  # the output of a linear layer: low precision
        return F.linear(x, w)  # (T, C)

    return {
        "linear": h,
        "matmul": lambda: x @ w,
        "conv1d": lambda: F.conv1d(x.T.unsqueeze(0), kernel),  # (1, C, T - 2)
        "softmax": lambda: torch.softmax(h(), dim=-1),
        "log_softmax": lambda: torch.log_softmax(h(), dim=-1),
        "layer_norm": lambda: F.layer_norm(h(), (16,)),
        "sum": lambda: h().sum(),
        "exp": lambda: h().exp(),
        "cross_entropy": lambda: F.cross_entropy(h(), target),
        "mse_loss": lambda: F.mse_loss(h(), x),
        "relu": lambda: F.relu(h()),
        "add (fp32 bias)": lambda: h() + bias,
    }


def autocast_dtypes(
    device_type: str = "cpu", dtype: torch.dtype = torch.bfloat16
) -> dict[str, torch.dtype]:
    """Output dtype of each op of :data:`CUDA_LIST` under ``torch.autocast``.

    Args:
        device_type: ``"cpu"`` (or ``"cuda"`` where a GPU is present).
        dtype: the low-precision dtype, ``torch.bfloat16`` or ``torch.float16``.

    Returns:
        Op name to the dtype of its output.

    Raises:
        ValueError: another device type or dtype.
    """
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    ops = _ops(device_type)
    with torch.autocast(device_type, dtype=dtype):
        return {name: op().dtype for name, op in ops.items()}


def autocast_table() -> Table:
    """Each op's output dtype under ``torch.autocast("cpu", dtype=torch.bfloat16)``."""
    short = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
    measured = autocast_dtypes("cpu", torch.bfloat16)
    rows = [
        [name, short.get(dt, str(dt)), CUDA_LIST[name]] for name, dt in measured.items()
    ]
    return Table(
        columns=["op (input: a linear's output)", "CPU output (measured)", "CUDA list"],
        rows=rows,
        note="Under torch.autocast with bfloat16; the CUDA column is the list the op "
        "belongs to in torch's source (ATen/autocast_mode.h, as the tests read it).",
        stamp=f"PyTorch {torch.__version__.split('+')[0]}",
    )
