"""``HCCL_ALGO``: how a job tells HCCL which algorithm to run between servers.

HCCL picks its algorithms by itself: inside a server from the hardware topology
(Mesh, Ring, ...; not configurable), between servers by product, data size and
server count. ``HCCL_ALGO`` overrides the second choice, for all operators
(``level0:NA;level1:<algo>``) or per operator
(``<op>=level0:NA;level1:<algo>/<op>=...``); once set, HCCL's own choice is off for
the operators it names. Level 0 (inside the server) accepts only ``NA``. The values
and the documented defaults are those of CANN's environment variable reference
(``HCCL_ALGO``, CANN 8.0); newer releases add ``AHC`` and a ``level2`` between
supernodes, left out here.
"""

from __future__ import annotations

from aiinfra import checks

#: Level-1 (between servers) algorithms that HCCL_ALGO accepts.
LEVEL1 = ("ring", "H-D_R", "NHR", "NHR_V1", "NB", "pipeline", "pairwise")
#: Operators that the per-operator form may name.
OPERATORS = (
    "allgather",
    "reducescatter",
    "allreduce",
    "broadcast",
    "reduce",
    "scatter",
    "alltoall",
)
ALL = "*"  # the key of the global form in :func:`parse_hccl_algo`'s result


def _level1(part: str, value: str) -> str:
    """The algorithm of one ``level0:NA;level1:<algo>`` setting."""
    fields = dict(f.split(":", 1) for f in part.split(";") if ":" in f)
    if set(fields) != {"level0", "level1"} or part.count(";") != 1:
        raise ValueError(
            f"HCCL_ALGO must read 'level0:NA;level1:<algo>' per setting, got {value!r}"
        )
    if fields["level0"] != "NA":
        raise ValueError(f"HCCL_ALGO's level0 must be NA, got {fields['level0']!r}")
    return checks.one_of("HCCL_ALGO level1", fields["level1"], LEVEL1)


def parse_hccl_algo(value: str) -> dict[str, str]:
    """Read an ``HCCL_ALGO`` value: operator -> level-1 algorithm.

    Args:
        value: ``"level0:NA;level1:H-D_R"`` (every operator, key :data:`ALL`) or
            ``"alltoall=level0:NA;level1:pairwise/allreduce=level0:NA;level1:NHR"``.

    Returns:
        ``{ALL: algo}`` or ``{operator: algo, ...}``; an operator not named is left
        to HCCL's own choice.

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: not one of the two forms; level0 not ``NA``; an unknown
            operator or algorithm; an operator named twice; ``pairwise`` for an
            operator other than ``alltoall``.
    """
    if not isinstance(value, str):
        raise TypeError(f"HCCL_ALGO must be a string, got {type(value).__name__}")
    if "=" not in value:
        algo = _level1(value, value)
        if algo == "pairwise":
            raise ValueError("HCCL_ALGO: pairwise is for alltoall only; name it")
        return {ALL: algo}
    out: dict[str, str] = {}
    for item in value.split("/"):
        op, _, setting = item.partition("=")
        checks.one_of("HCCL_ALGO operator", op, OPERATORS)
        if op in out:
            raise ValueError(f"HCCL_ALGO names {op!r} twice")
        out[op] = _level1(setting, value)
        if out[op] == "pairwise" and op != "alltoall":
            raise ValueError(f"HCCL_ALGO: pairwise is for alltoall only, not {op!r}")
    return out


def documented_default(servers: int, product: str) -> str | None:
    """HCCL's level-1 all-reduce algorithm when ``HCCL_ALGO`` is not set.

    Args:
        servers: servers in the communicator, >= 1.
        product: ``"atlas-training"`` (Atlas training series, the 910) or
            ``"atlas-a2"`` (Atlas A2 training series, the 910B).

    Returns:
        For the Atlas training series, ``"ring"`` when ``servers`` is not a power
        of two, else ``"H-D_R"`` (as documented). For Atlas A2, ``None``: HCCL
        chooses by product, data size and server count, and does not publish the
        rule.

    Raises:
        ValueError: ``servers`` < 1 or an unknown ``product``.
    """
    checks.positive_int("servers", servers)
    checks.one_of("product", product, ("atlas-training", "atlas-a2"))
    if product == "atlas-a2":
        return None
    return "H-D_R" if servers & (servers - 1) == 0 else "ring"
