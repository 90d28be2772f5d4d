"""TinyGPT is GPT-2's layer: same parameters and logits as transformers' GPT-2."""

import pytest
import torch
from aiinfra.memory.tiny_gpt import TinyGPT, tiny_gpt_config
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters

transformers = pytest.importorskip("transformers")


def _gpt2(config: TransformerConfig, tied: bool = True) -> torch.nn.Module:
    hf = transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.max_seq_len,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        activation_function="gelu",  # exact GELU, as TinyGPT's F.gelu
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=tied,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(hf).eval()


def test_parameters_equal_gpt2_and_the_counter():
    config = tiny_gpt_config(vocab_size=50, seq_len=12, n_layers=3, n_heads=2)
    numel = sum(p.numel() for p in TinyGPT(config).parameters())
    assert numel == sum(p.numel() for p in _gpt2(config).parameters())
    assert numel == count_parameters(config).total


def test_logits_equal_gpt2_with_the_same_weights():
    config = tiny_gpt_config(vocab_size=50, seq_len=12, n_layers=2, n_heads=4)
    ours, theirs = TinyGPT(config, dropout=0.0).eval(), _gpt2(config)
    hf = theirs.transformer
    with torch.no_grad():
        ours.wte.weight.copy_(hf.wte.weight)
        ours.wpe.weight.copy_(hf.wpe.weight)
        ours.ln_f.load_state_dict(hf.ln_f.state_dict())
        for block, h in zip(ours.blocks, hf.h, strict=True):
            block.ln_1.load_state_dict(h.ln_1.state_dict())
            block.ln_2.load_state_dict(h.ln_2.state_dict())
            pairs = [
                (block.attn.c_attn, h.attn.c_attn),
                (block.attn.c_proj, h.attn.c_proj),
                (block.mlp.c_fc, h.mlp.c_fc),
                (block.mlp.c_proj, h.mlp.c_proj),
            ]
            for linear, conv1d in pairs:  # Conv1D stores W as (in, out)
                linear.weight.copy_(conv1d.weight.t())
                linear.bias.copy_(conv1d.bias)
    idx = torch.randint(50, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(ours(idx), theirs(idx).logits)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: TinyGPT(TransformerConfig()), "GPT-2 family"),
        (lambda: TinyGPT(tiny_gpt_config(), recompute="some"), "recompute"),
        (lambda: TinyGPT(tiny_gpt_config(), dropout=1.0), "dropout"),
        (lambda: tiny_gpt_config(n_heads=5), "divisible by n_heads"),
        (
            lambda: TinyGPT(tiny_gpt_config(seq_len=4))(torch.zeros(1, 5).long()),
            "max_seq_len",
        ),
    ],
)
def test_bad_input_is_rejected(make, match):
    with pytest.raises(ValueError, match=match):
        make()
