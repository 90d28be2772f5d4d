"""The published ordering RTN > GPTQ > float at int4, on a model trained here."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from aiinfra import results
from aiinfra.infer.quant.evaluate import (
    KIND,
    QuantEvalConfig,
    language_tables,
    perplexity,
    quantize_model,
    run_quant_eval,
    sample_language,
    train_model,
    true_perplexity,
)
from aiinfra.infer.quant.rtn import dequantize, quantize
from aiinfra.infer.quant.smoothquant import W8A8Linear
from aiinfra.models.config import TransformerConfig

# A model that trains in about a second: one block, h = 16, V = 32, bigram language.
TINY = QuantEvalConfig(
    model=TransformerConfig(32, 16, 1, 2, d_ff=32, max_seq_len=16),
    successors=3,
    p_skip=0.0,
    seq_len=16,
    batch=32,
    steps=100,
    lr=3e-2,
    calib_seqs=16,
    heldout_seqs=64,
    scheme="absmax",
    quantize_head=True,
    seed=2,  # measured: seeds 0-3 all give the ordering; 2 by the widest margins
)
MICRO = dataclasses.replace(  # widths that the default runs' groups of 32 divide
    TINY,
    model=TransformerConfig(32, 32, 1, 2, d_ff=64, max_seq_len=16),
    steps=2,
    calib_seqs=4,
    heldout_seqs=4,
)


@pytest.fixture(scope="module")
def trained() -> tuple:
    g = torch.Generator().manual_seed(TINY.seed)
    tables = language_tables(TINY, g)
    model = train_model(TINY, tables, g)
    calib = sample_language(tables, TINY.calib_seqs, TINY, g)
    heldout = sample_language(tables, TINY.heldout_seqs, TINY, g)
    return tables, model, calib, heldout


def test_gptq_int4_perplexity_between_rtn_int4_and_float(trained: tuple) -> None:
    # Frantar et al. 2022, Table 3 (FACTS.md), OPT-125M on WikiText2: RTN 4-bit
    # 37.28 > GPTQ 4-bit 31.12 > FP16 27.65; the ordering must hold here too.
    tables, model, calib, heldout = trained
    ppl = {
        m: perplexity(quantize_model(model, (m, 4, None), calib, TINY), heldout)
        for m in ("float", "rtn", "gptq")
    }
    assert ppl["rtn"] > ppl["gptq"] > ppl["float"]
    # The model has learnt the language: far below uniform, above the floor.
    floor = true_perplexity(tables, heldout, TINY)
    assert floor < ppl["float"] < 1.25 * floor < TINY.model.vocab_size / 4


def test_int8_perplexity_within_a_tenth_of_a_percent_of_float(trained: tuple) -> None:
    _, model, calib, heldout = trained
    p_float = perplexity(model, heldout)
    for method in ("rtn", "gptq", "w8a8", "smoothquant"):
        qmodel = quantize_model(model, (method, 8, None), calib, TINY)
        assert perplexity(qmodel, heldout) == pytest.approx(p_float, rel=1e-3)


def test_rtn_model_holds_the_rounded_weights_and_w8a8_its_modules(
    trained: tuple,
) -> None:
    _, model, calib, _ = trained
    rtn = quantize_model(model, ("rtn", 4, 8), calib, TINY)
    w = model.blocks[0].mlp.w2.weight.detach()
    want = dequantize(quantize(w, 4, "absmax", "group", 8))
    assert torch.equal(rtn.blocks[0].mlp.w2.weight, want)
    assert torch.equal(rtn.embed.weight, model.embed.weight)  # embeddings stay
    w8a8 = quantize_model(model, ("smoothquant", 8, None), calib, TINY)
    assert isinstance(w8a8.blocks[0].attn.wq, W8A8Linear)
    assert isinstance(w8a8.head, W8A8Linear)  # quantize_head=True


def test_true_perplexity_of_a_deterministic_language_by_hand() -> None:
    # One successor: every token after the first pair is certain; token 1 is
    # uniform over V, so the perplexity is exp(log V / (T - 1)).
    cfg = dataclasses.replace(TINY, successors=1, model=TransformerConfig(8), seq_len=5)
    g = torch.Generator().manual_seed(0)
    tables = language_tables(cfg, g)
    tokens = sample_language(tables, 10, cfg, g)
    assert torch.equal(tokens[:, 2:], tables[0, tokens[:, 1:-1], 0])
    assert true_perplexity(tables, tokens, cfg) == pytest.approx(
        math.exp(math.log(8) / 4)
    )


def test_language_draws_successors_with_the_zipf_law() -> None:
    cfg = dataclasses.replace(TINY, successors=2, zipf=1.0, p_skip=0.5)
    g = torch.Generator().manual_seed(1)
    tables = language_tables(cfg, g)
    x = sample_language(tables, 400, cfg, g)  # (400, 16)
    nxt = x[:, 2:]
    first = (tables[0, x[:, 1:-1], 0] == nxt) | (tables[1, x[:, :-2], 0] == nxt)
    allowed = (tables[0, x[:, 1:-1]] == nxt[..., None]).any(-1) | (
        tables[1, x[:, :-2]] == nxt[..., None]
    ).any(-1)
    assert allowed.all()
    # P(first successor) >= 2/3 (weights 1, 1/2); collisions only add to it.
    assert 0.64 < first.double().mean().item() < 0.75


def test_run_and_stamp_write_every_run(tmp_path: object) -> None:
    runs = (("float", 16, None), ("rtn", 4, None))
    out = run_quant_eval(MICRO, runs)
    assert [r["key"] for r in out["rows"]] == ["float-w16", "rtn-w4"]
    assert out["rows"][0]["output_err"] == 0.0 < out["rows"][1]["output_err"]
    body = run_quant_eval(MICRO)
    path = results.write(KIND, body, backend="cpu", world_size=1, path=tmp_path / "q")
    data = json.loads(path.read_text())
    assert data["stamp"]["backend"] == "cpu" and len(data["rows"]) == 15
    assert {"fp8-w8", "int8-w8", "fp8-w8-g32", "int8-w8-g32"} <= set(data["layers"])
    assert set(data["layers"]["gptq-w4-g32"][0]) == {
        "layer",
        "weight_err",
        "output_err",
    }


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m, c: quantize_model(m, ("nf4", 4, None), c, TINY), "method must"),
        (lambda m, c: run_quant_eval(MICRO, (("hqq", 4, None),)), "method must"),
        (lambda m, c: run_quant_eval(MICRO, (("w8a8", 4, None),)), "8 bits"),
        (lambda m, c: run_quant_eval(MICRO, (("rtn", 4, 48),)), "group_size"),
    ],
)
def test_bad_input_raises(trained: tuple, call: object, match: str) -> None:
    _, model, calib, _ = trained
    with pytest.raises(ValueError, match=match):
        call(model, calib)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"successors": 40}, "successors must be in"),
        ({"p_skip": 1.5}, "p_skip"),
        ({"seq_len": 17}, "seq_len must be in"),
        ({"scheme": "nf4"}, "scheme"),
        ({"steps": 0}, "steps must be a positive"),
    ],
)
def test_bad_config_raises(change: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(TINY, **change)


def test_perplexity_rejects_one_token() -> None:
    with pytest.raises(ValueError, match="tokens must be"):
        perplexity(torch.nn.Identity(), torch.zeros(2, 1, dtype=torch.long))


def test_the_commands_announcement_counts_the_runs():
    from aiinfra.infer.cli import COMMANDS
    from aiinfra.infer.quant.evaluate import DEFAULT_RUNS

    (quantize,) = [c for c in COMMANDS if c.words == "quantize"]
    assert f"quantizes it {len(DEFAULT_RUNS)} ways" in quantize.runs


def test_format_runs_are_8_bit_and_tile_the_layers():
    with pytest.raises(ValueError, match="fp8 runs at 8 bits"):
        run_quant_eval(MICRO, (("fp8", 4, None),))
    with pytest.raises(ValueError, match="group_size must divide"):
        run_quant_eval(MICRO, (("int8", 8, 7),))
