"""Hugging Face checkpoints load with the logits and greedy tokens of transformers."""

import json
import shutil

import pytest
import torch
import transformers
from aiinfra import results
from aiinfra.models.hf.checkpoint_check import (
    FAMILIES,
    KIND,
    equivalence_table,
    run_check,
    tiny_hf_model,
)
from aiinfra.models.hf.weights import rotate_half_to_interleaved
from aiinfra.models.layers import RotaryEmbedding
from aiinfra.models.transformer import Transformer, generate_greedy
from safetensors.torch import load_file, save_file
from transformers.models.llama import modeling_llama

MLA = FAMILIES["DeepSeek-V3"][1]
VARIANTS = {
    "llama-gqa": ("LlamaForCausalLM", {"num_key_value_heads": 2}),
    "llama-mqa-tied": (
        "LlamaForCausalLM",
        {"num_key_value_heads": 1, "tie_word_embeddings": True},
    ),
    "mistral-window-5": (
        "MistralForCausalLM",
        {"num_key_value_heads": 2, "sliding_window": 5},
    ),
    "qwen2-mha-tied": (
        "Qwen2ForCausalLM",
        {"num_key_value_heads": 4, "tie_word_embeddings": True},
    ),
    "qwen2-gqa": ("Qwen2ForCausalLM", {"num_key_value_heads": 2}),
    "deepseek-v2-full-rank-q": ("DeepseekV2ForCausalLM", {**MLA, "q_lora_rank": None}),
    "deepseek-v2-q-lora-tied": (
        "DeepseekV2ForCausalLM",
        {**MLA, "q_lora_rank": 24, "tie_word_embeddings": True},
    ),
    "deepseek-v3-interleaved": ("DeepseekV3ForCausalLM", {**MLA, "q_lora_rank": 24}),
    "deepseek-v3-rotate-half": (
        "DeepseekV3ForCausalLM",
        {**MLA, "q_lora_rank": None, "rope_interleave": False},
    ),
    "gpt2": ("GPT2LMHeadModel", {}),
}
PROMPT = torch.randint(128, (2, 12), generator=torch.Generator().manual_seed(0))


def check_equal(hf_model, model: Transformer) -> None:
    """fp32 logits within 1e-5 of transformers', and the same 8 greedy tokens."""
    with torch.no_grad():
        expected = hf_model(PROMPT).logits  # (B, T, V)
        tokens = hf_model.generate(PROMPT, do_sample=False, max_new_tokens=8)
        torch.testing.assert_close(model(PROMPT), expected, atol=1e-5, rtol=0)
    assert torch.equal(generate_greedy(model, PROMPT, 8), tokens)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_saved_transformers_model_loads_with_its_logits_and_tokens(name, tmp_path):
    class_name, overrides = VARIANTS[name]
    hf_model = tiny_hf_model(class_name, **overrides)
    hf_model.save_pretrained(tmp_path)
    check_equal(hf_model, Transformer.from_pretrained(tmp_path))


def test_a_sharded_checkpoint_loads(tmp_path):
    hf_model = tiny_hf_model("Qwen2ForCausalLM", num_key_value_heads=2)
    hf_model.save_pretrained(tmp_path, max_shard_size=40_000)
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) > 2
    assert (tmp_path / "model.safetensors.index.json").exists()
    check_equal(hf_model, Transformer.from_pretrained(tmp_path))
    shards[1].unlink()
    with pytest.raises(FileNotFoundError, match=f"shard {shards[1].name} listed"):
        Transformer.from_pretrained(tmp_path)


def test_dtype_applies_to_parameters_not_to_the_rope_table(tmp_path):
    tiny_hf_model("LlamaForCausalLM").save_pretrained(tmp_path)
    model = Transformer.from_pretrained(tmp_path, dtype=torch.float64)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert model.blocks[0].attn.rope.cos.dtype == torch.float32


