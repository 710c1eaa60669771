"""The ``woml`` command line: ``python -m woml_magic check FILE`` (spec §2, §3.1).

``check`` parses a WOML document (a file, or ``-`` for standard input) and prints each
step's planned schedule, or the document error as its sentence, line and caret.
Exit status: 0 valid, 1 invalid or unreadable, 2 usage error (argparse).

Each subcommand is one ``_add_<name>`` function that registers its parser and its
handler, ``handler(args) -> int``; add more in ``_build_parser``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import WomlSyntaxError
from .model import Step
from .parse import parse
from .policy import format_duration

Handler = Callable[[argparse.Namespace], int]


def schedule_line(step: Step) -> str:
    """One step and its planned schedule (spec §3.1), e.g.
    ``charge: 3 attempts, exponential; waits 1s, 2s`` or ``ping: 1 attempt; no retry``.
    """
    policy = step.policy
    if policy.attempts == 1:
        return f"{step.id}: 1 attempt; no retry"
    waits = ", ".join(format_duration(w) for w in policy.waits())
    return f"{step.id}: {policy.attempts} attempts, {policy.backoff}; waits {waits}"


def _check(args: argparse.Namespace) -> int:
    """``check FILE``: parse and print every step's schedule (spec §2, §3.1)."""
    name = "<stdin>" if args.file == "-" else args.file
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        text = data.decode("utf-8-sig")  # a file saved with a BOM still reads as WOML
    except OSError as exc:
        print(f"woml check: cannot read {name}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as exc:
        print(
            f"woml check: {name} is not UTF-8 text (byte {exc.start}); save it as UTF-8",
            file=sys.stderr,
        )
        return 1
    try:
        workflow = parse(text)
    except WomlSyntaxError as exc:
        print(f"{name}:{exc.line}:{exc.column}: invalid WOML document", file=sys.stderr)
        print(exc.pretty(), file=sys.stderr)
        return 1
    count = len(workflow.steps)
    print(f"workflow {workflow.id}: {count} step{'' if count == 1 else 's'}")
    for step in workflow.steps:
        print(schedule_line(step))
    return 0


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "check",
        help="parse a WOML document and print each step's planned schedule",
        description="Parse a WOML document and print each step's planned retry schedule.",
    )
    parser.add_argument("file", metavar="FILE", help="the WOML document, or - for stdin")
    parser.set_defaults(handler=_check)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="woml", description="WOML workflow documents from the command line."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_check(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = _build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
