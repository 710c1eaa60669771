"""woml-magic: run WOML workflow cells in Jupyter (see the spec, ``docs/``).

``import woml_magic`` is cheap and has no side effects: the engine, the widgets, the
HTTP client and lxml load on first use (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported eagerly: the function shares its name with the module woml_magic.parse, and
# the first `from .parse import …` anywhere would otherwise rebind woml_magic.parse to
# the module, so `wm.parse(text)` would fail with "module is not callable".
from .parse import parse

__version__ = "0.1.0"

__all__ = [
    "Attempt",
    "AttemptError",
    "Call",
    "RetryPolicy",
    "Run",
    "RunHandle",
    "Step",
    "StepRun",
    "WomlError",
    "WomlSyntaxError",
    "Workflow",
    "__version__",
    "load_ipython_extension",
    "parse",
    "run",
    "run_async",
    "start",
    "unload_ipython_extension",
]

_LAZY = {
    "Workflow": "model",
    "Step": "model",
    "Run": "model",
    "StepRun": "model",
    "Attempt": "model",
    "AttemptError": "model",
    "Call": "model",
    "RetryPolicy": "policy",
    "WomlError": "errors",
    "WomlSyntaxError": "errors",
    "run": "api",
    "run_async": "api",
    "start": "api",
    "RunHandle": "api",
    "load_ipython_extension": "magic",
    "unload_ipython_extension": "magic",
}

if TYPE_CHECKING:
    from .api import RunHandle, run, run_async, start
    from .errors import WomlError, WomlSyntaxError
    from .magic import load_ipython_extension, unload_ipython_extension
    from .model import Attempt, AttemptError, Call, Run, Step, StepRun, Workflow
    from .policy import RetryPolicy


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'woml_magic' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
