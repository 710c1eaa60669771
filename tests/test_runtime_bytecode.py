"""The prelude as QuickJS bytecode (spec §4.5; woml_magic/runtime/_bytecode.py).

Reading bytecode must give a context exactly what compiling the source gives; on the
verified quickjs-ng range (pyproject.toml pins it) the fast path must be on, and the
loader must step aside (the worker then compiles), saying why, wherever it is not
known safe. Checking the binding's pointers must never dereference one it has not
proven readable. The worker's own behaviour in both modes is tested by
test_runtime.py, whose worker fixture runs every test both ways.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.metadata
import json
from typing import Any

import pytest
import quickjs

from woml_magic.runtime import ScriptWorker, _bytecode
from woml_magic.runtime._bytecode import (
    ENV_SWITCH,
    Bytecode,
    BytecodeUnavailable,
    check_pointers,
    context_pointers,
    library,
    readable,
)
from woml_magic.runtime.binding import unverified

SOURCE = """

globalThis.probe = function (n) {
  const e = new Error("at line four");
  return JSON.stringify({ n: n * 2, stack: e.stack.split("\\n")[0] });
};
"""

INSTALLED = importlib.metadata.version("quickjs-ng")
# The range whose Context layout was verified by hand (pyproject.toml: >=0.17,<0.18).
VERIFIED = INSTALLED.split(".")[:2] == ["0", "17"]


@pytest.fixture
def bytecode(monkeypatch: pytest.MonkeyPatch) -> Bytecode:
    """The fast path, which must open on a verified binding (a refusal fails the test
    with its reason); tests of it skip only outside the verified range."""
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    if not VERIFIED:
        pytest.skip(f"quickjs-ng {INSTALLED} is outside the verified range (0.17.x)")
    return Bytecode.open(INSTALLED)


def test_bytecode_evaluates_to_what_the_source_does_line_numbers_included(
    bytecode: Bytecode,
) -> None:
    loaded = bytecode.compile(SOURCE)
    assert loaded is not None
    from_bytecode = quickjs.Context()
    assert loaded.load(from_bytecode)
    from_source = quickjs.Context()
    from_source.eval(SOURCE)
    assert from_bytecode.eval("probe(21)") == from_source.eval("probe(21)")
    assert ":4:" in from_bytecode.eval("probe(21)")


def test_each_load_gives_a_fresh_context_its_own_objects(bytecode: Bytecode) -> None:
    loaded = bytecode.compile(SOURCE)
    assert loaded is not None
    first, second = quickjs.Context(), quickjs.Context()
    assert loaded.load(first)
    assert loaded.load(second)
    first.eval("probe.mark = 1")
    assert second.eval("probe.mark") is None


def test_the_environment_switch_turns_bytecode_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "0")
    with pytest.raises(BytecodeUnavailable, match=f"{ENV_SWITCH}=0"):
        Bytecode.open(INSTALLED)


@pytest.mark.parametrize("version", ["0.18.0", "0.18.0rc1", "0.16.9", "1.0", "x", "", None])
def test_an_unverified_binding_version_is_never_poked(
    monkeypatch: pytest.MonkeyPatch, version: str | None
) -> None:
    # The JSContext pointer is read at an offset of the binding's private layout.
    monkeypatch.delenv(ENV_SWITCH, raising=False)

    def poked(*_: Any) -> Any:
        raise AssertionError("the binding was touched")

    monkeypatch.setattr(_bytecode, "library", poked)
    monkeypatch.setattr(_bytecode, "context_pointers", poked)
    with pytest.raises(BytecodeUnavailable, match=r"quickjs-ng.*>=0\.17,<0\.18"):
        Bytecode.open(version)


@pytest.mark.parametrize(
    ("version", "verified"),
    [
        ("0.17", True), ("0.17.0.2", True), ("0.17.12.post1", True), ("0.17.0rc1", True),
        ("0.16.99", False), ("0.18.0", False), ("0.18.0rc1", False), ("1.17.0", False),
        ("v0.17", False), ("", False), (None, False),
    ],
)
def test_the_verified_range_is_the_full_version_from_0_17_to_before_0_18(
    version: str | None, verified: bool
) -> None:
    assert (unverified(version) is None) == verified


def test_source_that_does_not_compile_gives_no_bytecode(bytecode: Bytecode) -> None:
    assert bytecode.compile("function (") is None


def test_the_worker_reads_the_prelude_as_bytecode_on_a_verified_binding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    if not VERIFIED:
        pytest.skip(f"quickjs-ng {INSTALLED} is outside the verified range (0.17.x)")
    w = ScriptWorker()
    try:
        assert w.prelude is None
        asyncio.run(w.start())
        assert (w.prelude, w.prelude_reason) == ("bytecode", None)
    finally:
        asyncio.run(w.aclose())


def test_the_worker_says_why_it_compiles_the_prelude_from_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_SWITCH, "0")
    w = ScriptWorker()
    try:
        asyncio.run(w.start())
        assert w.prelude == "source"
        assert f"{ENV_SWITCH}=0" in (w.prelude_reason or "")
    finally:
        asyncio.run(w.aclose())


def test_bytecode_without_lines_evaluates_the_same_but_has_no_line_numbers(
    bytecode: Bytecode,
) -> None:
    """The worker's prelude is read without line numbers (docs/runtime.md)."""
    stripped = bytecode.compile(SOURCE, keep_lines=False)
    assert stripped is not None
    from_bytecode = quickjs.Context()
    assert stripped.load(from_bytecode)
    from_source = quickjs.Context()
    from_source.eval(SOURCE)
    stripped_probe = json.loads(from_bytecode.eval("probe(21)"))
    assert stripped_probe["n"] == json.loads(from_source.eval("probe(21)"))["n"]
    # No frame of it can pass for a script line (prelude.js looks for "<input>").
    assert "<input>" not in stripped_probe["stack"]


