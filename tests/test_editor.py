"""The editor's kernel side, as front ends use it (spec §6.4).

In an IPython shell: the completion matcher answers ``%%woml`` cells and leaves Python
alone, and unloading removes it. In a real kernel driven through ``jupyter_client``,
as JupyterLab drives it: ``complete_request`` with the whole cell and ``cursor_pos``
(kinds and signatures in ``_jupyter_types_experimental``), ``inspect_request`` (Shift+Tab),
and the ``woml.diagnostics`` comm.
"""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from woml_magic.magic import WomlMagics

ROOT = Path(__file__).resolve().parents[1]
MISSPELT = ('%%woml --simulate\n<step id="charge" retry-delay-max="3s">\n'
            "  <script>x</script>\n</step>")
PYTHON_CELLS = [("from os import pa", 17), ("pri", 3), ("x = [1, 2]\nx.app", 16)]


# -- in an IPython shell -------------------------------------------------------------------


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    yield ip
    if "WomlMagics" in ip.magics_manager.registry:
        ip.run_line_magic("unload_ext", "woml_magic")
    InteractiveShell.clear_instance()


def completions(ip: InteractiveShell, code: str, cursor: int) -> list[tuple[str, str, int]]:
    with provisionalcompleter():
        return [(c.text, str(c.type), c.start) for c in ip.Completer.completions(code, cursor)]


def python_completions(ip: InteractiveShell) -> list[list[tuple[str, int, int]]]:
    """What IPython completes in Python cells: texts and spans (Jedi computes a type
    only within its time budget, so types differ between a cold and a warm Jedi)."""
    with provisionalcompleter():
        return [[(c.text, c.start, c.end) for c in ip.Completer.completions(code, cursor)]
                for code, cursor in PYTHON_CELLS]


def test_the_matcher_completes_woml_cells_and_leaves_python_alone(
        shell: InteractiveShell) -> None:
    before = python_completions(shell)
    shell.run_line_magic("load_ext", "woml_magic")
    cell = '%%woml\n<step id="a" retry-b'
    assert completions(shell, cell, len(cell)) == [("retry-backoff", "attribute", 20)]
    cell = '%%woml\n<step id="a"><script>return services.'
    assert completions(shell, cell, len(cell)) == [
        ("sleep", "function", len(cell)), ("http", "module", len(cell)),
        ("secret", "function", len(cell))]
    assert python_completions(shell) == before


def test_unloading_removes_the_matcher(shell: InteractiveShell) -> None:
    shell.run_line_magic("load_ext", "woml_magic")
    magics = shell.magics_manager.registry["WomlMagics"]
    assert isinstance(magics, WomlMagics)
    assert len(shell.Completer.custom_matchers) == 1
    shell.run_line_magic("unload_ext", "woml_magic")
    assert shell.Completer.custom_matchers == []
    cell = '%%woml\n<step id="a" retry-b'
    assert ("retry-backoff", "attribute", 20) not in completions(shell, cell, len(cell))


def test_help_without_a_kernel_is_the_editors_own(shell: InteractiveShell) -> None:
    shell.run_line_magic("load_ext", "woml_magic")
    magics = shell.magics_manager.registry["WomlMagics"]
    assert magics.editor is not None
    reply = magics.editor.inspect_reply("%%woml --simulate\n", 3)
    assert reply["found"]
    usage = reply["data"]["text/plain"]
    assert usage.startswith("  %%woml [--clock {real,simulated}] [--simulate]")
    assert "--engine {local,temporal}" in usage
    assert "Run the WOML document in this cell" in usage


# -- in a real kernel -----------------------------------------------------------------------


