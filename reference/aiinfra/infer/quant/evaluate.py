"""Perplexity of a small trained model under RTN, AWQ, GPTQ and SmoothQuant.

No checkpoint is on disk, so the model is trained on a synthetic language: token
``t`` follows token ``t-1`` through a sparse table of ``k`` successors with Zipf
weights or, with probability ``p_skip``, token ``t-2`` through a second table (which
needs attention). Its perplexity floor is known; fresh samples give calibration and
held-out sets. Every linear layer (and the head, unless told not to) is quantized in
order, from inputs that flow through the layers already quantized (Frantar et al.
2022, Sec. 4), and reported with its relative weight and held-out output errors;
the model with its held-out perplexity.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra import progress
from aiinfra.infer.quant.awq import awq_search, awq_weight
from aiinfra.infer.quant.gptq import gptq_hessian, gptq_quantize
from aiinfra.infer.quant.rtn import SCHEMES, dequantize, quantize
from aiinfra.infer.quant.smoothquant import W8A8Linear, smoothing_scales
from aiinfra.infer.quant.w8a8 import FakeW8A8Linear
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer

KIND = "quant-eval"  # its kind of aiinfra.results
ERRORS = ("weight_err", "output_err")  # relative Frobenius errors, per layer
METHODS = ("float", "rtn", "awq", "gptq", "w8a8", "smoothquant", "fp8", "int8")
# W8A8 in one format with DeepSeek-V3's shape of scale groups (the FP8 page): group
# None, one scale per tensor; group g, 1 x g tiles of the input and g x g blocks of
# the weight (128 in V3, whose layers are 7168 wide; this model's are 64).
FORMAT_METHODS = ("fp8", "int8")
# (method, bits, group_size) of the book's table; group None: one scale per row.
DEFAULT_RUNS = (
    ("float", 16, None),
    *((m, 8, None) for m in ("rtn", "gptq", "w8a8", "smoothquant")),
    *((m, 4, g) for g in (None, 32) for m in ("rtn", "awq", "gptq")),
    *((m, 8, g) for g in (None, 32) for m in FORMAT_METHODS),
)


@dataclass(frozen=True)
class QuantEvalConfig:
    """The language, the model, its training and the data sets; defaults: the book's."""

    successors: int = 3  # k successors per token in each table
    zipf: float = 1.0  # successor r has weight r^-zipf: larger is more predictable
    p_skip: float = 0.3  # probability that token t follows token t-2's table
    model: TransformerConfig = field(  # Llama-style: V = h = 64, 2 blocks of 4 heads
        default_factory=partial(TransformerConfig, 64, 64, 2, 4, d_ff=192)
    )
    seq_len: int = 64  # tokens per sequence, at most model.max_seq_len
    batch: int = 32
    steps: int = 600
    lr: float = 5e-3
    calib_seqs: int = 32  # calibration sequences (GPTQ used 128 of 2048 tokens)
    heldout_seqs: int = 128
    seed: int = 0
    scheme: str = "zeropoint"  # weight-only grid (GPTQ's and AWQ's default)
    alpha: float = 0.5  # SmoothQuant's migration strength
    quantize_head: bool = True  # the head too (GPTQ, AWQ keep it float; here it is big)

    def __post_init__(self) -> None:
        V, n = self.model.vocab_size, self.model.max_seq_len
        checks = {
            "successors": (1 <= self.successors <= V, f"in [1, vocab_size = {V}]"),
            "p_skip": (0.0 <= self.p_skip <= 1.0, "in [0, 1]"),
            "seq_len": (3 <= self.seq_len <= n, f"in [3, model.max_seq_len = {n}]"),
            "scheme": (self.scheme in SCHEMES, f"one of {SCHEMES}"),
        }
        for name in ("batch", "steps", "calib_seqs", "heldout_seqs"):
            checks[name] = (getattr(self, name) >= 1, "a positive integer")
        for name, (ok, rule) in checks.items():
            if not ok:
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)!r}")


def language_tables(cfg: QuantEvalConfig, generator: torch.Generator) -> Tensor:
    """Two successor tables, ``(2, V, k)`` token ids."""
    V = cfg.model.vocab_size
    scores = torch.rand(2, V, V, generator=generator)
    return scores.topk(cfg.successors, dim=-1).indices  # (2, V, k)


def _successor_law(k: int, zipf: float) -> Tensor:
    """Probabilities ``(k,)`` of the ``k`` successors, proportional to ``r^-zipf``."""
    return (w := torch.arange(1, k + 1, dtype=torch.float64).pow(-zipf)) / w.sum()


