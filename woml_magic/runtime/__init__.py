"""The script worker: JavaScript attempts in a separate QuickJS process (spec §4.5).

``ScriptWorker`` (kernel side, ``worker.py``) runs ``AttemptRequest``s in a warm
child process (``_child.py``) and returns ``AttemptResult``s; the per-attempt
JavaScript prelude is ``prelude.js``. Names load on first use so that the child
process, which imports this package, starts without the kernel-side modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "SERVICES",
    "AttemptRequest",
    "AttemptResult",
    "LogSink",
    "ScriptWorker",
    "ServiceCall",
]

_LAZY = {
    "AttemptRequest": "attempt",
    "AttemptResult": "attempt",
    "LogSink": "attempt",
    "ServiceCall": "attempt",
    "ScriptWorker": "worker",
    "SERVICES": "worker",
}

if TYPE_CHECKING:
    from .attempt import AttemptRequest, AttemptResult, LogSink, ServiceCall
    from .worker import SERVICES, ScriptWorker


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'woml_magic.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
