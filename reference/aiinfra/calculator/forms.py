"""Forms of the book's calculators, and one run of a form through the ``aiinfra`` CLI.

Each :class:`Form` names an ``aiinfra`` command that needs neither torch nor
matplotlib (``memory``, ``plan``, ``kv``, ``budget``): its fields are that
command's flags, read from the command's own parser (type, default, choices, help),
so a flag added to the command appears in the form. :func:`run` builds the command
line from the values a reader typed (:func:`argv`), runs :func:`aiinfra.cli.main`
with ``--json`` and returns the first table, or the command's own error message and
the flag it names: the page shows the message next to that field, never a
traceback.

A pasted ``config.json`` is written to a temporary file and passed as the command's
config flag, as a reader would pass the file in a terminal.

The words a result can hold (headers, word cells, notes) are listed in
:data:`WORDS`, so that the Chinese edition translates each one (a test runs the
forms over their choices and checks that nothing else appears).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PASTED = "config.json"  # the model choice that reads the pasted text

#: What each field is called in the page (the flag is shown beside it).
FIELD_NAMES = {
    "--model": "model",
    "--seq": "sequence length",
    "--micro-batch": "micro-batch (sequences)",
    "--tp": "tensor-parallel ranks",
    "--sp": "sequence parallelism",
    "--recompute": "activation recompute",
    "--attention": "attention kernel",
    "--grad-dtype": "gradient layout",
    "--zero": "ZeRO stage",
    "--dp": "data-parallel ranks",
    "--gpu": "GPU",
    "--gpus": "GPUs",
    "--gpus-per-node": "GPUs per node",
    "--global-batch": "global batch (tokens; K, M, G)",
    "--efficiency": "matmul efficiency (fraction of peak)",
    "--exposed": "exposed share of DP traffic",
    "--memory-fraction": "usable share of HBM",
    "--top": "layouts shown",
    "--params": "parameters N",
    "--tokens": "training tokens D",
    "--mfu": "MFU values (space-separated)",
    "--context": "tokens per sequence",
    "--weights": "weight dtype",
    "--cache": "KV cache dtype",
}

#: The words of the memory and budget results, which their modules format in place.
_MEMORY_AND_BUDGET_WORDS = (
    "part",
    "bytes",
    "GiB",
    "GB",
    "parameters (bf16)",
    "gradients (bf16)",
    "gradients (fp32)",
    "optimizer: fp32 master + Adam m, v",
    "optimizer: fp32 master + Adam m, v + fp32 gradient",
    "activations (layers)",
    "logits + cross-entropy (fp32)",
    "total",
    "Bytes per GPU; GiB = 2^30 bytes, GB = 10^9 bytes.",
    "GPU-days",
    "days",
    "C = 6ND (Kaplan et al. 2020); time = C / (GPUs x dense BF16 peak x MFU); "
    "days: wall-clock time with every GPU busy.",
)


def _words() -> tuple[str, ...]:
    from aiinfra.memory.activations import RECOMPUTE
    from aiinfra.models.cli import KV_NOTE
    from aiinfra.models.kv_budget import COLUMNS as KV_COLUMNS
    from aiinfra.plan.report import COLUMNS as PLAN_COLUMNS
    from aiinfra.plan.report import NOTE as PLAN_NOTE

    found = [*_MEMORY_AND_BUDGET_WORDS, *PLAN_COLUMNS, PLAN_NOTE, *RECOMPUTE]
    found += [*KV_COLUMNS, KV_NOTE]
    return tuple(dict.fromkeys(found))  # in order, once each


#: Every word a result can show that is not a number: the columns, the word cells
#: and the notes of the forms' first tables (a test runs the forms over their
#: choices and finds no other).
WORDS = _words()


@dataclass(frozen=True)
class Form:
    """One calculator: an ``aiinfra`` command and which of its flags the form shows.

    Attributes:
        command: the command's words (``("memory",)``).
        flags: the flags shown, in order (the rest keep their defaults).
        model_flag: the flag a model name goes to (``--model``), if any.
        config_flag: the flag a pasted config.json's path goes to.
        defaults: values the form starts from where the command has none (a
            required flag) or where the book's page starts elsewhere.
        figure: (label column, value column) of the result's bar chart.
        api: the function behind the command, for the page's link to its API entry.
    """

    command: tuple[str, ...]
    flags: tuple[str, ...]
    figure: tuple[str, str]
    api: str
    model_flag: str | None = None
    config_flag: str | None = None
    defaults: Mapping[str, str] = field(default_factory=dict)
    skip_rows: tuple[str, ...] = ()  # rows left out of the figure (a total)


FORMS: dict[str, Form] = {
    "memory": Form(
        command=("memory",),
        flags=(
            "--model",
            "--seq",
            "--micro-batch",
            "--tp",
            "--sp",
            "--recompute",
            "--attention",
            "--grad-dtype",
            "--zero",
            "--dp",
        ),
        model_flag="--model",
        config_flag="--config",
        defaults={"--model": "llama-3-8b"},
        figure=("part", "GiB"),
        skip_rows=("total",),
        api="aiinfra.memory.calculator.memory_report",
    ),
    "plan": Form(
        command=("plan",),
        flags=(
            "--model",
            "--gpu",
            "--gpus",
            "--gpus-per-node",
            "--global-batch",
            "--seq",
            "--efficiency",
            "--exposed",
            "--memory-fraction",
            "--attention",
            "--top",
        ),
        model_flag="--model",
        config_flag="--model",
        defaults={
            "--model": "llama-3-70b",
            "--gpu": "H100",
            "--gpus": "64",
            "--global-batch": "4M",
            "--top": "5",
        },
        figure=("#", "step (s)"),
        api="aiinfra.plan.search.plan",
    ),
    "kv": Form(
        command=("kv",),
        flags=("--model", "--gpu", "--gpus", "--context", "--weights", "--cache"),
        model_flag="--model",
        config_flag="--config",
        defaults={"--model": "llama-3-70b"},
        figure=("GPUs", "sequences"),
        api="aiinfra.models.kv_budget.kv_budget",
    ),
    "budget": Form(
        command=("budget",),
        flags=("--params", "--tokens", "--gpu", "--gpus", "--mfu"),
        figure=("MFU (%)", "days"),
        api="aiinfra.hardware.budget.budget_table",
    ),
}


def _parser(form: Form) -> argparse.ArgumentParser:
    """The command's own sub-parser, flags added (as ``aiinfra`` builds it)."""
    from aiinfra import cli

    parser = cli.build_parser(list(form.command))
    action = parser._subparsers._group_actions[0]  # the groups
    return action.choices[form.command[0]]


