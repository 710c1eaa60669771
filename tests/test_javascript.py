"""The package's one JavaScript lexer (``woml_magic.javascript``; spec §2.3, §4.5).

A ``/`` is a regular expression where ECMAScript expects an operand, a division
elsewhere; the tokens cover the script with only white space between them; the linter
and the catch instrumentation read every corpus script alike; and QuickJS's lines and
columns (LS and PS end a line between tokens, columns count UTF-8 bytes) map back to
the cell's, checked against the engine itself and end to end through a real worker.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import quickjs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from woml_magic.javascript import (
    COMMENT,
    NAME,
    NUM,
    PUNCT,
    REGEX,
    STR,
    TPL,
    Lines,
    engine_line_count,
    tokenize,
    unclosed,
)
from woml_magic.lint import PER_ATTEMPT_KEY, lint
from woml_magic.model import Step, Workflow
from woml_magic.parse import parse
from woml_magic.runtime import AttemptRequest, ScriptWorker
from woml_magic.runtime._instrument import instrument_catches
from woml_magic.runtime.wrapper import wrap

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "lint_corpus").glob("*.woml"))
FAST = settings(
    deadline=None,
    database=None,  # no .hypothesis/ directory in the checkout
    derandomize=True,  # the same examples on every run: CI must not turn red at random
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LS, PS = "\u2028", "\u2029"
BREAKS = ["\n", "\r", "\r\n", LS, PS]


def slashes(src: str) -> list[str]:
    """How each ``/`` of ``src`` outside strings is read: ``regex`` or ``divide``."""
    return [
        "regex" if t.kind == REGEX else "divide"
        for t in tokenize(src)
        if t.kind == REGEX or (t.kind == PUNCT and t.text in ("/", "/="))
    ]


# --- regular expression or division (ECMAScript's InputElementRegExp goal) -------------------


@pytest.mark.parametrize(("src", "want"), [
    ("a / b / c", ["divide", "divide"]),
    ("x = /re/g", ["regex"]),
    ("x = a /re/g", ["divide", "divide"]),
    ("if (ok) /re/.test(s)", ["regex"]),
    ("while (f(x)) /re/.exec(s)", ["regex"]),
    ("f(a) / 2", ["divide"]),
    ("(a + b) / 2 / c", ["divide", "divide"]),
    ("if (ok) { x }\n/re/.test(s)", ["regex"]),
    ("x = {} / 2", ["divide"]),
    ("x = { a: 1 } / 2", ["divide"]),
    ("++ /re/", ["regex"]),
    ("a++ / 2", ["divide"]),
    ("a\n++/re/.lastIndex", ["regex"]),
    ("a[0] / 2", ["divide"]),
    ("return /re/", ["regex"]),
    ("a.return / 2", ["divide"]),
    ("typeof /re/", ["regex"]),
    ("x => /re/", ["regex"]),
    ("a ? /x/ : /y/", ["regex", "regex"]),
    ("[/a/, /b/]", ["regex", "regex"]),
    ("x /= 2", ["divide"]),
    ("x = /=/", ["regex"]),
    ("`${ '/' + `a${ 1 / 2 }` }` / 3", ["divide", "divide"]),
    ("`${ /re/.source }`", ["regex"]),
    ("// it's a 'quote\n/re/", ["regex"]),
    ("/* it's \" */ /re/", ["regex"]),
    ("/[/]/.test(s) / 2", ["regex", "divide"]),
    ("/a\\/b/ / 2", ["regex", "divide"]),
])  # fmt: skip
def test_a_slash_is_a_regex_where_an_operand_is_expected(src: str, want: list[str]) -> None:
    assert slashes(src) == want


def test_strings_templates_and_comments_hold_their_own_text() -> None:
    toks = tokenize("a = 'it\\'s // no' + `x${ \"}\" }y` // c\n/* '` */ b", comments=True)
    assert [(t.kind, t.text) for t in toks] == [
        (NAME, "a"), (PUNCT, "="), (STR, "it's // no"), (PUNCT, "+"), ("head", "x"),
        (STR, "}"), ("tail", "y"), (COMMENT, "// c"), (COMMENT, "/* '` */"), (NAME, "b"),
    ]  # fmt: skip
    assert [t.newline for t in toks if t.kind != COMMENT] == [False] * 7 + [True]


@pytest.mark.parametrize("brk", BREAKS)
def test_every_line_terminator_ends_a_line_comment_and_a_string(brk: str) -> None:
    assert [t.kind for t in tokenize(f"// c{brk}x")] == [NAME]
    assert tokenize(f"a{brk}b")[1].newline
    if brk in "\n\r\r\n":  # ECMAScript 2019: LS and PS may stand in a string
        assert [t.kind for t in tokenize(f"'a{brk}b'")][:2] == [STR, NAME]


@pytest.mark.parametrize(("src", "inside"), [
    ("x = 'abc", STR), ("x = 'abc'", None), ("x = 'a\nb", None), ("// c", COMMENT),
    ("// c\n", None), ("/* c", COMMENT), ("/* c */", None), ("/*/", COMMENT),
    ("`a", TPL), ("`a${b", TPL), ("`a${b}c", TPL), ("`a${b}`", None), ("x = /'/", None),
    ("", None),
])  # fmt: skip
def test_unclosed_says_what_the_text_ends_inside(src: str, inside: str | None) -> None:
    assert unclosed(src) == inside


# --- the tokens cover the script ---------------------------------------------------------

FRAGMENTS = [
    "a", "b1", "$x", "é", "0x1F", "1.5e3", ".5", "'s'", '"d"', "'\\''", "`t`", "`${", "}",
    "{", "(", ")", "[", "]", "/", "/=", "*", "+", "++", "-", "=", "=>", ";", ",", ":", "?",
    ".", "?.", "//", "/*", "*/", "\\", "#", "@", "if", "return", "typeof", "catch", "try",
    " ", "\t", *BREAKS,
]  # fmt: skip
SCRIPTS = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join) | st.text(max_size=80)


@FAST
@given(SCRIPTS)
def test_the_tokens_cover_the_script_with_only_space_between(src: str) -> None:
    """In order, apart, and between them only white space or characters no token starts
    with; a name, number, punctuator, regex or comment is its source text; and comments
    aside, reading with and without them gives the same tokens."""
    toks = tokenize(src, comments=True)
    at = 0
    for t in toks:
        assert at <= t.start < t.end <= len(src)
        assert tokenize(src[at : t.start], comments=True) == []
        if t.kind in (NAME, NUM, PUNCT, REGEX, COMMENT):
            assert t.text == src[t.start : t.end]
        at = t.end
    assert tokenize(src[at:], comments=True) == []
    code = [t for t in toks if t.kind != COMMENT]
    assert [t[:4] for t in tokenize(src)] == [t[:4] for t in code]


# --- the linter and the catch instrumentation read alike ----------------------------------


def corpus_scripts() -> Iterator[tuple[str, str]]:
    for path in CORPUS:
        body = path.read_text(encoding="utf-8").split("\n", 1)[1]
        for step in parse(body, line_offset=1).steps:
            yield f"{path.stem}:{step.id}", step.script


CATCH = "\ntry { f() } catch (e) { g(e) }"


@pytest.mark.parametrize(("name", "script"), list(corpus_scripts()), ids=lambda v: v[:40])
def test_the_linter_and_the_instrumentation_read_every_corpus_script_alike(
    name: str, script: str
) -> None:
    """A catch clause after the corpus script is the only one rewritten (a misread
    regex, string or template before it would hide it or find another), the rewrite
    compiles in QuickJS, and the linter finds the same warnings in it."""
    source = script + CATCH
    rewritten = instrument_catches(source, "hook")
    assert rewritten == script + CATCH.replace("{ g(e)", "{hook(e); g(e)"), name
    quickjs.Context().eval("const hook = () => 0;\n" + wrap(rewritten))
    assert engine_line_count(rewritten) == engine_line_count(source)

    def warnings(text: str) -> list[tuple[int, str]]:
        return [(w.line, w.code) for w in lint(Workflow("w", (Step("s", text),)))]

    assert warnings(rewritten) == warnings(source)


# --- QuickJS's lines and columns, and the cell's ------------------------------------------


def quickjs_position(src: str) -> tuple[int, int]:
    """Where QuickJS puts the syntax error of ``src``: (line, column)."""
    with pytest.raises(quickjs.JSException) as error:
        quickjs.Context().eval(src)
    found = re.search(r"at <input>:(\d+):(\d+)", str(error.value))
    assert found is not None, str(error.value)
    return int(found.group(1)), int(found.group(2))


PIECES = [
    "x = 1;{b}", "/* a{b}b */", "// c{b}", "s = 'a\\{b}b';", "t = `a{b}b`;", "u = `${{1{b}}}`;",
    "r = /a/g;{b}", "v = 'a{ls}b';", " é{b}", "w = 1 / 2 / 3;{b}", "if (x) /re/.test(s);{b}",
    "q = \"😀\";", "{{}}{b}/re/;", "z = {{}} / 2;{b}",
]  # fmt: skip
ENGINE_SCRIPTS = st.lists(
    st.tuples(st.sampled_from(PIECES), st.sampled_from(BREAKS), st.sampled_from([LS, PS])),
    min_size=1,
    max_size=8,
).map(lambda parts: "".join(p.format(b=b, ls=ls) for p, b, ls in parts))


@FAST
@given(ENGINE_SCRIPTS, st.sampled_from(["", "é ", "'😀' + ", "\t"]))
def test_quickjs_lines_and_columns_map_back_to_the_offset(script: str, before: str) -> None:
    """Whatever line terminators stand where (between tokens, in comments, strings and
    template literals), QuickJS's position of an error maps back to its offset."""
    src = script + before + ")"
    line, column = quickjs_position("let r, s, t, u, v, w, x, q, z;\n" + src)
    assert Lines(src).engine_offset(line - 1, column) == len(src) - 1
    assert engine_line_count(src) == line - 1