def sample_language(
    tables: Tensor, n: int, cfg: QuantEvalConfig, generator: torch.Generator
) -> Tensor:
    """``n`` sequences ``(n, seq_len)`` of the synthetic language of ``cfg``."""
    k, p_skip, seq_len = tables.shape[-1], cfg.p_skip, cfg.seq_len
    zipf = _successor_law(k, cfg.zipf)  # (k,)
    tokens = torch.randint(0, tables.shape[1], (n, 2), generator=generator)
    for _ in range(seq_len - 2):
        which = (torch.rand(n, generator=generator) < p_skip).long()  # (n,)
        prev = torch.where(which == 1, tokens[:, -2], tokens[:, -1])  # (n,)
        r = torch.multinomial(zipf.expand(n, k), 1, generator=generator)[:, 0]
        tokens = torch.cat((tokens, tables[which, prev, r][:, None]), dim=1)
    return tokens  # (n, seq_len)


def train_lm(
    model_cfg: TransformerConfig,
    steps: int,
    lr: float,
    sample: Callable[[torch.Generator], Tensor],
    generator: torch.Generator,
) -> Transformer:
    """A Llama-style model trained with AdamW on fresh batches ``sample(generator)``.

    GPT-2's initialisation, then ``steps`` steps of next-token cross-entropy with
    the learning rate decaying on a cosine from ``lr`` to a tenth of it; every
    random draw comes from ``generator``. The small models of the quantization
    and KV-eviction measurements are trained by it, each on its own language.
    """
    model = Transformer(model_cfg)
    with torch.no_grad():  # GPT-2's init, drawn from the generator
        for p in (p for p in model.parameters() if p.dim() == 2):
            p.normal_(0.0, 0.02, generator=generator)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for step in progress.track(range(steps), "training steps"):
        for group in opt.param_groups:  # cosine decay to 10 %
            group["lr"] = lr * (0.55 + 0.45 * math.cos(math.pi * step / steps))
        x = sample(generator)  # (B, T)
        logits = model(x[:, :-1])  # (B, T-1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()


def train_model(
    cfg: QuantEvalConfig, tables: Tensor, generator: torch.Generator
) -> Transformer:
    """The model of the evaluation, trained on fresh batches of its language."""
    sample = partial(sample_language, tables, cfg.batch, cfg)
    return train_lm(cfg.model, cfg.steps, cfg.lr, sample, generator)


@torch.no_grad()
def perplexity(model: nn.Module, tokens: Tensor) -> float:
    """``exp`` of the mean next-token cross-entropy over ``tokens (n, T)``."""
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (n, T >= 2), got {tuple(tokens.shape)}")
    logits = model(tokens[:, :-1])  # (n, T-1, V)
    return math.exp(F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()))


def _linear_groups(n_layers: int, head: bool = False) -> list[list[str]]:
    """Per block, in order: the names of the linear layers that share one input."""
    parts = (("wq", "wk", "wv"), ("wo",), ("w1", "w3"), ("w2",))
    sub = ("attn", "attn", "mlp", "mlp")
    out = [
        [f"blocks.{i}.{m}.{p}" for p in ps]
        for i in range(n_layers)
        for m, ps in zip(sub, parts, strict=True)
    ]
    return out + [["head"]] if head else out


@torch.no_grad()
def _capture_input(model: nn.Module, name: str, tokens: Tensor) -> Tensor:
    """The input ``(N, in)`` that the module ``name`` sees on ``tokens``."""
    seen: list[Tensor] = []
    handle = model.get_submodule(name).register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].reshape(-1, args[0].shape[-1]))
    )
    model(tokens)
    handle.remove()
    return seen[0]  # (N, in)


def _replace(
    lins: list[nn.Linear], x: Tensor, run: tuple, cfg: QuantEvalConfig
) -> list[nn.Module]:
    """``lins`` (which read ``x``) replaced by ``run = (method, bits, group)``."""
    method, bits, group = run
    ws = [lin.weight.detach() for lin in lins]
    if method in FORMAT_METHODS:
        blocks = (None, None) if group is None else ((1, group), (group, group))
        return [FakeW8A8Linear(lin, method, *blocks) for lin in lins]
    if method in ("w8a8", "smoothquant"):
        smoothed = method == "smoothquant"
        s = smoothing_scales(x.abs().amax(0), ws, cfg.alpha) if smoothed else None
        return [W8A8Linear(lin, s) for lin in lins]
    if method == "rtn":
        gran = "channel" if group is None else "group"
        w_hats = [dequantize(quantize(w, bits, cfg.scheme, gran, group)) for w in ws]
    elif method == "awq":
        s = awq_search(x, ws, bits, cfg.scheme, group).s  # one s: it folds once
        w_hats = [awq_weight(w, s, bits, cfg.scheme, group) for w in ws]
    else:
        H = gptq_hessian(x)  # (in, in), shared by the linears reading x
        w_hats = [dequantize(gptq_quantize(w, H, bits, cfg.scheme, group)) for w in ws]
    out = [copy.deepcopy(lin) for lin in lins]
    for new, w_hat in zip(out, w_hats, strict=True):
        new.weight.data.copy_(w_hat)
    return out


