"""The idempotency-key linter (issue 15 item 4; spec §3.4, §3.5, §4.1-§4.3).

A key built from ``attempt.number``, ``Date.now()``, ``new Date()``, ``Math.random()`` or
``crypto.randomUUID()`` is new on every attempt, so a retry cannot be recognised as a
repeat: ``per-attempt-key``. A named ``POST`` without ``idempotency`` fails closed when
its response is lost: ``unkeyed-post``. Warnings stand on the cell's line and column.

The corpus (``tests/lint_corpus/*.woml``) holds whole ``%%woml`` cells; a JavaScript
comment ``// expect: CODE …`` marks the line where each warning must stand, and a
document without markers must give none. The teaching notebooks' cells are linted as
the magic would lint them.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest
import quickjs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from woml_magic.lint import (
    PER_ATTEMPT_KEY,
    UNKEYED_POST,
    LintWarning,
    format_warning,
    lint,
)
from woml_magic.model import Step, Workflow
from woml_magic.parse import parse

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "lint_corpus").glob("*.woml"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0[1-4]-*.py"))
EXPECT = re.compile(r"// expect: (.*)$")

FAST = settings(
    deadline=None,
    database=None,  # no .hypothesis/ directory in the checkout
    derandomize=True,  # the same examples on every run: CI must not turn red at random
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def cell_workflow(cell: str) -> Workflow:
    """Parse a whole ``%%woml`` cell as the magic does: lines count the magic line."""
    head, body = cell.split("\n", 1)
    assert head.startswith("%%woml"), head
    return parse(body, line_offset=1)


def expected(cell: str) -> Counter[tuple[int, str]]:
    found: Counter[tuple[int, str]] = Counter()
    for number, line in enumerate(cell.split("\n"), start=1):
        if m := EXPECT.search(line):
            found.update((number, code) for code in m.group(1).split())
    return found


def lint_script(script: str, step_id: str = "s") -> list[LintWarning]:
    """Lint one script as a cell would hold it: its first line is the cell's line 3."""
    return lint(parse(f'<step id="{step_id}"><script>\n{script}\n</script></step>',
                      line_offset=1))


def codes(script: str) -> list[str]:
    return [w.code for w in lint_script(script)]


# --- the corpus ---------------------------------------------------------------------------

def test_the_corpus_covers_bad_and_good_scripts() -> None:
    bad = [p for p in CORPUS if expected(p.read_text(encoding="utf-8"))]
    good = [p for p in CORPUS if not expected(p.read_text(encoding="utf-8"))]
    assert len(CORPUS) >= 20
    assert len(bad) >= 20
    assert len(good) >= 15
    # Every file says what it shows, and its name says which kind it is.
    for path in CORPUS:
        assert path.name.startswith("bad-" if path in bad else "good-"), path.name
        assert "<!--" in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_warnings_stand_on_the_marked_lines(path: Path) -> None:
    cell = path.read_text(encoding="utf-8")
    warnings = lint(cell_workflow(cell))
    assert Counter((w.line, w.code) for w in warnings) == expected(cell), \
        "\n".join(format_warning(w) for w in warnings)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_scripts_are_real_javascript(path: Path) -> None:
    """The corpus is what a user could run: every script compiles as the body of the
    async function the worker wraps it in (spec §4)."""
    context = quickjs.Context()
    for step in cell_workflow(path.read_text(encoding="utf-8")).steps:
        context.eval(f"(async function (context, attempt, services, console) {{\n"
                     f"{step.script}\n}})")


def test_the_corpus_flags_each_per_attempt_source_and_the_unkeyed_post() -> None:
    messages = [w.message for p in CORPUS
                for w in lint(cell_workflow(p.read_text(encoding="utf-8")))]
    for source in ("attempt.number", "Date.now()", "new Date()", "Math.random()",
                   "crypto.randomUUID()", "Date()"):
        assert any(f"built from {source}," in m or f"built here from {source}," in m
                   for m in messages), source
    assert any(m.startswith("call 'create-charge' is a POST") for m in messages)


