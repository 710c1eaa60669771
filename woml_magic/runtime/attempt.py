"""What goes into one script attempt and what comes out (spec §3.2, §3.3, §3.4, §3.6).

These records are the contract between the engine and the script worker
(``woml_magic.runtime.worker.ScriptWorker``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_MEMORY_LIMIT_BYTES = 128 * 1024 * 1024
"""Per-attempt QuickJS memory limit (spec §3.2 crash: default 128 MiB)."""

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
"""Largest result JSON text in UTF-8 bytes (spec §3.2 oversized: default 256 KiB)."""

OUTCOMES = ("succeeded", "threw", "invalid-json", "oversized", "crash")
"""The outcomes the worker itself decides; the engine adds timeout, cancelled and the rest."""

ServiceCall = Callable[[str, list[Any]], Awaitable[Any]]
"""``(service name, JSON args) -> JSON result`` performed by the kernel (spec §4.1, §4.4).

May raise ``woml_magic.errors.ServiceRejection`` to reject the script's promise with
an ``Error`` of that name and message carrying the rejection's props.
"""

LogSink = Callable[[str, str], None]
"""``(level, text)`` for each console line, level one of log, info, warn, error (spec §4.4)."""


@dataclass(frozen=True)
class AttemptRequest:
    """One attempt of one step's script (spec §3.4, §3.6, §4.4).

    ``script`` is the body of an async function; its line 1 stands on cell line
    ``script_line`` starting at cell column ``script_column``. ``context`` and
    ``attempt`` become deeply frozen objects in the script. ``now_ms`` is the run's
    clock in epoch milliseconds: ``Date.now()`` in the script reads it.
    """

    script: str
    script_line: int
    script_column: int
    context: dict[str, Any]
    attempt: dict[str, Any]
    now_ms: Callable[[], float]
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES

    def __post_init__(self) -> None:
        if self.memory_limit_bytes < 1024 * 1024:
            raise ValueError(
                f"memory_limit_bytes={self.memory_limit_bytes} is too small; "
                "allowed is at least 1 MiB (1048576)"
            )
        if self.max_result_bytes < 1:
            raise ValueError(
                f"max_result_bytes={self.max_result_bytes} is not allowed; it must be positive"
            )


@dataclass(frozen=True)
class AttemptResult:
    """How one attempt ended, as far as the script worker can tell (spec §3.2, §3.3).

    ``result`` is the parsed JSON value when ``outcome == "succeeded"``.
    ``error_line`` is the CELL line where the error was created, when a script
    frame was on the stack.
    """

    outcome: str
    result: Any = None
    error_name: str | None = None
    error_message: str | None = None
    error_line: int | None = None
