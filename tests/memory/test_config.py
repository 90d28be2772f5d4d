"""Parameter counts from a config: published totals and numel() of real modules."""

import json

import pytest
import torch
from aiinfra.memory.config import ModelConfig, load_config
from aiinfra.memory.params import count_parameters
from aiinfra.memory.presets import PRESETS, preset
from aiinfra.memory.tiny_gpt import TinyGPT, TinyGPTConfig
from torch import nn


# Totals published with the checkpoints (Hugging Face model pages list 8.03B, 70.6B,
# 7.24B; GPT-2's num_parameters() is 124,439,808) and Brown et al. 2020, Table 2.1
# (GPT-3: 175.0B).
@pytest.mark.parametrize(
    "name, published, rel",
    [
        ("llama-3-8b", 8.03e9, 5e-4),
        ("llama-3-70b", 70.6e9, 1e-3),
        ("mistral-7b", 7.24e9, 5e-4),
        ("gpt2", 124_439_808, 0.0),
        ("gpt3-175b", 175.0e9, 5e-3),
    ],
)
def test_preset_parameter_count_matches_published_total(name, published, rel):
    assert count_parameters(preset(name)).total == pytest.approx(published, rel=rel)


def test_llama_3_8b_count_by_part():
    p = count_parameters(preset("llama-3-8b"))
    assert p.embedding == p.head == 128256 * 4096  # untied
    assert p.attention == 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024)  # GQA: 8 KV heads
    assert p.mlp == 32 * 3 * 4096 * 14336  # SwiGLU
    assert p.norms == (2 * 32 + 1) * 4096  # RMSNorm weights
    assert p.total == 8_030_261_248


class _TinyLlama(nn.Module):
    """An independent Llama: GQA attention, SwiGLU MLP, RMSNorm, (un)tied head."""

    def __init__(self, h, n_layers, a, kv, f, v, tied):
        super().__init__()
        d = h // a
        self.embed = nn.Embedding(v, h)
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            layer = nn.ModuleDict(
                {
                    "q": nn.Linear(h, a * d, bias=False),
                    "k": nn.Linear(h, kv * d, bias=False),
                    "v": nn.Linear(h, kv * d, bias=False),
                    "o": nn.Linear(a * d, h, bias=False),
                    "gate": nn.Linear(h, f, bias=False),
                    "up": nn.Linear(h, f, bias=False),
                    "down": nn.Linear(f, h, bias=False),
                    "norm1": nn.RMSNorm(h),
                    "norm2": nn.RMSNorm(h),
                }
            )
            self.layers.append(layer)
        self.norm = nn.RMSNorm(h)
        self.head = nn.Linear(h, v, bias=False)
        if tied:
            self.head.weight = self.embed.weight


@pytest.mark.parametrize("kv, tied", [(2, False), (4, True), (1, False)])
def test_count_equals_numel_of_a_tiny_llama_module(kv, tied):
    h, n_layers, a, f, v = 48, 3, 4, 80, 101
    cfg = {
        "hidden_size": h,
        "num_hidden_layers": n_layers,
        "num_attention_heads": a,
        "num_key_value_heads": kv,
        "intermediate_size": f,
        "vocab_size": v,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": tied,
    }
    module = _TinyLlama(h, n_layers, a, kv, f, v, tied)
    numel = sum(p.numel() for p in module.parameters())  # shared weight counted once
    assert count_parameters(load_config(cfg)).total == numel


def test_count_equals_numel_of_tiny_gpt():
    cfg = TinyGPTConfig(vocab_size=50, seq_len=12, n_layer=3, n_head=2, n_embd=24)
    numel = sum(p.numel() for p in TinyGPT(cfg).parameters())
    assert count_parameters(load_config(cfg.to_hf_config())).total == numel


def test_load_config_reads_a_json_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS["mistral-7b"]))
    assert load_config(path) == preset("mistral-7b")
    assert load_config(str(path)).num_kv_heads == 8


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"hidden_size": None}, ValueError, "hidden_size"),
        ({"intermediate_size": None}, ValueError, "intermediate_size"),
        ({"num_hidden_layers": -2}, ValueError, "num_layers"),
        ({"num_key_value_heads": 5}, ValueError, "num_kv_heads"),
        ({"num_attention_heads": 5}, ValueError, "divide"),
        ({"vocab_size": 3.5}, TypeError, "vocab_size"),
    ],
)
def test_bad_config_is_rejected_naming_the_field(change, error, match):
    cfg = {**PRESETS["llama-3-8b"], **change}
    with pytest.raises(error, match=match):
        load_config(cfg)


def test_bad_sources_are_rejected(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        load_config(path)
    with pytest.raises(ValueError, match="presets are"):
        preset("llama-9")
    with pytest.raises(ValueError, match="num_kv_heads"):
        ModelConfig(64, 2, 4, 3, 16, 128, 100)
    with pytest.raises(ValueError, match="seq_len"):
        TinyGPT(TinyGPTConfig(seq_len=4))(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="n_head"):
        TinyGPTConfig(n_head=5)
    with pytest.raises(ValueError, match="recompute"):
        TinyGPTConfig(recompute="some")
