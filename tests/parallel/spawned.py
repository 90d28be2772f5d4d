"""The rank side of the parallelism tests: one spawn runs every check.

Starting ranks costs seconds each (every rank imports torch), so every test file of
this folder that needs ranks shares one spawn of 4 gloo ranks, cached for the
session: the checks run on the world (p = 4) and, side by side, on the pairs [0, 2]
and [1, 3] (p = 2, group ranks differing from global ranks). The spawned function
returns plain numbers and strings; the tests assert on them. The DDP checks live
here, the ZeRO checks in :mod:`spawned_zero`, and the tensor-, pipeline- and
context-parallel checks and the device mesh's next to their tests
(:data:`MODEL_PARALLEL_CHECKS`). The NCCL tests (``test_nccl``) run the very same
checks on the GPUs present: only the device that
:func:`~aiinfra.distributed.rank_device` returns differs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable

import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device, run_distributed
from aiinfra.parallel.data.bucketed import BucketedDDP
from aiinfra.parallel.data.naive import NaiveDDP
from aiinfra.parallel.data.token_loss import global_token_count, token_mean_loss
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from torch import nn

from tests.parallel.spawned_zero import BATCH, STEPS, zero_checks
from tests.parallel.spawned_zero import flat as _flat
from tests.parallel.spawned_zero import max_diff as _max_diff
from tests.shared_spawn import shared_results

WIDTHS = (6, 16, 16, 3)  # DDP's model: 435 parameters in 6 tensors
DDP_KINDS = ["naive", "bucketed-64", "bucketed-600", "bucketed-1000000", "torch"]


def _batches(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    data = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    return [(x.to(device), y.to(device)) for x, y in data]


def _optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)


def _ddp_devices(wrapped: nn.Module) -> set[str]:
    """Every device a wrapper's parameters, gradients and buffers are on."""
    tensors = list(wrapped.parameters())
    tensors += [p.grad for p in wrapped.parameters() if p.grad is not None]
    tensors += [b.buffer for b in getattr(wrapped, "buckets", [])]
    return {str(t.device) for t in tensors}


def _token_mask(n_rows: int) -> torch.Tensor:
    """Which rows are real tokens: pairs (2j, 2j + 1) hold 2 if j % 3 == 0, else 1.

    Every micro-batch of 2 or more rows keeps a token, and the counts differ
    between ranks and micro-batches (N = 4, k = 3: 2 rows each, 1 or 2 tokens).
    """
    i = torch.arange(n_rows)
    return (i % 2 == 0) | ((i // 2) % 3 == 0)  # (n_rows,) bool


def _token_losses(out, y):
    return ((out - y) ** 2).mean(dim=1)  # (rows,): one loss per token


def _wrap(kind, model, group):
    """The data-parallel wrapper ``kind`` names around ``model`` (``single``: none)."""
    if kind == "naive":
        return NaiveDDP(model, group)
    if kind.startswith("bucketed"):
        return BucketedDDP(model, group, bucket_bytes=int(kind.split("-")[1]))
    if kind == "torch":
        return nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=0.001, process_group=group
        )
    return model


def train_tokens(kind, group, device, micro, how="global"):
    """SGD on a per-token mean loss over unequal token counts; returns parameters.

    ``how`` ``"global"`` normalises by the global count (one scalar all-reduce),
    ``"means"`` averages per-micro-batch means (the bug); ``kind`` ``"single"`` is
    one process on the whole batch with the true per-token mean.
    """
    single = kind == "single"
    rank = 0 if single else dist.get_rank(group)
    n_ranks = 1 if single else dist.get_world_size(group)
    model = mlp(WIDTHS, seed=rank, device=device)
    wrapped = _wrap(kind, model, group)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches(device):
        mask = _token_mask(len(x)).to(device)
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        mask = rank_share(mask, rank, n_ranks)
        local = int(mask.sum())
        total = local if single else global_token_count(local, group, device)
        opt.zero_grad()
        chunks = zip(x.chunk(micro), y.chunk(micro), mask.chunk(micro), strict=True)
        for i, (xm, ym, mm) in enumerate(chunks):
            last = i == micro - 1
            with contextlib.nullcontext() if last else wrapped.no_sync():
                loss_sum = (_token_losses(wrapped(xm), ym) * mm).sum()
                if how == "global":
                    loss = token_mean_loss(loss_sum, total, n_ranks)
                else:
                    loss = loss_sum / mm.sum() / micro
                loss.backward()
        opt.step()
    return _flat(model.parameters())


def token_checks(group, device) -> dict:
    """Per-token mean with unequal counts: ours and DDP against one process."""
    reference = train_tokens("single", group, device, micro=1)
    out = {}
    for kind in ("bucketed-600", "torch"):
        for micro in (1, 3):
            ours = train_tokens(kind, group, device, micro)
            out[f"{kind}/k={micro}"] = _max_diff(ours, reference)
    means = train_tokens("bucketed-600", group, device, micro=3, how="means")
    out["mean of means"] = _max_diff(means, reference)
    return out


def torch_ddp_buckets(group, device) -> dict:
    """DistributedDataParallel's buckets at construction and after two iterations."""
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(6)]).to(device)
    names = {id(p): n for n, p in model.named_parameters()}
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group)

    def buckets():
        return ddp.reducer._get_zeros_like_grad_buckets()

    out = {"constructed": [len(b.parameters()) for b in buckets()]}
    for _ in range(2):  # the rebuild happens at the start of the second iteration
        ddp(torch.ones(2, 512, device=device)).sum().backward()
    out["rebuilt"] = [len(b.parameters()) for b in buckets()]
    out["first"] = sorted(names[id(p)] for p in buckets()[0].parameters())
    return out