def quantize_model(
    model: Transformer, run: tuple, calib: Tensor, cfg: QuantEvalConfig
) -> Transformer:
    """A copy of ``model``, linear layers quantized by ``(method, bits, group_size)``.

    Each layer is calibrated on ``calib (n, T)`` through the layers before it.

    Raises:
        ValueError: for an unknown ``method``.
    """
    method = run[0]
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    qmodel = copy.deepcopy(model)
    if method == "float":
        return qmodel
    for names in _linear_groups(len(model.blocks), cfg.quantize_head):
        x = _capture_input(qmodel, names[0], calib)  # through the quantized part
        lins = [qmodel.get_submodule(n) for n in names]
        news = _replace(lins, x, run, cfg)
        for name, new in zip(names, news, strict=True):
            parent, _, child = name.rpartition(".")
            setattr(qmodel.get_submodule(parent), child, new)
    return qmodel


@torch.no_grad()
def _layer_errors(
    model: Transformer, qmodel: Transformer, heldout: Tensor, head: bool = False
) -> list[dict[str, Any]]:
    """Per linear: relative weight error and output error on the float model's input."""
    rows = []
    for names in _linear_groups(len(model.blocks), head):
        x = _capture_input(model, names[0], heldout)  # (N, in)
        for name in names:
            lin, new = model.get_submodule(name), qmodel.get_submodule(name)
            y, y_hat = lin(x), new(x)  # (N, out)
            smoothed = isinstance(new, W8A8Linear) and new.s is not None
            w_hat = new.weight / new.s if smoothed else new.weight  # W diag(s) / s
            w_err = (lin.weight - w_hat).norm() / lin.weight.norm()
            y_err = (y - y_hat).norm() / y.norm()
            rows.append(
                {"layer": name, "weight_err": float(w_err), "output_err": float(y_err)}
            )
    return rows


def run_quant_eval(
    cfg: QuantEvalConfig | None = None, runs: tuple = DEFAULT_RUNS
) -> dict[str, Any]:
    """Train, quantize by every ``(method, bits, group_size)`` of ``runs``, evaluate.

    Args:
        cfg: the experiment; None for the book's.
        runs: ``(method, bits, group_size)`` triples; ``bits`` is ignored for
            ``float`` and must be 8 for ``w8a8`` and ``smoothquant``.

    Returns:
        ``{"config", "floor_ppl", "rows", "layers"}``: per run its perplexity and
        mean errors (``rows``) and its per-layer errors (``layers``).

    Raises:
        ValueError: for an unknown method, bits other than 8 for W8A8, or a
            group size that does not divide the layers' inputs.
    """
    cfg = cfg or QuantEvalConfig()
    for method, bits, group in runs:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if method in ("w8a8", "smoothquant", *FORMAT_METHODS) and bits != 8:
            raise ValueError(f"{method} runs at 8 bits, got bits={bits!r}")
        h, d_ff = cfg.model.d_model, cfg.model.d_ff
        if group is not None and (h % group or d_ff % group):
            raise ValueError(
                f"group_size must divide d_model and d_ff ({h}, {d_ff}), got {group!r}"
            )
    g = torch.Generator().manual_seed(cfg.seed)
    tables = language_tables(cfg, g)
    model = train_model(cfg, tables, g)
    calib = sample_language(tables, cfg.calib_seqs, cfg, g)
    heldout = sample_language(tables, cfg.heldout_seqs, cfg, g)
    rows, layers = [], {}
    for method, bits, group in progress.track(runs, "quantized models"):
        qmodel = quantize_model(model, (method, bits, group), calib, cfg)
        errs = _layer_errors(model, qmodel, heldout, cfg.quantize_head)
        key = f"{method}-w{bits}" + ("" if group is None else f"-g{group}")
        layers[key] = errs
        row = dict(key=key, method=method, bits=bits, group_size=group)
        row |= {e: sum(r[e] for r in errs) / len(errs) for e in ERRORS}
        rows.append(row | {"ppl": perplexity(qmodel, heldout)})
    floor = true_perplexity(tables, heldout, cfg)
    return {"config": asdict(cfg), "floor_ppl": floor, "rows": rows, "layers": layers}


def true_perplexity(tables: Tensor, tokens: Tensor, cfg: QuantEvalConfig) -> float:
    """The floor: perplexity of the language's own law on ``tokens (n, T)``."""
    (n, T), (_, V, k), p_skip = tokens.shape, tables.shape, cfg.p_skip
    zipf = _successor_law(k, cfg.zipf)  # (k,)
    nxt = tokens[:, 2:, None]  # (n, T-2, 1)
    p1 = ((tables[0, tokens[:, 1:-1]] == nxt).double() * zipf).sum(-1)  # (n, T-2)
    p2 = ((tables[1, tokens[:, :-2]] == nxt).double() * zipf).sum(-1)
    nll = -((1 - p_skip) * p1 + p_skip * p2).log().sum() + n * math.log(V)
    return math.exp(float(nll) / (n * (T - 1)))
