"""The engine seam (spec §9): what the API needs from whatever executes a run.

An ``Executor`` checks a workflow's scripts and makes an ``Execution`` for one run, new
or resumed; the ``Execution`` runs it to the end, emitting the events of ``events.py``
to its sinks in order (the ``Run`` folds each one first). The local engine
(``woml_magic.engine.LocalExecutor``) is one; another engine implements the same two
protocols and registers a name in ``api.EXECUTORS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .clock import Clock
from .engine.config import EngineConfig
from .events import EventSink
from .model import Run, Workflow
from .outcomes import StopReason


class Execution(Protocol):
    """One run being executed."""

    @property
    def run(self) -> Run:
        """The live ``Run``, changed only by the events the execution emits."""
        ...

    def subscribe(self, sink: EventSink) -> None:
        """Send ``sink`` every later event (called on the run loop, spec §6.3)."""

    def now(self) -> float:
        """Seconds since the run started, on the run's clock (spec §5.1)."""
        ...

    def stop_reason(self, reason: StopReason) -> None:
        """Say why the task executing the run is about to be cancelled: ``cancelled``
        or ``interrupted`` (spec §3.2, §6.1)."""

    async def execute(self) -> Run:
        """Run to the end (a resumed run: continue it, spec §5.3); the final ``Run``.
        Cancelling the awaiting task records the running attempt with the stop reason."""
        ...


class Executor(Protocol):
    """Executes runs: the local engine, or another behind the same contract."""

    name: str

    async def check(self, workflow: Workflow) -> None:
        """Refuse a workflow that cannot run before anything runs (spec §2.3)."""

    def execution(
        self,
        run: Run,
        clock: Clock,
        *,
        sinks: Iterable[EventSink],
        config: EngineConfig,
        resume: bool,
        retry_interrupted: bool,
    ) -> Execution:
        """An ``Execution`` of ``run`` (its past already folded in, when ``resume``)."""
        ...