# --- rules not in the corpus, one line each -----------------------------------------------

KEY = 'await services.http.request({{ method: "PUT", url: "https://a.example/x", ' \
      'idempotency: {{ header: "Idempotency-Key", value: {value} }} }});'


@pytest.mark.parametrize(("script", "want"), [
    # the five sources and their spellings
    (KEY.format(value="`${attempt.number}`"), [PER_ATTEMPT_KEY]),
    (KEY.format(value="attempt?.number + ''"), [PER_ATTEMPT_KEY]),
    (KEY.format(value="globalThis.crypto.randomUUID()"), [PER_ATTEMPT_KEY]),
    (KEY.format(value="`${new Date().valueOf()}`"), [PER_ATTEMPT_KEY]),
    (KEY.format(value="JSON.stringify({ n: attempt.number })"), [PER_ATTEMPT_KEY]),
    # two constructs, two warnings
    (KEY.format(value="`${Date.now()}-${Math.random()}`"), [PER_ATTEMPT_KEY] * 2),
    # aliases
    ("const { http: h } = services;\n"
     "await h.request({ url: 'u', idempotency: { header: 'K', value: `${Date.now()}` } });",
     [PER_ATTEMPT_KEY]),
    ("const s = services; const h = s.http;\n"
     "await h.request({ url: 'u', idempotency: { header: 'K', value: `${Date.now()}` } });",
     [PER_ATTEMPT_KEY]),
    ("const { http: { request: send } } = services;\n"
     "await send({ url: 'u', idempotency: { header: 'K', value: `${Date.now()}` } });",
     [PER_ATTEMPT_KEY]),
    ("const a = attempt;\n" + KEY.format(value="`${a.number}`"), [PER_ATTEMPT_KEY]),
    ("const now = Date.now;\n" + KEY.format(value="`${now()}`"), [PER_ATTEMPT_KEY]),
    # a `var` in a block is visible after it (function scope)
    ("if (context.payload) { var k = Math.random(); }\n" + KEY.format(value="`${k}`"),
     [PER_ATTEMPT_KEY]),
    # a variable holding the whole request
    ("const req = { url: 'u', idempotency: { header: 'K', value: `${Date.now()}` } };\n"
     "await services.http.request(req);", [PER_ATTEMPT_KEY]),
    # a key written inside a template substitution of another call's url
    ("await services.http.request({ url: `u${(await services.http.request({ url: 'v', "
     "idempotency: { header: 'K', value: `${Math.random()}` } })).data}` });",
     [PER_ATTEMPT_KEY]),
    # unkeyed: null and undefined count as absent (services/http_request.py)
    ("await services.http.request({ method: 'POST', url: 'u', idempotency: null }, "
     "{ name: 'n' });", [UNKEYED_POST]),
    ("const name = 'n';\n"
     "await services.http.request({ method: `POST`, url: 'u' }, { name });", [UNKEYED_POST]),
    ("const M = 'POST';\n"
     "await services.http.request({ method: M, url: 'u' }, { name: 'n' });", [UNKEYED_POST]),
    # --- no warning ---
    (KEY.format(value="attempt.idempotencyKey"), []),
    (KEY.format(value="`${attempt.idempotencyKey}-${attempt.maxAttempts}`"), []),
    (KEY.format(value="String(context.payload.id)"), []),
    (KEY.format(value="await services.secret('KEY')"), []),
    # a local Date is not the global one
    ("const Date = { now: () => context.payload.at };\n" + KEY.format(value="`${Date.now()}`"),
     []),
    # the key written after the call does not reach it
    ("let k = attempt.idempotencyKey;\n" + KEY.format(value="k") + "\nk = Date.now();", []),
    # a write in a function that may never be called does not reach the call
    ("let k = attempt.idempotencyKey;\nconst reset = () => { k = Date.now(); };\n"
     + KEY.format(value="k"), []),
    ("let k = attempt.idempotencyKey;\nconst reset = () => k = Date.now();\n"
     + KEY.format(value="k"), []),
    # ... but one in the function that makes the call does
    ("async function go() {\n  let k = attempt.idempotencyKey;\n  k = `${Date.now()}`;\n  "
     + KEY.format(value="k") + "\n}\nawait go();", [PER_ATTEMPT_KEY]),
    # a parameter shadows an outer per-attempt binding
    ("const k = Date.now();\nasync function go(k) {\n  " + KEY.format(value="k")
     + "\n}\nawait go(context.payload.id);", []),
    # a member of the payload named `number` is not attempt.number
    ("const { number } = context.payload;\n" + KEY.format(value="`${number}`"), []),
    # a destructuring assignment replaces what it cannot see
    ("let k = Date.now();\n({ k } = context.payload);\n" + KEY.format(value="k"), []),
    # a key object completed later: its value is not known
    ("const idem = { header: 'K', value: `${Date.now()}` };\n"
     "idem.value = attempt.idempotencyKey;\n"
     "await services.http.request({ url: 'u', idempotency: idem });", []),
    # a computed property or an unknown spread may carry the key or another method
    ("await services.http.request({ method: 'POST', url: 'u', ...context.payload.extra }, "
     "{ name: 'n' });", []),
    ("const k = 'idempotency';\n"
     "await services.http.request({ method: 'POST', url: 'u', [k]: context.payload.idem }, "
     "{ name: 'n' });", []),
    ("await services.http.request({ method: 'POST', url: 'u' }, context.payload.options);", []),
    ("await services.http.request({ method: context.payload.method, url: 'u' }, "
     "{ name: 'n' });", []),
    ("await services.http.request({ method: 'POST', url: 'u', headers: context.payload.h }, "
     "{ name: 'n' });", [UNKEYED_POST]),  # request.idempotency is what WOML reads (§4.2)
    ("await services.http.request({ method: 'POST', url: 'u', headers: { ...context.h } }, "
     "{ name: 'n' });", []),
    # not services.http
    ("const http = { request: async () => null };\n"
     "await http.request({ method: 'POST', url: 'u' }, { name: 'n' });", []),
    ("await context.services.http.request({ method: 'POST', url: 'u' }, { name: 'n' });", []),
    ("await services.http.requests({ method: 'POST', url: 'u' }, { name: 'n' });", []),
])
def test_rules(script: str, want: list[str]) -> None:
    assert codes(script) == want


