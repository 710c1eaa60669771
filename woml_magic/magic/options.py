"""The ``%%woml`` options turned into what a run needs (spec §6.1, §9, §10): each flag
checked, combined with the ``Woml`` settings, refused with a ``UsageError`` that names
it when it is wrong."""

from __future__ import annotations

import argparse
import keyword
import math
import os
import re
from collections.abc import Sequence
from typing import Any

from IPython.core.error import UsageError

from .. import api
from ..api import Journal, Workflow
from ..errors import WomlRunError, quote
from .settings import Woml

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


def clock(args: Any, settings: Woml, journal: Journal) -> str:
    """The run's clock (spec §5.1, §5.3): the flags, a resumed run's own, or the setting."""
    if args.simulate and args.clock == "real":
        raise UsageError("--simulate and --clock real contradict each other; use one")
    asked = "simulated" if args.simulate else args.clock
    if args.resume is not None:
        # spec §5.3: a resumed run keeps its journaled clock; an option that says the
        # same is fine (re-running the cell with --resume added), another is refused.
        kept = api.journaled_clock(journal, args.resume)
        if asked is not None and kept is not None and asked != kept:
            option = "--simulate" if args.simulate else f"--clock {args.clock}"
            raise UsageError(
                f"{option} conflicts with run {args.resume}'s journaled clock {kept!r}: "
                f"a resumed run keeps its clock (spec §5.3); drop {option} or make it "
                f"--clock {kept}"
            )
        return kept or str(settings.clock)
    return str(asked or settings.clock)


def engine(args: Any, settings: Woml, chosen: str | None = None) -> tuple[str, Any]:
    """The engine and, for Temporal, where it runs (spec §9): flags over settings."""
    chosen = chosen or args.engine or str(settings.engine)
    flags = {
        "--temporal": args.temporal,
        "--namespace": args.namespace,
        "--task-queue": getattr(args, "task_queue", None),
    }
    if chosen != "temporal":
        given = [flag for flag, value in flags.items() if value is not None]
        if given:
            raise UsageError(f"{given[0]} applies to --engine temporal only")
        return chosen, None
    return chosen, settings.temporal_options(
        target=args.temporal, namespace=args.namespace, task_queue=flags["--task-queue"]
    )


def check_combinations(args: Any) -> None:
    """Refuse options that contradict each other, before anything runs."""
    if args.retry_interrupted and args.resume is None:
        raise UsageError("--retry-interrupted needs --resume RUN_ID (spec §5.3)")
    if args.resume is not None and args.run_id is not None and args.run_id != args.resume:
        raise UsageError(
            f"--run-id {args.run_id} and --resume {args.resume} disagree; a resumed run "
            "keeps its id, so give only --resume"
        )
    if args.resume is not None and args.payload is not None:
        raise UsageError(
            "--payload does not apply to --resume: a resumed run keeps its journaled "
            "payload (spec §5.3)"
        )
    if args.out is not None and not (args.out.isidentifier() and not keyword.iskeyword(args.out)):
        raise UsageError(f"--out {args.out!r} is not a Python variable name")


def payload(expr: str | None, settings: Woml, shell: Any) -> Any:
    """Evaluate ``--payload`` in the user namespace; it must be JSON (spec §6.1)."""
    if expr is None:
        return None
    try:
        value = shell.ev(expr)
    except Exception as exc:  # any error of the user's expression is reported alike
        raise UsageError(
            f"--payload {expr}: evaluating it raised {type(exc).__name__}: {exc}"
        ) from None
    try:
        return api.check_payload(value, settings.limits())
    except WomlRunError as exc:
        raise UsageError(f"--payload {expr}: {exc}") from None


def env_secret_names(settings: Woml) -> list[str]:
    """The names in ``Woml.secrets`` whose environment variable is set."""
    return [name for name in settings.secrets if name in os.environ]


def secrets(
    settings: Woml, session: dict[str, str], engine: str, workflow: Workflow
) -> dict[str, str] | None:
    """The secrets a run may use (spec §10.1): ``Woml.secrets`` names environment
    variables; ``%woml secret NAME`` values win. None when there are none, and for a
    Temporal run whose scripts use none (Temporal refuses secrets: its history would
    keep them; a script that asks for one gets that reason)."""
    if engine != "local" and not any("services.secret" in s.script for s in workflow.steps):
        return None
    found: dict[str, str] = {}
    for name in settings.secrets:
        if name not in os.environ:
            raise UsageError(
                f"Woml.secrets names {name}, but the kernel's environment has no {name}; "
                f"set it before starting the kernel, or use %woml secret {name}"
            )
        found[name] = os.environ[name]
    found.update(session)
    return found or None


#: Options that mean one run, not a lab of many (spec §11).
_NOT_IN_A_LAB = (
    "resume",
    "run_id",
    "retry_interrupted",
    "background",
    "engine",
    "temporal",
)
#: Options that mean a lab (spec §11).
_LAB_ONLY = ("server", "capacity", "outage", "what_if")


def check_lab(args: Any) -> None:
    """``--clients`` and the options that go with it (spec §11)."""
    if args.clients is None:
        given = [name for name in _LAB_ONLY if getattr(args, name) is not None]
        if args.throttle:
            given.append("throttle")
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UsageError(f"{flag} applies to the retry lab only: add --clients N")
        return
    # The lab's own checks, flag by flag, so a bad value is one usage line that names
    # its flag (they raise LabModelError and WhatIfError, shown with a traceback).
    from ..lab import MAX_CLIENTS, loopback_url
    from ..lab.server import LabModelError, parse_outage, server_model
    from ..lab.whatif import WhatIf, WhatIfError

    if not 1 <= args.clients <= MAX_CLIENTS:
        raise UsageError(f"--clients {args.clients}: give 1 to {MAX_CLIENTS:,} clients")
    checks: list[tuple[str, Any, Any]] = [("--outage", args.outage, parse_outage)]
    if args.server is not None:
        checks.append(
            ("--server", args.server, loopback_url if "://" in args.server else server_model)
        )
    checks += [("--what-if", overlay, WhatIf.parse) for overlay in args.what_if or ()]
    for flag, value, check in checks:
        if value is None:
            continue
        try:
            check(value)
        except (LabModelError, WhatIfError) as exc:
            raise UsageError(f"{flag} {quote(value)[1:-1]}: {exc}") from None
    if args.capacity is not None and not 0 < args.capacity < math.inf:
        raise UsageError(
            f"--capacity {args.capacity:g}: give a positive number of requests per second"
        )
    for name in _NOT_IN_A_LAB:
        if getattr(args, name) not in (None, False):
            raise UsageError(
                f"--{name.replace('_', '-')} does not apply to --clients: the lab runs many "
                "fresh clients on the simulated clock of one lab (spec §11)"
            )
    if args.clock == "real":
        raise UsageError("--clients runs on the lab's simulated clock; drop --clock real")
