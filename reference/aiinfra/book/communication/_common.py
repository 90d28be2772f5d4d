"""What several pages of the communication chapter share."""

from __future__ import annotations

from aiinfra.comm import cost

MIB = 2**20
#: A link whose time is the bytes sent: a cost model's time read as bytes per rank.
BYTES = cost.LinkModel(alpha=0.0, beta=1.0, name="bytes")
