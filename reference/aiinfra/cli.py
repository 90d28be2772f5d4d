"""The ``aiinfra`` command: the book's tables and measurements from a terminal.

Commands are two words, a chapter's group and a verb (``aiinfra bench collectives``,
``aiinfra comm cost``), or one (``aiinfra memory``). Each chapter lists its commands
in its own ``cli.py`` as :class:`~aiinfra.clikit.Command` records, found by
:func:`chapter_clis`. Flags are checked before any work starts: a bad flag, or a
``ValueError`` raised while the flags are checked together (a config dataclass's
validation), exits with status 2 and a message naming the flag; a missing optional
package exits with status 1 and names the package and the extra that installs it.
Nothing here imports matplotlib: every command that does not draw runs on the base
install. Nothing here imports torch either: the chapters' ``cli.py`` are light, and
only the command that is run gets its flags built (which may import what it
needs), so ``aiinfra --help`` and the calculators answer in a fraction of a second.
A bare ``aiinfra`` (or ``aiinfra bench``) lists the commands.
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
from aiinfra import progress, timing
from aiinfra.clikit import Command, HelpFormatter, MissingDependency, progress_wanted


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


def _chosen(argv: Sequence[str], commands: list[Command]) -> Command | None:
    """The command ``argv`` names (its first one or two words), if any."""
    words = [a for a in argv if not a.startswith("-")][:2]
    for cmd in commands:
        if words[:1] == [cmd.group] and (cmd.name is None or words[1:2] == [cmd.name]):
            return cmd
    return None


def build_parser(
    argv: Sequence[str] | None = None, everything: bool = False
) -> argparse.ArgumentParser:
    """The ``aiinfra`` parser: one sub-parser per group, one per command within it.

    Only the command that ``argv`` names gets its flags (its ``add_arguments`` may
    import what the command needs, torch included); ``everything`` adds every
    command's, for checks that look at all of them.
    """
    found = commands()
    chosen = _chosen(sys.argv[1:] if argv is None else argv, found)
    parser = argparse.ArgumentParser(
        prog="aiinfra",
        description=__doc__.split("\n")[0].replace("``", ""),
        epilog="aiinfra GROUP --help lists a group's commands; aiinfra GROUP "
        "COMMAND --help a command's flags and their defaults.",
    )
    groups = parser.add_subparsers(dest="group", metavar="GROUP")
    verbs: dict[str, argparse._SubParsersAction] = {}
    for cmd in found:
        options = {"help": cmd.help, "description": cmd.help}
        options["formatter_class"] = HelpFormatter
        if cmd.name is None:  # a one-word command: aiinfra memory ...
            command = groups.add_parser(cmd.group, **options)
        else:
            if cmd.group not in verbs:
                sub = groups.add_parser(cmd.group, help=f"{cmd.group} commands")
                verbs[cmd.group] = sub.add_subparsers(dest="command", metavar="COMMAND")
                sub.set_defaults(command_parser=sub)
            command = verbs[cmd.group].add_parser(cmd.name, **options)
        if everything or cmd is chosen:
            cmd.add_arguments(command)
        command.set_defaults(run=cmd.run, command_parser=command, chosen=cmd)
    return parser


def flag_names(message: str, parser: argparse.ArgumentParser) -> str:
    """Name flags, not fields: ``max_bytes must be`` becomes ``--max-bytes must be``.

    A config dataclass words its errors with its field names (``top_k (5) must be
    <= ...`` too, the value in brackets, or ``impls: triton needs ...`` at the
    start); where a field is a flag of ``parser`` the message is rewritten to the
    flag the user typed.
    """
    for action in parser._actions:
        flags = [s for s in action.option_strings if s.startswith("--")]
        if flags:
            field = rf"(?<![\w-]){re.escape(action.dest)}"
            pattern = rf"{field}(?=(?: \([^)]*\))? must\b)|^{field}(?=: )"
            message = re.sub(pattern, flags[0], message)
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiinfra`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):  # ``aiinfra`` or ``aiinfra bench``: list them
        (getattr(args, "command_parser", None) or parser).print_help()
        return 0
    cmd: Command = args.chosen
    try:
        quiet = getattr(args, "quiet", False)
        said = "" if quiet else cmd.announcement(args)
        with progress.shown(progress_wanted(args), said), timing.recording():
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
