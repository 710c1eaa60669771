"""Fresh QuickJS contexts for the worker process's attempts (spec §4.5).

Every attempt gets a fresh context with the prelude evaluated (``prelude.js`` and its
lazy parts). Making one is most of an attempt's cost, so ``Contexts`` prepares the
next one while the process is idle (a spare), gives contexts the prelude as bytecode
where ``_bytecode.py`` allows it, and evaluates scripts run again from bytecode
(``Scripts``). Positions follow the wrapper (``wrapper.py``): the prelude and its
parts are padded to start below every script line they may serve.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Protocol

import _quickjs as quickjs  # the extension, not its package: binding.py says why

from ._bytecode import Bytecode, CompiledScript
from .wrapper import (
    CLOSES_EARLY,
    FIRST_LINE,
    new_hook_name,
    padding,
    wrap,
    wrap_as_global,
    wrap_with_hook,
)

MAX_STACK_BYTES = 1024 * 1024
#: Scripts of up to this many lines run in the spare context made ahead of time.
SPARE_LINES = 20_000
_HERE = Path(__file__).parent
_PRELUDE = (_HERE / "prelude.js").read_text(encoding="utf-8")
_PARTS = {
    name: (_HERE / f"prelude-{name}.js").read_text(encoding="utf-8")
    for name in ("console", "services", "results", "secrets", "steps")
}
_PRELUDE_GLOBAL = "__womlPrelude"
_EMIT_GLOBAL = "__womlEmit"
_MAIN_GLOBAL = "__womlMain"
# The lazy parts as one JS object literal of source strings (the compiled-from-source way).
_PARTS_SOURCE = json.dumps(_PARTS)


# What prelude.js takes as `fixed`: the same for every attempt of the worker process.
_FIXED = json.dumps({
    "firstLine": FIRST_LINE, "closesEarly": CLOSES_EARLY, "mainGlobal": _MAIN_GLOBAL,
    "emitGlobal": _EMIT_GLOBAL, "hostGlobal": _PRELUDE_GLOBAL,
})


def prelude_source(pad: int, *, bytecode: bool) -> str:
    """The prelude applied to the emit callable, below a script of ``pad`` lines.

    The script reads the callable from the global ``Prepared`` adds (``_EMIT_GLOBAL``)
    and calls the prelude at once: its value (from source) or ``_PRELUDE_GLOBAL`` (as
    bytecode) is the host dispatcher, so a context costs no call from Python into the
    prelude and no evaluation to fetch the callable. The prelude deletes both globals
    itself (the second at ``configure``, before the script is compiled). The lazy parts
    are set up in a context only if its attempt needs them (prelude.js ``lib``): for
    bytecode the worker then reads each from its own bytecode (``Contexts.part``), so
    a context reads none of them up front; otherwise they are string literals,
    compiled then.
    """
    if bytecode:
        return (
            padding(pad)
            + f"globalThis.{_PRELUDE_GLOBAL} = ("
            + _PRELUDE
            + f")(globalThis.{_EMIT_GLOBAL}, null, {_FIXED});"
        )
    return (padding(pad) + "(" + _PRELUDE
            + f")(globalThis.{_EMIT_GLOBAL}, {_PARTS_SOURCE}, {_FIXED})")


class Emitter(Protocol):
    """What receives the prelude's ``emit`` calls: the attempt being run."""

    def emit(self, kind: Any, a: Any, b: Any, c: Any) -> str: ...


class Router:
    """Routes the JS ``emit`` callable to the attempt being run (a context is made
    before its attempt is known)."""

    current: Emitter | None = None

    def emit(self, kind: Any = None, a: Any = None, b: Any = None, c: Any = None) -> str:
        # Called from JavaScript: must never raise (a raising callable breaks the context).
        runner = self.current
        if runner is None:
            return "!"
        try:
            return runner.emit(kind, a, b, c)
        except Exception:
            return "!"


class Prepared:
    """A fresh context with the prelude evaluated, not yet given to any attempt.

    The attempt only configures it (``host("configure", …)``) and runs the script.
    The prelude is padded below a script of ``lines`` lines (see prelude.js); a spare
    serves scripts of up to ``SPARE_LINES`` lines.
    """

    def __init__(self, lines: int, contexts: Contexts) -> None:
        self.lines = lines
        self._contexts = contexts
        code = contexts.prelude_code
        if lines == SPARE_LINES and code is not None:
            self.ctx = self._context()
            if code.load(self.ctx):
                self._ready(self.ctx.get(_PRELUDE_GLOBAL))
                return
            # The bytecode may have run in part: the source way starts afresh.
        self.ctx = self._context()
        self._ready(self.ctx.eval(prelude_source(lines, bytecode=False)))

    def _context(self) -> quickjs.Context:
        ctx = quickjs.Context()
        ctx.set_max_stack_size(MAX_STACK_BYTES)
        ctx.add_callable(_EMIT_GLOBAL, self._contexts.router.emit)
        return ctx

    def _ready(self, host: Any) -> None:
        self.host = host


