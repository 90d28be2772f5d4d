"""The steps of HCCL's NHR and NB reduce-scatter and all-gather, as plain data.

Both take ceil(lg p) steps for any p, power of two or not, and each rank sends p - 1
slices of n/p bytes in all (no extra data for odd p, unlike H-D_R's fold). In step
s of the reduce-scatter, at distance d = 2^s, every rank sends
floor((p - 1 + d) / 2d) slices, spaced 2d apart, as one message: NHR (nonuniform
hierarchical ring) to rank r - d, NB (nonuniform Bruck) to rank r + d, the mirror
image. The receiver adds the partial sums to its own slices of the same index. The
all-gather runs the same steps backwards with every message reversed (distance
p/2-ish first, 1 last), so each slice reaches every rank along the tree its
reduction came up. Read from HCCL's open templates (``hicann/hccl``:
``ReduceScatterNHR::GetStepInfo``, ``ReduceScatterNB::RunReduceScatterNB``,
``InsTempAllGatherNHR::GetStepInfo``); HCCL's NHR also renumbers the slices in
memory so that each message is one contiguous copy, which changes where the bytes
sit, not which ones travel, and is left out here. Notation: p ranks, r this rank,
slice i the i-th of p slices of the vector, d the distance.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks
from aiinfra.comm.schedules import Step as ReplayStep

KINDS = ("nhr", "nb")  # the two schedules, by HCCL_ALGO's names in lower case


@dataclass(frozen=True)
class Step:
    """One rank's step: send slices ``send`` to ``dst``, receive ``recv`` from ``src``.

    Args:
        dst: the rank that receives this rank's message.
        src: the rank whose message this rank receives.
        send: slice indices sent, in message order.
        recv: slice indices received, in message order (the sender's ``send``).
    """

    dst: int
    src: int
    send: tuple[int, ...]
    recv: tuple[int, ...]


def step_count(p: int) -> int:
    """ceil(lg p): the steps of NHR and NB for p ranks (0 for one rank)."""
    return (checks.positive_int("p", p) - 1).bit_length()


def reduce_scatter_steps(kind: str, r: int, p: int) -> list[Step]:
    """Rank r's steps of the NHR or NB reduce-scatter over p ranks.

    Args:
        kind: ``"nhr"`` or ``"nb"``.
        r: this rank, 0 <= r < p.
        p: ranks, >= 1.

    Returns:
        One :class:`Step` per step, ceil(lg p) of them.

    Raises:
        ValueError: an unknown ``kind``; ``p`` < 1 or ``r`` outside [0, p).
    """
    checks.one_of("kind", kind, KINDS)
    checks.int_in("r", r, 0, checks.positive_int("p", p) - 1)
    out = []
    # region reduce-scatter-steps
    for s in range(step_count(p)):
        d = 1 << s  # distance 1, 2, 4, ...
        count = (p - 1 + d) // (2 * d)  # slices this step, 2d apart
        if kind == "nhr":  # send left: the partial sums of the receiver's slices
            dst, src, first = (r - d) % p, (r + d) % p, (r - d) % p
            send = [(first - 2 * d * i) % p for i in range(count)]
            recv = [(r - 2 * d * i) % p for i in range(count)]
        else:  # nb: send right, slices r + d, r + 3d, ...
            dst, src = (r + d) % p, (r - d) % p
            send = [(r + d + 2 * d * i) % p for i in range(count)]
            recv = [(r + 2 * d * i) % p for i in range(count)]
        out.append(Step(dst, src, tuple(send), tuple(recv)))
    # endregion
    return out


def all_gather_steps(kind: str, r: int, p: int) -> list[Step]:
    """Rank r's steps of the NHR or NB all-gather: the reduce-scatter reversed.

    Step s of the all-gather is step ceil(lg p) - 1 - s of the reduce-scatter with
    every message going the other way: rank r sends what it received there (its
    slices are final now) and receives what it sent.

    Args and Raises: as :func:`reduce_scatter_steps`.
    """
    rs = reduce_scatter_steps(kind, r, p)
    return [Step(x.src, x.dst, x.recv, x.send) for x in reversed(rs)]


def simulate_reduce_scatter(kind: str, p: int) -> list[list[frozenset[int]]]:
    """Which ranks' inputs each rank's partial sum of each slice holds at the end.

    A pure simulation of the message pattern (no tensors): ``out[r][i]`` is the set
    of ranks whose slice i has been added into rank r's copy. A correct
    reduce-scatter ends with ``out[r][r]`` = all p ranks, each added exactly once.

    Raises:
        ValueError: as :func:`reduce_scatter_steps`; a rank's source not sending it
            the slices it expects, or a contribution added twice.
    """
    held = [[{r} for _ in range(p)] for r in range(p)]
    plans = [reduce_scatter_steps(kind, r, p) for r in range(p)]
    for s in range(step_count(p)):
        msgs = {
            (r, x[s].dst): [(i, set(held[r][i])) for i in x[s].send]
            for r, x in enumerate(plans)
        }
        for r, x in enumerate(plans):
            got = msgs.get((x[s].src, r))
            if got is None or [i for i, _ in got] != list(x[s].recv):
                raise ValueError(f"rank {r} step {s}: its source sends other slices")
            for i, part in got:
                if part & held[r][i]:
                    raise ValueError(f"rank {r} slice {i}: a contribution twice")
                held[r][i] |= part
    return [[frozenset(h) for h in row] for row in held]


def replay_all_reduce(kind: str, p: int) -> list[ReplayStep]:
    """Replay NHR's or NB's all-reduce on sets of ranks, for the step figures.

    The reduce-scatter's ceil(lg p) steps then the all-gather's, as the chapter's
    other replays (:mod:`aiinfra.comm.schedules`): ``held[r][i]`` is the set of
    ranks summed in rank r's slice i, and each step lists its ``(src, dst)`` sends.

    Raises:
        ValueError: as :func:`reduce_scatter_steps`; a contribution added twice.
    """
    held = [[frozenset({r}) for _ in range(p)] for r in range(p)]
    out = [ReplayStep("start", 0, (), tuple(map(tuple, held)))]
    for phase, plan in (
        ("reduce-scatter", reduce_scatter_steps),
        ("all-gather", all_gather_steps),
    ):
        plans = [plan(kind, r, p) for r in range(p)]
        for s in range(step_count(p)):
            sent = {
                (r, x[s].dst): [held[r][i] for i in x[s].send]
                for r, x in enumerate(plans)
            }
            for r, x in enumerate(plans):
                for i, part in zip(x[s].recv, sent[(x[s].src, r)], strict=True):
                    if phase == "all-gather":
                        held[r][i] = part
                    elif part & held[r][i]:
                        raise ValueError(f"rank {r} slice {i}: a contribution twice")
                    else:
                        held[r][i] = held[r][i] | part
            sends = tuple((r, x[s].dst) for r, x in enumerate(plans))
            out.append(ReplayStep(phase, s + 1, sends, tuple(map(tuple, held))))
    return out
