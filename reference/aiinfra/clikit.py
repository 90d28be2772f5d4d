"""What every chapter's command line shares: records, flags, output, progress.

A chapter's ``cli.py`` lists its commands as :class:`Command` records (words, help,
a function adding the flags, a function running them); :mod:`aiinfra.cli` collects
them. A ``cli.py`` imports nothing heavy at its top (no torch): the ``aiinfra``
command imports every one of them to list the commands, and only the chosen
command's functions import what it needs.

Flags:

- a command that runs a config dataclass declares its flags with
  :func:`add_config_flags` (one flag per field: type, default and help read from the
  dataclass, the help from the field's trailing comment or its ``metadata["help"]``)
  and builds the config with :func:`config_from`; the dataclass validates the flags
  together, and ``aiinfra`` turns its ``ValueError`` into a usage error (exit
  status 2) naming the flag;
- a name from a registry (a model, a GPU) is read by :func:`name_of`: any case, and
  the error lists the names;
- every ``--help`` shows the defaults (:class:`HelpFormatter`).

Output (:func:`add_output_flags`, :func:`show`, :func:`save`): a command prints
human-readable tables, headed by one line that echoes every input (the command
line with its defaults filled in); ``--json`` prints every table it computes as
one JSON document instead. A measurement writes a file only when asked:
``--out PATH`` writes the stamped result there, ``--stamp`` writes it into the
book's data (:func:`aiinfra.results.results_path`, which ``nox -s bench`` uses).
Progress goes to stderr (:mod:`aiinfra.progress`), off with ``--quiet`` or when
stderr is not a terminal (``AIINFRA_PROGRESS=1`` forces it on).

A missing optional package (:class:`MissingDependency`) ends with a message naming
the distribution and the extra that installs it (exit status 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import inspect
import io
import json
import math
import os
import re
import sys
import tokenize
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

if typing.TYPE_CHECKING:
    from aiinfra.report import Table


@dataclass(frozen=True)
class Command:
    """One ``aiinfra`` command.

    Args:
        group: the first word (``bench``, ``comm``, ``memory``).
        name: the second word, or ``None`` for a one-word command.
        help: one line for ``--help``.
        add_arguments: adds the command's flags to its parser.
        run: runs the parsed flags and returns the exit status.
        runs: for a command that takes more than a moment, what it runs and about
            how long: a sentence, or a function of the parsed flags that words it
            for them; printed to stderr when the work starts.
    """

    group: str
    name: str | None
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    runs: str | Callable[[argparse.Namespace], str] = ""

    def announcement(self, args: argparse.Namespace) -> str:
        """The line said before the work: ``aiinfra <words>: <runs>``, or ``""``."""
        text = self.runs(args) if callable(self.runs) else self.runs
        return f"aiinfra {self.words}: {text}" if text else ""

    @property
    def words(self) -> str:
        """``bench decode``, ``memory``: how the command is typed."""
        return self.group if self.name is None else f"{self.group} {self.name}"


class MissingDependency(ImportError):
    """An optional package that a command needs is not installed."""


#: Import name -> the distribution that provides it, where they differ.
DISTRIBUTIONS = {"yaml": "PyYAML", "prometheus_client": "prometheus-client"}


def require(module: str, extra: str) -> ModuleType:
    """Import an optional package, or say which distribution and extra to install.

    Args:
        module: the import name, e.g. ``"yaml"``.
        extra: the extra of ``aiinfra`` that installs it, e.g. ``"cloud"``.

    Raises:
        MissingDependency: the package is not installed; the message names the
            distribution (``PyYAML`` for ``yaml``), as pip knows it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        dist = DISTRIBUTIONS.get(module, module)
        raise MissingDependency(
            f"this command needs the package {module!r}, which is not installed: "
            f"pip install 'aiinfra[{extra}]' (or pip install {dist})"
        ) from exc


# region argparse types
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


