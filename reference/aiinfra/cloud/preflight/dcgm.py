"""NVIDIA DCGM's diagnostic levels: ``dcgmi diag -r 1`` to ``-r 4``.

Each level runs what the previous one runs and more. The durations are those the
``dcgmi diag`` reference gives (level 1 seconds, level 2 about two minutes, level 3
about 15 minutes, level 4 longer); the tests of each level are those of DCGM's
``NvidiaValidationSuite::FillTestVectors`` (NVIDIA/DCGM, commit 72fa3fe): level 1
the software and deployment checks, level 2 adds ``memory`` and ``pcie``, level 3
``diagnostic`` (a GEMM burn-in that compares its results), ``targeted_stress``,
``targeted_power``, ``memory_bandwidth``, ``nvbandwidth``, ``nccl_tests`` (and
``eud`` when run as root), level 4 ``memtest`` and ``pulse_test``. When to run
which is the DCGM user guide's: level 1 as a readiness check, level 2 as an
epilogue after a failure, levels 3 and 4 by an administrator as a post-mortem.
"""

from __future__ import annotations

#: Minutes a level normally lasts, where the dcgmi diag reference gives a figure.
LEVEL_MINUTES = {2: 2, 3: 15}

#: ``(level, alias, duration, tests the level adds, when an operator runs it)``.
DCGM_LEVELS: tuple[tuple[int, str, str, str, str], ...] = (
    (
        1,
        "quick",
        "seconds",
        "software and deployment: NVML and CUDA libraries, permissions, "
        "persistence mode, retired pages and row remapping, other processes on "
        "the GPU, inforom, Fabric Manager",
        "readiness: before a node accepts work",
    ),
    (
        2,
        "medium",
        f"about {LEVEL_MINUTES[2]} minutes",
        "memory (allocate and check GPU memory), pcie (PCIe and NVLink transfers)",
        "epilogue: after a failed job, once the GPUs are idle",
    ),
    (
        3,
        "long",
        f"about {LEVEL_MINUTES[3]} minutes",
        "diagnostic (GEMM burn-in, results compared), targeted stress, targeted "
        "power, memory bandwidth, nvbandwidth, nccl-tests",
        "post-mortem: isolating a suspected fault, before returning a node",
    ),
    (
        4,
        "xlong",
        "longer than level 3",
        "memtest (memory test patterns), pulse test (pulsed load on the power "
        "delivery)",
        "post-mortem, by an administrator",
    ),
)
