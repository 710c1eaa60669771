"""The prelude as QuickJS bytecode: read, not compiled, in every fresh context (spec §4.5).

Every attempt gets a fresh context, and compiling the prelude into it was most of an
attempt's cost (≈ 0.45 ms; QuickJS compiles about 25 bytes of JavaScript per
microsecond). Reading the same code as bytecode takes ≈ 0.07 ms. The Python binding of
quickjs-ng has no bytecode API, but its shared library exports QuickJS's C API, so
this module calls ``JS_Eval`` (compile only), ``JS_WriteObject``, ``JS_ReadObject``
and ``JS_EvalFunction`` through ctypes on the ``JSContext`` of a binding ``Context``.

That pointer sits at a fixed offset in the binding's ``Context`` object, which is
the binding's private layout. So the bytecode is used only when all of these hold,
and otherwise ``PreludeBytecode.build`` returns None and the worker compiles the
prelude from source (the same behaviour, only slower):

- the installed binding is a version whose layout was checked (``CHECKED_VERSIONS``);
- in this process, the pointer read from a fresh ``Context`` is a context of the
  runtime read beside it (``JS_GetRuntime``), and bytecode written and read back
  evaluates to what the source does;
- ``WOML_PRELUDE_BYTECODE`` is not ``0`` (the tests run both ways).

The bytecode is made once per worker process, in a scratch context, by the same
library that reads it, so its format always matches.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import Any

import quickjs

# quickjs-ng binding versions (major, minor) whose ``Context`` layout is
# ``PyObject_HEAD; JSRuntime *runtime; JSContext *context; ...``.
CHECKED_VERSIONS = {(0, 17)}
ENV_SWITCH = "WOML_PRELUDE_BYTECODE"

_RUNTIME_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # after PyObject_HEAD
_CONTEXT_OFFSET = _RUNTIME_OFFSET + ctypes.sizeof(ctypes.c_void_p)
_COMPILE_ONLY = 1 << 5  # JS_EVAL_FLAG_COMPILE_ONLY (JS_EVAL_TYPE_GLOBAL is 0)
_BYTECODE = 1 << 0  # JS_WRITE_OBJ_BYTECODE, JS_READ_OBJ_BYTECODE
# JS_WRITE_OBJ_STRIP_SOURCE: without each function's source text (only
# Function.prototype.toString reads it) the prelude's bytecode is 15 KB, not 72 KB,
# and reads in half the time. Line numbers are debug information, which stays.
_STRIP_SOURCE = 1 << 4
# JS_WRITE_OBJ_STRIP_DEBUG: without line numbers either (a sixth smaller, read that
# much faster; ``build(keep_lines=False)``). The worker's prelude needs none: a frame
# without a line is never taken for a script frame (prelude.js `prepareStackTrace`).
_STRIP_DEBUG = 1 << 5
_TAG_UNDEFINED = 3
_TAG_EXCEPTION = 6
_TAG_FUNCTION_BYTECODE = -2
_PROBE_NAME = "__womlBytecodeProbe"


class _JSValue(ctypes.Structure):
    """QuickJS's ``JSValue`` on 64-bit platforms: a 64-bit payload and a 64-bit tag."""

    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


def _binding_version() -> tuple[int, int] | None:
    """(major, minor) of the installed quickjs-ng, from its ``.dist-info`` folder.

    Read beside the package rather than through ``importlib.metadata``, whose import
    and lookup would add ≈ 13 ms to every worker's start.
    """
    site = Path(quickjs.__file__).resolve().parent.parent
    for info in site.glob("quickjs_ng-*.dist-info"):
        match = re.fullmatch(r"quickjs_ng-(\d+)\.(\d+)[^-]*\.dist-info", info.name)
        if match is not None:
            return int(match.group(1)), int(match.group(2))
    return None


def _library() -> Any | None:
    """The binding's shared library with the C functions typed, or None."""
    binding = getattr(quickjs, "_quickjs", None)
    path = getattr(binding, "__file__", None)
    if path is None or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        lib = ctypes.CDLL(path)
        ptr, size, value = ctypes.c_void_p, ctypes.c_size_t, _JSValue
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "JS_GetRuntime": (ptr, [ptr]),
            "JS_Eval": (value, [ptr, ctypes.c_char_p, size, ctypes.c_char_p, ctypes.c_int]),
            "JS_WriteObject": (ptr, [ptr, ctypes.POINTER(size), value, ctypes.c_int]),
            "JS_ReadObject": (value, [ptr, ctypes.c_char_p, size, ctypes.c_int]),
            "JS_EvalFunction": (value, [ptr, value]),
            "JS_GetException": (value, [ptr]),
            "JS_FreeValue": (None, [ptr, value]),
            "js_free": (None, [ptr, ptr]),
        }
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
    except (OSError, AttributeError):
        return None
    return lib