def train_ddp(kind, opt_name, group, device, micro=1):
    """Train a fresh model with ``kind``; each rank takes its share of every batch.

    ``kind`` ``"single"`` is one process on the whole batch: the ground truth.
    Returns the final parameters, flat, and the devices the wrapper used.
    """
    single = kind == "single"
    rank = 0 if single else dist.get_rank(group)
    n_ranks = 1 if single else dist.get_world_size(group)
    # Different on each rank (group rank as seed): the broadcast from group rank 0
    # must make every replica the one-process model (seed 0).
    model = mlp(WIDTHS, seed=rank, device=device)
    wrapped = _wrap(kind, model, group)
    opt = _optimizer(opt_name, model.parameters())
    for x, y in _batches(device):
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        opt.zero_grad()
        for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro), strict=True)):
            last = i == micro - 1
            with contextlib.nullcontext() if last else wrapped.no_sync():
                (nn.functional.mse_loss(wrapped(xm), ym) / micro).backward()
        if kind == "naive":
            wrapped.sync_gradients()
        opt.step()
    return _flat(model.parameters()), _ddp_devices(wrapped)


def ddp_checks(group: dist.ProcessGroup | None) -> dict:
    """Ours against one process and DistributedDataParallel; replicas; traffic."""
    device = rank_device(group)
    n_ranks = dist.get_world_size(group)
    out = {"to_one_process": {}, "to_torch": {}, "between_ranks": {}, "devices": {}}
    for opt_name in ("sgd", "adamw"):
        reference, _ = train_ddp("single", opt_name, group, device)
        theirs, _ = train_ddp("torch", opt_name, group, device)
        for kind in DDP_KINDS:
            ours, devices = train_ddp(kind, opt_name, group, device)
            key = f"{kind}/{opt_name}"
            out["to_one_process"][key] = _max_diff(ours, reference)
            out["to_torch"][key] = _max_diff(ours, theirs)
            out["devices"][key] = sorted(devices)
            everyone = ours.new_empty(n_ranks * ours.numel())  # (N Psi,)
            dist.all_gather_into_tensor(everyone, ours, group=group)
            out["between_ranks"][key] = _max_diff(everyone.view(n_ranks, -1), ours)
        # Gradient accumulation: 3 micro-batches per rank, only the last one syncs.
        for kind in ("bucketed-600", "torch"):
            acc, _ = train_ddp(kind, opt_name, group, device, micro=3)
            key = f"{kind}+no_sync/{opt_name}"
            out["to_one_process"][key] = _max_diff(acc, reference)
            out["to_torch"][key] = _max_diff(acc, theirs)
    out["tokens"] = token_checks(group, device)
    out["rebuild"] = torch_ddp_buckets(group, device)
    out["sent"] = {}
    rank = dist.get_rank(group)
    x, y = _batches(device)[0]
    for cls in (NaiveDDP, BucketedDDP):
        ddp = cls(mlp(WIDTHS, device=device), group)
        out_ = ddp(rank_share(x, rank, n_ranks))
        nn.functional.mse_loss(out_, rank_share(y, rank, n_ranks)).backward()
        if cls is NaiveDDP:
            ddp.sync_gradients()
        out["sent"][cls.__name__] = ddp.comm.paper_elements()
    # Gradient accumulation: 3 micro-batches, only the last one outside no_sync.
    ddp = BucketedDDP(mlp(WIDTHS, device=device), group)
    xs, ys = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
    for i, (xm, ym) in enumerate(zip(xs.chunk(3), ys.chunk(3), strict=True)):
        with contextlib.nullcontext() if i == 2 else ddp.no_sync():
            nn.functional.mse_loss(ddp(xm), ym).backward()
    out["sent"]["BucketedDDP, k=3"] = ddp.comm.paper_elements()
    return out


