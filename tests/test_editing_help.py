"""Help at a cursor in a ``%%woml`` cell, and the reference entries it shows (spec §6.4).

``help_at`` is what Shift+Tab and ``?`` show: the cell magic's usage on ``%%woml``, a
flag's help on a flag, the reference entry of an element, attribute or script name.
The entries must say what ``docs/reference.md`` says, and name what the parser, the
service registry, the request parser and the script worker really have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.editing import entries
from woml_magic.editing.flags import flags_of
from woml_magic.editing.help import help_at
from woml_magic.magic import WomlMagics

FLAGS = flags_of(WomlMagics.woml_cell.parser)
USAGE = "%%woml [--clock {real,simulated}] …"
REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
CELL = ('%%woml --clock simulated\n<step id="charge" retry="3" retry-backoff="exponential">\n'
        "  <script>\n    await services.http.request({ url: context.payload.url,\n"
        "      idempotency: { header: \"Idempotency-Key\", value: attempt.idempotencyKey } },\n"
        '      { name: "create-charge" });\n  </script>\n</step>')


def help_on(word: str, offset: int = 0, nth: int = 0) -> str | None:
    """The help with the cursor ``offset`` characters into the ``nth`` ``word``."""
    at = -1
    for _ in range(nth + 1):
        at = CELL.index(word, at + 1)
    return help_at(CELL, at + offset, usage=USAGE, flags=FLAGS)


def test_on_woml_the_help_is_the_cell_magics_usage() -> None:
    assert help_on("%%woml", 3) == USAGE
    assert help_on("%%woml", 0) == USAGE


def test_on_a_flag_the_help_is_that_flags_usage_and_help() -> None:
    assert help_on("--clock", 4) == (
        "--clock real|simulated\n\nThe run's clock (spec §5.1); default Woml.clock, itself 'real'.")
    assert help_on("simulated", 2) == help_on("--clock", 4)  # on its value


def test_on_retry_backoff_the_help_is_its_reference_entry_with_default_and_example() -> None:
    text = help_on("retry-backoff", 6)
    assert text is not None
    assert text.splitlines()[0] == "retry-backoff — attribute (spec §2.2)"
    assert "default: fixed" in text.splitlines()
    assert 'example: retry-backoff="exponential"' in text.splitlines()
    assert help_on("exponential", 3) == text  # on its value
    assert help_on("charge", 2).startswith("id — attribute")  # type: ignore[union-attr]
    assert help_on("retry-backoff", 0) == text  # at the start of the name
    assert help_on("retry-backoff", 13) == text  # at its end (as completion resolves it)


@pytest.mark.parametrize(("word", "offset", "first_line"), [
    ("<step", 2, "<step> — element (spec §2.2)"),
    ("<script>", 3, "<script> — element (spec §2.3)"),
    ("</step>", 3, "<step> — element (spec §2.2)"),
    ('retry="3"', 2, "retry — attribute (spec §2.2)"),
    ("services.http", 3, "services — variable (spec §4)"),
    ("http.request", 1, "services.http — module (spec §4.1)"),
    ("request(", 3, "services.http.request(request, options) — function (spec §4.1)"),
    ("context.payload", 9, "context.payload — property (spec §3.6)"),
    ("idempotencyKey", 4, "attempt.idempotencyKey — property (spec §3.5)"),
    ("url:", 1, "request.url — key (spec §4.1)"),
    ("header:", 2, "idempotency.header — key (spec §4.1)"),
    ("name:", 2, "options.name — key (spec §4.3)"),
])
def test_on_a_woml_name_the_help_is_its_entry(word: str, offset: int, first_line: str) -> None:
    text = help_on(word, offset)
    assert text is not None, word
    assert text.splitlines()[0] == first_line


@pytest.mark.parametrize(("cell", "cursor"), [
    ("print(1)", 3),  # not a %%woml cell: IPython's inspection applies
    ('%%woml\n<step id="a"><script>1</script></step>\n  tail', 49),  # between elements
    ("%%woml\n<step id=\"a\"><script>const total = 1;</script></step>", 32),
    ("%%woml\n<!-- retry-backoff -->", 12),
])
def test_elsewhere_there_is_no_help(cell: str, cursor: int) -> None:
    assert help_at(cell, cursor, usage=USAGE, flags=FLAGS) is None


def _reference_table() -> dict[str, tuple[str, str]]:
    """docs/reference.md's ``<step>`` attribute table: name → (default, example)."""
    text = REFERENCE.read_text(encoding="utf-8")
    section = text.split("## `<step>` attributes", 1)[1].split("\n\n", 2)[1]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = (cells[2].strip("`"), cells[4].strip("`"))
    return rows


def test_the_attribute_entries_say_what_the_reference_says() -> None:
    table = _reference_table()
    step = entries.attributes("step")
    assert list(step) == list(table)
    for name, (default, example) in table.items():
        assert (step[name].default, step[name].example) == (default, example), name


def test_every_name_the_package_declares_has_an_entry() -> None:
    assert entries.undescribed() == []


def test_the_script_names_are_what_a_script_really_sees() -> None:
    """spec §3.4, §3.6, §4: the worker's objects, read by a real script."""
    script = ("return {attempt: Object.keys(attempt), context: Object.keys(context), "
              "'context.run': Object.keys(context.run), services: Object.keys(services), "
              "'services.http': Object.keys(services.http), console: Object.keys(console)};")
    run = wm.run(f'<step id="a"><script>{script}</script></step>', clock="simulated",
                 journal=":memory:")
    seen = run.steps["a"].result
    for dotted, names in seen.items():
        assert [e.name.rsplit(".", 1)[1] for e in entries.members(dotted)] == names, dotted
    assert sorted(e.name for e in entries.globals_()) == sorted(n for n in seen if "." not in n)