def test_the_permutation_turns_rotate_half_rope_into_interleaved_rope():
    # Ground truth: transformers' Llama RoPE on a projection with the original rows;
    # this package's RoPE on the permuted rows must give the same rotated pairs,
    # (i, i + D/2) there, (2i, 2i + 1) here.
    H, D, d, T = 2, 8, 16, 5
    config = transformers.LlamaConfig(hidden_size=H * D, num_attention_heads=H)
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(H * D, d, generator=generator)  # W_q, Hugging Face's rows
    x = torch.randn(1, T, d, generator=generator)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(x, torch.arange(T)[None])
    q = (x @ w.T).view(1, T, H, D).transpose(1, 2)  # (1, H, T, D)
    q_hf, _ = modeling_llama.apply_rotary_pos_emb(q, q, cos, sin)
    w_ours = rotate_half_to_interleaved(w, D)
    q_ours = RotaryEmbedding(D, T)((x @ w_ours.T).view(1, T, H, D).transpose(1, 2))
    halves = (q_hf[..., : D // 2], q_hf[..., D // 2 :])  # pair i is (i, i + D/2)
    torch.testing.assert_close(q_ours, torch.stack(halves, dim=-1).flatten(-2))


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("llama")
    tiny_hf_model("LlamaForCausalLM", num_key_value_heads=2).save_pretrained(directory)
    return directory


def edited(llama_dir, tmp_path, config=None, tensors=None):
    """A copy of the Llama checkpoint with config fields or tensors changed."""
    shutil.copytree(llama_dir, tmp_path, dirs_exist_ok=True)
    if config:
        hf = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(hf | config))
    if tensors:
        state = tensors(load_file(tmp_path / "model.safetensors"))
        save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    return tmp_path


def drop(name):
    return lambda state: {k: v for k, v in state.items() if k != name}


def add(name, tensor):
    return lambda state: state | {name: tensor}


LINEAR_ROPE = {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}


@pytest.mark.parametrize(
    "config, tensors, message",
    [
        (
            None,
            drop("model.layers.1.mlp.up_proj.weight"),
            "lacks tensor 'model.layers.1.mlp.up_proj.weight'",
        ),
        (
            None,
            add("model.layers.0.extra", torch.ones(2)),
            r"unexpected tensors.*'model.layers.0.extra'",
        ),
        (
            None,
            add("model.norm.weight", torch.ones(63)),
            r"'model.norm.weight' has shape \(63,\), the config implies \(64,\)",
        ),
        ({"model_type": "gemma"}, None, "'model_type' is 'gemma'"),
        (
            {"tie_word_embeddings": True},
            None,
            "ties the head, but 'lm_head.weight' differs",
        ),
        ({"rope_parameters": LINEAR_ROPE}, None, "RoPE type 'linear'"),
    ],
)
def test_bad_checkpoints_raise_errors_naming_the_cause(
    llama_dir, tmp_path, config, tensors, message
):
    with pytest.raises(ValueError, match=message):
        Transformer.from_pretrained(edited(llama_dir, tmp_path, config, tensors))


def test_moe_layers_without_their_tensors_are_refused(tmp_path):
    # MoE checkpoints load (tests/models/test_transformer.py); a dense checkpoint
    # whose config announces experts lacks their tensors, or their fields.
    class_name, overrides = VARIANTS["deepseek-v2-full-rank-q"]
    tiny_hf_model(class_name, **overrides).save_pretrained(tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    hf["first_k_dense_replace"] = 1  # layer 1 would be a mixture of experts
    (tmp_path / "config.json").write_text(json.dumps(hf))
    with pytest.raises(ValueError, match="'num_experts_per_tok' is missing"):
        Transformer.from_pretrained(tmp_path)
    hf["num_experts_per_tok"] = 2
    (tmp_path / "config.json").write_text(json.dumps(hf))
    with pytest.raises(ValueError, match="lacks tensor 'model.layers.1.mlp.gate"):
        Transformer.from_pretrained(tmp_path)


def test_missing_files_are_named(llama_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        Transformer.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text((llama_dir / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="neither model.safetensors nor"):
        Transformer.from_pretrained(tmp_path)


def _agrees(res):
    table = equivalence_table(res)
    assert [row[0] for row in table.rows] == list(FAMILIES)
    for family, _, diff, same in table.rows:
        assert float(diff) < 1e-5 and same == "16 / 16", family  # fp32 rounding
    return table


def test_the_books_stamped_table_reports_agreement_for_every_family():
    """The committed result (aiinfra bench hf-checkpoints --stamp) the book reads."""
    res = results.load(KIND, "cpu")
    assert {"date", "cpu", "transformers"} <= set(res["stamp"])
    table = _agrees(res)
    assert table.fields["transformers"] == res["stamp"]["transformers"]


@pytest.mark.slow
def test_the_check_run_now_agrees_for_every_family():
    """What the command measures, run here: six checkpoints saved and loaded."""
    _agrees(run_check())