# ---- checking the binding's pointers without trusting them --------------------------


def test_readable_asks_the_operating_system_and_never_faults() -> None:
    buffer = ctypes.create_string_buffer(b"x" * 64)
    assert readable(ctypes.addressof(buffer), 64)
    # Page zero and the pages after it are never mapped (vm.mmap_min_addr).
    for address in (0, 8, 0x1000, 0x8000 - 8):
        assert not readable(address, 8)
    assert not readable(ctypes.addressof(buffer), 0)


def _fake_pointers() -> tuple[ctypes.Array[ctypes.c_char], ctypes.Array[ctypes.c_char]]:
    """Two zeroed, aligned blocks of readable memory: neither is a JSRuntime or a
    JSContext."""
    return ctypes.create_string_buffer(256), ctypes.create_string_buffer(256)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("null", "null pointer"),
        ("misaligned", "aligned"),
        ("unmapped", "readable memory"),
        ("mapped but not a context", "not a context and its runtime"),
        ("another Context's runtime", "does not name its Context"),
    ],
)
def test_pointers_that_are_not_a_context_are_refused_without_a_crash(
    bytecode: Bytecode, case: str, reason: str
) -> None:
    lib = library()
    assert lib is not None
    ctx, other = quickjs.Context(), quickjs.Context()
    runtime, context = context_pointers(ctx)
    assert runtime is not None
    assert context is not None
    fake_runtime, fake_context = _fake_pointers()
    pointers: dict[str, tuple[int | None, int | None]] = {
        "null": (runtime, None),
        "misaligned": (runtime + 1, context + 1),
        "unmapped": (0x1000, 0x2000),
        "mapped but not a context": (
            ctypes.addressof(fake_runtime), ctypes.addressof(fake_context)
        ),
        "another Context's runtime": context_pointers(other),
    }
    found = check_pointers(lib, *pointers[case], owner=id(ctx))
    assert found is not None
    assert reason in found
    assert check_pointers(lib, runtime, context, owner=id(ctx)) is None


# ---- the lazy parts, read when an attempt needs them (prelude.js `factory`) ------------


def test_a_value_lands_only_in_an_object_of_its_own_context(bytecode: Bytecode) -> None:
    function = bytecode.compile("(function () { return 6 * 7; })", keep_lines=False)
    assert function is not None
    ctx, other = quickjs.Context(), quickjs.Context()
    holder = ctx.eval("globalThis.h = { __proto__: null }")
    assert function.define(ctx, holder, "part")
    assert ctx.eval("h.part()") == 42
    # A held object of another context, or anything but a held object, is refused
    # unread: the binding's Object layout is trusted only for this context's own.
    foreign = other.eval("globalThis.h = { __proto__: null }")
    for wrong in (foreign, "h", 7, None):
        assert not function.define(ctx, wrong, "again")
    assert ctx.eval("'again' in h") is False
    assert other.eval("'part' in h || 'again' in h") is False


