"""Argument checks: one message style for every function of the package.

A public function checks its arguments before it does any work (before a
collective starts, a file is written or a kernel is launched) and says what is
wrong in one sentence that names the argument, the constraint and the value:
``n_ranks must be an int >= 2, got 1``. Every check here returns the value it
checked, so a constructor can write ``self.n = checks.positive_int("n", n)``.

A value of the wrong type (``2.5`` or ``True`` where an int is needed) raises
:class:`WrongType`, which is both a :class:`TypeError` and a :class:`ValueError`:
what it is (the wrong type), and what callers that catch usage errors expect (the
``aiinfra`` command turns a ``ValueError`` into exit status 2 naming the flag). A
value of the right type outside its range raises :class:`ValueError`. ``bool`` is
never an int here, although Python makes it one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any


class WrongType(TypeError, ValueError):
    """An argument of the wrong type (a ``TypeError`` that is a ``ValueError`` too)."""


def _fail(name: str, constraint: str, value: Any, *, wrong_type: bool) -> None:
    error = WrongType if wrong_type else ValueError
    raise error(f"{name} must be {constraint}, got {value!r}")


def is_int(value: object) -> bool:
    """Whether ``value`` is a Python ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number (int, float, NumPy scalar), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bound(value: Any) -> str:
    """A bound as a reader writes it: ``1``, not ``1.0``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _range(low: Any, high: Any, low_open: bool, high_open: bool) -> str:
    """``>= 1``, ``> 0``, ``<= 100``, ``in [0, 4)``: the constraint's bounds."""
    low, high = (None if b is None else _bound(b) for b in (low, high))
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def integer(
    name: str, value: Any, low: int | None = None, high: int | None = None
) -> int:
    """An int in ``[low, high]`` (either bound may be ``None``: no bound).

    Raises:
        WrongType: ``value`` is not an int (a bool is not).
        ValueError: it is outside the bounds.
    """
    bounds = _range(low, high, False, False)
    constraint = f"an int {bounds}".rstrip()
    if not is_int(value):
        _fail(name, constraint, value, wrong_type=True)
    if (low is not None and value < low) or (high is not None and value > high):
        _fail(name, constraint, value, wrong_type=False)
    return value


def positive_int(name: str, value: Any) -> int:
    """An int ``>= 1`` (a count: ranks, layers, tokens)."""
    return integer(name, value, low=1)


def non_negative_int(name: str, value: Any) -> int:
    """An int ``>= 0`` (an index from zero, a count that may be empty)."""
    return integer(name, value, low=0)


def int_in(name: str, value: Any, low: int, high: int) -> int:
    """An int in ``[low, high]``, both included (a rank: ``0, p - 1``)."""
    return integer(name, value, low, high)


def positive_ints(**values: Any) -> None:
    """Each keyword an int ``>= 1``: ``positive_ints(batch=b, seq=s)``."""
    for name, value in values.items():
        positive_int(name, value)


def int_list(name: str, values: Any, low: int = 1) -> tuple[int, ...]:
    """A non-empty sequence of ints, each ``>= low`` (sizes to sweep)."""
    constraint = f"a non-empty sequence of ints >= {low}"
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        _fail(name, constraint, values, wrong_type=True)
    items = tuple(values)
    if not items or not all(is_int(v) for v in items):
        _fail(name, constraint, values, wrong_type=bool(items))
    if min(items) < low:
        _fail(name, constraint, values, wrong_type=False)
    return items


def power_of_two(name: str, value: Any, low: int = 1) -> int:
    """An int that is a power of two and ``>= low`` (a tile size, a ring of 2^k)."""
    constraint = f"a power of two >= {low}"
    if not is_int(value):
        _fail(name, constraint, value, wrong_type=True)
    if value < low or value < 1 or value & (value - 1):
        _fail(name, constraint, value, wrong_type=False)
    return value


def number(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    finite: bool = True,
) -> float:
    """A real number within the bounds (never NaN; infinity only if not ``finite``).

    Args:
        name: the argument's name, for the message.
        value: what was passed.
        low: the lower bound, or ``None`` for none.
        high: the upper bound, or ``None`` for none.
        low_open: exclude ``low`` itself (``> 0`` rather than ``>= 0``).
        high_open: exclude ``high`` itself.
        finite: refuse ``inf`` and ``-inf``.

    Raises:
        WrongType: ``value`` is not a real number (a bool is not).
        ValueError: NaN, an infinity where ``finite``, or outside the bounds.
    """
    bounds = _range(low, high, low_open, high_open)
    constraint = f"{'a finite number' if finite else 'a number'} {bounds}".rstrip()
    if not is_number(value):
        _fail(name, constraint, value, wrong_type=True)
    bad = (
        math.isnan(value)
        or (finite and math.isinf(value))
        or (low is not None and (value <= low if low_open else value < low))
        or (high is not None and (value >= high if high_open else value > high))
    )
    if bad:
        _fail(name, constraint, value, wrong_type=False)
    return value


def positive(name: str, value: Any) -> float:
    """A finite number ``> 0`` (a time, a bandwidth, a size in bytes)."""
    return number(name, value, low=0, low_open=True)


def non_negative(name: str, value: Any) -> float:
    """A finite number ``>= 0`` (a latency that may be zero, a cost)."""
    return number(name, value, low=0)


def probability(name: str, value: Any) -> float:
    """A number in ``[0, 1]`` (an acceptance rate, a share)."""
    return number(name, value, 0, 1)


def fraction(name: str, value: Any) -> float:
    """A number in ``(0, 1)``, both ends excluded (a share that must leave some)."""
    return number(name, value, 0, 1, low_open=True, high_open=True)


def positives(**values: Any) -> None:
    """Each keyword a finite number ``> 0``: ``positives(flops=f, bandwidth=b)``."""
    for name, value in values.items():
        positive(name, value)


def one_of(name: str, value: Any, choices: Sequence[Any] | Iterable[Any]) -> Any:
    """One of ``choices`` (a format, a schedule's name, a preset).

    Raises:
        ValueError: ``value`` is not among them; the message lists them.
    """
    options = list(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        _fail(name, f"one of {listed}", value, wrong_type=False)
    return value