@pytest.mark.parametrize("brk", BREAKS)
def test_the_cells_lines_end_at_lf_cr_and_crlf_only(brk: str) -> None:
    lines = Lines(f"ab{brk}cd", first_line=5, first_column=3)
    assert lines.position(1) == (5, 4)
    assert lines.position(len(f"ab{brk}c")) == ((6, 2) if brk in "\n\r\r\n" else (5, 3 + 4))


# --- end to end: the cell, the worker and the linter agree ---------------------------------


@pytest.fixture(scope="module")
def worker() -> Iterator[ScriptWorker]:
    w = ScriptWorker()
    yield w
    asyncio.run(w.aclose())


#: A script's lines as the cell shows them; LS and PS stand inside them, between tokens,
#: in a string and in a comment. They are the cell's lines 3, 4 and 5.
SCRIPT_LINES = [
    f"const a = 1;{LS}const b = 2;{PS}const k = `k-${{Date.now()}}`;",
    f"const c = 'x{LS}y';{LS}/* {PS} */ const d = 3;",
    "const send = () => services.http.request({ url: 'http://127.0.0.1:9/', idempotency: "
    f"{{ header: 'Idempotency-Key', value: k }} }});{LS}if (a) throw new Error('é' + c);",
]
FIRST = 3


def cell_step(lines: list[str], brk: str) -> Step:
    """The step of a ``%%woml`` cell whose script lines are ``lines``, ended by ``brk``,
    from the cell's line 3 on."""
    body = '<step id="s"><script>\n' + brk.join(lines) + brk + "</script></step>\n"
    (step,) = parse(body, line_offset=1).steps
    return step


