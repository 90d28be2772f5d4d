"""Loaded checkpoints against ``transformers``: the same logits, the same tokens.

:meth:`Transformer.from_pretrained` is checked the way a user would meet it: a
model of each family is built with the ``transformers`` library, its weights drawn
at random (norm gains and biases included, so that a misplaced one shows), saved
with ``save_pretrained`` and loaded back into this package. Both models then score
the same prompt, and both decode greedily, ``transformers`` with ``generate`` and
this package with its own KV caches (:func:`generate_greedy`). The models are tiny
(two layers of width 64), in fp32 on a CPU. ``aiinfra bench hf-checkpoints`` runs
the check (:func:`run_check`) and prints the table; ``--stamp`` stores the result
(:data:`KIND`) that the book's table reads, so the book never saves a checkpoint.
"""

from __future__ import annotations

import math
import tempfile

import torch
import transformers
from torch import nn

from aiinfra import results
from aiinfra.models.transformer import Transformer, generate_greedy
from aiinfra.report import Table

_SIZES = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5,
    "bos_token_id": None,
    "eos_token_id": None,  # generate() must not stop early
    "pad_token_id": None,
}
_MLA = {
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "qk_rope_head_dim": 8,
    "first_k_dense_replace": 2,  # every layer dense: no MoE
    "num_key_value_heads": 4,  # unused by MLA; DeepseekV3Config's default is 128
}
_GPT2 = {
    "vocab_size": 128,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
    "bos_token_id": None,
    "eos_token_id": None,
}

# family -> (transformers class, config overrides): the models of the book's table.
FAMILIES: dict[str, tuple[str, dict]] = {
    "Llama": ("LlamaForCausalLM", {"num_key_value_heads": 2}),
    "Mistral": ("MistralForCausalLM", {"num_key_value_heads": 2, "sliding_window": 5}),
    "Qwen2": (
        "Qwen2ForCausalLM",
        {"num_key_value_heads": 1, "tie_word_embeddings": True},
    ),
    "DeepSeek-V2": ("DeepseekV2ForCausalLM", {**_MLA, "q_lora_rank": None}),
    "DeepSeek-V3": ("DeepseekV3ForCausalLM", {**_MLA, "q_lora_rank": 24}),
    "GPT-2": ("GPT2LMHeadModel", {}),
}
PROMPT_LEN, NEW_TOKENS = 12, 8  # a window of 5 is shorter than the prompt
KIND = "hf-checkpoints"  # its kind of aiinfra.results


