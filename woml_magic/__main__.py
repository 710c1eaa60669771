"""The ``woml`` command line (spec §2, §3.1, §7, §8).

- ``check FILE`` parses a WOML document (a file, or ``-`` for standard input) and prints
  each step's planned schedule, or the document error as its sentence, line and caret.
  Exit status: 0 valid, 1 invalid or unreadable, 2 usage error (argparse).
- ``run FILE`` runs a document headlessly and prints its text timeline; exit status 0
  when the run succeeded, 1 otherwise. Each limit of ``woml_magic.limits`` is a flag
  (``--max-log-lines N``, …), refused out of its range as the API refuses it.
- ``demo`` runs the duplicate-charge lesson against a local demo API (the README's
  main job); exit status 0 when both halves behaved as the lesson says.
- ``worker --temporal HOST:PORT`` runs a Temporal worker for ``--engine temporal`` runs
  (spec §9) until SIGINT or SIGTERM; exit status 0 when stopped by a signal, 2 when it
  cannot start (bad options, missing extra, no server).

Each subcommand is one ``_add_<name>`` function that registers its parser and its
handler, ``handler(args) -> int``; add more in ``_build_parser``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .errors import WomlSyntaxError
from .limits import LIMITS, Limits
from .model import Step
from .parse import parse
from .policy import format_duration

if TYPE_CHECKING:
    from .temporal.options import TemporalOptions

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

    from .api import EngineConfig, run
    from .errors import WomlError
    from .limits import JSONLimitError, loads_limited
    from .timeline import render_text

    text = _read(args, "run")
    if text is None:
        return 1
    try:
        # The limits' own check (spec §6.1): the API's sentence for a value out of range.
        limits = Limits(**{name: getattr(args, name) for name in LIMITS
                           if getattr(args, name) is not None})
    except WomlError as exc:
        print(f"woml run: {exc}", file=sys.stderr)
        return 1
    try:
        # spec §4.5: refused before anything runs, one sentence naming the limit, the
        # same on every Python (3.13's reader no longer recurses into a RecursionError).
        payload = None if args.payload is None else loads_limited(
            args.payload, max_depth=limits.max_json_depth, what="--payload")
    except JSONLimitError as exc:
        print(f"woml run: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"woml run: --payload is not JSON: {exc}", file=sys.stderr)
        return 1
    try:
        result = run(text, payload=payload, clock="simulated" if args.simulate else "real",
                     run_id=args.run_id, journal=args.journal, resume=args.resume,
                     retry_interrupted=args.retry_interrupted,
                     config=EngineConfig(limits=limits))
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
    for name, limit in LIMITS.items():  # one flag per limit, as declared (STYLE 14)
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, metavar="N", dest=name,
                            help=f"the run's {name}: {limit.low} to {limit.high} {limit.unit} "
                                 f"(default {limit.default})")
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


def _worker(args: argparse.Namespace) -> int:
    """``worker``: serve a task queue of a Temporal cluster until SIGINT/SIGTERM (spec §9).

    Once the SDK has run, the process ends with ``os._exit`` after flushing its output:
    the SDK can abort the interpreter at exit (sdk-python#300), which would turn a
    clean stop into a crash report.
    """
    from .errors import WomlError

    api_key = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            return _worker_error(f"--api-key-env: the environment variable {args.api_key_env} "
                                 "is not set or empty; export the API key in it")
    try:
        from .temporal.options import TemporalOptions

        options = TemporalOptions(target=args.temporal, namespace=args.namespace,
                                  task_queue=args.task_queue, tls=args.tls, api_key=api_key)
    except WomlError as exc:  # bad options, or the temporal extra is missing
        return _worker_error(str(exc))
    code = _serve_until_signal(options, args.max_concurrent_activities)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _worker_error(message: str) -> int:
    print(f"woml worker: {message}", file=sys.stderr, flush=True)
    return 2


def _serve_until_signal(options: TemporalOptions, max_concurrent_activities: int | None) -> int:
    """Connect, then run ``temporal.worker.serve`` until the first SIGINT/SIGTERM cancels
    it (a second one exits at once, without waiting for running attempts); the exit
    status."""
    import asyncio
    import signal

    from .errors import WomlError
    from .temporal.options import connect
    from .temporal.worker import serve

    def ready() -> None:
        print(f"woml worker: polling task queue {options.task_queue} on {options.target} "
              f"(namespace {options.namespace})", flush=True)

    async def work() -> None:
        await connect(options)  # no server: one line and exit 2, before any worker
        await serve(options, max_concurrent_activities=max_concurrent_activities, ready=ready)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(work())
        stopping: list[str] = []

        def say(text: str, stream: TextIO) -> None:
            # A reader that went away (a closed pipe) must not keep the worker alive.
            with contextlib.suppress(OSError, ValueError):
                print(text, file=stream, flush=True)

        def stop(name: str) -> None:
            if stopping:
                say(f"woml worker: {name} again, exiting without waiting for running "
                    "attempts", sys.stderr)
                with contextlib.suppress(OSError, ValueError):
                    sys.stdout.flush()
                os._exit(1)
            stopping.append(name)
            task.cancel()  # first: nothing below may keep the worker from stopping
            say(f"woml worker: stopping on {name}", sys.stdout)

        def on_signal(signum: int, _frame: object) -> None:  # where loops have no handlers
            loop.call_soon_threadsafe(stop, signal.Signals(signum).name)

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop, sig.name)
            except NotImplementedError:  # Windows
                signal.signal(sig, on_signal)
        try:
            await task
        except asyncio.CancelledError:
            if not stopping:
                raise
        except WomlError as exc:
            return _worker_error(str(exc))
        else:
            print("woml worker: stopped (the worker ended by itself)", flush=True)
        return 0

    return asyncio.run(main())


def _add_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "worker", help="run a Temporal worker for --engine temporal runs (spec §9)",
        description="Poll a task queue of a Temporal cluster and run WOML workflows and "
                    "attempts from it until SIGINT or SIGTERM. Needs the temporal extra: "
                    'pip install "woml-magic[temporal]".',
    )
    parser.add_argument("--temporal", metavar="HOST:PORT", required=True,
                        help="the cluster's frontend, e.g. 127.0.0.1:7233")
    parser.add_argument("--task-queue", metavar="Q", default="woml",
                        help="the task queue to poll (default: woml, the magic's)")
    parser.add_argument("--namespace", metavar="NS", default="default",
                        help="the namespace (default: default)")
    parser.add_argument("--tls", action="store_true", help="connect over TLS")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="read a Temporal Cloud API key from this environment variable "
                             "(implies --tls)")
    parser.add_argument("--max-concurrent-activities", metavar="N", type=_positive_int,
                        help="run at most N attempts at once (default: the SDK's)")
    parser.set_defaults(handler=_worker)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="woml", description="WOML workflow documents from the command line."
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_check(commands)
    _add_run(commands)
    _add_demo(commands)
    _add_worker(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = _build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
