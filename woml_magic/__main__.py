"""The ``woml`` command line (spec §2, §3.1, §7, §8).

- ``check FILE`` parses a WOML document (a file, or ``-`` for standard input) and prints
  each step's planned schedule, or the document error as its sentence, line and caret.
  Exit status: 0 valid, 1 invalid or unreadable, 2 usage error (argparse).
- ``run FILE`` runs a document headlessly and prints its text timeline; exit status 0
  when the run succeeded, 1 otherwise.
- ``demo`` runs the duplicate-charge lesson against a local demo API (the README's
  main job); exit status 0 when both halves behaved as the lesson says.

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


def _read(args: argparse.Namespace, command: str) -> str | None:
    """The document named by ``args.file`` as text, or None after printing why not."""
    name = "<stdin>" if args.file == "-" else args.file
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        text = data.decode("utf-8-sig")  # a file saved with a BOM still reads as WOML
    except OSError as exc:
        print(f"woml {command}: cannot read {name}: {exc.strerror or exc}", file=sys.stderr)
        return None
    except UnicodeDecodeError as exc:
        print(
            f"woml {command}: {name} is not UTF-8 text (byte {exc.start}); save it as UTF-8",
            file=sys.stderr,
        )
        return None
    return text


def _check(args: argparse.Namespace) -> int:
    """``check FILE``: parse and print every step's schedule (spec §2, §3.1)."""
    name = "<stdin>" if args.file == "-" else args.file
    text = _read(args, "check")
    if text is None:
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


def _run(args: argparse.Namespace) -> int:
    """``run FILE``: run the document headlessly and print its text timeline (spec §7)."""
    import json

    from .api import run
    from .errors import WomlError
    from .limits import DEFAULT_MAX_JSON_DEPTH
    from .timeline import render_text

    text = _read(args, "run")
    if text is None:
        return 1
    try:
        payload = None if args.payload is None else json.loads(args.payload)
    except ValueError as exc:
        print(f"woml run: --payload is not JSON: {exc}", file=sys.stderr)
        return 1
    except RecursionError:
        # spec §4.5: refused before anything runs, never a traceback.
        print("woml run: --payload is nested too deeply to read; the limit is "
              f"{DEFAULT_MAX_JSON_DEPTH} levels (max_json_depth)", file=sys.stderr)
        return 1
    try:
        result = run(text, payload=payload, clock="simulated" if args.simulate else "real",
                     run_id=args.run_id, journal=args.journal, resume=args.resume,
                     retry_interrupted=args.retry_interrupted)
    except WomlSyntaxError as exc:
        print(exc.pretty(), file=sys.stderr)
        return 1
    except WomlError as exc:
        print(f"woml run: {exc}", file=sys.stderr)
        return 1
    print(render_text(result))
    return 0 if result.status == "succeeded" else 1


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run", help="run a WOML document headlessly and print its timeline",
        description="Run a WOML document and print its text timeline (spec §6.3).",
    )
    parser.add_argument("file", metavar="FILE", help="the WOML document, or - for stdin")
    parser.add_argument("--simulate", action="store_true", help="use the simulated clock")
    parser.add_argument("--payload", metavar="JSON", help="the run's payload, as JSON")
    parser.add_argument("--run-id", metavar="ID", help="pin the run id (and so the keys)")
    parser.add_argument("--journal", metavar="PATH", default=":memory:",
                        help="journal file (default: in memory)")
    parser.add_argument("--resume", metavar="RUN_ID", help="resume a journaled run")
    parser.add_argument("--retry-interrupted", action="store_true",
                        help="on resume, run an interrupted attempt's step again")
    parser.set_defaults(handler=_run)


def _demo(args: argparse.Namespace) -> int:
    """``demo``: the duplicate-charge lesson against a local demo API (spec §4.2, §8)."""
    from .demo.lesson import main as lesson

    return lesson(clock="simulated" if args.simulate else "real")


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo", help="the duplicate-charge lesson, headless, against a local demo API",
        description="Charge twice through a demo API on 127.0.0.1 that loses a response: "
                    "without and with an idempotency key.",
    )
    parser.add_argument("--simulate", action="store_true", help="use the simulated clock")
    parser.set_defaults(handler=_demo)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="woml", description="WOML workflow documents from the command line."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_check(commands)
    _add_run(commands)
    _add_demo(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = _build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
