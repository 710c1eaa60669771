"""The script worker: JavaScript attempts in a separate QuickJS process (spec §4.5).

``ScriptWorker`` (``worker.py``) runs ``AttemptRequest``s (``attempt.py``) in a warm
child process and returns ``AttemptResult``s; ``pool.py`` keeps warm workers. The
modules, one concept each:

    kernel side   worker.py      the attempt and syntax-check protocol driver
                  pipeline.py    attempts sent ahead to one process, in its order
                  commands.py    an attempt's commands to the child, encoded
                  transport.py   the child process and the kernel's end of its pipes
                  bridge.py      the services.* calls of an attempt, performed here
                  report.py      the kernel's verdict on what the child reports
                  attempt.py     what goes into an attempt and what comes out
                  pool.py        the warm workers of a process
    both sides    protocol.py    the messages on the pipes, their shapes and checks
                  wrapper.py     the script as a JS function; JS positions → cell
                  binding.py     quickjs-ng's installed version and the verified range
    child side    _child.py      the worker process's command loop
                  _channel.py    its end of the pipes, its tie to the kernel
                  _contexts.py   fresh contexts with the prelude (prelude*.js)
                  _runner.py     one attempt, one syntax check
                  _bytecode.py   the prelude as bytecode, where that is safe
                  _instrument.py catch clauses that report a caught out-of-memory

The child never runs this file: its bootstrap stands in for the package
(``transport._BOOTSTRAP``), so it starts without the kernel-side modules.
"""

from __future__ import annotations

from .attempt import AttemptRequest, AttemptResult, LogSink, ServiceCall
from .worker import SERVICES, ScriptWorker

__all__ = [
    "SERVICES",
    "AttemptRequest",
    "AttemptResult",
    "LogSink",
    "ScriptWorker",
    "ServiceCall",
]
