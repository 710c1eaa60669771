"""Diagnostics of a ``%%woml`` cell as it is typed (spec §2.5, §6.4, §10.3).

The parser's error and the key linter's warnings, at their line and column in the
cell as the editor shows it (the ``%%woml`` line is line 1), with the message the
user sees when the cell runs — checked against the magic running the same cell in a
real IPython shell.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

from woml_magic.editing.diagnostics import Diagnostic, diagnostics
from woml_magic.errors import WomlSyntaxError
from woml_magic.magic.editor import Editor

MISSPELT = ('%%woml --simulate\n<step id="charge" retry-delay-max="3s">\n'
            "  <script>x</script>\n</step>")
PER_ATTEMPT = """%%woml --simulate
<step id="charge" retry="2">
  <script>
    if (context.payload) {
      await services.http.request({ method: "POST", url: "https://api.example.com/c",
        idempotency: { header: "Idempotency-Key", value: `c-${attempt.number}` } },
        { name: "create-charge" });
    }
    return 1;
  </script>
</step>"""


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "woml_magic")
    ip.run_line_magic("config", "Woml.journal = ':memory:'")
    yield ip
    ip.run_line_magic("unload_ext", "woml_magic")
    InteractiveShell.clear_instance()


def run_cell(ip: InteractiveShell, cell: str) -> None:
    line, _, body = cell.partition("\n")
    ip.run_cell_magic("woml", line.removeprefix("%%woml").strip(), body)


def test_a_misspelt_attribute_is_an_error_at_its_name_with_the_did_you_mean() -> None:
    assert diagnostics(MISSPELT) == [Diagnostic(
        line=2, column=19, end_line=2, end_column=34, severity="error",
        message="unknown attribute `retry-delay-max` on <step id=\"charge\">; did you mean "
                "`retry-max-delay`?",
        source="parser")]


def test_the_error_is_the_one_running_the_cell_raises(shell: InteractiveShell) -> None:
    with pytest.raises(WomlSyntaxError) as raised:
        run_cell(shell, MISSPELT)
    (found,) = diagnostics(MISSPELT)
    assert (found.line, found.column, found.message) == (
        raised.value.line, raised.value.column, raised.value.message)


def test_a_per_attempt_key_is_the_warning_running_the_cell_shows(shell: InteractiveShell) -> None:
    (found,) = diagnostics(PER_ATTEMPT)
    assert (found.severity, found.source) == ("warning", "lint")
    assert (found.line, found.column, found.end_line) == (6, 63, 6)
    assert PER_ATTEMPT.splitlines()[5][found.column - 1 : found.end_column - 1] == (  # type: ignore[operator]
        "attempt.number")
    with capture_output() as shown:
        run_cell(shell, PER_ATTEMPT)
    lines = "\n".join(o.data["text/plain"] for o in shown.outputs)
    assert f"line {found.line}: {found.message}" in lines.splitlines()


@pytest.mark.parametrize("cell", [
    "print(1)",  # not a %%woml cell
    '%%woml\n<step id="a"><script>return 1;</script></step>',
    # The parser does not compile scripts: a JavaScript error is the run's check.
    '%%woml\n<step id="a"><script>return (;</script></step>',
    '%%woml\n<step id="a"><script>while (true) {}</script></step>',
])
def test_a_clean_document_has_no_diagnostics(cell: str) -> None:
    assert diagnostics(cell) == []


def test_an_empty_cell_says_what_a_cell_holds() -> None:
    (found,) = diagnostics("%%woml --simulate\n")
    assert found.message.startswith("the cell has no <step>")
    assert (found.line, found.column, found.severity) == (2, 1, "error")
    # Only the %%woml line: the editor has no line 2, so the end of line 1.
    assert diagnostics("%%woml --simulate")[0].message == found.message
    assert (diagnostics("%%woml --simulate")[0].line,
            diagnostics("%%woml --simulate")[0].column) == (1, 18)


def test_a_cell_over_the_size_limit_is_that_one_error_and_fast() -> None:
    cell = "%%woml\n" + '<step id="a"><script>' + "x" * (2 << 20) + "</script></step>"
    started = time.perf_counter()
    found = diagnostics(cell)
    assert time.perf_counter() - started < 0.5
    assert found == [Diagnostic(2, 1, None, None, "error",
                                "the document is 2,097,189 bytes of UTF-8, over the limit of "
                                "1 MiB (1,048,576 bytes)", "parser")]


def test_the_linter_reads_steps_in_order_within_its_budget() -> None:
    """A cell of many steps keeps the kernel free: with no budget left after the first
    step, only the first step's warnings come back (running the cell lints them all)."""
    second = PER_ATTEMPT.replace('id="charge"', 'id="refund"').split("\n", 1)[1]
    cell = f"{PER_ATTEMPT}\n{second}"
    assert [d.line for d in diagnostics(cell)] == [6, 16]
    assert [d.line for d in diagnostics(cell, lint_budget_s=0)] == [6]


def test_the_comms_answer_carries_the_id_and_the_json_fields() -> None:
    answer = Editor.answer({"id": 3, "code": MISSPELT})
    assert answer == {"id": 3, "diagnostics": [{
        "line": 2, "column": 19, "endLine": 2, "endColumn": 34, "severity": "error",
        "message": diagnostics(MISSPELT)[0].message, "source": "parser"}]}


@pytest.mark.parametrize(("data", "error"), [
    ("not an object", "a message is an object"),
    ({"id": 4}, "code must be the cell's text, got NoneType"),
    ({"id": 5, "code": 12}, "code must be the cell's text, got int"),
])
def test_a_message_the_kernel_cannot_read_gets_an_error_not_an_exception(
        data: object, error: str) -> None:
    answer = Editor.answer(data)
    assert answer["diagnostics"] == []
    assert answer["error"].startswith(error)
    assert answer["id"] == (data.get("id") if isinstance(data, dict) else None)