class _Channel:
    """The worker's end of the pipes, in memory: what the attempt sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, message: Any) -> None:
        self.sent.append(dict(message))


def _parts_read(
    bytecode: Bytecode, monkeypatch: pytest.MonkeyPatch, script: str, context: dict[str, Any]
) -> list[tuple[list[str], str]]:
    """The lazy parts each of two attempts of ``script`` read, with its outcome: run by
    the worker process's own classes, in this process."""
    from woml_magic.runtime import AttemptRequest, _contexts, _runner, commands

    contexts = _contexts.Contexts(bytecode)
    read: list[str] = []
    real_part = contexts.part

    def part(ctx: quickjs.Context, name: Any, holder: Any) -> bool:
        read.append(name)
        return real_part(ctx, name, holder)

    monkeypatch.setattr(contexts, "part", part)
    request = AttemptRequest(
        script=script, script_line=1, script_column=1, context=context,
        attempt={"number": 1}, now_ms=lambda: 0.0,
    )
    seen = []
    for attempt_id in (1, 2):  # each attempt's fresh context reads its own parts
        read.clear()
        channel = _Channel()
        contexts.prepare_spare()  # as the worker process does between attempts
        command = json.loads(commands.run_line(request, attempt_id))  # what the child reads
        _runner.AttemptRunner(channel, command, contexts).run()  # type: ignore[arg-type]
        seen.append((list(read), channel.sent[-1]["outcome"]))
    return seen


@pytest.mark.parametrize(
    ("script", "parts", "outcome"),
    [
        ('throw new Error("x");', [], "threw"),
        ("return 1 + 1;", [], "succeeded"),
        ("console.log(1);\nconsole.warn(2);\nreturn 1;", ["console"], "succeeded"),
        ("return {a: [1]};", ["results"], "succeeded"),
        ("throw {code: 7};", ["console"], "threw"),
        ("await services.sleep(10n);", ["services"], "threw"),
        ('return services.secret("PW");', ["secrets"], "threw"),  # none is set
        ('return btoa("x") + btoa("y");', ["secrets"], "succeeded"),
    ],
)
def test_a_lazy_part_is_read_exactly_when_an_attempt_needs_it(
    bytecode: Bytecode, monkeypatch: pytest.MonkeyPatch, script: str, parts: list[str],
    outcome: str,
) -> None:
    seen = _parts_read(bytecode, monkeypatch, script, {"payload": None})
    assert seen == [(parts, outcome)] * 2


def test_context_steps_is_read_as_a_part_only_after_a_step_has_a_result(
    bytecode: Bytecode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading a step's result would ask the kernel: this script only checks the proxy.
    script = 'if (typeof context.steps !== "object") throw new Error("no steps");\nreturn 1;'
    first = _parts_read(bytecode, monkeypatch, script, {"payload": None})
    later = _parts_read(bytecode, monkeypatch, script, {"payload": None, "steps": {"a": 1}})
    assert first == [([], "succeeded")] * 2
    assert later == [(["steps"], "succeeded")] * 2


def test_a_script_seen_twice_is_read_from_bytecode_however_short(
    bytecode: Bytecode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from woml_magic.runtime import _contexts
    from woml_magic.runtime.wrapper import function_length, wrap

    compiled: list[str] = []
    real_compile = bytecode.compile

    def compile_(source: str, **kw: Any) -> Any:
        compiled.append(source)
        return real_compile(source, **kw)

    monkeypatch.setattr(bytecode, "compile", compile_)
    scripts = _contexts.Scripts(bytecode)
    script = 'throw new Error("x");'
    lengths = []
    for _ in range(3):
        ctx = quickjs.Context()
        main = scripts.evaluate(ctx, script, None, strict=True)
        lengths.append(ctx.eval("f => f.toString().length")(main))
    assert len(compiled) == 1  # made at the second attempt, reused at the third
    assert lengths == [function_length(wrap(script))] * 3
