"""What several pages of the models chapter share."""

from __future__ import annotations

from aiinfra.accelerators import GPUS
from aiinfra.models import kv_budget
from aiinfra.models.presets import preset


def budget(name: str, gpu: str, n: int = 1) -> kv_budget.KVBudget:
    """The KV budget of model ``name`` on ``n`` GPUs named ``gpu``."""
    return kv_budget.kv_budget(preset(name), GPUS[gpu], n)
