"""Tables of the mixed-precision section, computed when the book is built.

Two tables run the section's mechanisms: a loss-scale trace of
:class:`aiinfra.precision.loss_scaler.DynamicLossScaler` beside
``torch.amp.GradScaler``, and small updates with and without
:class:`aiinfra.precision.master_weights.MasterWeights`.
"""

from __future__ import annotations

import torch

from aiinfra.precision.formats import float_format
from aiinfra.precision.loss_scaler import DynamicLossScaler
from aiinfra.precision.master_weights import MasterWeights
from aiinfra.report import Table

COLOURS = {"sign": "#d62728", "exponent": "#1f77b4", "mantissa": "#2ca02c"}


def loss_scale_trace(
    steps: int = 10, overflow_at: tuple[int, ...] = (2, 3, 8), growth_interval: int = 3
) -> Table:
    """The loss scale step by step, ours beside ``torch.amp.GradScaler("cpu")``.

    Args:
        steps: optimizer steps of a small linear model.
        overflow_at: steps whose gradient gets an injected inf.
        growth_interval: clean steps before the scale doubles.

    Returns:
        One row per step: overflow, whether each scaler stepped, both scales.
    """
    g = torch.Generator().manual_seed(0)
    models = [torch.nn.Linear(4, 1) for _ in range(2)]
    weight, bias = torch.randn(1, 4, generator=g), torch.randn(1, generator=g)
    for model in models:  # the same start for both
        with torch.no_grad():
            model.weight.copy_(weight)
            model.bias.copy_(bias)
    scalers = [
        DynamicLossScaler(init_scale=2.0**10, growth_interval=growth_interval),
        torch.amp.GradScaler(
            "cpu", init_scale=2.0**10, growth_interval=growth_interval
        ),
    ]
    opts = [torch.optim.SGD(m.parameters(), lr=0.01) for m in models]
    rows = []
    for step in range(steps):
        x = torch.randn(8, 4, generator=g)
        row: list = [step, "inf" if step in overflow_at else ""]
        for model, scaler, opt in zip(models, scalers, opts, strict=True):
            opt.zero_grad()
            scaler.scale(model(x).pow(2).mean()).backward()
            if step in overflow_at:
                model.weight.grad[0, 0] = float("inf")
            before = model.weight.detach().clone()
            scaler.step(opt)
            scaler.update()
            row.append("yes" if not torch.equal(before, model.weight) else "skipped")
        row += [scalers[0].get_scale(), scalers[1].get_scale()]
        rows.append(row)
    return Table(
        columns=[
            "step",
            "gradient",
            "ours stepped",
            "GradScaler stepped",
            "ours: scale after",
            "GradScaler: scale after",
        ],
        rows=rows,
        note="Backoff 0.5, growth 2; an inf is written into one gradient at the "
        "marked steps.",
        stamp=f"growth_interval = {growth_interval}",
    )


def master_weights_table(steps: int = 100) -> Table:
    """A weight of 1 after ``steps`` SGD updates of eps/4, without and with masters.

    Args:
        steps: number of updates.

    Returns:
        One row per 16-bit format: the update, the weight without master weights,
        with them, and the exact fp64 result.
    """
    rows = []
    for name in ("bf16", "fp16"):
        dtype = torch.bfloat16 if name == "bf16" else torch.float16
        update = float_format(name).eps / 4
        result = []
        for master in (False, True):
            w = torch.nn.Parameter(torch.ones(1, dtype=dtype))
            make = lambda ps, u=update: torch.optim.SGD(ps, lr=u)  # noqa: E731
            opt = MasterWeights([w], make) if master else make([w])
            for _ in range(steps):
                w.grad = torch.ones_like(w)
                opt.step()
            result.append(f"{w.item():.6g}")
        rows.append([name, f"{update:.3g}", *result, f"{1 - steps * update:.6g}"])
    return Table(
        columns=[
            "model dtype",
            "update (eps/4)",
            "without master",
            "with fp32 master",
            "exact",
        ],
        rows=rows,
        note="SGD on a weight of 1.",
        stamp="{steps} steps",
        fields={"steps": steps},
    )