def attempt_line(worker: ScriptWorker, step: Step, script: str) -> tuple[str, int | None]:
    async def run() -> tuple[str, int | None]:
        request = AttemptRequest(
            script=script,
            script_line=step.script_line,
            script_column=step.script_column,
            context={},
            attempt={},
            now_ms=lambda: 0.0,
        )
        result = await worker.run_attempt(request, no_services, lambda level, text: None)
        return result.outcome, result.error_line

    return asyncio.run(run())


async def no_services(name: str, args: list[object]) -> object:
    raise AssertionError(name)


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n"])
def test_a_warning_a_thrown_error_and_a_syntax_error_stand_on_the_cells_lines(
    worker: ScriptWorker, brk: str
) -> None:
    """spec §2.3: lines as the editor shows them (LF, CR, CR LF end one; LS and PS do not,
    though QuickJS counts those between tokens)."""
    step = cell_step(SCRIPT_LINES, brk)
    (warning,) = lint(Workflow("w", (step,)))
    assert (warning.code, warning.line, warning.column) == (
        PER_ATTEMPT_KEY,
        FIRST,
        SCRIPT_LINES[0].index("Date.now") + 1,
    )
    # The parser hands the script over with LF (XML 1.0 §2.11); the Python API may not.
    assert attempt_line(worker, step, step.script) == ("threw", FIRST + 2)
    assert attempt_line(worker, step, step.script.replace("\n", brk)) == ("threw", FIRST + 2)

    broken = [*SCRIPT_LINES[:2], SCRIPT_LINES[2] + f"{LS}const é = );"]
    step = cell_step(broken, brk)
    for script in (step.script, step.script.replace("\n", brk)):
        found = asyncio.run(worker.check_syntax(script, step.script_line, step.script_column))
        assert found is not None
        assert found[1:] == (FIRST + 2, broken[2].rindex(");") + 1)
