"""The nccl-tests-style benchmark: a tiny sweep on 2 gloo ranks, and bad input.

Ground truth for #wrong: torch.distributed's own collective on the same input (as
nccl-tests checks each result against the expected one); a deliberately broken
algorithm must be caught.
"""

import pytest
import torch
import torch.distributed as dist
from aiinfra import comm
from aiinfra.comm import bench
from aiinfra.comm.results import rows_table
from aiinfra.distributed import run_distributed

TINY = bench.BenchConfig(min_bytes=1024, max_bytes=2048, warmup=0, iters=1)


def _broken_all_reduce(tensor, check_consistency=True):
    comm.ring_all_reduce(tensor, check_consistency=check_consistency)
    if dist.get_rank() == 0:
        tensor.view(-1)[:3] += 1  # three wrong elements on rank 0


def _sweep_then_broken(config):
    rows = bench.bench_rank(config)
    bench.ALGORITHMS["all_reduce"]["broken"] = _broken_all_reduce  # this rank only
    broken = bench.BenchConfig(
        collectives=("all_reduce",),
        algorithms=("broken",),
        min_bytes=4096,
        max_bytes=4096,
        warmup=0,
        iters=1,
    )
    paired = bench.BenchConfig(
        collectives=("all_reduce",),
        algorithms=("ring", "torch"),
        min_bytes=4096,
        max_bytes=4096,
        warmup=0,
        iters=1,
        repeats=3,
    )
    return rows, bench.bench_rank(broken), bench.bench_rank(paired)


@pytest.fixture(scope="module")
def tiny_run():
    return run_distributed(_sweep_then_broken, 2, TINY, timeout=240)


def test_every_algorithm_matches_torch_on_a_tiny_sweep(tiny_run):
    (rows, _, _), (rows_1, _, _) = tiny_run
    assert rows == rows_1  # times and #wrong are agreed over the ranks
    expected = {(c, a) for c, algs in bench.ALGORITHMS.items() for a in algs}
    assert {(r["collective"], r["algorithm"]) for r in rows} == expected
    assert len(rows) == 2 * len(expected)  # two sizes each
    for r in rows:
        assert r["wrong"] == 0, r
        assert r["time_us"] > 0 and r["busbw"] >= 0 and r["dtype"] == "float32"
        assert r["size"] == 4 * r["count"] and r["size"] in (1024, 2048)


def test_a_broken_algorithm_is_counted_wrong(tiny_run):
    (_, broken, _), _ = tiny_run
    assert [(r["algorithm"], r["size"], r["wrong"]) for r in broken] == [
        ("broken", 4096, 3)
    ]


def test_repeats_time_the_algorithms_in_turn_and_keep_the_median(tiny_run):
    (_, _, paired), _ = tiny_run
    assert [r["algorithm"] for r in paired] == ["ring", "torch"]
    for r in paired:
        runs = r["runs_us"]
        assert len(runs) == 3 and all(t > 0 for t in runs)
        assert r["time_us"] == sorted(runs)[1]  # the median of three
        assert "runs_us" not in tiny_run[0][0][0]  # one run: no list


def test_rows_table_has_nccl_tests_columns(tiny_run):
    table = rows_table(tiny_run[0][0])
    assert table.columns[-3:] == ["algbw (GB/s)", "busbw (GB/s)", "#wrong"]
    assert len(table.rows) == len(tiny_run[0][0])


def test_sizes_double_from_min_to_max():
    config = bench.BenchConfig(min_bytes=1024, max_bytes=5000)
    assert config.sizes() == [1024, 2048, 4096]
    assert bench.BenchConfig(min_bytes=8, max_bytes=8).sizes() == [8]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"collectives": ("allreduce",)}, "collectives must be some of"),
        ({"collectives": ("broadcast",), "algorithms": ("ring",)}, "algorithms must"),
        ({"dtype": "float8"}, "dtype must be one of"),
        ({"min_bytes": 0}, "min_bytes must be >= 1"),
        ({"min_bytes": 4096, "max_bytes": 1024}, "max_bytes must be >= 4096"),
        ({"iters": 0}, "iters must be >= 1"),
        ({"warmup": -1}, "warmup must be >= 0"),
        ({"repeats": 0}, "repeats must be >= 1"),
    ],
)
def test_bench_config_rejects_bad_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench.BenchConfig(**kwargs)


@pytest.mark.parametrize(
    ("world_size", "backend", "config", "match"),
    [
        (0, "gloo", TINY, "world_size must be an int >= 1"),
        (2, "mpi", TINY, "backend must be 'gloo' or 'nccl'"),
        (4, "gloo", bench.BenchConfig(local_size=3), "local_size 3 must divide"),
    ],
)
def test_run_bench_rejects_bad_launches_before_starting(
    world_size, backend, config, match
):
    with pytest.raises(ValueError, match=match):
        bench.run_bench(config, world_size, backend)


def test_run_bench_rejects_nccl_without_enough_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ValueError, match="backend 'nccl' needs one CUDA GPU per rank"):
        bench.run_bench(TINY, 2, "nccl")