# --- positions, messages, the API ---------------------------------------------------------

def test_line_and_column_are_the_cells() -> None:
    """spec §2.3: the %%woml line is line 1; the script's first line starts at
    ``script_column``, later lines at column 1."""
    cell = ('%%woml\n'
            '<step id="charge" retry="3"><script>await services.http.request({ url: "u", '
            'idempotency: { header: "K", value: `${Date.now()}` } });\n'
            '  const h = services.http;\n'
            '  await h.request({ url: "u", idempotency: { header: "K", value: '
            'attempt.number } });\n'
            '</script></step>\n')
    lines = cell.split("\n")
    warnings = lint(cell_workflow(cell))
    assert [(w.line, w.column) for w in warnings] == [
        (2, lines[1].index("Date.now") + 1),
        (4, lines[3].index("attempt.number") + 1),
    ]
    assert {w.step_id for w in warnings} == {"charge"}


def test_an_unkeyed_post_stands_where_the_call_starts() -> None:
    (w,) = lint_script("  const res = await services.http.request({ method: 'POST', url: 'u' },\n"
                       "    { name: 'create-charge' });")
    assert (w.line, w.column, w.code) == (3, 21, UNKEYED_POST)


def test_format_warning() -> None:
    w = LintWarning("charge", 7, 3, PER_ATTEMPT_KEY, "the idempotency key is bad")
    assert format_warning(w) == "line 7: step 'charge': the idempotency key is bad"