def _items(kind: type) -> Callable[[str], tuple]:
    """An argparse type for one word of a list flag: ``4`` or ``1,2,4``."""

    def parse(text: str) -> tuple:
        try:
            return tuple(kind(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {kind.__name__}s separated by spaces or commas, got {text!r}"
            ) from None

    parse.__name__ = f"{kind.__name__}s"
    return parse


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


def name_of(choices: Iterable[str]) -> Callable[[str], str]:
    """An argparse type: one name of a registry (models, GPUs), in any case.

    The one matching rule of every command: case is ignored, and the name is
    returned as the registry spells it (``h100`` -> ``H100``); an unknown name is
    an error that lists them all.
    """
    spelled = {c.lower(): c for c in choices}

    def parse(text: str) -> str:
        if text.lower() not in spelled:
            raise argparse.ArgumentTypeError(
                f"must be one of {', '.join(sorted(spelled.values()))} (any case), "
                f"got {text!r}"
            )
        return spelled[text.lower()]

    parse.__name__ = "name"
    return parse


# endregion


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with every default shown (``(default: 8)``), lists as typed."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        hidden = default in (None, False, argparse.SUPPRESS) or isinstance(
            action, argparse._HelpAction | argparse._VersionAction
        )
        if "%(default)" in text or hidden or not action.option_strings:
            return text
        return f"{text} (default: {_shown(default)})"


