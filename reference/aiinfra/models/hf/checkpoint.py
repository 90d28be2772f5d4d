"""Reading a Hugging Face checkpoint directory for :class:`Transformer`.

A model on the Hugging Face Hub is a directory: ``config.json``, read by
:meth:`TransformerConfig.from_hf_config`, and the tensors in safetensors files, one
``model.safetensors`` or shards listed in ``model.safetensors.index.json``. The
Llama, Mistral and Qwen2 families load, their mixture-of-experts kin Mixtral and
Qwen2-MoE, DeepSeek-V2/V3 (MLA, and experts after the first dense layers), and
GPT-2. The tensors are renamed, split and permuted by
:mod:`~aiinfra.models.hf.weights`, then assigned to a model built on the ``meta``
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
from aiinfra.models.hf.config import read_json_object
from aiinfra.models.hf.weights import ROTATE_HALF, convert_state_dict

DEEPSEEK = ("deepseek_v2", "deepseek_v3")  # MLA, and experts
MODEL_TYPES = (*ROTATE_HALF, *DEEPSEEK, "gpt2")
_GPT2_GELU = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")  # the tanh form


def check_modelled(hf: Mapping[str, Any]) -> None:
    """Refuse, by name, a checkpoint config whose computation is not modelled here.

    Raises:
        ValueError: an unknown ``model_type``, or GPT-2 attention or activation
            variants. (MoE variants are refused by
            :func:`~aiinfra.models.hf.moe_config.moe_kwargs`.)
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


def read_pretrained(
    directory: str | os.PathLike, dtype: torch.dtype = torch.float32
) -> tuple[TransformerConfig, dict[str, Tensor]]:
    """The config and the tensors of a Hugging Face checkpoint directory, converted.

    :meth:`~aiinfra.models.transformer.Transformer.from_pretrained` builds the model
    on the ``meta`` device (no memory, no random init) and assigns these tensors to it.

    Args:
        directory: holds ``config.json`` and the safetensors weights.
        dtype: element type of the tensors.

    Returns:
        The model's config, and its state dict in this package's names and layouts.

    Raises:
        FileNotFoundError: ``config.json`` or a weights file is missing.
        ValueError: the config is not modelled (see :func:`check_modelled` and
            :meth:`TransformerConfig.from_hf_config`).
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
    return config, {k: v.to(dtype).contiguous() for k, v in state.items()}
