"""Pre-flight checks of a node before a job starts, and how a fault shows in them.

``config``: what to run and the thresholds that flag a rank; ``checks``: what one
rank runs (an all-reduce smoke test, a GEMM burn-in, a cross-replica parameter
checksum); ``run``: spawn the ranks and judge every one; ``dcgm``: NVIDIA DCGM's
diagnostic levels, as its documentation and code list them.
"""
