"""The ``%%woml`` options turned into what a run needs (spec §6.1, §9, §10): each flag
checked, combined with the ``Woml`` settings, refused with a ``UsageError`` that names
it when it is wrong."""

from __future__ import annotations

import keyword
import math
import os
from typing import Any

from IPython.core.error import UsageError

from .. import api
from ..api import Journal, Workflow
from ..clock import ClockKind, as_clock
from ..errors import LabModelError, WomlRunError, quote
from ..limits import MAX_CLIENTS, clients_allowed
from .arguments import CellArgs, EngineArgs
from .settings import Woml


def clock(args: CellArgs, settings: Woml, journal: Journal) -> ClockKind:
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
        return kept or as_clock(settings.clock)
    return as_clock(asked or settings.clock)


def engine(where: EngineArgs, settings: Woml, chosen: str | None = None) -> tuple[str, Any]:
    """The engine and, for Temporal, where it runs (spec §9): flags over settings."""
    chosen = chosen or where.engine or str(settings.engine)
    if chosen != "temporal":
        given = [flag for flag, value in where.given().items() if value is not None]
        if given:
            raise UsageError(f"{given[0]} applies to --engine temporal only")
        return chosen, None
    return chosen, settings.temporal_options(
        target=where.temporal, namespace=where.namespace, task_queue=where.task_queue
    )


def check_combinations(args: CellArgs) -> None:
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


def _not_in_a_lab(args: CellArgs) -> list[str]:
    """The options given that mean one run, not a lab of many (spec §11)."""
    values = {"--resume": args.resume, "--run-id": args.run_id,
              "--retry-interrupted": args.retry_interrupted or None,
              "--background": args.background or None, "--engine": args.where.engine,
              **args.where.given(), **args.cassette.given()}
    return [flag for flag, value in values.items() if value is not None]


def check_lab(args: CellArgs) -> None:
    """``--clients`` and the options that go with it (spec §11)."""
    lab = args.lab
    if lab.clients is None:
        given = lab.lab_only_given()
        if given:
            raise UsageError(f"{given[0]} applies to the retry lab only: add --clients N")
        return
    # The lab's own checks, flag by flag, so a bad value is one usage line that names
    # its flag (they raise LabModelError, shown with a traceback).
    from ..lab.plan import loopback_url, preset
    from ..lab.server import PRESETS, parse_outage
    from ..lab.whatif import WhatIf

    if not 1 <= lab.clients <= MAX_CLIENTS:
        raise UsageError(f"--clients {lab.clients}: give {clients_allowed()}")
    checks: list[tuple[str, Any, Any]] = [("--outage", lab.outage, parse_outage)]
    if lab.server is not None:
        checks.append(
            ("--server", lab.server, loopback_url if "://" in lab.server else preset)
        )
    checks += [("--what-if", overlay, WhatIf.parse) for overlay in lab.what_if]
    for flag, value, check in checks:
        if value is None:
            continue
        try:
            check(value)
        except LabModelError as exc:
            raise UsageError(f"{flag} {quote(value)[1:-1]}: {exc}") from None
    # Every lab flag but --server describes the server model (spec §11).
    given = [flag for flag in lab.lab_only_given() if flag != "--server"]
    if lab.server is not None and "://" in lab.server and given:
        raise UsageError(
            f"{given[0]} needs a server model, and --server {quote(lab.server)[1:-1]} is "
            f"a real API: drop {given[0]}, or give a model: --server "
            f"{' | '.join(PRESETS)}"
        )
    if lab.capacity is not None and not 0 < lab.capacity < math.inf:
        raise UsageError(
            f"--capacity {lab.capacity:g}: give a positive number of requests per second"
        )
    one_run = _not_in_a_lab(args)
    if one_run:
        raise UsageError(
            f"{one_run[0]} does not apply to --clients: the lab runs many fresh clients on the "
            "simulated clock of one lab (spec §11)"
        )
    if args.clock == "real":
        raise UsageError("--clients runs on the lab's simulated clock; drop --clock real")