def tiny_hf_model(class_name: str, seed: int = 0, **overrides: object) -> nn.Module:
    """A two-layer ``transformers`` model with every parameter drawn at random.

    Matrices are drawn from ``N(0, 1 / n)`` with ``n`` their last dimension, norm
    gains from ``1 + N(0, 0.1^2)`` and biases from ``N(0, 0.1^2)``, by a generator
    seeded with ``seed``.

    Args:
        class_name: a ``transformers`` class, e.g. ``"LlamaForCausalLM"``.
        seed: seed of the generator.
        overrides: config fields that replace the tiny defaults.

    Returns:
        The model, fp32, in evaluation mode.
    """
    model_class = getattr(transformers, class_name)
    sizes = _GPT2 if class_name.startswith("GPT2") else _SIZES
    config = model_class.config_class(**{**sizes, **overrides})
    model = model_class(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied matrix is listed once
            noise = torch.randn(p.shape, generator=generator)
            if p.dim() > 1:
                p.copy_(noise / math.sqrt(p.shape[-1]))
            else:
                p.copy_(0.1 * noise + (0.0 if name.endswith("bias") else 1.0))
    return model


def compare(
    hf_model: nn.Module,
    directory: str,
    prompt_len: int = PROMPT_LEN,
    new_tokens: int = NEW_TOKENS,
) -> tuple[float, int]:
    """Save a ``transformers`` model, load it here, compare logits and greedy tokens.

    Args:
        hf_model: from :func:`tiny_hf_model`.
        directory: an empty directory to save the checkpoint into.
        prompt_len: tokens of the random prompt (batch of 2).
        new_tokens: tokens to decode greedily.

    Returns:
        The largest absolute difference of the logits over the prompt, and how many
        of the ``2 new_tokens`` decoded tokens are equal.
    """
    vocab = hf_model.config.vocab_size
    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(vocab, (2, prompt_len), generator=generator)  # (B, T)
    hf_model.save_pretrained(directory)
    model = Transformer.from_pretrained(directory)
    with torch.no_grad():
        diff = (model(prompt) - hf_model(prompt).logits).abs().max().item()
        theirs = hf_model.generate(prompt, do_sample=False, max_new_tokens=new_tokens)
    ours = generate_greedy(model, prompt, new_tokens)  # (B, T + new_tokens)
    return diff, int((ours == theirs)[:, prompt_len:].sum())


def run_check() -> dict:
    """Save, load and compare one tiny model of each family (:func:`compare`).

    Returns:
        The body of a ``hf-checkpoints`` result (:data:`KIND`): ``config`` (the
        models' sizes, the prompt, the new tokens, Mistral's window) and one row
        per family: ``family``, ``class``, ``max_logit_diff``, ``equal_tokens``.
    """
    rows = []
    for family, (class_name, overrides) in FAMILIES.items():
        with tempfile.TemporaryDirectory() as directory:
            diff, same = compare(tiny_hf_model(class_name, **overrides), directory)
        rows.append(
            {"family": family, "class": class_name}
            | {"max_logit_diff": diff, "equal_tokens": same}
        )
    config = {
        "layers": _SIZES["num_hidden_layers"],
        "width": _SIZES["hidden_size"],
        "prompt_len": PROMPT_LEN,
        "new_tokens": NEW_TOKENS,
        "prompts": 2,
        "window": FAMILIES["Mistral"][1]["sliding_window"],
    }
    return {"config": config, "rows": rows}


def equivalence_table(res: dict) -> Table:
    """Max logit difference and equal greedy tokens, one row per family.

    Args:
        res: a result of :func:`run_check`, stamped (:func:`aiinfra.results.load`
            of :data:`KIND`) or not.
    """
    c = res["config"]
    rows = [
        [r["family"], r["class"], f"{r['max_logit_diff']:.1e}"]
        + [f"{r['equal_tokens']} / {c['prompts'] * c['new_tokens']}"]
        for r in res["rows"]
    ]
    note = (
        "Random models built with transformers, saved with save_pretrained and "
        "loaded with Transformer.from_pretrained. Logits in fp32 over two prompts; "
        "then greedy tokens per prompt, by generate(do_sample=False) and by this "
        "package's decoding with KV caches. Llama: grouped-query attention; "
        "Mistral: a sliding window shorter than the prompt; Qwen2: query, key and "
        "value biases, one KV head, a tied head; DeepSeek-V2: MLA with full-rank "
        "queries; DeepSeek-V3: MLA with a query latent; GPT-2: LayerNorm, GELU, "
        "learned positions, biases."
    )
    stamp = (
        "{layers} layers, width {width}; prompts of {prompt} tokens, {new} new tokens "
        "each; Mistral's window {window} tokens"
    )
    fields = {
        "layers": c["layers"],
        "width": c["width"],
        "prompt": c["prompt_len"],
        "new": c["new_tokens"],
        "window": c["window"],
    }
    if "stamp" in res:  # measured: where, when, with which transformers
        on, where = results.measured_on(res["stamp"])
        stamp += "; " + on + "; transformers {transformers}"
        fields |= where | {"transformers": res["stamp"].get("transformers", "?")}
    return Table(
        ["family", "transformers class", "max |logit difference|", "equal tokens"],
        rows,
        note,
        stamp,
        fields=fields,
    )
