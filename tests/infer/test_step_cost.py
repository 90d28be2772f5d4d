"""The one count of a decode step's bytes: what a running model touches.

A dispatch mode records every parameter an operation reads while the model decodes
one token per sequence (an embedding reads only the rows it gathers) and the cache
rows the attention reads and writes: the independent ground truth that the cost
model of every page (:func:`~aiinfra.infer.step_cost.decode_step_bytes`) must equal.
The pages that quote a decode step's time then agree with each other.
"""

import pytest
import torch
from aiinfra.accelerators import GPUS
from aiinfra.infer.kv.decode import decode_bound_tokens_per_s
from aiinfra.infer.step_cost import RooflineStepCost, decode_step_bytes
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from torch.utils._python_dispatch import TorchDispatchMode

TINY = TransformerConfig(
    vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48
)


class ParametersRead(TorchDispatchMode):
    """Bytes of the distinct parameters the operations read; gathered rows only."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.params = {p.data_ptr(): p for p in model.parameters()}
        self.read: set[int] = set()
        self.rows = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if func is torch.ops.aten.embedding.default:  # weight[indices]: rows only
            weight, indices = args[0], args[1]
            self.rows += indices.numel() * weight.shape[1] * weight.element_size()
        elif func not in (torch.ops.aten.t.default, torch.ops.aten.view.default):
            self.read |= {t.data_ptr() for t in tensors} & self.params.keys()
        return func(*args, **(kwargs or {}))

    @property
    def bytes(self) -> int:
        return self.rows + sum(
            self.params[p].numel() * self.params[p].element_size() for p in self.read
        )


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_decode_step_bytes_equal_what_a_decoding_model_reads(position):
    c = TransformerConfig(**{**TINY.__dict__, "position": position})
    torch.manual_seed(0)
    model = Transformer(c).eval().to(torch.bfloat16)
    B, ctx = 3, 5
    caches = model.new_caches(B, ctx + 1)
    for cache in caches:
        cache.length = ctx
    with torch.no_grad(), ParametersRead(model) as counted:
        model(torch.zeros(B, 1, dtype=torch.long), caches)
    # cache: each sequence reads ctx rows and writes one, keys and values, bf16
    kv = sum(x.k[:, :, : ctx + 1].nbytes + x.v[:, :, : ctx + 1].nbytes for x in caches)
    # GPT-2's position rows: here all B sequences are at position ctx and share
    # one gathered row; the model counts a row per sequence (their positions differ)
    shared = (B - 1) * c.d_model * 2 if position == "learned" else 0
    assert decode_step_bytes(c, B, ctx) == counted.bytes + kv + shared
    # the whole embedding table is not read: a row per sequence
    table = c.vocab_size * c.d_model * 2
    assert counted.bytes < sum(p.nbytes for p in model.parameters()) - table / 2


def test_every_page_prices_a_llama_3_8b_step_from_the_one_count():
    # Before: 8.03e9 parameters (the whole embedding table) gave 209 tokens/s and a
    # 4.8 ms step on one page, 7.50e9 matmul weights 4.5 ms on another.
    from aiinfra.book.inference import batching, kv_cache, speculative

    c, h100 = preset("llama-3-8b"), GPUS["H100"]
    step = decode_step_bytes(c, 1, 0)
    # 7.50e9 matmul weights, 0.27e6 norm gains, one 4096-wide row: bf16
    assert step == pytest.approx(2 * (7.5047e9 + 266_240 + 4096), rel=1e-4)
    assert kv_cache.h100_bound_batch1() == pytest.approx(h100.hbm_bandwidth / step)
    ms = 1e3 * step / h100.hbm_bandwidth
    assert speculative.spec_gpu_step_ms(1) == pytest.approx(ms, rel=1e-6)
    at_context = RooflineStepCost(c, h100)([], 1, 0)
    assert 1e3 * at_context == pytest.approx(ms, rel=1e-6)
    assert batching.decode_step_ms(1, 0) == pytest.approx(ms, rel=1e-6)
    assert decode_bound_tokens_per_s(c, h100.hbm_bandwidth, 1, 0) == pytest.approx(
        1e3 / ms
    )


def test_a_decode_step_refuses_a_bad_batch_or_context_by_name():
    with pytest.raises(ValueError, match="batch must be"):
        decode_step_bytes(TINY, 0, 5)
    with pytest.raises(ValueError, match="context must be"):
        decode_step_bytes(TINY, 1, -1)
