"""Run a pipeline schedule on ranks: a Transformer in stages, point-to-point sends.

The model is cut into p v stages of L / (p v) consecutive blocks; the embedding
joins the first stage, the final norm, the head and the loss the last. Rank r holds
stages r, r + p, ..., as the interleaved schedule wants (Narayanan et al. 2021, Sec.
2.2.2). Each rank runs its actions of a :class:`~aiinfra.parallel.pipeline.schedules.
Schedule`: F receives a stage's input and sends its output on, B receives the output
gradient and sends the input gradient back, and W (zero-bubble schedules, Qi et al.
2024) computes the weight gradients B left out. Two ranks must post the transfers
between them in the same order: NCCL runs both directions between a pair on one
stream, and in two different orders each rank's first receive can wait for a send
queued behind the other rank's receive. So every rank walks one global list of
events, computed alike on every rank from the schedule's simulated timeline, posts
the transfers that concern it in that order, and waits for a receive only when a
pass needs its tensor.
Notation: p ranks, m micro-batches of b sequences, v chunks per rank, L layers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn import functional

from aiinfra import checks
from aiinfra.comm.primitives import isendrecv
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.pipeline.schedules import Action, Schedule
from aiinfra.parallel.pipeline.simulator import simulate


def stage_layers(n_layers: int, p: int, v: int = 1) -> list[range]:
    """The blocks of each of the p v stages, in order: L / (p v) consecutive each.

    Raises:
        ValueError: p or v not an int >= 1, more stages than layers, or L not a
            multiple of p v.
    """
    for name, value in (("p", p), ("v", v), ("n_layers", n_layers)):
        checks.positive_int(name, value)
    n = p * v
    if n > n_layers:
        raise ValueError(
            f"p * v = {n} stages but only n_layers = {n_layers} layers: every "
            "stage needs at least one block"
        )
    if n_layers % n:
        raise ValueError(
            f"n_layers = {n_layers} must be a multiple of p * v = {n}: the blocks "
            "are split evenly over the stages"
        )
    k = n_layers // n
    return [range(s * k, (s + 1) * k) for s in range(n)]


class PipelineStage(nn.Module):
    """Consecutive blocks of a :class:`~aiinfra.models.transformer.Transformer`.

    The first stage also embeds the tokens, the last applies the final norm and the
    head. The modules are the model's own (shared, not copied).

    Args:
        model: the whole model.
        blocks: indices of this stage's blocks.
        first: whether this stage embeds the tokens.
        last: whether it produces the logits.
    """

    def __init__(
        self, model: Transformer, blocks: range, first: bool, last: bool
    ) -> None:
        super().__init__()
        self.embed = model.embed if first else None
        self.pos_embed = model.pos_embed if first else None
        self.blocks = nn.ModuleList(model.blocks[i] for i in blocks)
        self.norm = model.norm if last else None
        self.head = model.head if last else None

    def forward(self, x: Tensor) -> Tensor:
        """Tokens ``(b, T)`` or activations ``(b, T, h)`` in; ``(b, T, h)`` out.

        The last stage returns logits ``(b, T, V)`` instead.
        """
        if self.embed is not None:
            T = x.shape[1]
            x = self.embed(x)  # (b, T, h)
            if self.pos_embed is not None:
                x = x + self.pos_embed(torch.arange(T, device=x.device))  # (b, T, h)
        for block in self.blocks:
            x = block(x)  # (b, T, h)
        if self.head is not None:
            x = self.head(self.norm(x))  # (b, T, V)
        return x


def _backward(
    out: Tensor,
    grad: Tensor | None,
    inputs: list[Tensor] | None = None,
    keep: bool = False,
) -> None:
    """``out.backward(grad)``, through the scalar ``sum(out * grad)``.

    The same gradients, without the first-call import of sympy (about a second on
    a small CPU) that a non-scalar backward pays. ``grad`` None: ``out`` is the
    loss. ``inputs``: only these get gradients; ``keep``: retain the graph.
    """
    scalar = out if grad is None else (out * grad).sum()
    scalar.backward(inputs=inputs, retain_graph=keep)


def _events(schedule: Schedule) -> list[tuple]:
    """Every compute and every transfer of a step, in one order all ranks share.

    Sorted by the time of the unit-cost timeline (a transfer at its producer's
    end, before computes that start then): whichever event comes first globally,
    the ranks it involves have finished all their earlier ones, so nobody waits
    forever, and each pair of ranks meets its transfers in the same order.
    """
    events, last = [], schedule.n_stages - 1
    for span in simulate(schedule).spans:
        a, s = span.action, schedule.stage(span.action)
        events.append((span.start, 1, s, a.microbatch, a.kind, a))
        to = {"F": s + 1, "B": s - 1}.get(a.kind, -1)  # W sends nothing
        if 0 <= to <= last and to % schedule.p != a.rank:
            events.append((span.end, 0, s, a.microbatch, a.kind, (s, to)))
    return [e[3:] for e in sorted(events, key=lambda e: e[:5])]


class PipelineExecutor:
    """One rank's part of a pipeline: its stages, and its share of each step.

    Args:
        model: the whole model, identical on every rank (only this rank's stages
            are used); tensors on :func:`~aiinfra.distributed.rank_device`.
        schedule: the schedule all ranks follow; ``schedule.p`` ranks.
        group: the pipeline's process group (``None``: the world).

    Raises:
        ValueError: the group size is not ``schedule.p``, the model ties its
            embedding and head (they would sit on two ranks), or the layers do not
            split into ``p v`` equal stages.
    """

    def __init__(
        self,
        model: Transformer,
        schedule: Schedule,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        if dist.get_world_size(group) != schedule.p:
            raise ValueError(
                f"schedule.p = {schedule.p} must equal the group size "
                f"{dist.get_world_size(group)}: one rank per pipeline position"
            )
        if model.config.tie_embeddings:
            raise ValueError(
                "model.config.tie_embeddings must be False: the tied matrix would "
                "live on the first and the last stage at once"
            )
        layers = stage_layers(model.config.n_layers, schedule.p, schedule.v)
        self.schedule, self.group = schedule, group
        self.rank = dist.get_rank(group)
        last = schedule.n_stages - 1
        self.stages = {
            s: PipelineStage(model, layers[s], s == 0, s == last)
            for s in range(self.rank, schedule.n_stages, schedule.p)
        }
        self.hidden, self.events = model.config.d_model, _events(schedule)
        self.dtype, self.device = model.embed.weight.dtype, model.embed.weight.device
        self.peak_saved = 0  # most micro-batch chunks held for backward at once

    def step(self, tokens: Tensor, targets: Tensor) -> Tensor | None:
        """Forward and backward of one batch; gradients accumulate in ``.grad``.

        Args:
            tokens: ``(B, T)`` token ids, ``B = m b``; micro-batch i is rows
                ``i b .. (i + 1) b - 1``.
            targets: ``(B, T)`` next-token ids.

        Returns:
            On the rank of the last stage, the loss: the mean over micro-batches
            of each one's mean cross-entropy. ``None`` on the other ranks.

        Raises:
            ValueError: ``tokens`` and ``targets`` differ in shape, are not 2-D, or
                B is not a multiple of m.
        """
        m = self.schedule.m
        if tokens.dim() != 2 or tokens.shape != targets.shape or len(tokens) % m:
            raise ValueError(
                f"tokens and targets must both be (B, T) with B a multiple of m = "
                f"{m}, got {tuple(tokens.shape)} and {tuple(targets.shape)}"
            )
        self.inputs, self.targets = tokens.chunk(m), targets.chunk(m)
        self.inbox: dict[tuple, tuple] = {}  # (kind, microbatch, stage) -> (x, works)
        self.outbox: dict[tuple, Tensor] = {}  # what stage sends when its turn comes
        self.sending: list[dist.Work] = []
        self.saved: dict[tuple, list] = {}  # (microbatch, stage) -> [x, out, grad]
        self.loss, self.peak_saved = None, 0
        # region step
        for microbatch, kind, what in self.events:
            if isinstance(what, Action):
                if what.rank == self.rank:
                    self._compute(what)
            else:
                self._transfer(kind, microbatch, *what)
        for work in self.sending:
            work.wait()
        # endregion
        return self.loss

    def _transfer(self, kind: str, microbatch: int, src: int, dst: int) -> None:
        """Send F's output from stage src to dst, or B's input gradient back."""
        p, none = self.schedule.p, torch.empty(0, device=self.device)
        if src % p == self.rank:  # (b, T, h): an activation or its gradient
            tensor = self.outbox.pop((kind, microbatch, src)).contiguous()
            # Not waited for here: the receiver may still be computing.
            self.sending += isendrecv(tensor, dst % p, none, dst % p, self.group)
        elif dst % p == self.rank:
            b, T = self.inputs[microbatch].shape
            buf = torch.empty(b, T, self.hidden, dtype=self.dtype, device=self.device)
            works = isendrecv(none, src % p, buf, src % p, self.group)
            self.inbox[(kind, microbatch, dst)] = (buf, works)  # waited for when used

    def _take(self, kind: str, i: int, s: int) -> Tensor:
        """What stage s receives for micro-batch i, once it has arrived."""
        tensor, works = self.inbox.pop((kind, i, s))
        for work in works:
            work.wait()
        return tensor

    def _hand_on(self, kind: str, i: int, s: int, tensor: Tensor) -> None:
        """Queue F's output (for stage s + 1) or B's input gradient (for s - 1)."""
        to = s + 1 if kind == "F" else s - 1
        if to % self.schedule.p == self.rank:  # the next stage is ours (p = 1)
            self.inbox[(kind, i, to)] = (tensor.detach(), [])
        else:
            self.outbox[(kind, i, s)] = tensor.detach()

    def _compute(self, a: Action) -> None:
        """Run action ``a``: an F, B or W on one of this rank's stages."""
        s, i = self.schedule.stage(a), a.microbatch
        stage, last = self.stages[s], s == self.schedule.n_stages - 1
        if a.kind == "F":
            x = self.inputs[i] if s == 0 else self._take("F", i, s).requires_grad_()
            out = stage(x)
            if last:  # the loss of micro-batch i, weighted 1/m
                logits, y = out.flatten(0, 1), self.targets[i].flatten()
                out = functional.cross_entropy(logits, y) / self.schedule.m
                self.loss = out.detach() + (0 if self.loss is None else self.loss)
            else:
                self._hand_on("F", i, s, out)
            self.saved[(i, s)] = [x, out, None]
            self.peak_saved = max(self.peak_saved, len(self.saved))
            return
        x, out, grad = self.saved[(i, s)]
        if a.kind == "B" and not last:
            grad = self._take("B", i, s)  # (b, T, h), from stage s + 1
        if a.kind == "B" and self.schedule.splits_backward:  # input gradient only
            if s > 0:
                _backward(out, grad, [x], keep=True)
            self.saved[(i, s)][2] = grad
        elif a.kind == "B":  # input and weight gradients together
            _backward(out, grad)
            del self.saved[(i, s)]
        else:  # W: the weight gradients that B left out
            params = [q for q in stage.parameters() if q.requires_grad]
            _backward(out, grad, params)
            del self.saved[(i, s)]
        if a.kind == "B" and s > 0:
            self._hand_on("B", i, s, x.grad)
