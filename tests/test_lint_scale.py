"""The key linter's cost (issue 24 item 5; spec §3.5, §10.3): linear in the script's
size for any nesting, and a cell whose scripts are larger than the linter reads gets a
note at once instead of a wait.

Before: 10,000 nested ``() =>`` (60 KB) took 32.9 s to lint, ×3.7 per doubling, 2,500
of them 3.7 s (an expression's end was searched from every arrow to the end of the
script, and every binding looked up in a list of all bindings of its name); 20,000 `(`
then 20,000 `]` took 56 s (each `]` searched every open `(` for a `[`). ``bench/lint.py``
has the figures; the bounds here are loose enough for a shared machine and far below
the old times.
"""

from __future__ import annotations

import time

import pytest

from woml_magic.lint import MAX_LINT_CHARS, NOT_LINTED, PER_ATTEMPT_KEY, format_warning, lint
from woml_magic.parse import parse

CALL = (
    'await services.http.request({method: "POST", url: "http://127.0.0.1:9/c", '
    'idempotency: {header: "Idempotency-Key", value: k}}, {name: "c"});\n'
)


def seconds_to_lint(script: str) -> tuple[float, list[str]]:
    workflow = parse(f'<step id="s"><script>{script}</script></step>')
    start = time.perf_counter()
    found = lint(workflow)
    return time.perf_counter() - start, [w.code for w in found]


@pytest.mark.parametrize("head", ["() => ", "(a) => ", "f(", "{a: "])
def test_eight_thousand_nested_levels_lint_in_well_under_the_old_times(head: str) -> None:
    closer = {"f(": ")", "{a: ": "}"}.get(head, "")
    script = "const k = attempt.number + " + head * 8_000 + "1" + closer * 8_000 + ";\n" + CALL
    assert len(script) <= MAX_LINT_CHARS
    took, codes = seconds_to_lint(script)
    assert codes == [PER_ATTEMPT_KEY]  # still read to the end: the key is per attempt
    assert took < 5.0, f"{took:.1f} s for {len(script):,} characters"


def test_scripts_over_the_limit_get_one_note_and_are_not_read() -> None:
    # The first step fits and is linted; the second passes the limit: it and the third
    # get one note, on the second's script, and nothing of them is read.
    keyed = "const k = Date.now();\n" + CALL
    huge = "const k = " + "() => " * ((MAX_LINT_CHARS + 1) // 6) + "1;\n" + CALL
    doc = (
        f'<step id="a"><script>{keyed}</script></step>\n'
        f'<step id="b"><script>{huge}</script></step>\n'
        f'<step id="c"><script>{keyed}</script></step>'
    )
    workflow = parse(doc)
    start = time.perf_counter()
    found = lint(workflow)
    assert time.perf_counter() - start < 0.5
    assert [(w.step_id, w.code) for w in found] == [("a", PER_ATTEMPT_KEY), ("b", NOT_LINTED)]
    note = found[1]
    assert (note.line, note.column) == (
        workflow.steps[1].script_line,
        workflow.steps[1].script_column,
    )
    total = sum(len(s.script) for s in workflow.steps)
    assert format_warning(note) == (
        f"line {note.line}: step 'b': this step's script and the 1 after it were not checked for "
        f"idempotency keys: the cell's scripts are too large to lint ({total:,} "
        f"characters; the linter reads up to {MAX_LINT_CHARS:,} per cell)"
    )


def test_a_script_just_under_the_limit_is_linted() -> None:
    script = "const k = Math.random();\n" + CALL
    script += "//" + "x" * (MAX_LINT_CHARS - len(script) - 2)
    assert len(script) == MAX_LINT_CHARS
    assert seconds_to_lint(script)[1] == [PER_ATTEMPT_KEY]


def test_stray_closers_are_linear_too() -> None:
    # 20,000 `(` then 20,000 `]`: each `]` looked for its `[` through every open `(`
    # (56 s before); now a closer finds its opener, or that there is none, at once.
    script = "(" * 20_000 + "]" * 20_000 + "\nconst k = Date.now();\n" + CALL
    took, codes = seconds_to_lint(script)
    assert took < 5.0, f"{took:.1f} s"
    assert codes == [PER_ATTEMPT_KEY]  # and the script is still read to its end


def test_a_name_declared_in_thousands_of_blocks_resolves_to_the_right_one() -> None:
    # Each block's `k` is its own; the request reads the outer one, built per attempt.
    script = (
        "{ let k = 1; }\n" * 2500
        + "let k = attempt.number;\n"
        + "{ let k = 2; k = k + 1; }\n" * 600
        + CALL
    )
    took, codes = seconds_to_lint(script)
    assert codes == [PER_ATTEMPT_KEY]
    assert took < 5.0, f"{took:.1f} s"