class Kernel:
    """A kernel as a front end talks to it: requests on shell, comm answers on iopub."""

    def __init__(self, cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel

        env = dict(os.environ)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                     "IPYTHONDIR"):
            (cwd / name.lower()).mkdir(exist_ok=True)
            env[name] = str(cwd / name.lower())
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        env["WOML_TEST_KEY"] = "not-a-real-key"
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env)

    def execute(self, code: str) -> None:
        reply = self.kc.execute_interactive(code, timeout=60, output_hook=lambda _m: None)
        assert reply["content"]["status"] == "ok", reply["content"]

    def complete(self, code: str, cursor: int | None = None) -> dict[str, Any]:
        reply = self.kc.complete(code, len(code) if cursor is None else cursor, reply=True,
                                 timeout=30)
        content: dict[str, Any] = reply["content"]
        return content

    def inspect(self, code: str, cursor: int) -> dict[str, Any]:
        reply = self.kc.inspect(code, cursor, reply=True, timeout=30)
        content: dict[str, Any] = reply["content"]
        return content

    def comm_open(self, target: str) -> str:
        comm_id = uuid.uuid4().hex
        self.kc.shell_channel.send(self.kc.session.msg(
            "comm_open", {"comm_id": comm_id, "target_name": target, "data": {}}))
        return comm_id

    def comm_send(self, comm_id: str, data: dict[str, Any], timeout: float = 30) -> Any:
        """Send ``data`` on the comm and return the kernel's answer on it."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got = self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            if (got["msg_type"] == "comm_msg" and got["content"]["comm_id"] == comm_id
                    and got["parent_header"].get("msg_id") == msg["header"]["msg_id"]):
                return got["content"]["data"]
        raise AssertionError(f"no answer on comm {comm_id} within {timeout}s")

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, dict[str, Any]]]:
    """A kernel with the extension loaded, and what Python cells gave before loading it."""
    k = Kernel(tmp_path_factory.mktemp("editor-kernel"))
    try:
        before = {"complete": python_replies(k), "inspect": k.inspect("print(1)", 3)}
        k.execute("%load_ext woml_magic\n%config Woml.secrets = ['WOML_TEST_KEY']")
        yield k, before
    finally:
        k.close()


def python_replies(k: Kernel) -> list[dict[str, Any]]:
    """The kernel's complete replies for Python cells, without the types and signatures
    Jedi computes only within its time budget."""
    replies = [k.complete(code, cursor) for code, cursor in PYTHON_CELLS]
    for reply in replies:
        for item in reply["metadata"].get("_jupyter_types_experimental", ()):
            item.pop("type", None)
            item.pop("signature", None)
    return replies


def kinds(content: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["text"], m["type"]) for m in content["metadata"]["_jupyter_types_experimental"]]


@pytest.mark.kernel
@pytest.mark.parametrize(("cell", "replaced", "expected"), [
    ('%%woml --simulate\n<step id="charge" retry-b', "retry-b", [("retry-backoff", "attribute")]),
    ("%%woml --cl", "--cl", [("--clock", "option"), ("--clients", "option")]),
    ("%%woml --clock ", "", [("real", "value"), ("simulated", "value")]),
    ('%%woml\n<step id="a"><script>await services.', "",
     [("sleep", "function"), ("http", "module"), ("secret", "function")]),
    ('%%woml\n<step id="a"><script>attempt.', "",
     [("number", "property"), ("maxAttempts", "property"), ("idempotencyKey", "property")]),
    ('%%woml\n<step id="a"><script>await services.http.request({ me', "me", [("method", "key")]),
    ('%%woml\n<step id="a"><script>services.secret("', "", [("WOML_TEST_KEY", "secret")]),
    ('%%woml\n<step id="a" id="ch', "", []),  # nothing to offer: and no Python either
])
def test_complete_request_answers_as_jupyterlab_asks(
        kernel: tuple[Kernel, dict[str, Any]], cell: str, replaced: str,
        expected: list[tuple[str, str]]) -> None:
    k, _ = kernel
    content = k.complete(cell)
    assert content["status"] == "ok"
    assert kinds(content) == expected
    assert content["matches"] == [text for text, _ in expected]
    if expected:
        assert cell[content["cursor_start"] : content["cursor_end"]] == replaced
        assert content["cursor_end"] == len(cell)
        assert all(m["signature"] for m in content["metadata"]["_jupyter_types_experimental"])


@pytest.mark.kernel
def test_a_completion_in_the_middle_of_a_cell_replaces_the_word_there(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    k, _ = kernel
    cell = ('%%woml\n<step id="a" retry-de retry="3">\n  <script>return 1;</script>\n</step>')
    cursor = cell.index("retry-de") + len("retry-de")
    content = k.complete(cell, cursor)
    assert content["matches"] == ["retry-delay"]
    assert (content["cursor_start"], content["cursor_end"]) == (cursor - 8, cursor)


@pytest.mark.kernel
def test_python_cells_complete_and_inspect_exactly_as_before(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    k, before = kernel
    assert python_replies(k) == before["complete"]
    assert k.inspect("print(1)", 3) == before["inspect"]


@pytest.mark.kernel
def test_shift_tab_on_woml_shows_the_cell_magics_usage(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    k, _ = kernel
    content = k.inspect("%%woml --simulate\n<step id=\"a\"><script>1</script></step>", 4)
    assert content["found"]
    text = content["data"]["text/plain"]
    assert text.startswith("  %%woml [--clock {real,simulated}] [--simulate]")
    assert "subcommand" not in text  # not the line magic's docstring


@pytest.mark.kernel
def test_shift_tab_on_an_attribute_shows_its_reference_entry(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    k, _ = kernel
    cell = '%%woml\n<step id="a" retry-backoff="exponential"><script>1</script></step>'
    content = k.inspect(cell, cell.index("backoff"))
    assert content["found"]
    lines = content["data"]["text/plain"].splitlines()
    assert lines[0] == "retry-backoff — attribute (spec §2.2)"
    assert "default: fixed" in lines
    assert 'example: retry-backoff="exponential"' in lines
    cell = '%%woml\n<step id="a"><script>await services.sleep("1s")</script></step>'
    content = k.inspect(cell, cell.index("sleep") + 2)
    assert content["data"]["text/plain"].startswith("services.sleep(duration) — function")
    content = k.inspect('%%woml\n<step id="a"><script>const total = 1;</script></step>', 30)
    assert content == {"status": "ok", "found": False, "data": {}, "metadata": {}}


@pytest.mark.kernel
def test_the_diagnostics_comm_answers_with_the_parsers_error(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    k, _ = kernel
    comm = k.comm_open("woml.diagnostics")
    answer = k.comm_send(comm, {"id": 41, "code": MISSPELT})
    assert answer == {"id": 41, "diagnostics": [{
        "line": 2, "column": 19, "endLine": 2, "endColumn": 34, "severity": "error",
        "message": "unknown attribute `retry-delay-max` on <step id=\"charge\">; did you "
                   "mean `retry-max-delay`?",
        "source": "parser"}]}
    fixed = MISSPELT.replace("retry-delay-max", "retry-max-delay")
    assert k.comm_send(comm, {"id": 42, "code": fixed}) == {"id": 42, "diagnostics": []}


@pytest.mark.kernel
def test_unloading_gives_the_kernel_back_its_own_handlers(
        kernel: tuple[Kernel, dict[str, Any]]) -> None:
    """Last in this module: the kernel answers %%woml cells as IPython does again."""
    k, _ = kernel
    k.execute("%unload_ext woml_magic")
    k.execute("assert 'do_inspect' not in vars(get_ipython().kernel)\n"
              "assert 'do_complete' not in vars(get_ipython().kernel)\n"
              "assert 'woml.diagnostics' not in get_ipython().kernel.comm_manager.targets\n"
              "assert get_ipython().Completer.custom_matchers == []")
    content = k.complete('%%woml\n<step id="a" retry-b')
    assert "retry-backoff" not in content["matches"]