def fields(kind: str) -> list[dict[str, Any]]:
    """The form's fields as the page draws them: flag, kind, default, choices, help.

    ``kind`` is ``bool`` (a switch), ``choice`` (a list), ``model`` (a list of the
    named models and :data:`PASTED`), or ``text``. Defaults are the command's own
    (as ``--help`` prints them) unless the form sets one.
    """
    form = _form(kind)
    by_flag = {
        flag: action
        for action in _parser(form)._actions
        for flag in action.option_strings
    }
    out = []
    for flag in form.flags:
        action = by_flag[flag]
        default = form.defaults.get(flag, action.default)
        if isinstance(default, list | tuple):
            default = " ".join(str(v) for v in default)
        entry: dict[str, Any] = {
            "flag": flag,
            "help": action.help or "",
            "default": "" if default is None else str(default),
        }
        if isinstance(action, argparse._StoreTrueAction):
            entry.update(kind="bool", default=bool(action.default))
        elif flag == form.model_flag:
            from aiinfra.models.presets import MODEL_NAMES

            entry.update(kind="model", choices=[*MODEL_NAMES, PASTED])
        elif action.choices:
            entry.update(kind="choice", choices=[str(c) for c in action.choices])
        elif flag == "--gpu":
            from aiinfra.hardware.budget import GPUS

            entry.update(kind="choice", choices=list(GPUS))
        else:
            entry.update(kind="text")
        out.append(entry)
    return out


def _form(kind: str) -> Form:
    if kind not in FORMS:
        raise ValueError(f"kind must be one of {', '.join(FORMS)}, got {kind!r}")
    return FORMS[kind]


