"""The decoder-only Transformer: causal, decodes with caches, ties its head, learns."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.attention.mla import MultiHeadLatentAttention
from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.checkpoint_check import FAMILIES, tiny_hf_model
from aiinfra.models.layers import GeluMLP
from aiinfra.models.transformer import Transformer, generate_greedy

MLA = FAMILIES["DeepSeek-V3"][1]
GPT = {"norm": "layernorm", "mlp": "gelu", "position": "learned", "bias": True}
CONFIGS = {
    "gqa": TransformerConfig(n_kv_heads=2, max_seq_len=16),
    "mla": TransformerConfig(
        kv_lora_rank=16, q_lora_rank=24, rope_head_dim=8, max_seq_len=16
    ),
    "window": TransformerConfig(n_kv_heads=2, sliding_window=4, max_seq_len=16),
    "gpt": TransformerConfig(max_seq_len=16, d_ff=256, **GPT),
    "moe": TransformerConfig(
        n_kv_heads=2, max_seq_len=16, n_experts=4, top_k=2, d_expert=32, n_shared=1
    ),
}


def make(name: str) -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIGS[name]).double()


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_at_a_position_ignore_later_tokens(name):
    model = make(name)
    tokens = torch.randint(256, (2, 10))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 256
    torch.testing.assert_close(model(tokens)[:, :6], model(changed)[:, :6])


@pytest.mark.parametrize("name", CONFIGS)
def test_decoding_with_caches_equals_the_full_forward(name):
    model = make(name)
    tokens = torch.randint(256, (2, 12))
    caches = model.new_caches(batch_size=2)
    out = [model(tokens[:, :5], caches)] + [
        model(tokens[:, t : t + 1], caches) for t in range(5, 12)
    ]
    torch.testing.assert_close(torch.cat(out, dim=1), model(tokens))


def test_the_config_selects_mla():
    assert isinstance(make("mla").blocks[0].attn, MultiHeadLatentAttention)


def test_the_config_selects_the_gpt_pieces():
    model = make("gpt")
    block = model.blocks[0]
    assert isinstance(block.attn_norm, torch.nn.LayerNorm) and block.attn.rope is None
    assert isinstance(block.mlp, GeluMLP) and block.mlp.w1.bias is not None
    assert model.pos_embed.weight.shape == (16, 64)  # max_seq_len x d


@pytest.mark.parametrize(
    "hf_config, published",
    [
        # openai-community/gpt2: model.num_parameters() of the Hub checkpoint (nanoGPT
        # prints 123.65M, the same count without the 1024 x 768 position table).
        (
            {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12}
            | {"n_head": 12, "n_positions": 1024},
            124_439_808,
        ),
        # meta-llama/Meta-Llama-3-8B: safetensors index total_size 16,060,522,496 B
        # in bf16.
        (
            {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336}
            | {"num_hidden_layers": 32, "num_attention_heads": 32}
            | {"num_key_value_heads": 8, "max_position_embeddings": 8192},
            8_030_261_248,
        ),
    ],
)
def test_parameters_of_both_families_match_their_released_checkpoints(
    hf_config, published
):
    with torch.device("meta"):
        model = Transformer(TransformerConfig.from_hf_config(hf_config))
    assert sum(p.numel() for p in model.parameters()) == published


@pytest.mark.parametrize("name", ["gqa", "gpt"])
def test_greedy_decoding_picks_the_argmax_of_the_full_forward(name):
    model = make(name)
    prompt = torch.randint(256, (2, 5))
    out = generate_greedy(model, prompt, 6)
    tokens = prompt
    for _ in range(6):  # no cache: run the whole sequence again for each token
        next_token = model(tokens)[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    assert torch.equal(out, tokens)


def test_a_tied_head_is_the_embedding_matrix():
    tied = Transformer(TransformerConfig(tie_embeddings=True))
    untied = Transformer(TransformerConfig())
    assert tied.head.weight is tied.embed.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_tied == 256 * 64  # one V x d matrix fewer


def test_a_tiny_model_learns_a_repeated_sequence():
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=16, d_model=32, d_ff=64, n_layers=1, max_seq_len=32
    )
    model = Transformer(config)
    tokens = torch.arange(16).repeat(2).unsqueeze(0)  # (1, 32): 0..15, 0..15
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(10):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0]


def test_bad_inputs_are_rejected():
    model = make("gqa")
    with pytest.raises(ValueError, match=r"tokens must be \(B, T\)"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="exceed the RoPE table"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="caches has 1 entries, the model has 2"):
        model(torch.zeros(1, 3, dtype=torch.long), model.new_caches(1)[:1])
    with pytest.raises(ValueError, match="exceed the position table"):
        make("gpt")(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        generate_greedy(model, torch.zeros(1, 3, dtype=torch.long), 0)


# Tiny MoE models of transformers (an independent implementation), weights drawn at
# random and saved in the Hub's layout (one matrix per expert), loaded back here.
_EXPERTS = {"num_experts_per_tok": 2, "moe_intermediate_size": 32}
_DEEPSEEK = {
    **MLA,
    **_EXPERTS,
    "q_lora_rank": 24,
    "first_k_dense_replace": 1,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "n_group": 4,
    "topk_group": 2,
}
MOE_VARIANTS = {
    "mixtral": (
        "MixtralForCausalLM",
        {"num_local_experts": 4, "num_key_value_heads": 2},
    ),
    "qwen2-moe": (
        "Qwen2MoeForCausalLM",
        {
            **_EXPERTS,
            "num_experts": 6,
            "shared_expert_intermediate_size": 48,
            "num_key_value_heads": 4,  # Qwen2MoeConfig's default is 16
        },
    ),
    "deepseek-v2-groups": (
        "DeepseekV2ForCausalLM",
        {
            **_DEEPSEEK,
            "topk_method": "group_limited_greedy",
            "routed_scaling_factor": 2.0,
        },
    ),
    "deepseek-v3": ("DeepseekV3ForCausalLM", _DEEPSEEK),
}


@pytest.mark.parametrize("name", MOE_VARIANTS)
def test_moe_transformer_equals_transformers_model(name, tmp_path):
    class_name, overrides = MOE_VARIANTS[name]
    hf_model = tiny_hf_model(class_name, **overrides)
    generator = torch.Generator().manual_seed(1)
    for buffer_name, b in hf_model.named_buffers():  # V3's balancing bias b
        if buffer_name.endswith("e_score_correction_bias"):
            b.copy_(0.1 * torch.randn(b.shape, generator=generator))
    hf_model.save_pretrained(tmp_path)
    model = Transformer.from_pretrained(tmp_path)
    assert model.config.is_moe_layer(0) != name.startswith("deepseek")  # dense first
    prompt = torch.randint(128, (2, 12), generator=generator)
    with torch.no_grad():
        expected = hf_model(prompt).logits  # (B, T, V)
        torch.testing.assert_close(model(prompt), expected, atol=1e-5, rtol=0)
    tokens = hf_model.generate(prompt, do_sample=False, max_new_tokens=4)
    assert torch.equal(generate_greedy(model, prompt, 4), tokens)
