"""The argument checks: what each accepts, what it refuses, and how it says so.

The expected messages are written out by hand, in the one style every check uses:
``<name> must be <constraint>, got <value!r>``.
"""

import math

import numpy as np
import pytest
from aiinfra import checks


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: checks.positive_int("n", 0), "n must be an int >= 1, got 0"),
        (lambda: checks.non_negative_int("k", -1), "k must be an int >= 0, got -1"),
        (lambda: checks.integer("p", 1, low=2), "p must be an int >= 2, got 1"),
        (lambda: checks.int_in("r", 4, 0, 3), "r must be an int in [0, 3], got 4"),
        (
            lambda: checks.power_of_two("b", 24, 16),
            "b must be a power of two >= 16, got 24",
        ),
        (lambda: checks.positive("t", 0.0), "t must be a finite number > 0, got 0.0"),
        (
            lambda: checks.non_negative("c", -1),
            "c must be a finite number >= 0, got -1",
        ),
        (
            lambda: checks.probability("a", 1.5),
            "a must be a finite number in [0, 1], got 1.5",
        ),
        (lambda: checks.fraction("s", 1), "s must be a finite number in (0, 1), got 1"),
        (
            lambda: checks.one_of("fmt", "int3", ("int8", "fp8")),
            "fmt must be one of 'int8', 'fp8', got 'int3'",
        ),
        (
            lambda: checks.int_list("sizes", (4, 0)),
            "sizes must be a non-empty sequence of ints >= 1, got (4, 0)",
        ),
        (
            lambda: checks.positive_ints(batch=2, seq=0),
            "seq must be an int >= 1, got 0",
        ),
    ],
)
def test_each_check_names_the_argument_the_constraint_and_the_value(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("value", [True, 2.0, "3", None, np.int64(3)])
def test_an_int_is_a_python_int_and_never_a_bool(value):
    with pytest.raises(checks.WrongType, match=r"n must be an int >= 1, got "):
        checks.positive_int("n", value)


def test_a_wrong_type_is_both_a_type_error_and_a_value_error():
    # Callers written for either keep working: the command line catches ValueError.
    with pytest.raises(TypeError):
        checks.positive_int("n", 1.5)
    with pytest.raises(ValueError):
        checks.positive_int("n", 1.5)
    assert issubclass(checks.WrongType, TypeError)
    assert issubclass(checks.WrongType, ValueError)


def test_numbers_accept_numpy_scalars_and_refuse_nan_bools_and_infinities():
    assert checks.positive("x", np.float32(0.5)) == np.float32(0.5)
    assert checks.positive("x", 3) == 3
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="x must be a finite number > 0"):
            checks.positive("x", bad)
    with pytest.raises(checks.WrongType, match="got True"):
        checks.non_negative("x", True)
    assert checks.number("bw", math.inf, 0, low_open=True, finite=False) == math.inf


def test_bounds_are_inclusive_unless_open():
    assert checks.int_in("r", 0, 0, 3) == 0 and checks.int_in("r", 3, 0, 3) == 3
    assert checks.probability("p", 0) == 0 and checks.probability("p", 1) == 1
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        checks.fraction("s", 0.0)
    assert checks.number("mfu", 1, 0, 1, low_open=True) == 1


def test_each_check_returns_what_it_checked():
    assert checks.positive_int("n", 7) == 7
    assert checks.int_list("sizes", [1, 2]) == (1, 2)
    assert checks.one_of("x", "b", "abc") == "b"
    assert checks.power_of_two("b", 64, 16) == 64
