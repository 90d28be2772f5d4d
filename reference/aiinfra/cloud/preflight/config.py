"""What ``aiinfra preflight`` runs and the thresholds that flag a rank.

A pre-flight check runs on every rank of a node (or a job) before the job starts:
an all-reduce of known values (its sum must be exact, its bus bandwidth above a
floor), a GEMM burn-in (every rank multiplies the same seeded matrices; a result
that differs in one bit from the other ranks' or from its own first one is silent
data corruption) and the ranks' GEMM times against their median (a rank slower
than ``straggler_ratio`` times the median is a straggler). ``inject`` plants a fault
(``sdc:RANK`` flips a bit of that rank's GEMM results, ``slow:RANK`` slows it) so
that a test, or a reader, sees each check catch its fault. This module imports no
torch: ``aiinfra --help`` reads the config's flags from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks

#: A rank whose GEMM time is above this many times the ranks' median is flagged.
STRAGGLER_RATIO = 1.5
#: Bus bandwidth floor of the all-reduce, GB/s: flags only a broken path by default;
#: on a real node, pass a fraction of what nccl-tests measures on a healthy one.
MIN_BUSBW_GBS = 0.01
#: An injected ``slow`` rank computes each GEMM this many times: a third of the speed.
INJECTED_SLOWDOWN = 3
#: The faults ``inject`` can plant.
FAULTS = ("sdc", "slow")
BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class PreflightConfig:
    """One pre-flight run.

    Attributes:
        ranks: processes, one per GPU on NCCL; at least 2 (a check compares ranks).
        backend: ``gloo`` (CPU) or ``nccl`` (one GPU per rank).
        size: side of the square fp32 GEMM matrices.
        iters: GEMMs per rank in the burn-in.
        numel: fp32 elements of the all-reduce buffer.
        repeats: timed all-reduces after one warm-up.
        straggler_ratio: GEMM time over the ranks' median above which a rank is a
            straggler, > 1.
        min_busbw: all-reduce bus bandwidth floor, GB/s, > 0.
        inject: faults to plant, ``sdc:RANK`` or ``slow:RANK``.
        timeout: seconds the spawned ranks may take in all.
    """

    ranks: int = 4
    backend: str = "gloo"
    size: int = 256
    iters: int = 12
    numel: int = 1 << 20
    repeats: int = 5
    straggler_ratio: float = STRAGGLER_RATIO
    min_busbw: float = MIN_BUSBW_GBS
    inject: tuple[str, ...] = ()
    timeout: float = 60.0

    def __post_init__(self) -> None:
        checks.integer("ranks", self.ranks, low=2)
        checks.one_of("backend", self.backend, BACKENDS)
        checks.positive_ints(
            size=self.size, iters=self.iters, numel=self.numel, repeats=self.repeats
        )
        # Exact sums: every element of the result, ranks * (ranks + 1) / 2, is an
        # integer fp32 holds exactly.
        if self.ranks * (self.ranks + 1) // 2 >= 2**24:
            raise ValueError(f"ranks must keep the sum below 2**24, got {self.ranks}")
        checks.number("straggler_ratio", self.straggler_ratio, low=1, low_open=True)
        checks.positive("min_busbw", self.min_busbw)
        checks.positive("timeout", self.timeout)
        self.faults()  # refuses a malformed or out-of-range fault

    def faults(self) -> dict[str, int]:
        """The planted faults, ``{"sdc": rank, "slow": rank}`` for those given.

        Raises:
            ValueError: an ``inject`` item is not ``FAULT:RANK`` with a known fault,
                a rank in 0..ranks - 1, each fault once.
        """
        out: dict[str, int] = {}
        for item in self.inject:
            fault, _, rank = str(item).partition(":")
            if fault not in FAULTS or not rank.isdigit():
                raise ValueError(
                    f"inject must be FAULT:RANK with FAULT in {FAULTS}, got {item!r}"
                )
            if not int(rank) < self.ranks:
                raise ValueError(
                    f"inject rank must be in 0..{self.ranks - 1}, got {item!r}"
                )
            if fault in out:
                raise ValueError(f"inject names {fault} twice: {self.inject!r}")
            out[fault] = int(rank)
        return out
