"""The magics' arguments (spec §6.1, §6.2, §11): each flag declared once, for argparse,
and what a line says as a typed, frozen object built from argparse's ``Namespace`` in
one place (``CellArgs.of``; ``line.LineArgs.of``), so nothing downstream reads a flag by a
string name.

The retry lab's flags are an argparse *argument group*, not a sub-parser: the lab is
still one ``%%woml`` line, selected by ``--clients N`` (spec §11) rather than by a
subcommand word, so the line keeps the spec's grammar, the editor's flags and
completions (``editing.flags`` reads the parser's actions, groups included) stay as they
are, and ``%%woml?`` shows the lab's flags under their own heading. They parse into
``LabArgs``, the engine's flags into ``EngineArgs``, shared with ``%woml show``/``save``
(whose own arguments are ``line.line_arguments``).
"""

# IPython's argument decorators are untyped (STYLE 8).
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from IPython.core.magic_arguments import argument, argument_group, magic_arguments

from .. import api
from ..clock import CLOCKS, ClockKind, as_clock
from ..errors import quote

_F = TypeVar("_F", bound=Callable[..., Any])

# -- flag values (argparse ``type=`` and ``action=``): ASCII digits, each flag once -----

_WHOLE = re.compile(r"[+-]?[0-9]{1,9}")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def whole_number(text: str) -> int:
    """A flag's whole number in ASCII digits (``int()`` also reads ``５`` and ``٥``)."""
    if not _WHOLE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"{quote(text, 30)} is not a whole number; write ASCII digits, e.g. 100"
        )
    return int(text)


def decimal(text: str) -> float:
    """A flag's number in ASCII digits (``float()`` also reads ``nan``, ``inf`` and
    ``１``); whether it is in range is the flag's own check."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"{quote(text, 30)} is not a number; write ASCII digits, e.g. 20 or 2.5"
        )
    return float(text)


class Once(argparse.Action):
    """A flag that takes one value and may be given once: a second one is a usage error,
    not a silent replacement of the first (``--outage 1s..2s --outage 5s..6s`` would
    model only the last window)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        seen: set[str] = namespace.__dict__.setdefault("_once_seen", set())
        if self.dest in seen:
            raise argparse.ArgumentError(
                self,
                f"given twice ({quote(getattr(namespace, self.dest), 30)}, then "
                f"{quote(values, 30)}); give it once (the lab models one outage window, one "
                "server, one capacity)",
            )
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


#: ``--engine``'s choices: the registry's live view, so an engine registered in
#: ``api.ENGINES`` after the extension loaded is a choice too (STYLE 14).
ENGINES_NOW = api.ENGINES.keys()

# -- the typed arguments -----------------------------------------------------------------


@dataclass(frozen=True)
class EngineArgs:
    """Which engine, and for Temporal where it runs (spec §9); ``%woml`` has no
    ``--task-queue`` (it reads a run's history), so ``task_queue`` stays None there."""

    engine: str | None = None
    temporal: str | None = None
    namespace: str | None = None
    task_queue: str | None = None

    def given(self) -> dict[str, str | None]:
        """The Temporal-only flags as written, with their values."""
        return {"--temporal": self.temporal, "--namespace": self.namespace,
                "--task-queue": self.task_queue}


@dataclass(frozen=True)
class LabArgs:
    """The retry lab's flags (spec §11); ``clients`` None: no lab."""

    clients: int | None = None
    seed: int = 0
    server: str | None = None
    capacity: float | None = None
    outage: str | None = None
    throttle: bool = False
    what_if: tuple[str, ...] = ()

    def lab_only_given(self) -> list[str]:
        """The flags given that mean a lab (all but ``--clients`` and ``--seed``)."""
        values = {"--server": self.server, "--capacity": self.capacity,
                  "--outage": self.outage, "--throttle": self.throttle or None,
                  "--what-if": self.what_if or None}
        return [flag for flag, value in values.items() if value is not None]


@dataclass(frozen=True)
class CassetteArgs:
    """Record the run's managed calls, or replay them (spec §10.4)."""

    record: str | None = None
    record_mode: str | None = None
    replay: str | None = None

    def given(self) -> dict[str, str | None]:
        """The cassette flags as written, with their values."""
        return {"--record": self.record, "--record-mode": self.record_mode,
                "--replay": self.replay}


@dataclass(frozen=True)
class CellArgs:
    """A ``%%woml`` line (spec §6.1), as ``CellArgs.of`` reads argparse's result."""

    clock: ClockKind | None
    simulate: bool
    payload: str | None
    run_id: str | None
    resume: str | None
    retry_interrupted: bool
    journal: str | None
    out: str | None
    background: bool
    no_timeline: bool
    where: EngineArgs
    faults: tuple[str, ...]
    cassette: CassetteArgs
    no_lint: bool
    lab: LabArgs

    @classmethod
    def of(cls, ns: argparse.Namespace) -> CellArgs:
        """The one place a ``%%woml`` line's ``Namespace`` is read."""
        return cls(
            clock=None if ns.clock is None else as_clock(ns.clock),
            simulate=ns.simulate, payload=ns.payload, run_id=ns.run_id, resume=ns.resume,
            retry_interrupted=ns.retry_interrupted, journal=ns.journal, out=ns.out,
            background=ns.background, no_timeline=ns.no_timeline,
            where=EngineArgs(engine=ns.engine, temporal=ns.temporal, namespace=ns.namespace,
                             task_queue=ns.task_queue),
            faults=tuple(ns.fault or ()),
            cassette=CassetteArgs(record=ns.record, record_mode=ns.record_mode,
                                  replay=ns.replay),
            no_lint=ns.no_lint,
            lab=LabArgs(clients=ns.clients, seed=ns.seed, server=ns.server,
                        capacity=ns.capacity, outage=ns.outage, throttle=ns.throttle,
                        what_if=tuple(ns.what_if or ())),
        )