def value_error(call: Callable[[], object]) -> str | None:
    """The message of the ValueError ``call()`` raises, or None if it raises none."""
    try:
        call()
    except ValueError as e:
        return str(e)
    return None


def bad_group_errors() -> dict:
    """On 4 ranks: a group without this rank; replicas that differ (every rank)."""
    rank = dist.get_rank()
    errors = {}
    only_rank0 = dist.new_group([0])  # every rank must call new_group
    errors["not_a_member"] = value_error(
        lambda: NaiveDDP(mlp(WIDTHS), group=only_rank0)
    )
    model = mlp(WIDTHS) if rank == 0 else nn.Linear(6, 3)
    for cls in (NaiveDDP, BucketedDDP):
        errors[f"mismatch/{cls.__name__}"] = value_error(lambda cls=cls: cls(model))
    return errors


# Checks that live next to their tests: (key, module, function). Each function takes
# the group (None: the world) and returns plain numbers and strings.
MODEL_PARALLEL_CHECKS = (
    ("tp", "tests.parallel.tensor.test_layers", "tensor_parallel_checks"),
    (
        "tpm",
        "tests.parallel.tensor.test_model",
        "tensor_parallel_model_checks",
    ),
    ("pp", "tests.parallel.pipeline.test_executor", "pipeline_checks"),
    ("cp", "tests.parallel.context.test_attention", "context_parallel_checks"),
    ("mesh", "tests.parallel.test_mesh", "mesh_checks"),
    ("ep", "tests.models.expert_parallel.test_layer", "expert_parallel_checks"),
)


def _model_parallel_checks(group: dist.ProcessGroup | None) -> dict:
    # Imported here: those test modules import this one for gloo_results.
    out = {}
    for key, module, function in MODEL_PARALLEL_CHECKS:
        out[key] = getattr(importlib.import_module(module), function)(group)
    return out


def gloo_checks() -> dict:
    """Run on 4 gloo ranks: every check, on the world and on this rank's pair."""
    pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    out = {}
    for name, group in (("world", None), ("pair", pairs[dist.get_rank() % 2])):
        out[name] = {"ddp": ddp_checks(group), "zero": zero_checks(group)}
        out[name].update(_model_parallel_checks(group))
    out["errors"] = bad_group_errors()
    return out


def accelerator_checks() -> dict:
    """Run on the NCCL ranks: the same checks on the world only."""
    world = {"ddp": ddp_checks(None), "zero": zero_checks(None)}
    return {"world": world | _model_parallel_checks(None)}


def gloo_results() -> list[dict]:
    """:func:`gloo_checks` on 4 spawned gloo ranks, once per test session."""
    return shared_results(gloo_checks, 4, timeout=300)


@functools.cache
def nccl_results(world_size: int) -> list[dict]:
    """:func:`accelerator_checks` on ``world_size`` NCCL ranks (one GPU each)."""
    return run_distributed(accelerator_checks, world_size, backend="nccl", timeout=300)
