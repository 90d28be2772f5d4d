"""Which model to plan for: a preset, a ``config.json`` or a checkpoint directory.

The planner reads the same :class:`~aiinfra.models.config.TransformerConfig` as the
memory calculator: a dense entry of :data:`aiinfra.models.presets.PRESETS` by name,
or a Hugging Face ``config.json`` (given as the file or as the checkpoint directory
that holds it) through :meth:`TransformerConfig.from_hf_config`. A
mixture-of-experts config is refused: its experts are not dense MLPs. One model the
presets lack is added here from its paper: Llama 3 405B (Dubey et al. 2024,
Table 3: 126 layers, width 16,384, FFN 53,248, 128 heads, 8 key/value heads,
vocabulary 128,256, RoPE base 500,000). Its released ``config.json`` (Llama 3.1)
carries a ``llama3`` RoPE scaling that ``from_hf_config`` refuses; the sizes, all
that a plan needs, are the paper's.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.config import read_json_object
from aiinfra.models.presets import (
    MODEL_NAMES,
    PAPER_MODELS,
    PRESETS,
    is_moe,
)

_DENSE_ONLY = "the planner models dense MLPs only"


def load_model(source: str | os.PathLike) -> tuple[str, TransformerConfig]:
    """The model a name, a ``config.json`` or a checkpoint directory describes.

    Args:
        source: a name of :data:`MODEL_NAMES` (any case), the path of a
            ``config.json``, or a directory holding one.

    Returns:
        ``(label, config)``: the name, or the path, and the parsed config.

    Raises:
        TypeError: ``source`` is not a string or a path.
        ValueError: an unknown name that is no file either, a directory without
            ``config.json``, a file that cannot be read or parsed, or a
            mixture-of-experts config.
    """
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"model must be a str or a path, got {type(source).__name__}")
    key = os.fspath(source).lower()
    if key in PRESETS or key in PAPER_MODELS:
        fields = PRESETS.get(key) or PAPER_MODELS[key]
        if is_moe(fields):
            raise ValueError(
                f"model must be dense: {key!r} has routed experts; {_DENSE_ONLY}"
            )
        return key, TransformerConfig.from_hf_config(fields)
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise ValueError(
                f"model must be a checkpoint directory with a config.json, got "
                f"{os.fspath(source)!r}"
            )
    if not path.is_file():
        raise ValueError(
            f"model must be a preset ({', '.join(MODEL_NAMES)}), a config.json or a "
            f"checkpoint directory, got {os.fspath(source)!r}"
        )
    try:
        fields = read_json_object(path)
    except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError
        raise ValueError(
            f"model must be a readable config.json, got {os.fspath(path)!r}: {err}"
        ) from err
    if is_moe(fields):
        raise ValueError(
            f"model must be dense: {os.fspath(path)!r} has routed experts; "
            f"{_DENSE_ONLY}"
        )
    return os.fspath(source), TransformerConfig.from_hf_config(fields)
