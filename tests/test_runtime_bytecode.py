"""The prelude as QuickJS bytecode (spec §4.5; woml_magic/runtime/_bytecode.py).

Reading bytecode must give a context exactly what compiling the source gives, and
the loader must step aside (the worker then compiles) wherever it is not known safe.
The worker's own behaviour in both modes is tested by test_runtime.py, whose worker
fixture runs every test both ways.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import quickjs

from woml_magic.runtime import ScriptWorker, _bytecode
from woml_magic.runtime._bytecode import ENV_SWITCH, PreludeBytecode

SOURCE = """

globalThis.probe = function (n) {
  const e = new Error("at line four");
  return JSON.stringify({ n: n * 2, stack: e.stack.split("\\n")[0] });
};
"""


def loader_or_skip() -> PreludeBytecode:
    loaded = PreludeBytecode.build(SOURCE)
    if loaded is None:
        pytest.skip("no prelude bytecode with this quickjs-ng binding")
    return loaded


def test_bytecode_evaluates_to_what_the_source_does_line_numbers_included() -> None:
    loaded = loader_or_skip()
    from_bytecode = quickjs.Context()
    assert loaded.load(from_bytecode)
    from_source = quickjs.Context()
    from_source.eval(SOURCE)
    assert from_bytecode.eval("probe(21)") == from_source.eval("probe(21)")
    assert ":4:" in from_bytecode.eval("probe(21)")


def test_each_load_gives_a_fresh_context_its_own_objects() -> None:
    loaded = loader_or_skip()
    first, second = quickjs.Context(), quickjs.Context()
    assert loaded.load(first)
    assert loaded.load(second)
    first.eval("probe.mark = 1")
    assert second.eval("probe.mark") is None


def test_the_environment_switch_turns_bytecode_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert PreludeBytecode.build(SOURCE) is None


def test_an_unchecked_binding_version_is_never_poked(monkeypatch: pytest.MonkeyPatch) -> None:
    # The JSContext pointer is read at an offset of the binding's private layout.
    monkeypatch.setattr(_bytecode, "_binding_version", lambda: (0, 99))
    assert PreludeBytecode.build(SOURCE) is None
    monkeypatch.setattr(_bytecode, "_binding_version", lambda: None)
    assert PreludeBytecode.build(SOURCE) is None


def test_source_that_does_not_compile_gives_no_bytecode() -> None:
    loader_or_skip()
    assert PreludeBytecode.build("function (") is None


def test_the_worker_says_which_way_it_gives_contexts_the_prelude(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = "bytecode" if PreludeBytecode.build(SOURCE) is not None else "source"
    w = ScriptWorker()
    try:
        assert w.prelude is None
        asyncio.run(w.start())
        assert w.prelude == expected
    finally:
        asyncio.run(w.aclose())
    monkeypatch.setenv(ENV_SWITCH, "0")
    w = ScriptWorker()
    try:
        asyncio.run(w.start())
        assert w.prelude == "source"
    finally:
        asyncio.run(w.aclose())


def test_bytecode_without_lines_evaluates_the_same_but_has_no_line_numbers() -> None:
    """The worker's prelude is read without line numbers (docs/runtime.md)."""
    loader_or_skip()
    stripped = PreludeBytecode.build(SOURCE, keep_lines=False)
    assert stripped is not None
    from_bytecode = quickjs.Context()
    assert stripped.load(from_bytecode)
    from_source = quickjs.Context()
    from_source.eval(SOURCE)
    stripped_probe = json.loads(from_bytecode.eval("probe(21)"))
    assert stripped_probe["n"] == json.loads(from_source.eval("probe(21)"))["n"]
    # No frame of it can pass for a script line (prelude.js looks for "<input>").
    assert "<input>" not in stripped_probe["stack"]
