"""The prelude as QuickJS bytecode: read, not compiled, in every fresh context (spec §4.5).

Every attempt gets a fresh context, and compiling the prelude into it was most of an
attempt's cost (≈ 0.45 ms; QuickJS compiles about 25 bytes of JavaScript per
microsecond). Reading the same code as bytecode takes ≈ 0.07 ms. The Python binding of
quickjs-ng has no bytecode API, but its shared library exports QuickJS's C API, so
this module calls ``JS_Eval`` (compile only), ``JS_WriteObject``, ``JS_ReadObject``
and ``JS_EvalFunction`` through ctypes on the ``JSContext`` of a binding ``Context``.

That pointer sits at a fixed offset in the binding's ``Context`` object
(``PyObject_HEAD; JSRuntime *runtime; JSContext *context; …``), the binding's private
layout. ``Bytecode.open`` trusts it only when all of these hold, in this order, and
otherwise raises ``BytecodeUnavailable`` with the reason (the worker then compiles the
prelude from source: the same behaviour, ≈ 2.6 times fewer attempts per second):

- ``WOML_PRELUDE_BYTECODE`` is not ``0`` (the tests run both ways);
- the installed quickjs-ng's full version lies in the verified range
  (``binding.VERIFIED``); outside it the struct is never read;
- the library loads with the functions typed, on a 64-bit build;
- on a fresh ``Context``, the two pointers pass ``check_pointers``, which dereferences
  nothing it has not proven readable (see there);
- bytecode written and read back evaluates to what its source does, and its value
  lands in an object a binding ``Object`` holds (``define``; that struct's layout is
  checked the same way: its owner must be the very ``Context``).

The bytecode is made once per worker process, in a scratch context, by the same
library that reads it, so its format always matches.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import _quickjs as quickjs  # the extension, not its package: binding.py says why

from .binding import unverified

ENV_SWITCH = "WOML_PRELUDE_BYTECODE"

_POINTER = ctypes.sizeof(ctypes.c_void_p)
_RUNTIME_OFFSET = 2 * _POINTER  # after PyObject_HEAD
_CONTEXT_OFFSET = _RUNTIME_OFFSET + _POINTER
# How much of a pointer's target must be readable before a C function reads it.
# JS_GetRuntime reads the field after the GC header (offset 16 in 0.17.0.2, measured by
# disassembly; it is the second field of JSContext in every QuickJS).
_WINDOW = 64
_COMPILE_ONLY = 1 << 5  # JS_EVAL_FLAG_COMPILE_ONLY (JS_EVAL_TYPE_GLOBAL is 0)
_BYTECODE = 1 << 0  # JS_WRITE_OBJ_BYTECODE, JS_READ_OBJ_BYTECODE
# JS_WRITE_OBJ_STRIP_SOURCE: without each function's source text (only
# Function.prototype.toString reads it) the prelude's bytecode is 15 KB, not 72 KB,
# and reads in half the time. Line numbers are debug information, which stays.
_STRIP_SOURCE = 1 << 4
# JS_WRITE_OBJ_STRIP_DEBUG: without line numbers either (a sixth smaller, read that
# much faster; ``compile(keep_lines=False)``). The worker's prelude needs none: a frame
# without a line is never taken for a script frame (prelude.js `prepareStackTrace`).
_STRIP_DEBUG = 1 << 5
_TAG_OBJECT = -1
_TAG_UNDEFINED = 3
_TAG_EXCEPTION = 6
_TAG_FUNCTION_BYTECODE = -2
_PROBE_NAME = "__womlBytecodeProbe"
# The binding's ``Object`` (a JS value handed to Python): ``PyObject_HEAD; RuntimeData
# *runtime_data; JSValue object;``, where the runtime data is the ``Context`` object.
_OBJECT_OWNER_OFFSET = 2 * _POINTER
_OBJECT_VALUE_OFFSET = _OBJECT_OWNER_OFFSET + _POINTER
_JS_VALUE_SIZE = 16
# JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE | JS_PROP_ENUMERABLE: an ordinary property.
_PLAIN_PROPERTY = 7


class BytecodeUnavailable(Exception):
    """Why contexts get the prelude compiled from source here; the message says."""


class _JSValue(ctypes.Structure):
    """QuickJS's ``JSValue`` on 64-bit platforms: a 64-bit payload and a 64-bit tag."""

    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


