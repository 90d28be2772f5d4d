"""Loading a Hugging Face checkpoint directory into :class:`Transformer`.

A model on the Hugging Face Hub is a directory: ``config.json``, read by
:meth:`TransformerConfig.from_hf_config`, and the tensors in safetensors files, one
``model.safetensors`` or shards listed in ``model.safetensors.index.json``. The
Llama, Mistral and Qwen2 families load, their mixture-of-experts kin Mixtral and
Qwen2-MoE, DeepSeek-V2/V3 (MLA, and experts after the first dense layers), and
GPT-2. The tensors are renamed, split and permuted by
:mod:`~aiinfra.models.hf_weights`, then assigned to a model built on the ``meta``
device, so no memory is spent on a random initialization. Nothing is downloaded:
the directory must be on disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor

from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf_config import read_json_object
from aiinfra.models.hf_weights import ROTATE_HALF, convert_state_dict
from aiinfra.models.layers import RotaryEmbedding
from aiinfra.models.transformer import Transformer

DEEPSEEK = ("deepseek_v2", "deepseek_v3")  # MLA, and experts
MODEL_TYPES = (*ROTATE_HALF, *DEEPSEEK, "gpt2")
_GPT2_GELU = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # the tanh form


def check_modelled(hf: Mapping[str, Any]) -> None:
    """Refuse, by name, a checkpoint config whose computation is not modelled here.

    Raises:
        ValueError: an unknown ``model_type``, or GPT-2 attention or activation
            variants. (MoE variants are refused by
            :func:`~aiinfra.models.hf_moe_config.moe_kwargs`.)
    """
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"config field 'model_type' is {kind!r}; loadable: {MODEL_TYPES}"
        )
    if kind == "gpt2":
        if hf.get("activation_function", "gelu_new") not in _GPT2_GELU:
            raise ValueError(
                f"config field 'activation_function' is "
                f"{hf['activation_function']!r}; GPT-2 is loaded with the tanh GELU "
                f"of {_GPT2_GELU}"
            )
        if hf.get("scale_attn_by_inverse_layer_idx") or not hf.get(
            "scale_attn_weights", True
        ):
            raise ValueError(
                "config fields 'scale_attn_weights'/'scale_attn_by_inverse_layer_idx'"
                " ask for another attention scale than 1/sqrt(d)"
            )


def read_tensors(directory: Path) -> dict[str, Tensor]:
    """Every tensor of ``model.safetensors``, or of the shards its index lists.

    Raises:
        FileNotFoundError: no weights file, or a shard named in the index is absent.
        ValueError: a tensor named in the index is not in its shard.
    """
    single, index = (
        directory / "model.safetensors",
        directory / "model.safetensors.index.json",
    )
    if single.exists():
        return load_file(single)
    if not index.exists():
        raise FileNotFoundError(
            f"{directory} has neither {single.name} nor {index.name}"
        )
    with open(index, encoding="utf-8") as f:
        weight_map: dict[str, str] = json.load(f)["weight_map"]
    tensors: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        if not (directory / shard).exists():
            raise FileNotFoundError(f"shard {shard} listed in {index.name} is missing")
        tensors.update(load_file(directory / shard))
    for name, shard in weight_map.items():
        if name not in tensors:
            raise ValueError(
                f"tensor {name!r} listed in {index.name} is not in {shard}"
            )
    return tensors


def load_pretrained(
    directory: str | os.PathLike, dtype: torch.dtype = torch.float32
) -> Transformer:
    """Build a :class:`Transformer` from a Hugging Face checkpoint directory.

    The model is built on the ``meta`` device (no memory, no random init), the
    checkpoint's tensors are assigned to it, and the RoPE tables computed.

    Args:
        directory: holds ``config.json`` and the safetensors weights.
        dtype: element type of the parameters (the RoPE tables stay fp32).

    Returns:
        The model on the CPU, in evaluation mode.

    Raises:
        FileNotFoundError: ``config.json`` or a weights file is missing.
        ValueError: the config is not modelled (see :func:`check_modelled` and
            :meth:`TransformerConfig.from_hf_config`), or a tensor is missing,
            unexpected or of the wrong shape.
    """
    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(
            f"{directory} has no config.json: not a Hugging Face checkpoint directory"
        )
    hf = read_json_object(directory / "config.json")
    check_modelled(hf)
    config = TransformerConfig.from_hf_config(hf)
    state = convert_state_dict(read_tensors(directory), config, hf)
    with torch.device("meta"):
        model = Transformer(config)
    state = {k: v.to(dtype).contiguous() for k, v in state.items()}
    model.load_state_dict(state, assign=True)  # strict: every parameter, no other
    if config.tie_embeddings:
        model.head.weight = model.embed.weight  # assign=True made two parameters
    for module in model.modules():  # non-persistent buffers: still on meta
        if isinstance(module, RotaryEmbedding):
            table = RotaryEmbedding(module.dim, module.max_seq_len, config.rope_theta)
            module.cos, module.sin = table.cos, table.sin
    return model.eval()