def argv(
    kind: str, values: Mapping[str, Any], config_path: str | None = None
) -> list[str]:
    """The ``aiinfra`` command line of a filled form (``--json`` not included).

    ``values`` maps flags to what the reader typed (a string; ``True``/``False`` for
    a switch); an empty or missing value keeps the command's default. The model
    :data:`PASTED` becomes ``config_path``.

    Raises:
        ValueError: ``kind`` names no form, or ``values`` names a flag the form
            does not show.
    """
    form = _form(kind)
    unknown = sorted(set(values) - set(form.flags))
    if unknown:
        raise ValueError(
            f"values: {', '.join(unknown)} is not a field of the {kind} form"
        )
    line = list(form.command)
    for flag in form.flags:
        value = values.get(flag, form.defaults.get(flag, ""))
        if value is True:
            line.append(flag)
        elif value is False or value is None or str(value).strip() == "":
            continue
        elif flag == form.model_flag and value == PASTED:
            line += [form.config_flag or flag, config_path or ""]
        else:
            line += [flag, *str(value).split()]
    return line


_FLAG = re.compile(r"--[a-z][a-z-]*")


def run(kind: str, values: Mapping[str, Any], config: str = "") -> dict[str, Any]:
    """Run a filled form through ``aiinfra``; the first table or the error.

    Args:
        kind: a key of :data:`FORMS`.
        values: flag -> typed value (see :func:`argv`).
        config: the pasted config.json text, when the model is :data:`PASTED`.

    Returns:
        On success ``ok`` is true and the result holds ``argv`` (the command line),
        ``columns``, ``rows`` (the JSON's values), ``cells`` (the rows as the page
        writes them, :func:`cell`), ``note`` and ``bars`` (the figure's,
        :func:`figure`). On failure ``ok`` is false and it
        holds ``argv``, ``message`` (the command's own words, such as
        ``argument --seq: must be an int >= 1, got '-3'``) and ``flag``, the first
        of the form's flags the message names, or None.
    """
    form = _form(kind)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config)
        try:
            line = argv(kind, values, path)
        except ValueError as error:
            return {"ok": False, "argv": [], "flag": None, "message": str(error)}
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                from aiinfra import cli

                code = cli.main([*line, "--json", "--quiet"])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 2
        except Exception as error:  # shown to the reader, not a traceback
            code, err = 1, io.StringIO(f"{type(error).__name__}: {error}")
    shown = [a.replace(path, PASTED) for a in line]
    if code != 0:
        message = _message(err.getvalue())
        named = [f for f in _FLAG.findall(message) if f in form.flags]
        if not named and values.get(form.model_flag or "") == PASTED:
            named = [form.model_flag]
        return {
            "ok": False,
            "argv": shown,
            "flag": named[0] if named else None,
            "message": message.replace(path, PASTED),
        }
    table = next(iter(json.loads(out.getvalue())["tables"].values()))
    answer = {
        "ok": True,
        "argv": shown,
        "columns": table["columns"],
        "rows": table["rows"],
        "cells": [[cell(v) for v in row] for row in table["rows"]],
        "note": table.get("note", ""),
    }
    answer["bars"] = figure(kind, answer)
    return answer


def cell(value: Any) -> str:
    """A result's cell as the page shows it.

    The JSON's value: integers with thousands commas (``16,060,522,496``), floats
    as Python writes them (``50.0``).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _message(stderr: str) -> str:
    """The last error line of ``aiinfra``'s stderr, without the usage or prog."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return "the command failed without a message"
    last = lines[-1]
    return last.split(" error: ", 1)[1] if " error: " in last else last


def figure(kind: str, result: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The bars of a result's figure: (label, value) per row, a total left out.

    The page draws them as they are (its script chooses no rows or columns).
    """
    form = _form(kind)
    label, value = (result["columns"].index(c) for c in form.figure)
    return [
        (str(row[label]), float(str(row[value]).replace(",", "")))
        for row in result["rows"]
        if str(row[label]) not in form.skip_rows
    ]


def page_spec(kind: str) -> dict[str, Any]:
    """What the page's script needs: the fields, the figure's columns, the words."""
    form = _form(kind)
    return {
        "kind": kind,
        "command": " ".join(("aiinfra", *form.command)),
        "fields": fields(kind),
        "figure": list(form.figure),
    }