def test_a_warning_is_a_frozen_record() -> None:
    w = LintWarning("charge", 7, 3, PER_ATTEMPT_KEY, "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.line = 8  # type: ignore[misc]


def test_messages_say_what_is_wrong_and_what_to_do() -> None:
    direct = lint_script(KEY.format(value="`${Date.now()}`"))[0].message
    assert direct == (
        "the idempotency key of this request is built from Date.now(), which changes every "
        "attempt, so a retry sends a new key and the server cannot recognise the repeat; use "
        "attempt.idempotencyKey (the same for every attempt of this step), with a fixed suffix "
        "if the step makes several calls")
    (via,) = lint_script("const stamp = Math.random();\nconst key = `k${stamp}`;\n"
                         "await services.http.request({ url: 'u', idempotency: "
                         "{ header: 'K', value: key } }, { name: 'c' });")
    assert (via.line, via.column) == (3, 15)
    assert via.message.startswith("the idempotency key of call 'c' on line 5 comes from `key`, "
                                  "built here from Math.random(), which changes every attempt")
    (post,) = lint_script("await services.http.request({ method: 'POST', url: 'u' }, "
                          "{ name: 'create-charge' });")
    assert post.message == (
        "call 'create-charge' is a POST without request.idempotency, so if its response is "
        "lost the step fails closed instead of retrying (a repeat could charge or create "
        "twice); add idempotency: { header: \"Idempotency-Key\", value: "
        "attempt.idempotencyKey } if the API accepts keys")
    for m in (direct, via.message, post.message):  # one sentence each
        assert ". " not in m.replace("e.g. ", "")
        assert not m.endswith(".")


def test_warnings_come_in_step_order_then_by_position() -> None:
    bad = ("<script>await services.http.request({ url: 'u', idempotency: "
           "{ header: 'K', value: `${Math.random()}${Date.now()}` } });</script>")
    doc = f'<workflow id="w"><step id="b">{bad}</step><step id="a">{bad}</step></workflow>'
    columns = [m.start() + 1 for m in re.finditer(r"Math\.random|Date\.now", doc)]
    assert [(w.step_id, w.line, w.column) for w in lint(parse(doc))] == [
        ("b", 1, columns[0]), ("b", 1, columns[1]), ("a", 1, columns[2]), ("a", 1, columns[3])]


def test_two_hundred_steps() -> None:
    steps = "\n".join(
        f'<step id="s{i}" retry="3"><script>\n'
        f'  const k = {"attempt.idempotencyKey" if i % 2 else "`${attempt.number}`"};\n'
        "  await services.http.request({ method: 'POST', url: 'u',\n"
        "    idempotency: { header: 'K', value: k } }, { name: 'c' });\n"
        "</script></step>" for i in range(200))
    warnings = lint(parse(f'<workflow id="w">\n{steps}\n</workflow>'))
    assert [w.step_id for w in warnings] == [f"s{i}" for i in range(0, 200, 2)]
    assert {w.line % 5 for w in warnings} == {3}  # the `const k` line of each step


# --- the teaching notebooks ---------------------------------------------------------------

#: Teaching cells that warn on purpose, by notebook and ``--out`` name. Notebook 03's
#: ``no_key`` cell sends a named POST without a key to show the duplicate-charge lesson
#: (the ambiguity guard fails it closed), so ``unkeyed-post`` is right there.
TEACHING_WARNINGS: dict[tuple[str, str], list[tuple[int, str]]] = {
    ("03-idempotency-keys.py", "no_key"): [(4, UNKEYED_POST)],
}


def woml_cells() -> list[tuple[str, str, str]]:
    """``(notebook, --out name, cell)`` for every ``%%woml`` cell of the jupytext sources."""
    cells = []
    for path in NOTEBOOKS:
        for cell in re.split(r"^# %%.*\n", path.read_text(encoding="utf-8"), flags=re.M):
            if cell.startswith("%%woml"):
                out = re.search(r"--out (\w+)", cell.split("\n", 1)[0])
                cells.append((path.name, out.group(1) if out else "", cell.rstrip("\n") + "\n"))
    return cells


def test_every_teaching_notebook_has_woml_cells() -> None:
    assert {name for name, _, _ in woml_cells()} == {p.name for p in NOTEBOOKS}
    assert len(NOTEBOOKS) == 4


@pytest.mark.parametrize(("notebook", "out", "cell"), woml_cells(),
                         ids=[f"{n[:2]}-{o}" for n, o, _ in woml_cells()])
def test_teaching_notebook_cells(notebook: str, out: str, cell: str) -> None:
    """No teaching notebook shows a warning: a cell that warns on purpose says
    ``--no-lint`` (issue 15: no warning on the teaching notebooks)."""
    warnings = lint(cell_workflow(cell))
    assert [(w.line, w.code) for w in warnings] == TEACHING_WARNINGS.get((notebook, out), [])
    if warnings:
        assert "--no-lint" in cell.split("\n", 1)[0], (notebook, out)


# --- robustness ---------------------------------------------------------------------------

FRAGMENTS = [
    "services.http.request(", "services . http . request (", "http.request(", "request(",
    "const ", "let ", "var ", "function ", "return ", "=>", "async ", "await ", "new ",
    "Date", "Date.now()", "new Date", "Math.random()", "crypto.randomUUID()", "attempt",
    "attempt.number", "attempt.idempotencyKey", "idempotency", "idempotency: ", "value: ",
    "method: 'POST'", "{ name: 'n' }", "name", "key", "k", "=", "+=", "==", ",", ";", ":",
    ".", "?.", "...", "(", ")", "[", "]", "{", "}", "`", "${", "'", '"', "\\", "/", "//",
    "/*", "*/", "/x/g", "\n", " ", "+", "?", "0", "1e3", "for (", "of ", "if (", "catch (",
    "try {", "delete ", "Object.assign(", "headers: ", "'Idempotency-Key': ", "\u2028", "é",
]
SCRIPTS = st.one_of(
    st.text(),
    st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=60)
    .map("".join),
)


