"""woml-magic: run WOML workflow cells in Jupyter (see the spec, ``docs/``).

``import woml_magic`` is cheap and has no side effects: the engine, the widgets, the
HTTP client and lxml load on first use (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

# Imported eagerly: each function shares its name with a submodule (woml_magic.parse,
# the subpackage woml_magic.lab), and the first `from .parse import …` or `import
# woml_magic.lab.server` anywhere would otherwise rebind the name to the module, so
# `wm.parse(text)` would fail with "module is not callable". woml_magic.lab is light:
# the engine loads on the first lab.
from .lab import lab
from .parse import parse

__version__ = "0.1.0"

__all__ = [
    "Attempt",
    "AttemptError",
    "Call",
    "CassetteError",
    "Comparison",
    "DemoAPIError",
    "EngineConfig",
    "Fault",
    "Journal",
    "LabArgumentError",
    "LabModelError",
    "Limits",
    "RetryPolicy",
    "Run",
    "RunHandle",
    "RunOptions",
    "Secrets",
    "Step",
    "StepRun",
    "TargetError",
    "WhatIfError",
    "WomlError",
    "WomlExtraMissing",
    "WomlImageError",
    "WomlJournalError",
    "WomlLimitError",
    "WomlRunError",
    "WomlSyntaxError",
    "Workflow",
    "__version__",
    "compare",
    "lab",
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
    "AttemptError": "events",  # a record of attempt-finished (spec §3.2)
    "Call": "model",
    "RetryPolicy": "policy",
    "Limits": "limits",
    # The whole error tree (errors.py's docstring draws it).
    **dict.fromkeys(
        ("WomlError", "WomlSyntaxError", "WomlRunError", "WomlLimitError", "WomlExtraMissing",
         "WomlJournalError", "WomlImageError", "LabModelError", "LabArgumentError",
         "WhatIfError", "TargetError", "DemoAPIError", "CassetteError"),
        "errors",
    ),
    # What run(), run_async() and start() take (spec §7).
    **dict.fromkeys(("EngineConfig", "Fault", "Journal", "RunOptions", "Secrets"), "api"),
    "run": "api",
    "run_async": "api",
    "start": "api",
    "RunHandle": "handle",
    # Runs on one time axis (spec §10.4): a view of runs, so the timeline's.
    "compare": "timeline.compare",
    "Comparison": "timeline.compare",
    "load_ipython_extension": "magic",
    "unload_ipython_extension": "magic",
}

if TYPE_CHECKING:
    from .api import EngineConfig, Fault, Journal, RunOptions, Secrets, run, run_async, start
    from .errors import (
        CassetteError,
        DemoAPIError,
        LabArgumentError,
        LabModelError,
        TargetError,
        WhatIfError,
        WomlError,
        WomlExtraMissing,
        WomlImageError,
        WomlJournalError,
        WomlLimitError,
        WomlRunError,
        WomlSyntaxError,
    )
    from .events import AttemptError
    from .handle import RunHandle
    from .limits import Limits
    from .magic import load_ipython_extension, unload_ipython_extension
    from .model import Attempt, Call, Run, Step, StepRun, Workflow
    from .policy import RetryPolicy
    from .timeline.compare import Comparison, compare


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, globals())