def _shown(value: Any) -> str:
    """A default as a user types it: ``1 2 4`` for a list, ``4e+11`` for a float."""
    if isinstance(value, list | tuple):
        return " ".join(_shown(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# region config flags
#: Field -> flag where the book's notation is shorter than the field's name.
SHORT_FLAGS = {
    "n_layers": "layers",
    "n_heads": "heads",
    "n_kv_heads": "kv-heads",
    "vocab_size": "vocab",
    "n_experts": "experts",
}


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """Field -> its trailing comment in the class's source (``n: int = 8  # ranks``)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    line_field: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        row, col = tok.start
        if tok.type == tokenize.NAME and row not in line_field and col == 4:
            line_field[row] = tok.string
        elif tok.type == tokenize.COMMENT and row in line_field:
            out.setdefault(line_field[row], tok.string.lstrip("#").strip())
    return out


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field -> its line of the class docstring's ``Args:`` (Google style)."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    inside, current = False, None
    for line in lines:
        if line.strip() in ("Args:", "Attributes:"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            inside = False
        if not inside:
            continue
        m = re.match(r"    (\w+)(?: \([^)]*\))?: (.*)", line)
        if m:
            current = m[1]
            out[current] = m[2].strip()
        elif current and line.startswith("        "):
            out[current] += " " + line.strip()
    return out


def _plain(text: str) -> str:
    """Docstring markup as plain text: ``x`` and :data:`~a.X` become x and X."""
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def _flag_kind(annotation: Any) -> tuple[str, type | None]:
    """(``scalar``/``list``/``bool``/``skip``, element type) of a field's type."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return _flag_kind(kinds[0]) if len(kinds) == 1 else ("skip", None)
    if annotation is bool:
        return "bool", bool
    if annotation in (int, float, str):
        return "scalar", annotation
    if origin in (tuple, list) and args and args[0] in (int, float, str):
        return "list", args[0]
    return "skip", None


def add_config_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Iterable[str] = (),
    flags: dict[str, str] | None = None,
    helps: dict[str, str] | None = None,
    choices: dict[str, Sequence[Any]] | None = None,
    parse: dict[str, Callable[[str], Any]] | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """One flag per field of the dataclass ``cls``, read from the dataclass itself.

    A field ``new_tokens: int = 512  # tokens to generate`` becomes ``--new-tokens``
    of type ``int``, default 512, help "tokens to generate" (or the field's
    ``metadata["help"]``, or its line in the class docstring's ``Args:``);
    ``tuple[int, ...]`` takes several values (``--ks 1 2 4`` or ``--ks 1,2,4``);
    ``bool`` is ``--x``/``--no-x``; ``X | None`` is an ``X`` defaulting to ``None``.
    Fields of other types (a nested config) are not flags.
    The flag's ``dest`` is the field's name, so :func:`config_from` finds it and a
    validation error naming the field names the flag.

    Args:
        parser: the command's parser.
        cls: the config dataclass; its defaults are the flags' defaults.
        skip: fields that are not flags (set by the command itself).
        flags: field -> flag name without ``--``, where not the field's name with
            dashes (:data:`SHORT_FLAGS` applies by default).
        helps: field -> help text, overriding the comment.
        choices: field -> allowed values.
        parse: field -> argparse type, overriding the field's type.
        defaults: field -> default, overriding the dataclass's.
    """
    flags, helps = {**SHORT_FLAGS, **(flags or {})}, helps or {}
    choices, parse, defaults = choices or {}, parse or {}, defaults or {}
    comments = field_docs(cls) | field_comments(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        kind, element = _flag_kind(hints.get(f.name))
        if kind == "skip" and f.name not in parse:
            continue
        if f.name in defaults:
            default = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        text = helps.get(f.name) or f.metadata.get("help") or comments.get(f.name)
        options: dict[str, Any] = {
            "dest": f.name,
            "default": default,
            "help": _plain(text or f.name.replace("_", " ")),
        }
        if kind == "bool":
            options["action"] = argparse.BooleanOptionalAction
        elif kind == "list":
            each = names(list(choices[f.name])) if f.name in choices else None
            options |= {
                "nargs": "+",
                "type": parse.get(f.name, each or _items(element)),
            }
            options["metavar"] = "NAME" if element is str else element.__name__.upper()
            if each is not None:
                options["help"] += f" ({', '.join(map(str, choices[f.name]))}, or all)"
        else:
            options["type"] = parse.get(f.name, element)
            if f.name in choices:
                options["choices"] = choices[f.name]
        long = f.name.replace("_", "-")
        flag = flags.get(f.name, long)
        # The field's own name stays a flag too where a shorter one is shown.
        strings = [f"--{flag}"] + ([f"--{long}"] if flag != long else [])
        parser.add_argument(*strings, **options)


def config_from(args: argparse.Namespace, cls: type, **overrides: Any) -> Any:
    """The config ``cls`` from the flags of :func:`add_config_flags` (and overrides).

    A list flag's words are joined into one tuple (``--ks 1,2 4`` is ``(1, 2, 4)``).

    Raises:
        ValueError: the dataclass refuses the values (the message names the field,
            which ``aiinfra`` rewrites as the flag).
    """
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in overrides or not f.init or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        if isinstance(value, list):  # nargs: one tuple per word, or plain values
            parts = [v if isinstance(v, tuple) else (v,) for v in value]
            value = tuple(x for part in parts for x in part)
        values[f.name] = value
    return cls(**values, **overrides)


# endregion


# region output
def add_output_flags(parser: argparse.ArgumentParser, measures: bool = False) -> None:
    """``--json`` and ``--quiet``; for a measurement also ``--out`` and ``--stamp``.

    Args:
        parser: the command's parser.
        measures: the command measures something that :func:`save` can store.
    """
    add = parser.add_argument
    add("--json", action="store_true", help="print every table as one JSON document")
    add("--quiet", action="store_true", help="no progress on stderr")
    if measures:
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--out", type=Path, help="write the stamped result (JSON) to this file"
        )
        where.add_argument(
            "--stamp",
            action="store_true",
            help="write the stamped result into the book's data (docs/_data/bench/)",
        )
        # Accepted from older command lines: nothing is written unless asked.
        add("--no-write", action="store_true", help=argparse.SUPPRESS)


def save(
    args: argparse.Namespace,
    kind: str,
    body: dict[str, Any],
    *,
    backend: str,
    world_size: int,
    extra_stamp: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The stamped result ``{"stamp": ..., **body}``, written where the flags say.

    ``--out PATH`` writes it there, ``--stamp`` into the book's data; without
    either nothing is written.

    Returns:
        The result as :func:`aiinfra.results.load` would read it.
    """
    from aiinfra import results

    extra_stamp = (extra_stamp or {}) | {"repeat_spread": repeat_spread()}
    if getattr(args, "out", None) is None and not getattr(args, "stamp", False):
        stamp = results.machine_stamp(world_size, backend) | extra_stamp
        warn_if_noisy(stamp)
        return {"stamp": stamp, **body}
    path = results.write(
        kind,
        body,
        backend=backend,
        world_size=world_size,
        path=getattr(args, "out", None),
        extra_stamp=extra_stamp,
    )
    warn_if_noisy(extra_stamp | results.machine_stamp(world_size, backend))
    print(f"wrote {path}", file=sys.stderr)
    return results.load(kind, backend, path)


#: Repeats of one timing whose median is this much slower than their best: the run
#: was disturbed (a loaded, shared machine), and differences of that size between
#: the rows of its tables are noise.
NOISY_SPREAD = 0.10


def repeat_spread() -> dict[str, Any] | None:
    """How far the repeats of this run's timings spread (:mod:`aiinfra.timing`).

    Returns:
        ``{"timings", "median", "max"}``: how many timings, and the median and the
        largest of their ``(median - best) / best``; ``None`` when the run timed
        nothing in this process (spawned ranks time themselves).
    """
    import statistics

    from aiinfra import timing

    spreads = timing.recorded()
    if not spreads:
        return None
    return {
        "timings": len(spreads),
        "median": round(statistics.median(spreads), 4),
        "max": round(max(spreads), 4),
    }


def warn_if_noisy(stamp: dict[str, Any]) -> None:
    """Warn on stderr when the repeats spread too far for comparisons to hold."""
    spread = stamp.get("repeat_spread")
    if not spread or spread["median"] <= NOISY_SPREAD:
        return
    print(
        f"warning: the repeats of a timing differed by {spread['median']:.0%} "
        f"(median over {spread['timings']} timings; up to {spread['max']:.0%}) with "
        f"a load of {stamp.get('load_1min')} on {stamp.get('cpu_count')} cores: "
        "differences of that size between rows are noise; rerun on a quiet "
        "machine, or with more --repeats",
        file=sys.stderr,
    )


def command_line(args: argparse.Namespace) -> str:
    """The command with every flag that sets an input, defaults filled in."""
    parser: argparse.ArgumentParser = args.command_parser
    words = [parser.prog]
    output = {"json", "quiet", "out", "stamp", "no_write", "help"}
    for action in parser._actions:
        if not action.option_strings or action.dest in output:
            continue
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse.BooleanOptionalAction):
            if value is not None:
                words.append(action.option_strings[0 if value else 1])
        elif action.nargs == 0:  # store_true
            if value:
                words.append(action.option_strings[0])
        elif value is not None:
            flag = next(s for s in action.option_strings if s.startswith("--"))
            words += [flag, _shown(value)]
    return " ".join(words)


def _jsonable(value: Any) -> Any:
    """A flag's value as JSON: paths and infinities as strings, tuples as lists."""
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The flags of the command as a JSON-ready dict (output flags left out)."""
    skip = {"json", "quiet", "out", "stamp", "no_write", "run", "command_parser"}
    skip |= {"group", "command", "chosen"}
    return {k: _jsonable(v) for k, v in vars(args).items() if k not in skip}


def show(
    args: argparse.Namespace,
    tables: dict[str, Table],
    result: dict[str, Any] | None = None,
) -> None:
    """Print every table: titled text, or (``--json``) one JSON document.

    Args:
        args: the parsed flags (their values are echoed first).
        tables: title -> table, in the order to print them.
        result: the measured result, stamp included, for ``--json``.
    """
    if getattr(args, "json", False):
        doc: dict[str, Any] = {"command": args.command_parser.prog}
        doc["inputs"] = inputs(args)
        doc["tables"] = {title: t.as_dict() for title, t in tables.items()}
        if result is not None:
            doc["result"] = result
        print(json.dumps(doc, indent=1, default=_jsonable))
        return
    parts = [f"# {command_line(args)}"]
    for title, table in tables.items():
        parts.append(f"{title}\n{'=' * len(title)}\n{table.to_text()}")
    print("\n\n".join(parts))


# endregion


def progress_wanted(args: argparse.Namespace) -> bool:
    """Whether to draw progress bars on stderr.

    Never with ``--quiet``; else ``AIINFRA_PROGRESS=1`` or ``0`` decides, and
    without it, whether stderr is a terminal.
    """
    if getattr(args, "quiet", False):
        return False
    forced = os.environ.get("AIINFRA_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stderr.isatty()