def lint_raw(script: str, line: int = 3, column: int = 9) -> list[LintWarning]:
    return lint(Workflow("w", (Step("s", script, script_line=line, script_column=column),)))


@FAST
@given(SCRIPTS)
def test_any_script_text_lints_without_raising(script: str) -> None:
    lines = script.count("\n")
    for w in lint_raw(script):
        assert 3 <= w.line <= 3 + lines
        assert w.column >= 1
        assert w.code in (PER_ATTEMPT_KEY, UNKEYED_POST)


@FAST
@given(st.sampled_from(CORPUS), st.data())
def test_damaged_corpus_scripts_lint_without_raising(path: Path, data: st.DataObject) -> None:
    script = cell_workflow(path.read_text(encoding="utf-8")).steps[-1].script
    at = data.draw(st.integers(0, len(script)))
    cut = data.draw(st.integers(0, 40))
    insert = data.draw(st.lists(st.sampled_from(FRAGMENTS), max_size=4).map("".join))
    lint_raw(script[:at] + insert + script[at + cut:])


@pytest.mark.parametrize("script", [
    "`${" * 5000,
    "(" * 20000 + ")" * 5000,
    "{a:" * 5000,
    "function f(){return " * 2000,
    "x => " * 5000,
    "const {a:" * 3000,
    "const a0 = Date.now();\n" + "".join(f"const a{i} = a{i - 1} + a{i - 1};\n"
                                         for i in range(1, 400))
    + "await services.http.request({ url: 'u', idempotency: { header: 'K', value: a399 } });",
    "await services.http.request({ url: 'u', idempotency: { header: 'K', value: a.b"
    + ".c" * 5000 + " } });",
    "let k = 1;\n" + "k = k + k;\n" * 300
    + "await services.http.request({ url: 'u', idempotency: { header: 'K', value: k } });",
])
def test_pathological_scripts_finish(script: str) -> None:
    lint_raw(script)
