"""The ``aiinfra`` command: the book's tables and measurements from a terminal.

Commands are two words, a chapter's group and a verb (``aiinfra bench collectives``,
``aiinfra comm cost``), or one (``aiinfra memory``). Each chapter lists its commands
in its own ``cli.py`` as :class:`~aiinfra.clikit.Command` records, found by
:func:`chapter_clis`. Flags are checked before any work starts: a bad flag, or a
``ValueError`` raised while the flags are checked together (a config dataclass's
validation), exits with status 2 and a message naming the flag; a missing optional
package exits with status 1 and names the package and the extra that installs it.
Nothing here imports matplotlib: every command that does not draw runs on the base
install.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import pkgutil
import re
import sys
from collections.abc import Sequence

import aiinfra
from aiinfra.clikit import Command, MissingDependency


def chapter_clis() -> list[str]:
    """The ``cli`` modules of the package's subpackages, in name order.

    A chapter adds commands by adding ``aiinfra/<package>/cli.py`` with a
    ``COMMANDS`` tuple; nothing here lists them.
    """
    found = []
    for info in pkgutil.iter_modules(aiinfra.__path__):
        name = f"aiinfra.{info.name}.cli"
        if info.ispkg and importlib.util.find_spec(name) is not None:
            found.append(name)
    return sorted(found)


def commands() -> list[Command]:
    """Every chapter's commands, chapter by chapter (:func:`chapter_clis`)."""
    return [c for m in chapter_clis() for c in importlib.import_module(m).COMMANDS]


def build_parser() -> argparse.ArgumentParser:
    """The ``aiinfra`` parser: one sub-parser per group, one per command within it."""
    parser = argparse.ArgumentParser(
        prog="aiinfra", description=__doc__.split("\n")[0].replace("``", "")
    )
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    verbs: dict[str, argparse._SubParsersAction] = {}
    for cmd in commands():
        if cmd.name is None:  # a one-word command: aiinfra memory ...
            command = groups.add_parser(cmd.group, help=cmd.help, description=cmd.help)
        else:
            if cmd.group not in verbs:
                sub = groups.add_parser(cmd.group, help=f"{cmd.group} commands")
                verbs[cmd.group] = sub.add_subparsers(
                    dest="command", required=True, metavar="COMMAND"
                )
            command = verbs[cmd.group].add_parser(
                cmd.name, help=cmd.help, description=cmd.help
            )
        cmd.add_arguments(command)
        command.set_defaults(run=cmd.run, command_parser=command)
    return parser


def flag_names(message: str, parser: argparse.ArgumentParser) -> str:
    """Name flags, not fields: ``max_bytes must be`` becomes ``--max-bytes must be``.

    A config dataclass words its errors with its field names (``top_k (5) must be
    <= ...`` too, the value in brackets); where a field is a flag of ``parser`` the
    message is rewritten to the flag the user typed.
    """
    for action in parser._actions:
        flags = [s for s in action.option_strings if s.startswith("--")]
        if flags:
            field = rf"(?<![\w-]){re.escape(action.dest)}"
            pattern = rf"{field}(?=(?: \([^)]*\))? must\b)"
            message = re.sub(pattern, flags[0], message)
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiinfra`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except MissingDependency as exc:
        print(f"{args.command_parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a usage error: exits 2, as argparse does
        args.command_parser.error(flag_names(str(exc), args.command_parser))
    except BrokenPipeError:  # the reader (`| head`) left: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # python -m aiinfra.cli, as torchrun -m needs
    sys.exit(main())
