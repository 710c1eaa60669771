"""What goes into one script attempt and what comes out (spec §3.2, §3.3, §3.4, §3.6).

These records are the contract between the engine and the script worker
(``woml_magic.runtime.worker.ScriptWorker``). Only the kernel imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from woml_magic.limits import Limits
from woml_magic.outcomes import Outcome

ServiceCall = Callable[[str, list[Any]], Awaitable[Any]]
"""``(service name, JSON args) -> JSON result`` performed by the kernel (spec §4.1, §4.4).

May raise ``woml_magic.errors.ServiceRejection`` to reject the script's promise with
an ``Error`` of that name and message carrying the rejection's props.
"""

StallSink = Callable[[], None]
"""Called when the worker knows nothing can settle the script's promise (spec §3.2):
the attempt can only end at its timeout, so a simulated clock may jump to it."""

LogSink = Callable[[str, str], None]
"""``(level, text)`` for each console line, level one of log, info, warn, error (spec §4.4)."""


def encode(value: Any) -> str:
    """The compact JSON text of a JSON value (spec §3.3): how results and payloads travel."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


class StepResults(Mapping[str, Any]):
    """Results of the steps that succeeded so far in a run (spec §3.6 ``context.steps``).

    Each result is encoded once, when it is added; an attempt's script reads a step's
    result from the kernel only when it uses it, so an attempt costs the same in step
    10,000 as in step 2 (spec §4.5).
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._texts: dict[str, str] = {}

    def add(self, step_id: str, value: Any) -> None:
        self._values[step_id] = value
        self._texts[step_id] = encode(value)

    def text(self, step_id: str) -> str | None:
        """The JSON text of ``step_id``'s result, or None when it has none."""
        return self._texts.get(step_id)

    def texts(self) -> Mapping[str, str]:
        return self._texts

    def __getitem__(self, step_id: str) -> Any:
        return self._values[step_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class AttemptRequest:
    """One attempt of one step's script (spec §3.4, §3.6, §4.4).

    ``script`` is the body of an async function; its line 1 stands on cell line
    ``script_line`` starting at cell column ``script_column``. ``context`` and
    ``attempt`` become deeply frozen objects in the script. ``now_ms`` is the run's
    clock in epoch milliseconds: ``Date.now()`` in the script reads it.

    ``context["steps"]`` may be a ``StepResults`` (each result encoded once) or a plain
    mapping; ``payload_text`` is ``context["payload"]`` already encoded (see
    ``woml_magic.limits.check_payload_limits``), or None to encode it per attempt.
    ``limits`` are the run's (``woml_magic.limits.Limits``, checked when made): the
    script's memory, its result's size, and what it may send into the kernel (spec
    §3.2, §4.5).
    ``secret_names`` are the names ``services.secret`` knows in this attempt (spec
    §10.1): names only, never values, so its stub answers without asking the kernel.
    """

    script: str
    script_line: int
    script_column: int
    context: dict[str, Any]
    attempt: dict[str, Any]
    now_ms: Callable[[], float]
    limits: Limits = field(default_factory=Limits)
    payload_text: str | None = None
    secret_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class AttemptResult:
    """How one attempt ended, as far as the script worker can tell (spec §3.2, §3.3).

    ``outcome`` is one the worker decides (``outcomes.WORKER_OUTCOMES``), or one the
    engine decides for an attempt the worker never finished. ``result`` is the parsed
    JSON value when ``outcome`` is ``succeeded``.
    ``error_line`` is the CELL line where the error was created, when a script
    frame was on the stack.
    """

    outcome: Outcome
    result: Any = None
    error_name: str | None = None
    error_message: str | None = None
    error_line: int | None = None
