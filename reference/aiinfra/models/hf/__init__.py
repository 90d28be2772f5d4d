"""Hugging Face checkpoints: their ``config.json`` and tensors, in this package's terms.

:mod:`.config` reads a ``config.json`` into config fields
(:class:`~aiinfra.models.config.TransformerConfig`) and :mod:`.moe_config` its experts;
:mod:`.weights` renames, splits and permutes the tensors; :mod:`.checkpoint` reads a
checkpoint directory (``Transformer.from_pretrained`` loads it);
:mod:`.checkpoint_check` compares the loaded model with ``transformers``.
"""
