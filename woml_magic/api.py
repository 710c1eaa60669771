"""The Python API: ``run``, ``run_async`` and ``start`` (spec §7).

Every run executes on the package's run loop, in a thread of its own (``runloop``,
spec §6.3): ``start`` submits it there and returns a ``RunHandle``; ``run`` waits for
that handle (a kernel interrupt ends the attempt ``interrupted``); ``run_async``
awaits it from any other loop. No caller's loop is ever re-entered.

The three take one set of options (``RunOptions``). What executes a run is an
``executor.Executor`` chosen by ``engine=``; resume decisions are ``resume``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from . import resume as resuming
from .clock import CLOCKS, ClockKind, as_clock, make_clock
from .engine import EngineConfig, LocalExecutor
from .engine.config import RECORD_MODES, Cassette, Fault, Secrets, parse_faults
from .errors import WomlError, WomlRunError, excerpt, one_of, quote
from .events import EventSink
from .executor import Executor
from .handle import RunHandle
from .journal import MEMORY, Journal, RunSummary
from .limits import Limits, check_payload_limits
from .model import Run, Workflow
from .runloop import run_loop
from .runtime.pool import default_pool

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .temporal.options import TemporalOptions

__all__ = [
    "ENGINES", "MEMORY", "RECORD_MODES", "Cassette", "EngineConfig", "Fault", "Journal", "Run",
    "RunHandle", "RunOptions", "RunSummary", "Secrets",
    "Workflow", "check_journal", "check_payload", "default_pool", "fetch_run", "journaled_clock",
    "new_run_id", "run", "run_async", "start",
]

#: The engines a run can execute on (spec §9), by the name ``engine=`` takes: the one
#: declaration of the engines' names. ``%%woml --engine``'s choices and ``Woml.engine``'s
#: validator read it when they are used, so an engine registered here reaches them
#: (STYLE 14).
ENGINES: dict[str, Callable[[_Options], Executor]] = {}


class RunOptions(TypedDict, total=False):
    """How to run (spec §7): the keyword arguments of ``run``, ``run_async``, ``start``."""

    clock: ClockKind  # one of clock.CLOCKS (spec §5.1)
    run_id: str | None  # pin the run id (spec §3.5)
    journal: str | os.PathLike[str] | Journal  # ":memory:", a path, or an open Journal
    resume: str | None  # re-execute this journaled run (spec §5.3)
    retry_interrupted: bool  # with resume: run an interrupted attempt's step again
    sinks: Iterable[EventSink]  # receive every event after the Run folded it
    config: EngineConfig | None  # limits and HTTP settings
    engine: str  # which engine executes the run (spec §9): a name in ENGINES
    # engine="temporal": TemporalOptions, "HOST:PORT", a dict of TemporalOptions' fields,
    # or None (a local dev server started on first use)
    temporal: TemporalOptions | str | dict[str, Any] | None
    # values services.secret("NAME") refers to (spec §10.1): {"NAME": "value"} or Secrets;
    # added to config.secrets (these win for a name in both); not with engine="temporal"
    secrets: Secrets | Mapping[str, str] | None
    # injected faults (spec §10.2): "CALL@ATTEMPT=KIND" strings or Fault objects, after
    # config.faults
    faults: Iterable[str | Fault]
    # spec §10.4: write every managed call to this cassette file; record_mode says what
    # to do when it exists ("new", the default, refuses; "overwrite"; "append")
    record: str | os.PathLike[str] | None
    record_mode: str | None
    # spec §10.4: answer every managed call from this cassette file, with no network
    replay: str | os.PathLike[str] | None


@dataclass(frozen=True)
class _Options:
    """``RunOptions`` checked, with their defaults."""

    clock: ClockKind = "real"
    run_id: str | None = None
    journal: str | os.PathLike[str] | Journal = MEMORY
    resume: str | None = None
    retry_interrupted: bool = False
    sinks: tuple[EventSink, ...] = ()
    config: EngineConfig | None = None
    engine: str = "local"
    temporal: TemporalOptions | str | dict[str, Any] | None = None
    secrets: Secrets | None = field(default=None, repr=False)
    faults: tuple[Fault, ...] = ()
    record: str | os.PathLike[str] | None = None
    record_mode: str | None = None
    replay: str | os.PathLike[str] | None = None

    @classmethod
    def of(cls, caller: str, options: dict[str, Any]) -> _Options:
        unknown = sorted(set(options) - set(RunOptions.__annotations__))
        if unknown:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument {unknown[0]!r}; it takes "
                f"payload and {', '.join(RunOptions.__annotations__)}"
            )
        # Both checked here, before anything runs (spec §10.1, §10.2).
        opts = cls(**{**options, "sinks": tuple(options.get("sinks", ())),
                      "secrets": Secrets.of(options.get("secrets")),
                      "faults": parse_faults(options.get("faults"))})
        if opts.clock not in CLOCKS:
            raise WomlRunError(f"unknown clock {quote(opts.clock)}; use {one_of(CLOCKS)}")
        if opts.engine not in ENGINES:
            raise WomlRunError(f"unknown engine {quote(opts.engine)}; use {one_of(ENGINES)}")
        if opts.temporal is not None and opts.engine != "temporal":
            raise WomlRunError("temporal= applies to engine='temporal' only")
        if opts.record is not None and opts.replay is not None:
            raise WomlRunError("record= and replay= exclude each other: a run records a "
                               "cassette or replays one (spec §10.4)")
        if opts.record_mode is not None and opts.record is None:
            raise WomlRunError("record_mode= applies with record=FILE only (spec §10.4)")
        if (opts.record is not None or opts.replay is not None) and opts.engine != "local":
            raise WomlRunError(
                "record= and replay= run on the local engine only: a Temporal activity "
                "may run in another process, which cannot share the cassette file; "
                "record with engine='local' (spec §10.4)"
            )
        if opts.config is not None and not isinstance(opts.config, EngineConfig):
            raise WomlRunError(
                f"config= takes a woml_magic.engine.EngineConfig, not"
                f" {type(opts.config).__name__}; or leave it out for the defaults"
            )
        return opts


def _temporal(opts: _Options) -> Executor:
    from .temporal import TemporalExecutor  # the optional extra, loaded on first use

    return TemporalExecutor(opts.temporal)


ENGINES["local"] = lambda _opts: LocalExecutor(default_pool())
ENGINES["temporal"] = _temporal


def fetch_run(
    run_id: str, *, engine: str = "temporal",
    temporal: TemporalOptions | str | dict[str, Any] | None = None,
) -> Run:
    """The ``Run`` ``run_id`` as its engine has it, without a journal (spec §9: rebuilt
    from the Temporal workflow's history, so any kernel can show any run)."""
    if engine != "temporal":
        raise WomlRunError(
            f"fetch_run reads runs from the temporal engine; a {engine!r} run is in its "
            "journal: Journal(path).load(run_id)"
        )
    from .temporal import as_options
    from .temporal.history import load_run

    if run_loop().is_current():
        raise WomlError("fetch_run() was called from the run loop itself")
    return run_loop().submit(load_run(run_id, as_options(temporal))).result()


def new_run_id() -> str:
    """A random run id (spec §3.5: random unless the user pins it)."""
    return f"run-{secrets.token_hex(6)}"


def _as_workflow(text_or_workflow: str | Workflow) -> Workflow:
    if isinstance(text_or_workflow, Workflow):
        return text_or_workflow
    if not isinstance(text_or_workflow, str):
        raise TypeError(
            f"run() takes WOML text or a Workflow, not {type(text_or_workflow).__name__}"
        )
    from .parse import parse

    return parse(text_or_workflow)


def check_payload(payload: Any, limits: Limits | None = None) -> Any:
    """Return ``payload`` as the JSON value the run will see, or raise before anything
    runs (spec §6.1): ``WomlLimitError`` naming the limit when it is too deep or too
    large (spec §4.5), ``WomlRunError`` when it is not JSON."""
    lim = limits or Limits()
    try:
        text = check_payload_limits(payload, lim.max_payload_bytes, lim.max_json_depth)
    except (TypeError, ValueError) as exc:
        raise WomlRunError(
            f"the payload must be a JSON value (dict, list, str, int, float, bool or None): "
            f"{exc}"
        ) from None
    return json.loads(text)


def check_journal(
    journal: Journal, *, run_id: str | None = None, resume: str | None = None,
    flags: bool = False,
) -> None:
    """Refuse, before anything runs, a run id the journal already holds and a resume of
    a run it does not hold (spec §3.5, §5.3); ``flags`` phrases the remedy as the
    magic's options."""
    if resume is not None and not journal.has_run(resume):
        where = f"--resume {excerpt(resume, 0, 60)[0]}: " if flags else ""
        lister = "`%woml runs`" if flags else \
            "`%woml runs` or woml_magic.journal.Journal(path).runs()"
        raise WomlRunError(
            f"{where}no run {quote(resume)} in the journal {journal.path}; {lister} lists the "
            "runs it holds"
        )
    if run_id is not None and journal.has_run(run_id):
        if flags:
            raise WomlRunError(
                f"--run-id {run_id}: that run is already in the journal {journal.path}; "
                f"pick another id, or continue it with --resume {run_id}"
            )
        raise WomlRunError(
            f"run id {run_id!r} is already in the journal {journal.path}; pick another id, "
            f"or continue it with resume={run_id!r}"
        )


def journaled_clock(journal: Journal, run_id: str) -> ClockKind | None:
    """The clock run ``run_id`` was started with (its first journaled event, spec §5.2)."""
    events = journal.events(run_id)
    clock = getattr(events[0], "clock", None) if events else None
    return as_clock(clock) if clock in CLOCKS else None


@contextlib.contextmanager
def _open_journal(journal: str | os.PathLike[str] | Journal) -> Generator[Journal, None, None]:
    if isinstance(journal, Journal):
        yield journal
        return
    owned = Journal(journal)
    try:
        yield owned
    finally:
        owned.close()


def _validate_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 128 or not run_id.isprintable():
        raise WomlRunError(
            f"run id {quote(run_id)} is not allowed; use 1 to 128 printable characters"
        )
    return run_id


async def _execute(
    text_or_workflow: str | Workflow, payload: Any, opts: _Options, handle: RunHandle | None
) -> Run:
    """The run itself, on the run loop: check, open the journal, start or resume."""
    workflow = _as_workflow(text_or_workflow)
    executor = ENGINES[opts.engine](opts)
    await executor.check(workflow)  # spec §2.3: nothing runs, nothing is journaled
    config = _config(opts)  # after the check: a cassette to record is made here
    with _open_journal(opts.journal) as jr:
        # A resumed run keeps its id; ``run_id`` applies to a new run only (spec §5.3).
        run_id = None if opts.run_id is None or opts.resume is not None \
            else _validate_run_id(opts.run_id)
        claimed = opts.resume if opts.resume is not None else run_id or new_run_id()
        # The claim is held until the execution ends; the checks and the load run
        # under it, so no other process can journal in between (spec §5.2).
        with jr.claim(claimed, "run" if opts.resume is None else "resume"):
            check_journal(jr, run_id=run_id, resume=opts.resume)
            if opts.resume is not None:
                past = jr.load(opts.resume, workflow)
                resuming.check_resumable(past, workflow)
                if not resuming.needs_execution(past, retry_interrupted=opts.retry_interrupted):
                    return resuming.reattached(past)
                start_at = resuming.clock_start(past, last_wall=jr.last_wall(opts.resume),
                                                now_wall=time.time())
                run, clock = past, make_clock(past.clock, start_at=start_at)
            else:
                run = Run(id=claimed, workflow=workflow, clock=opts.clock,
                          payload=check_payload(payload, config.limits))
                clock = make_clock(opts.clock)
            execution = executor.execution(
                run, clock, sinks=[jr, *opts.sinks], config=config,
                resume=opts.resume is not None, retry_interrupted=opts.retry_interrupted,
            )
            if handle is not None:
                handle._begin(execution)
            return await execution.execute()


def _config(opts: _Options) -> EngineConfig:
    """The run's ``EngineConfig``: ``config=`` with ``secrets=`` and ``faults=`` added,
    and the cassette of ``record=`` or ``replay=`` opened (spec §10.4)."""
    config = opts.config or EngineConfig()
    if opts.secrets:
        merged = opts.secrets if config.secrets is None else config.secrets.merged(opts.secrets)
        config = dataclasses.replace(config, secrets=merged)
    if opts.faults:
        config = dataclasses.replace(config, faults=(*config.faults, *opts.faults))
    if opts.record is not None:
        cassette = Cassette.record(opts.record, opts.record_mode or "new")
        config = dataclasses.replace(config, cassette=cassette)
    elif opts.replay is not None:
        config = dataclasses.replace(config, cassette=Cassette.replay(opts.replay))
    return config


def run(
    text_or_workflow: str | Workflow, payload: Any = None, **options: Unpack[RunOptions]
) -> Run:
    """Run a workflow to its end, blocking (spec §7).

    Works in a plain process and inside a running event loop (a notebook cell): the
    run executes on the package's run loop while this thread waits, so the caller's
    loop is never re-entered (spec §6.3). A kernel interrupt (SIGINT) ends the running
    attempt ``interrupted``, tears the worker down, then raises ``KeyboardInterrupt``
    (spec §6.1).
    """
    return _start("run", text_or_workflow, payload, dict(options)).wait_interruptibly()


def start(
    text_or_workflow: str | Workflow, payload: Any = None, **options: Unpack[RunOptions]
) -> RunHandle:
    """Start a run in the background on the run loop and return at once (spec §7)."""
    return _start("start", text_or_workflow, payload, dict(options))


async def run_async(
    text_or_workflow: str | Workflow, payload: Any = None, **options: Unpack[RunOptions]
) -> Run:
    """Run a workflow to its end and return the ``Run`` (spec §7).

    The run executes on the package's run loop (``runloop``); awaiting it from any
    other loop only waits. Cancelling the awaiting task records the running attempt as
    ``cancelled`` and then raises ``asyncio.CancelledError``.
    """
    opts = _Options.of("run_async", dict(options))
    runner = run_loop()
    if runner.is_current():
        return await _execute(text_or_workflow, payload, opts, None)
    handle = _submit(text_or_workflow, payload, opts)
    # The one awaiting wait (runloop): ipykernel's Ctrl-C in an `await` cell is a cancel
    # that does not wake an idle loop; the wait ticks so it lands.
    return await handle._need_task().wait_cancellably(handle.cancel)


def _start(caller: str, text_or_workflow: str | Workflow, payload: Any,
           options: dict[str, Any]) -> RunHandle:
    opts = _Options.of(caller, options)
    if run_loop().is_current():
        raise WomlError(
            "wm.run()/wm.start() was called from the run loop itself (an event sink?); "
            "await wm.run_async(...) there instead"
        )
    return _submit(text_or_workflow, payload, opts)


def _submit(text_or_workflow: str | Workflow, payload: Any, opts: _Options) -> RunHandle:
    handle = RunHandle()
    handle._attach(run_loop().submit(_execute(text_or_workflow, payload, opts, handle)))
    return handle