# -- the declarations ----------------------------------------------------------------------


def declared(decorators: Sequence[Any]) -> Callable[[_F], _F]:
    """IPython's ``@magic_arguments()`` over ``decorators`` (its ``argument``s and
    ``argument_group``s), in the order written: a magic's arguments as one list."""

    def declare(func: _F) -> _F:
        for deco in reversed(decorators):
            func = deco(func)
        made: _F = magic_arguments()(func)
        return made

    return declare


cell_arguments = declared([
    argument("--clock", choices=CLOCKS, default=None,
             help="The run's clock (spec §5.1); default Woml.clock, itself 'real'."),
    argument("--simulate", action="store_true", help="Short for --clock simulated."),
    argument("--payload", metavar="EXPR", default=None,
             help="A Python expression, evaluated in the notebook's namespace, whose "
             "JSON value is context.payload (quote it if it has spaces)."),
    argument("--run-id", metavar="ID", default=None,
             help="Pin the run id (it determines the idempotency keys, spec §3.5)."),
    argument("--resume", metavar="ID", default=None,
             help="Re-execute journaled run ID with the same document (spec §5.3)."),
    argument("--retry-interrupted", action="store_true",
             help="With --resume: run an interrupted attempt's step again (spec §5.3)."),
    argument("--journal", metavar="PATH", default=None,
             help="The journal file, or :memory:; default Woml.journal (spec §5.2)."),
    argument("--out", metavar="VAR", default=None, help="Also bind the Run to this variable."),
    argument("--background", action="store_true",
             help="Return at once; the run goes on in the kernel's event loop, with a "
             "live timeline and a Cancel button (`%%woml cancel RUN_ID` also works)."),
    argument("--no-timeline", action="store_true",
             help="Show no live timeline; the cell's value still renders the Run."),
    argument("--engine", choices=ENGINES_NOW, default=None,
             help="Which engine runs the cell (spec §9); default Woml.engine, itself 'local'."),
    argument("--temporal", metavar="HOST:PORT", default=None,
             help="With --engine temporal: this cluster instead of a local dev server "
             "(default Woml.temporal)."),
    argument("--namespace", metavar="NS", default=None, help="The Temporal namespace."),
    argument("--task-queue", metavar="Q", default=None, help="The Temporal task queue."),
    argument("--fault", metavar="CALL@ATTEMPT=KIND", action="append", default=None,
             help="Inject a fault into a named call (spec §10.2), e.g. "
             "create-charge@1=drop-response; repeatable; ATTEMPT may be *."),
    argument("--record", metavar="FILE", default=None,
             help="Write every managed call of the run into this cassette file (spec "
             "§10.4); an existing file needs --record-mode."),
    argument("--record-mode", choices=api.RECORD_MODES, default=None,
             help="With --record: new (the default: the file must not exist), overwrite "
             "or append."),
    argument("--replay", metavar="FILE", default=None,
             help="Answer every managed call from this cassette file, with no network "
             "(spec §10.4)."),
    argument("--no-lint", action="store_true", help="Show no idempotency-key warnings."),
    # Last: every argument after an argument_group joins it (IPython's decorators).
    argument_group("retry lab (spec §11)",
                   "--clients N makes the cell a lab of N clients; the rest need it."),
    argument("--clients", metavar="N", type=whole_number, action=Once, default=None,
             help="The retry lab (spec §11): N virtual clients of this workflow on one "
             "simulated clock against a server model; the value is a LabResult."),
    argument("--seed", metavar="S", type=whole_number, action=Once, default=0,
             help="With --clients: the seed."),
    argument("--server", metavar="MODEL|URL", action=Once, default=None,
             help="With --clients: a model (unlimited, capacity, throttle, occ) or the URL "
             "of an API on this machine; default a model with ample capacity."),
    argument("--capacity", metavar="R", type=decimal, action=Once, default=None,
             help="With --clients: the model's capacity in requests/s."),
    argument("--outage", metavar="A..B", action=Once, default=None,
             help="With --clients: every request in this window fails (e.g. 10s..40s)."),
    argument("--throttle", action="store_true",
             help="With --clients: over capacity, answer 429 with Retry-After."),
    argument("--what-if", metavar="OVERLAY", action="append", default=None,
             help="With --clients: jitter=full|equal|decorrelated, budget=10%% — beside "
             "WOML's schedule, never WOML semantics (repeatable)."),
])
