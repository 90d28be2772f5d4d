"""Activation checkpointing: keep a segment's input, recompute the rest in backward.

A segment of the network (a layer, a few layers, the attention core) is run forward
without recording anything for backward; only its inputs are saved. When backward
reaches the segment, it runs the segment forward again, this time recording, and
backpropagates through the fresh graph (Chen et al. 2016, "Training Deep Nets with
Sublinear Memory Cost"). Memory falls from every intermediate tensor to the inputs;
the price is one more forward pass of the segment. Dropout must draw the same masks
both times, so the random-number state at the segment's start is saved and restored.
This is the reentrant scheme of ``torch.utils.checkpoint(..., use_reentrant=True)``;
Korthikanti et al. 2022 call it full recomputation when the segment is a layer and
selective recomputation when it is the attention core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class Checkpoint(torch.autograd.Function):
    """Run ``run_function(*args)`` without saving its activations; redo it in backward.

    Only the tensor arguments are saved (``ctx.save_for_backward``). Gradients reach
    the parameters used inside ``run_function`` through the recomputed graph, so at
    least one argument must require grad for autograd to call :meth:`backward` at all.
    """

    @staticmethod
    def forward(
        ctx: Any, run_function: Callable[..., torch.Tensor], *args: torch.Tensor
    ) -> torch.Tensor:
        """Run the segment without recording it; keep its inputs and RNG states."""
        ctx.run_function = run_function
        # Dropout inside the segment must draw the same masks when it is recomputed.
        ctx.cpu_rng = torch.get_rng_state()
        ctx.cuda_devices = sorted({a.device.index for a in args if a.is_cuda})
        ctx.cuda_rng = [torch.cuda.get_rng_state(d) for d in ctx.cuda_devices]
        ctx.save_for_backward(*args)
        with torch.no_grad():  # nothing inside is recorded, so nothing is saved
            return run_function(*args)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        """Recompute the segment with the saved RNG states, then backpropagate."""
        # region recompute
        inputs = [a.detach().requires_grad_(a.requires_grad) for a in ctx.saved_tensors]
        with torch.random.fork_rng(devices=ctx.cuda_devices):
            torch.set_rng_state(ctx.cpu_rng)
            for device, state in zip(ctx.cuda_devices, ctx.cuda_rng, strict=True):
                torch.cuda.set_rng_state(state, device)
            with torch.enable_grad():
                output = ctx.run_function(*inputs)  # forward again, now recorded
        torch.autograd.backward(output, grad_output)  # grads of the parameters, too
        # endregion
        return (None, *(x.grad if x.requires_grad else None for x in inputs))


def checkpoint(run_function: Callable[..., torch.Tensor], *args: torch.Tensor) -> Any:
    """Apply ``run_function`` to ``args`` with activation checkpointing.

    Args:
        run_function: the segment; returns one tensor. It must be deterministic
            apart from the random-number draws, which are replayed.
        *args: tensor inputs, at least one requiring grad.

    Returns:
        ``run_function(*args)``, with a backward that recomputes it.

    Raises:
        TypeError: an argument is not a tensor.
        ValueError: no argument requires grad (the parameters inside would get
            no gradient).
    """
    if not all(isinstance(a, torch.Tensor) for a in args):
        raise TypeError("checkpoint: every argument must be a tensor")
    if torch.is_grad_enabled() and not any(a.requires_grad for a in args):
        raise ValueError(
            "checkpoint: at least one argument must require grad, otherwise "
            "backward never reaches the segment"
        )
    return Checkpoint.apply(run_function, *args)


def checkpoint_sequential(
    layers: list[torch.nn.Module], segments: int, x: torch.Tensor
) -> torch.Tensor:
    """Run ``layers`` in order as ``segments`` checkpointed segments.

    Segment sizes differ by at most one layer (the first ones take the remainder).

    Args:
        layers: modules applied in order, each mapping a tensor to a tensor.
        segments: k, the number of segments, 1 to ``len(layers)``.
        x: the input of the first layer, requiring grad.

    Returns:
        The output of the last layer.

    Raises:
        ValueError: ``segments`` is not between 1 and ``len(layers)``.
    """
    n = len(layers)
    if not 1 <= segments <= n:
        raise ValueError(f"segments must be between 1 and {n} layers, got {segments}")
    start = 0
    for j in range(segments):
        size = n // segments + (1 if j < n % segments else 0)
        segment = layers[start : start + size]
        start += size

        def run(h: torch.Tensor, segment: list = segment) -> torch.Tensor:
            for layer in segment:
                h = layer(h)
            return h

        x = checkpoint(run, x)
    return x