def library() -> Any | None:
    """The binding's shared library with the C functions typed, or None."""
    path = getattr(quickjs, "__file__", None)
    if path is None or _POINTER != 8:
        return None
    try:
        lib = ctypes.CDLL(path)
        ptr, size, value = ctypes.c_void_p, ctypes.c_size_t, _JSValue
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "JS_GetRuntime": (ptr, [ptr]),
            "JS_GetRuntimeOpaque": (ptr, [ptr]),
            "JS_Eval": (value, [ptr, ctypes.c_char_p, size, ctypes.c_char_p, ctypes.c_int]),
            "JS_WriteObject": (ptr, [ptr, ctypes.POINTER(size), value, ctypes.c_int]),
            "JS_ReadObject": (value, [ptr, ctypes.c_char_p, size, ctypes.c_int]),
            "JS_EvalFunction": (value, [ptr, value]),
            "JS_GetException": (value, [ptr]),
            "JS_DefinePropertyValueStr": (ctypes.c_int, [ptr, value, ctypes.c_char_p, value,
                                                         ctypes.c_int]),
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


def readable(address: int, size: int) -> bool:
    """Whether ``size`` bytes at ``address`` are readable memory of this process.

    Asked of the operating system, without touching them: the bytes are written into a
    pipe, and the kernel refuses (``EFAULT``) what is not mapped instead of faulting.
    """
    if address <= 0 or size <= 0:
        return False
    read_end, write_end = os.pipe()
    try:
        return os.write(write_end, (ctypes.c_char * size).from_address(address)) == size
    except (OSError, ValueError, OverflowError):
        return False
    finally:
        os.close(read_end)
        os.close(write_end)


def check_pointers(lib: Any, runtime: int | None, context: int | None, owner: int) -> str | None:
    """None if ``context`` and ``runtime`` (read from a binding ``Context`` whose
    ``id`` is ``owner``) are its ``JSContext *`` and ``JSRuntime *``, else why not.

    Nothing is dereferenced before it is known readable: the pointers must be non-null
    and aligned, and the memory they point at readable (``readable``); only then does
    ``JS_GetRuntime`` read the context, which must name ``runtime``; only then, the
    runtime proven, does ``JS_GetRuntimeOpaque`` read it, which must name the
    ``Context`` object itself (the binding keeps it there), a value Python gave us.
    """
    if not runtime or not context:
        return "the binding's Context holds a null pointer where its layout puts one"
    if runtime % _POINTER or context % _POINTER:
        return "the binding's Context holds no aligned pointers where its layout puts them"
    if not (readable(context, _WINDOW) and readable(runtime, _WINDOW)):
        return "the binding's Context does not point at readable memory where expected"
    if lib.JS_GetRuntime(context) != runtime:
        return "the binding's Context pointers are not a context and its runtime"
    if lib.JS_GetRuntimeOpaque(runtime) != owner:
        return "the binding's runtime does not name its Context"
    return None


def context_pointers(ctx: quickjs.Context) -> tuple[int | None, int | None]:
    """The runtime and context pointers where the layout puts them in ``ctx``, read from
    the Python object itself (within its ``__basicsize__``); unchecked."""
    if type(ctx).__basicsize__ < _CONTEXT_OFFSET + _POINTER:
        return None, None
    runtime = ctypes.c_void_p.from_address(id(ctx) + _RUNTIME_OFFSET).value
    context = ctypes.c_void_p.from_address(id(ctx) + _CONTEXT_OFFSET).value
    return runtime, context


