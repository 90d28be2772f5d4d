"""Inside one GPU: the H100 SXM's compute units and memory levels, as published.

A GPU is a set of streaming multiprocessors (SMs). Each SM has its own tensor
cores, a register file and an SRAM that serves as L1 cache and as shared memory,
which the threads of one program (a CUDA thread block) share; all SMs share an L2
cache in front of HBM. The closer a level is to the tensor cores, the smaller and
faster it is, so a kernel is fast when each byte it brings from HBM is used many
times from the levels above. The sizes are those of NVIDIA's H100 whitepaper
(2022) for the H100 SXM5; the shared-memory bandwidth per clock is the CUDA
programming guide's (32 banks of 4 bytes per clock); the SMs, peaks and HBM are
those of :data:`aiinfra.hardware.GPUS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.accelerators import GPUS

KIB = 1024
# NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table of H100 SXM5
# against A100: per SM 4 tensor cores, 128 FP32 cores, a 256 KB register file, a
# 256 KB L1 data cache / shared memory of which up to 228 KB is shared memory;
# 50 MB of L2 for the GPU.
TENSOR_CORES_PER_SM = 4
FP32_CORES_PER_SM = 128
REGISTER_FILE_BYTES_PER_SM = 256 * KIB
L1_SHARED_BYTES_PER_SM = 256 * KIB
SHARED_MEMORY_BYTES_PER_SM = 228 * KIB
L2_BYTES = 50 * 10**6
# CUDA C++ Programming Guide, shared memory of compute capability 5.x and later:
# 32 banks, each 32 bits wide per clock cycle.
SHARED_MEMORY_BYTES_PER_CLOCK_PER_SM = 32 * 4


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a GPU's memory, from the registers to HBM.

    Args:
        name: ``"registers"``, ``"shared memory"``, ``"L2"`` or ``"HBM"``.
        bytes_per_sm: capacity of one SM's copy; ``None`` for a level shared by
            all SMs.
        bytes_total: capacity on the whole GPU.
        bandwidth: bytes/s of the whole GPU; ``None`` where NVIDIA publishes none.
    """

    name: str
    bytes_per_sm: int | None
    bytes_total: int
    bandwidth: float | None


def fp32_clock_hz(gpu: str = "H100") -> float:
    """The clock at which the FP32 peak is quoted: ``F_fp32 / (SMs x 128 x 2)``.

    An FP32 core does one fused multiply-add, two FLOPs, per clock.

    Raises:
        KeyError: ``gpu`` is not in :data:`~aiinfra.hardware.GPUS`.
        ValueError: its FP32 peak is not given.
    """
    g = GPUS[gpu]
    return g.peak_flops("fp32") / (g.sms * FP32_CORES_PER_SM * 2)


def h100_memory_levels() -> list[MemoryLevel]:
    """The H100 SXM's registers, shared memory, L2 and HBM, nearest first.

    The shared memory's bandwidth is the per-clock bandwidth of each SM times
    the SMs and the clock of :func:`fp32_clock_hz`; registers and L2 have none
    published.
    """
    g = GPUS["H100"]
    smem_bw = SHARED_MEMORY_BYTES_PER_CLOCK_PER_SM * g.sms * fp32_clock_hz("H100")
    return [
        MemoryLevel(
            "registers",
            REGISTER_FILE_BYTES_PER_SM,
            REGISTER_FILE_BYTES_PER_SM * g.sms,
            None,
        ),
        MemoryLevel(
            "shared memory",
            SHARED_MEMORY_BYTES_PER_SM,
            SHARED_MEMORY_BYTES_PER_SM * g.sms,
            smem_bw,
        ),
        MemoryLevel("L2", None, L2_BYTES, None),
        MemoryLevel("HBM", None, g.hbm_bytes, g.hbm_bandwidth),
    ]
