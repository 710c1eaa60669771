"""The local engine: runs a workflow's steps with WOML's retry semantics in this
process (spec §3, §4.2, §5.3, §9: the ``local`` engine).

- ``schedule``: ``Engine``, one run's steps in order with the waits between attempts;
- ``attempt``: one attempt in the script worker, raced against its timeout;
- ``check``: every script compiled before anything runs (spec §2.3);
- ``activity``: when an attempt holds a simulated clock (spec §5.1);
- ``config``: ``EngineConfig``.

``LocalExecutor`` is this engine behind ``woml_magic.executor.Executor``. Time comes
only from the run's ``Clock``; scripts run only in the script worker (spec §4.5); the
engine never imports IPython or widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..clock import Clock
from ..events import Event, EventSink
from ..model import Run, Workflow
from ..runtime.pool import WorkerPool
from .attempt import AttemptRunner
from .check import CHECK_SECONDS, check_scripts
from .config import EngineConfig
from .schedule import Attempts, AttemptsFactory, Engine

__all__ = [
    "CHECK_SECONDS", "AttemptRunner", "Attempts", "AttemptsFactory", "Engine", "EngineConfig",
    "LocalExecutor", "check_scripts",
]


class LocalExecutor:
    """Runs workflows in this process with the warm script workers of ``pool``."""

    name = "local"

    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool

    async def check(self, workflow: Workflow) -> None:
        await check_scripts(workflow, self._pool)

    def execution(
        self,
        run: Run,
        clock: Clock,
        *,
        sinks: Iterable[EventSink],
        config: EngineConfig,
        resume: bool,
        retry_interrupted: bool,
    ) -> Engine:
        def attempts(run: Run, clock: Clock, emit: Callable[[Event], None]) -> AttemptRunner:
            return AttemptRunner(run, clock, pool=self._pool, config=config, emit=emit)

        return Engine(run, clock, attempts=attempts, sinks=sinks, resume=resume,
                      retry_interrupted=retry_interrupted)
