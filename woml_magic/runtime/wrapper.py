"""How a script becomes one JavaScript function, and how JavaScript positions map back
to the cell (spec §2.3, §3.2, §4.5).

A step's script is the body of an async function. The worker evaluates it as::

    JS line 1            (async function (context, attempt, services, console) { "use strict";
    JS line 2            <script line 1>
    …                    …
    JS line n + 1        <script line n>
    JS line n + 2        })

so script line ``k`` stands on JS line ``k + FIRST_LINE - 1`` and the script's
columns are unchanged. Everything else a context evaluates (the prelude, its lazy
parts) is padded with blank lines (``padding``) to start below the wrapper's last
line, so a stack frame on a line from ``FIRST_LINE`` to ``last_line(n)`` is a script
frame. Both processes use this module: the worker process wraps and pads, the kernel
maps positions back (``cell_position``) with the JavaScript lexer's ``Lines`` (imported
there, on first use): QuickJS numbers lines its own way (LS and PS between tokens end a
line, which the cell does not show) and counts columns in UTF-8 bytes.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

HEADER = '(async function (context, attempt, services, console) { "use strict";\n'
FOOTER = "\n})"
#: The JS line of the script's line 1.
FIRST_LINE = HEADER.count("\n") + 1

CLOSES_EARLY = (
    "the script closes its own function body early (an unbalanced `}`); a script must be "
    "the body of one async function"
)
"""Why a script whose text ends the wrapper's function before its footer is refused."""


class Reach(NamedTuple):
    """Which of its arguments besides ``context`` a script can reach at all."""

    attempt: bool
    services: bool
    console: bool


@functools.lru_cache(maxsize=64)
def reach_of(script: str) -> Reach:
    """Which arguments the script can reach (spec §4.5): a parameter is reachable only
    through its name, ``arguments`` or a direct ``eval`` (the body is strict: no
    ``with``, no ``caller``), each spelled in the text or with a ``\\u`` escape. An
    argument the text cannot reach is never built (prelude.js ``configure``): no
    script can tell, and a throwing script is spared most of its setting up. A script
    that cannot reach ``services`` never waits on the kernel (the lab sends its
    attempts ahead, ``lab.labclock``).
    """
    dynamic = "arguments" in script or "eval" in script or "\\" in script
    return Reach(*(dynamic or name in script for name in Reach._fields))


def last_line(script_lines: int) -> int:
    """The JS line of the last line of a script of ``script_lines`` lines."""
    return script_lines + FIRST_LINE - 1


def padding(script_lines: int) -> str:
    """Blank lines that put what follows them below a wrapped script of
    ``script_lines`` lines, footer included: its frames are never script frames."""
    return "\n" * (last_line(script_lines) + 1)


def wrap(script: str) -> str:
    """The script as one async function expression, its line 1 on ``FIRST_LINE``."""
    return HEADER + script + FOOTER


def _hook_block(hook: str) -> str:
    """The opening of a block binding the catch hook (see _instrument.py) as the
    constant ``hook``: the prelude puts the hook on the global object under that name
    just before the block is evaluated; the block takes it and deletes the global, so
    a script never finds it there. It stays on the header's line."""
    return f"{{ const {hook} = globalThis.{hook}; delete globalThis.{hook}; "


def wrap_with_hook(script: str, hook: str) -> str:
    """``wrap(script)`` in a block that binds the catch hook as the constant ``hook``."""
    return _hook_block(hook) + wrap(script) + " }"


def wrap_as_global(script: str, hook: str | None, name: str) -> str:
    """A global script that stores ``wrap(script)`` (with the catch hook bound, unless
    ``hook`` is None) in ``globalThis[name]``: the form compiled to bytecode."""
    assignment = f"globalThis.{name} = " + wrap(script)
    return assignment + ";" if hook is None else _hook_block(hook) + assignment + "; }"


def new_hook_name() -> str:
    """A name for the catch hook that no script can know in advance."""
    return "__womlCaught_" + os.urandom(8).hex()


def function_length(wrapped: str) -> int:
    """``fn.toString().length`` of the function that ``wrapped`` (``wrap(script)``)
    defines.

    JavaScript counts UTF-16 code units; the wrapper's outer parentheses are not part
    of the function. A different length at run time means the script closed the
    function early and the wrapper's tail became code of its own.
    """
    return len(wrapped.encode("utf-16-le", "surrogatepass")) // 2 - 2


def cell_position(
    js_line: int, js_column: int, script: str, script_line: int, script_column: int
) -> tuple[int, int]:
    """Map a position QuickJS reports in the wrapped script to the cell (spec §2.3).

    QuickJS's script line is JS line − ``FIRST_LINE`` + 1, numbered and its column
    counted as QuickJS does (``javascript.Lines``); the cell's line and column are those
    of that place in the script, whose line 1 stands on cell line ``script_line`` from
    column ``script_column``. Positions in the wrapper's own lines are clamped to the
    script's start or end.
    """
    from woml_magic.javascript import Lines  # on first use: `import woml_magic` stays cheap

    lines = Lines(script, script_line, script_column)
    line = js_line - FIRST_LINE + 1
    offset = 0 if line < 1 else lines.engine_offset(line, js_column)
    cell_line, column = lines.position(offset)
    return cell_line, max(1, column)
