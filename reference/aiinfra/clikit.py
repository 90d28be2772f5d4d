"""What every chapter's command line shares: a command record and argument checks.

A chapter's ``cli.py`` lists its commands as :class:`Command` records (words, help,
a function adding the flags, a function running them); :mod:`aiinfra.cli` collects
them. Flags are parsed by the checks below, which all word their errors the same
way (``must be ..., got ...``), and a config dataclass validates the flags together:
the ``aiinfra`` command turns any ``ValueError`` into a usage error (exit status 2)
and a missing optional package (:class:`MissingDependency`) into a message naming
the package and the extra that installs it (exit status 1).
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Command:
    """One ``aiinfra`` command.

    Args:
        group: the first word (``bench``, ``comm``, ``memory``).
        name: the second word, or ``None`` for a one-word command.
        help: one line for ``--help``.
        add_arguments: adds the command's flags to its parser.
        run: runs the parsed flags and returns the exit status.
    """

    group: str
    name: str | None
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


class MissingDependency(ImportError):
    """An optional package that a command needs is not installed."""


def require(module: str, extra: str) -> ModuleType:
    """Import an optional package, or say which package and extra to install.

    Args:
        module: the import name, e.g. ``"deepspeed"``.
        extra: the extra of ``aiinfra`` that installs it, e.g. ``"parallel"``.

    Raises:
        MissingDependency: the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"this command needs the package {module!r}, which is not installed: "
            f"pip install 'aiinfra[{extra}]' (or pip install {module})"
        ) from exc


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an int >= {low}, got {text!r}")
        return value

    return parse


def int_list(text: str) -> tuple[int, ...]:
    """``1,2,4``: counts (drafted tokens, batch sizes), each >= 1."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, e.g. 1,2,4, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"each value must be >= 1, got {text!r}")
    return values


def positive_float(text: str) -> float:
    """An argparse type: a finite float ``> 0``."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def size(text: str) -> int:
    """An argparse type: a byte count with an optional binary suffix, ``16M``.

    K, M and G are powers of 1024 (KiB, MiB, GiB), as in nccl-tests' ``-b``/``-e``.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(
            f"must be an integer with an optional binary suffix K, M or G (1K = "
            f"1024 bytes), got {text!r}"
        )
    return int(m[1]) * 1024 ** " KMG".index(m[2].upper() or " ")


def names(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: comma-separated names from ``choices``; ``all``: each."""

    def parse(text: str) -> tuple[str, ...]:
        picked = tuple(n.strip() for n in text.split(",") if n.strip())
        if picked == ("all",):
            return tuple(choices)
        unknown = [n for n in picked if n not in choices]
        if unknown or not picked:
            raise argparse.ArgumentTypeError(
                f"must be some of {', '.join(choices)} (comma-separated) or all, "
                f"got {text!r}"
            )
        return picked

    return parse
