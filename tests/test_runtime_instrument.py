"""Catch-clause instrumentation: a caught out-of-memory `null` still counts (spec §3.2 crash).

The rewrite must touch only `catch` clauses in code, never strings, templates,
comments or regular expressions, and must keep every line where it was. The script is
read with the package's one lexer (``woml_magic.javascript``), so the hard cases of a
`/` (regular expression or division) decide here what is code.
"""

from __future__ import annotations

import pytest
import quickjs

from woml_magic.runtime._instrument import instrument_catches
from woml_magic.runtime.wrapper import wrap

CATCH, CAUGHT = "try {} catch (e) {}", "try {} catch (e) {__womlCaught(e);}"

REWRITES = [
    ("try { x } catch (e) { y }", "try { x } catch (e) {__womlCaught(e); y }"),
    ("try {} catch{}", "try {} catch(__womlE) {__womlCaught(__womlE);}"),
    (
        "try {} catch ( err /* c */ )\n{ 1 }",
        "try {} catch ( err /* c */ )\n{__womlCaught(err); 1 }",
    ),
    ("try {} catch (e) // why\n{}", "try {} catch (e) // why\n{__womlCaught(e);}"),
    (
        "const t = `${ {a: 1}.a }`; try {} catch (e) {}",
        "const t = `${ {a: 1}.a }`; try {} catch (e) {__womlCaught(e);}",
    ),
    # A division misread as a regex would swallow the clause up to a later `/`, a regex
    # misread as a division would let its quote start a string.
    *(
        (f"{before}{CATCH}{after}", f"{before}{CAUGHT}{after}")
        for before, after in [
            ("x = a / b / c; ", " y = 1 / 2;"),
            ("x = a++ / 2; ", " y = 1 / 2;"),
            ("x = f(a) / 2; ", " y = 1 / 2;"),
            ("x = {} / 2; ", " y = 1 / 2;"),
            ("x = /'/g; ", ""),
            ("if (a) /'/.test(s); ", ""),
            ("if (a) {}\n/'/.test(s); ", ""),
            ("x = ++ /'/.lastIndex; ", ""),
            ("const t = `${ '/' + `a${ 1 / 2 }` }`; ", " y = 1 / 2;"),
            ("// it's\n", ""),
            ('/* " */ ', ""),
            ("const r = /[/]catch (e) {/; ", ""),
        ]
    ),
    ("try {}\u2028catch (e) {}", "try {}\u2028catch (e) {__womlCaught(e);}"),
    (
        "try { try {} catch {} } catch (e) {}",
        "try { try {} catch (__womlE) {__womlCaught(__womlE);} } catch (e) {__womlCaught(e);}",
    ),
]

UNTOUCHED = [
    'const s = "catch (e) {";',
    "const s = 'catch (e) {';",
    "const t = `catch (e) {`;",
    "const t = `${'x'} catch (e) {`;",
    "// catch (e) {",
    "/* catch (e) { */",
    "const r = /catch (e) {/;",
    "p.catch(e => 1);",
    "try {} catch ({ message }) {}",
    "const x = a / b; const y = c / d;",
    "const o = { catch(e) { return e } };",
    "class A { m() {} catch(e) {} }",
    "try {} finally {} catch (e) {}",
    "`${ '/' } catch (e) {`",
]


@pytest.mark.parametrize(("source", "expected"), REWRITES)
def test_catch_clauses_in_code_report_the_caught_value(source: str, expected: str) -> None:
    assert instrument_catches(source) == expected


@pytest.mark.parametrize("source", UNTOUCHED)
def test_strings_comments_regexes_methods_and_patterns_are_untouched(source: str) -> None:
    assert instrument_catches(source) == source


@pytest.mark.parametrize(("source", "_expected"), REWRITES)
def test_rewriting_keeps_every_line_in_place(source: str, _expected: str) -> None:
    assert instrument_catches(source).count("\n") == source.count("\n")


@pytest.mark.parametrize(("_source", "expected"), REWRITES)
def test_a_rewritten_script_compiles(_source: str, expected: str) -> None:
    """QuickJS reads the rewrite as a script (the worker would fall back otherwise)."""
    quickjs.Context().eval("const __womlCaught = () => 0;\n" + wrap(expected))


def test_a_script_run_again_is_rewritten_once() -> None:
    """Every attempt of a retried step rewrites the same text: the answer is kept."""
    source = "try {} catch (e) {}\n" * 50
    assert instrument_catches(source, "h") is instrument_catches(source, "h")
    assert instrument_catches(source, "g") != instrument_catches(source, "h")