class Bytecode:
    """QuickJS's bytecode functions, on binding contexts whose layout was checked here."""

    def __init__(self, lib: Any, context_type: type) -> None:
        self._lib = lib
        self._type = context_type

    @classmethod
    def open(cls, version: str | None) -> Bytecode:
        """The bytecode functions for the installed quickjs-ng of ``version`` (its full
        version, see ``binding.installed_version``); ``BytecodeUnavailable`` with the
        reason where that is not safe here (see the module docstring)."""
        if os.environ.get(ENV_SWITCH, "1") == "0":
            raise BytecodeUnavailable(f"{ENV_SWITCH}=0 turns the prelude bytecode off")
        reason = unverified(version)
        if reason is not None:
            raise BytecodeUnavailable(reason)
        if quickjs.Context.__basicsize__ < _CONTEXT_OFFSET + _POINTER:
            raise BytecodeUnavailable("the binding's Context is smaller than its layout")
        if quickjs.Object.__basicsize__ < _OBJECT_VALUE_OFFSET + _JS_VALUE_SIZE:
            raise BytecodeUnavailable("the binding's Object is smaller than its layout")
        lib = library()
        if lib is None:
            raise BytecodeUnavailable("the binding's library does not export the C API")
        try:
            return cls._checked(lib)
        except BytecodeUnavailable:
            raise
        except Exception as error:  # any surprise means source compilation, never a crash
            raise BytecodeUnavailable(f"the bytecode self-check failed: {error!r}") from error

    @classmethod
    def _checked(cls, lib: Any) -> Bytecode:
        """The functions on a fresh ``Context`` whose pointers pass ``check_pointers``,
        once bytecode round-trips through them."""
        ctx = quickjs.Context()
        reason = check_pointers(lib, *context_pointers(ctx), owner=id(ctx))
        if reason is not None:
            raise BytecodeUnavailable(reason)
        opened = cls(lib, type(ctx))
        if not opened._round_trips():
            raise BytecodeUnavailable("bytecode read back does not run as its source")
        if not opened._defines():
            raise BytecodeUnavailable("bytecode's value does not land in a held object")
        return opened

    def _pointer(self, ctx: quickjs.Context) -> int | None:
        """The ``JSContext *`` of a binding context: a ``Context`` of the type whose
        layout ``open`` checked, so the pointer is its context, or null."""
        if type(ctx) is not self._type:
            return None
        runtime, context = context_pointers(ctx)
        if not runtime or not context or self._lib.JS_GetRuntime(context) != runtime:
            return None
        return int(context)

    def compile(
        self, source: str, *, keep_lines: bool = True, keep_source: bool = False,
        scratch: quickjs.Context | None = None,
    ) -> CompiledScript | None:
        """``source`` (a global script) as bytecode, compiled in ``scratch`` (or a fresh
        context); None if it does not compile. ``keep_lines=False`` strips line numbers
        (``_STRIP_DEBUG``); ``keep_source`` keeps function source text (``toString``)."""
        try:
            data = self._compile(source, scratch or quickjs.Context(),
                                 strip=not keep_source, debug=keep_lines)
        except Exception:  # never a broken worker: the caller compiles from source
            return None
        return None if data is None else CompiledScript(self, data)

    def _compile(self, source: str, scratch: quickjs.Context, *, strip: bool,
                 debug: bool) -> bytes | None:
        lib = self._lib
        context = self._pointer(scratch)
        if context is None:
            return None
        text = source.encode("utf-8", "surrogatepass")
        function = lib.JS_Eval(context, text, len(text), b"<input>", _COMPILE_ONLY)
        if function.tag != _TAG_FUNCTION_BYTECODE:
            self._discard(context, function)
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

    def _discard(self, context: int, value: _JSValue) -> None:
        """Free a returned value, or clear the exception it signals."""
        if value.tag == _TAG_EXCEPTION:
            self._lib.JS_FreeValue(context, self._lib.JS_GetException(context))
        elif value.tag != _TAG_UNDEFINED:
            self._lib.JS_FreeValue(context, value)

    def _round_trips(self) -> bool:
        """Whether a tiny script read back from bytecode runs as its source does."""
        probe = self.compile(f"globalThis.{_PROBE_NAME} = 6 * 7;")
        if probe is None:
            return False
        ctx = quickjs.Context()
        return probe.load(ctx) and bool(ctx.get(_PROBE_NAME) == 42)

    def _defines(self) -> bool:
        """Whether a script read back from bytecode puts its value in a held object."""
        probe = self.compile("(function () { return 6 * 7; })")
        if probe is None:
            return False
        ctx = quickjs.Context()
        holder = ctx.eval(f"globalThis.{_PROBE_NAME} = {{ __proto__: null }}")
        return probe.define(ctx, holder, "part") and ctx.eval(f"{_PROBE_NAME}.part()") == 42

    def _held(self, ctx: quickjs.Context, held: Any) -> _JSValue | None:
        """The object a binding ``Object`` of ``ctx`` holds, read where the layout puts
        it, within the Python object: its owner must be ``ctx`` itself and the value an
        object; else None."""
        if type(held) is not quickjs.Object:
            return None
        owner = ctypes.c_void_p.from_address(id(held) + _OBJECT_OWNER_OFFSET).value
        if owner != id(ctx):
            return None
        value = _JSValue.from_address(id(held) + _OBJECT_VALUE_OFFSET)
        if value.tag != _TAG_OBJECT or not value.u or value.u % _POINTER:
            return None
        return _JSValue(value.u, value.tag)

    def define(self, data: bytes, ctx: quickjs.Context, held: Any, key: str) -> bool:
        """Evaluate bytecode ``data`` in ``ctx`` and define its value as property ``key``
        of the object ``held`` (a binding ``Object`` of ``ctx``): an own property, so no
        setter or proxy of the script's is ever consulted. False if it could not be."""
        lib = self._lib
        context = self._pointer(ctx)
        target = None if context is None else self._held(ctx, held)
        if context is None or target is None:
            return False
        value = self._evaluate(context, data)
        if value.tag == _TAG_EXCEPTION:
            self._discard(context, value)
            return False
        # Takes over `value`; -1 with an exception pending, or 0, when it fails.
        done = lib.JS_DefinePropertyValueStr(
            context, target, key.encode("ascii"), value, _PLAIN_PROPERTY
        )
        if done != 1:
            self._discard(context, _JSValue(0, _TAG_EXCEPTION))
        return bool(done == 1)

    def load(self, data: bytes, ctx: quickjs.Context) -> bool:
        """Evaluate bytecode ``data`` in ``ctx``; False (nothing evaluated) if it could
        not be."""
        context = self._pointer(ctx)
        if context is None:
            return False
        result = self._evaluate(context, data)
        self._discard(context, result)
        return bool(result.tag != _TAG_EXCEPTION)

    def _evaluate(self, context: int, data: bytes) -> _JSValue:
        """Bytecode ``data`` read and evaluated in ``context``: its value, or an
        exception value (from the read or the evaluation), either for the caller to
        free."""
        function: _JSValue = self._lib.JS_ReadObject(context, data, len(data), _BYTECODE)
        if function.tag == _TAG_EXCEPTION:
            return function
        value: _JSValue = self._lib.JS_EvalFunction(context, function)  # takes over `function`
        return value


class CompiledScript:
    """One global script's bytecode, evaluated into fresh contexts by ``load``."""

    def __init__(self, bytecode: Bytecode, data: bytes) -> None:
        self._bytecode = bytecode
        self._data = data

    def load(self, ctx: quickjs.Context) -> bool:
        """Evaluate the script in ``ctx``; False (nothing evaluated) if it could not be."""
        return self._bytecode.load(self._data, ctx)

    def define(self, ctx: quickjs.Context, held: Any, key: str) -> bool:
        """Evaluate the script in ``ctx`` and put its value in ``held[key]``
        (``Bytecode.define``)."""
        return self._bytecode.define(self._data, ctx, held, key)
