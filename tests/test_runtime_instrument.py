"""Catch-clause instrumentation: a caught out-of-memory `null` still counts (spec §3.2 crash).

The rewrite must touch only `catch` clauses in code, never strings, templates,
comments or regular expressions, and must keep every line where it was.
"""

from __future__ import annotations

import pytest

from woml_magic.runtime._instrument import instrument_catches

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