class Scripts:
    """Wrapped scripts evaluated into attempts' contexts, as bytecode once seen twice.

    A retried step runs the same script again (up to ten attempts, or a thousand runs
    of one cell), so from its second attempt on a script is read from bytecode made
    once (``_bytecode.py``), when bytecode is available. Keyed by the exact script text.
    Even a one-line script reads faster than it compiles in a fresh context (≈ 10 µs
    less for `throw new Error("x")`, ≈ 20 µs for three lines); QuickJS compiles about
    25 bytes per microsecond besides.
    """

    KEEP = 64
    GLOBAL = _MAIN_GLOBAL  # deleted by prelude.js `start`, before the script runs

    def __init__(self, bytecode: Bytecode | None) -> None:
        self._bytecode = bytecode
        self._seen: dict[str, int] = {}
        self._compiled: dict[str, CompiledScript | None] = {}
        self._scratch: quickjs.Context | None = None

    def evaluate(
        self, ctx: quickjs.Context, script: str, hook: str | None, *, strict: bool = False
    ) -> Any:
        """The script's function in ``ctx``; None if it does not compile (``strict``:
        raise ``quickjs.JSException`` instead)."""
        direct = wrap(script) if hook is None else wrap_with_hook(script, hook)
        code = self._code(script, hook)
        if code is not None and code.load(ctx):
            main = ctx.get(self.GLOBAL)  # the prelude's `start` deletes the global
            if main is not None:
                return main
        if strict:
            return ctx.eval(direct)
        try:
            return ctx.eval(direct)
        except quickjs.JSException:
            return None

    def _code(self, script: str, hook: str | None) -> CompiledScript | None:
        if self._bytecode is None:
            return None
        key = script if hook is None else hook + "\0" + script
        if key in self._compiled:
            return self._compiled[key]
        count = self._seen.get(key, 0) + 1
        self._seen[key] = count
        if len(self._seen) > 4 * self.KEEP:
            del self._seen[next(iter(self._seen))]
        if count < 2:
            return None
        if self._scratch is None:
            self._scratch = quickjs.Context()
        code = self._bytecode.compile(
            wrap_as_global(script, hook, self.GLOBAL), keep_source=True, scratch=self._scratch
        )
        self._compiled[key] = code
        if len(self._compiled) > self.KEEP:
            del self._compiled[next(iter(self._compiled))]
        return code


class Contexts:
    """The worker process's source of prepared contexts (one per process).

    ``bytecode`` is None where contexts compile the prelude from source; ``reason``
    then says why.
    """

    def __init__(self, bytecode: Bytecode | None, reason: str | None = None) -> None:
        self.prelude_code: CompiledScript | None = None
        self.part_code: dict[str, CompiledScript | None] = {}
        if bytecode is not None:
            self.prelude_code = bytecode.compile(
                prelude_source(SPARE_LINES, bytecode=True), keep_lines=False
            )
            # Without line numbers, a part's frames can never pass for script frames.
            self.part_code = {
                name: bytecode.compile(text, keep_lines=False) for name, text in _PARTS.items()
            }
            if self.prelude_code is None or None in self.part_code.values():
                bytecode, reason = None, "the prelude did not compile to bytecode"
                self.prelude_code, self.part_code = None, {}
        self.reason = reason
        self.router = Router()
        self.scripts = Scripts(bytecode)
        # The catch hook's name in this worker process: fixed, so a script retried keeps
        # the same text and its compiled form can be reused (see `Scripts`). A script
        # can learn it only by reading its own functions' source, and calling the hook
        # can only make its attempt a `crash`, as `throw null` already does.
        self.hook = new_hook_name()
        self._spare: list[Prepared] = []

    def prepare_spare(self) -> None:
        """Make the next attempt's context now, while nothing waits on this process."""
        if not self._spare:
            with contextlib.suppress(Exception):  # a spare is an optimisation, never a failure
                self._spare.append(Prepared(SPARE_LINES, self))

    def part(self, ctx: quickjs.Context, name: Any, holder: Any) -> bool:
        """Read lazy part ``name`` (prelude.js ``factory``) into ``ctx``, its function as
        ``holder.part``; False if it could not be (memory ran out)."""
        code = self.part_code.get(name) if isinstance(name, str) else None
        return code is not None and code.define(ctx, holder, "part")

    def take(self, lines: int) -> Prepared:
        """A context for a script of ``lines`` lines: the spare if it serves them."""
        if self._spare and lines <= self._spare[0].lines:
            return self._spare.pop()
        return Prepared(lines, self)
