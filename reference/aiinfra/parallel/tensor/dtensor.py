"""The same plan through PyTorch's own tensor parallelism (DTensor).

``torch.distributed.tensor.parallel.parallelize_module`` takes a plan of the same
shape as :data:`~aiinfra.parallel.tensor.model.MEGATRON_PLAN`: module names
(with ``*``) mapped to ``ColwiseParallel``, ``RowwiseParallel`` or
``SequenceParallel``. :func:`torch_plan` translates a plan of this package into those
styles, so the book can run one plan both ways and compare the results (they agree
to float64 rounding on gloo; see the tests). The attention reshapes its projections
by ``n_heads``, so :func:`parallelize_with_torch` also sets each layer's head counts
to the local ``H/p`` and ``G/p``, as PyTorch's own tensor-parallel example does.
The loss is computed on the sharded logits inside ``loss_parallel()``.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from aiinfra.models.transformer import Transformer
from aiinfra.parallel.tensor.attention import check_heads
from aiinfra.parallel.tensor.model import check_plan


def torch_plan(
    plan: dict[str, str], sequence_parallel: bool
) -> dict[str, ParallelStyle]:
    """PyTorch's parallel styles for a plan of this package.

    ``vocab`` becomes ``RowwiseParallel`` on the embedding (its rows are the
    vocabulary) and ``ColwiseParallel`` with sharded output on the head (its output
    features are the vocabulary). Under sequence parallelism the activations between
    blocks are ``Shard(1)`` (the sequence), and each attention and MLP input is
    gathered first (``PrepareModuleInput``).
    """
    seq = Shard(1) if sequence_parallel else Replicate()
    styles: dict[str, ParallelStyle] = {}
    for name, style in plan.items():
        if name == "embed":
            styles[name] = RowwiseParallel(
                input_layouts=Replicate(), output_layouts=seq
            )
        elif name == "head":
            styles[name] = ColwiseParallel(
                input_layouts=seq, output_layouts=Shard(-1), use_local_output=False
            )
        elif style == "colwise":
            styles[name] = ColwiseParallel()
        elif style == "rowwise":
            styles[name] = RowwiseParallel(output_layouts=seq)
        elif style == "sequence":
            styles[name] = SequenceParallel()
    if sequence_parallel:
        gather = PrepareModuleInput(
            input_layouts=(Shard(1), None),
            desired_input_layouts=(Replicate(), None),
        )
        styles["blocks.*.attn"] = gather
        styles["blocks.*.mlp"] = PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
        )
    return styles


def parallelize_with_torch(
    model: Transformer, plan: dict[str, str], group: dist.ProcessGroup | None = None
) -> Transformer:
    """Shard ``model`` in place with ``parallelize_module`` on ``group``'s ranks.

    Raises:
        ValueError: the plan does not fit the model, or the group size does not
            divide the heads (checked before any collective).
    """
    sequence_parallel = check_plan(model, plan)
    group = group or dist.group.WORLD
    p = dist.get_world_size(group)
    check_heads(model.config.n_heads, model.config.n_kv_heads, p)
    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
    mesh = DeviceMesh.from_group(group, device_type=device)
    for block in model.blocks:
        block.attn.n_heads //= p
        block.attn.n_kv_heads //= p
    return parallelize_module(model, mesh, torch_plan(plan, sequence_parallel))