class PreludeBytecode:
    """One script's bytecode, evaluated into fresh contexts by ``load``."""

    def __init__(self, lib: Any, data: bytes) -> None:
        self._lib = lib
        self._data = data

    @classmethod
    def build(cls, source: str, *, keep_lines: bool = True) -> PreludeBytecode | None:
        """Compile ``source`` (a global script) to bytecode, or None where that is not
        safe here (see the module docstring). ``keep_lines=False`` strips line numbers
        too (``_STRIP_DEBUG``)."""
        if os.environ.get(ENV_SWITCH, "1") == "0":
            return None
        if _binding_version() not in CHECKED_VERSIONS:
            return None
        if quickjs.Context.__basicsize__ < _CONTEXT_OFFSET + 8:
            return None
        lib = _library()
        if lib is None:
            return None
        try:
            data = cls._compile(lib, source, debug=keep_lines)
            if data is None:
                return None
            made = cls(lib, data)
            return made if made._round_trips() else None
        except Exception:  # any surprise means source compilation, never a broken worker
            return None

    @staticmethod
    def _pointer(lib: Any, ctx: quickjs.Context) -> int | None:
        """The ``JSContext *`` of a binding context, checked against its runtime."""
        runtime = ctypes.c_void_p.from_address(id(ctx) + _RUNTIME_OFFSET).value
        context = ctypes.c_void_p.from_address(id(ctx) + _CONTEXT_OFFSET).value
        if not runtime or not context or lib.JS_GetRuntime(context) != runtime:
            return None
        return int(context)

    def compile_more(self, source: str, scratch: quickjs.Context) -> PreludeBytecode | None:
        """Another global script as bytecode, keeping function source text (scripts'
        ``toString`` is checked), compiled in ``scratch`` by the library ``build``
        checked; None if it does not compile."""
        try:
            data = self._compile(self._lib, source, scratch=scratch, strip=False)
        except Exception:  # never a broken worker: the caller compiles from source
            return None
        return None if data is None else PreludeBytecode(self._lib, data)

    @classmethod
    def _compile(
        cls, lib: Any, source: str, *, scratch: quickjs.Context | None = None,
        strip: bool = True, debug: bool = True,
    ) -> bytes | None:
        scratch = scratch or quickjs.Context()
        context = cls._pointer(lib, scratch)
        if context is None:
            return None
        text = source.encode("utf-8", "surrogatepass")
        function = lib.JS_Eval(context, text, len(text), b"<input>", _COMPILE_ONLY)
        if function.tag != _TAG_FUNCTION_BYTECODE:
            cls._discard(lib, context, function)
            return None
        size = ctypes.c_size_t()
        flags = _BYTECODE | (_STRIP_SOURCE if strip else 0) | (0 if debug else _STRIP_DEBUG)
        buffer = lib.JS_WriteObject(context, ctypes.byref(size), function, flags)
        lib.JS_FreeValue(context, function)
        if not buffer:
            return None
        data = ctypes.string_at(buffer, size.value)
        lib.js_free(context, buffer)
        return data

    @staticmethod
    def _discard(lib: Any, context: int, value: _JSValue) -> None:
        """Free a returned value, or clear the exception it signals."""
        if value.tag == _TAG_EXCEPTION:
            lib.JS_FreeValue(context, lib.JS_GetException(context))
        elif value.tag != _TAG_UNDEFINED:
            lib.JS_FreeValue(context, value)

    def _round_trips(self) -> bool:
        """Whether a tiny script read back from bytecode runs as its source does."""
        probe = PreludeBytecode._compile(self._lib, f"globalThis.{_PROBE_NAME} = 6 * 7;")
        if probe is None:
            return False
        ctx = quickjs.Context()
        return PreludeBytecode(self._lib, probe).load(ctx) and bool(ctx.get(_PROBE_NAME) == 42)

    def load(self, ctx: quickjs.Context) -> bool:
        """Evaluate the bytecode in ``ctx``; False (nothing evaluated) if it could not be."""
        lib = self._lib
        context = self._pointer(lib, ctx)
        if context is None:
            return False
        function = lib.JS_ReadObject(context, self._data, len(self._data), _BYTECODE)
        if function.tag == _TAG_EXCEPTION:
            self._discard(lib, context, function)
            return False
        result = lib.JS_EvalFunction(context, function)  # takes over `function`
        self._discard(lib, context, result)
        return bool(result.tag != _TAG_EXCEPTION)
