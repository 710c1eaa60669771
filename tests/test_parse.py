"""The WOML document parser: cell forms, attributes, children, raw scripts, errors (spec §2)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import woml_magic
from woml_magic.errors import WomlSyntaxError
from woml_magic.parse import MAX_STEPS, parse

S = timedelta(seconds=1)

SEED_CHARGE = """\
<step id="charge" retry="3" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
  <script>...</script>
</step>"""

SEED_CREATE_CUSTOMER = """\
<step
  id="createCustomer"
  retry="4"
  retry-backoff="exponential"
  retry-delay="1s"
  retry-max-delay="10s"
>
  <script>
    const response = await services.http.request({
      method: "POST",
      url: "https://api.example.com/customers",
      json: context.payload,
      idempotency: {
        header: "Idempotency-Key",
        value: attempt.idempotencyKey
      }
    }, { name: "create-customer" });

    return response.data;
  </script>
</step>"""


def step(attrs: str = "", script: str = "return 1;") -> str:
    return f'<step id="s" {attrs}><script>{script}</script></step>'


def error(text: str, **kwargs: int) -> WomlSyntaxError:
    with pytest.raises(WomlSyntaxError) as info:
        parse(text, **kwargs)
    return info.value


# --- spec §7: the public entry point -------------------------------------------------------


def test_spec_7_parse_is_exported_from_the_package() -> None:
    assert woml_magic.parse is parse


def test_spec_7_parse_takes_text_only() -> None:
    with pytest.raises(TypeError, match="str, got bytes"):
        parse(b"<step/>")  # type: ignore[arg-type]


# --- spec §2.1: cell forms --------------------------------------------------------------------


def test_spec_2_1_seed_charge_example_parses_with_waits_1s_2s() -> None:
    wf = parse(SEED_CHARGE)
    assert wf.id == "cell"
    (charge,) = wf.steps
    assert charge.id == "charge"
    assert charge.script == "..."
    assert charge.policy.attempts == 3
    assert charge.policy.backoff == "exponential"
    assert charge.policy.max_delay == 30 * S
    assert charge.policy.waits() == [S, 2 * S]


def test_spec_2_1_seed_create_customer_example_parses_with_waits_1s_2s_4s() -> None:
    (customer,) = parse(SEED_CREATE_CUSTOMER).steps
    assert customer.id == "createCustomer"
    assert customer.policy.waits() == [S, 2 * S, 4 * S]
    assert "services.http.request" in customer.script
    assert customer.script.strip().endswith("return response.data;")


def test_spec_2_1_workflow_element_holds_steps_in_document_order() -> None:
    wf = parse(
        '<workflow id="signup">'
        '<step id="b"><script>1</script></step>'
        '<step id="a"><script>2</script></step>'
        "</workflow>"
    )
    assert wf.id == "signup"
    assert [s.id for s in wf.steps] == ["b", "a"]


def test_spec_2_1_top_level_steps_form_the_implicit_workflow_cell() -> None:
    wf = parse(step().replace('"s"', '"one"') + "\n" + step().replace('"s"', '"two"'))
    assert wf.id == "cell"
    assert [s.id for s in wf.steps] == ["one", "two"]


def test_spec_2_1_whitespace_comments_and_xml_declaration_are_allowed() -> None:
    text = (
        '\n  <?xml version="1.0" encoding="UTF-8"?>\n<!-- top -->\n'
        '<workflow id="w"> <!-- inside -->\n'
        '  <step id="a"> <!-- in step --> <script>x</script> <!-- after --> </step>\n'
        "</workflow>\n<!-- end -->\n\n"
    )
    wf = parse(text)
    assert [s.id for s in wf.steps] == ["a"]
    assert wf.source == text


def test_spec_2_1_fingerprint_ignores_comments_and_formatting_outside_scripts() -> None:
    plain = parse(SEED_CHARGE)
    decorated = parse("<!-- note -->\n\n" + SEED_CHARGE.replace("<step ", "<step\n  ") + "\n")
    assert plain.fingerprint == decorated.fingerprint
    assert parse(SEED_CHARGE.replace("...", "..;")).fingerprint != plain.fingerprint


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the cell has no <step>"),
        ("   \n <!-- only a comment -->\n", "the cell has no <step>"),
        ('<workflow id="w"></workflow>', 'workflow id="w"> has no <step>'),
        ('<workflow id="w"/>', "has no <step>"),
        ("text " + step(), "unexpected text 'text'"),
        (step() + " trailing", "unexpected text 'trailing'"),
        (step() + "\n&amp;", "unexpected text '&amp;'"),
        ('<workflow id="w">words' + step() + "</workflow>", 'inside <workflow id="w">'),
        ("<![CDATA[x]]>" + step(), "unexpected text"),
        ("<steps/>", "unexpected element <steps> at the top of the cell; did you mean <step>?"),
        ("<html/>", "<step> or <workflow> is allowed here"),
        ('<script>x</script><step id="a"/>', "must be inside a <step>"),
        ('<workflow id="w">' + step() + '</workflow><workflow id="v"/>', "follows the <workflow>"),
        ('<workflow id="w">' + step() + "</workflow>" + step(), "follows the <workflow>"),
        (step() + '<workflow id="w"/>', "cannot follow top-level <step>"),
        (
            '<workflow id="w"><task/></workflow>',
            'unexpected element <task> inside <workflow id="w">',
        ),
        ("<workflow>" + step() + "</workflow>", "<workflow> needs an id attribute"),
        ('<workflow id="1w">' + step() + "</workflow>", 'id="1w" on <workflow> is not a valid id'),
        ('<workflow id="w" name="x">' + step() + "</workflow>", "unknown attribute `name`"),
        ("<?php echo 1 ?>" + step(), "processing instructions"),
        (step() + '<?xml version="1.0"?>', "must come first"),
        ("<?xml version='2'?>" + step(), "malformed XML declaration"),
        ("<!DOCTYPE step>" + step(), "<!DOCTYPE declarations are not allowed"),
        ("<!ENTITY x 'y'>" + step(), "<!ENTITY declarations are not allowed"),
        ("<!foo>" + step(), "only comments"),
    ],
)
def test_spec_2_1_anything_but_one_workflow_or_top_level_steps_is_an_error(
    text: str, says: str
) -> None:
    assert says in error(text).message


# --- spec §2.2: attributes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ("", (1, "fixed", S, None, 30 * S)),
        ('retry="1"', (1, "fixed", S, None, 30 * S)),
        ('retry="10"', (10, "fixed", S, None, 30 * S)),
        ('retry="3" retry-backoff="exponential"', (3, "exponential", S, None, 30 * S)),
        ('retry-backoff="fixed"', (1, "fixed", S, None, 30 * S)),
        ('retry-delay="0s"', (1, "fixed", timedelta(0), None, 30 * S)),
        ('retry-delay="250ms"', (1, "fixed", timedelta(milliseconds=250), None, 30 * S)),
        ('retry-delay="1m30s"', (1, "fixed", 90 * S, None, 30 * S)),
        ('retry-delay="24h"', (1, "fixed", timedelta(hours=24), None, 30 * S)),
        ('retry-delay="2s" retry-max-delay="2s"', (1, "fixed", 2 * S, 2 * S, 30 * S)),
        ('retry-max-delay="24h"', (1, "fixed", S, timedelta(hours=24), 30 * S)),
        ('retry-delay="0s" retry-max-delay="0s"', (1, "fixed", timedelta(0), timedelta(0), 30 * S)),
        ('timeout="1ms"', (1, "fixed", S, None, timedelta(milliseconds=1))),
        ('timeout="1.5s"', (1, "fixed", S, None, timedelta(seconds=1.5))),
        ('timeout="24h"', (1, "fixed", S, None, timedelta(hours=24))),
        ("retry='2' timeout='5s'", (2, "fixed", S, None, 5 * S)),  # single quotes are XML too
        ('retry="&#51;"', (3, "fixed", S, None, 30 * S)),  # a character reference is the digit 3
    ],
)
def test_spec_2_2_valid_attributes_and_defaults(
    attrs: str, expected: tuple[int, str, timedelta, timedelta | None, timedelta]
) -> None:
    (s,) = parse(step(attrs)).steps
    policy = s.policy
    assert (policy.attempts, policy.backoff, policy.delay, policy.max_delay, s.timeout) == expected


@pytest.mark.parametrize(
    ("attrs", "says"),
    [
        ('retry="0"', 'retry="0" on <step id="s"> is not allowed'),
        ('retry="11"', 'retry="11"'),
        ('retry="100"', 'retry="100"'),
        ('retry="03"', "without sign or leading zero"),  # leading zero
        ('retry="+3"', "without sign or leading zero"),  # sign
        ('retry="-1"', 'retry="-1"'),
        ('retry=" 3"', "whole number from 1 to 10"),
        ('retry="3.0"', "whole number from 1 to 10"),
        ('retry=""', "whole number from 1 to 10"),
        ('retry="three"', "whole number from 1 to 10"),
        ('retry="٣"', "whole number from 1 to 10"),  # Arabic-Indic three is not a decimal digit
        ('retry="' + "9" * 5000 + '"', "whole number from 1 to 10"),
        ('retry-backoff="linear"', 'write retry-backoff="fixed" or retry-backoff="exponential"'),
        ('retry-backoff="Exponential"', 'retry-backoff="Exponential"'),
        ('retry-backoff=""', "retry-backoff"),
        ('retry-delay="1 s"', "retry-delay on <step id=\"s\">: invalid duration '1 s'"),
        ('retry-delay="1"', "the number 1 has no unit"),  # bare number
        ('retry-delay="-1s"', "no sign"),
        ('retry-delay="1s1m"', "in the order h, m, s, ms"),  # wrong unit order
        ('retry-delay="1s1s"', "once each"),  # repeated unit
        ('retry-delay="25h"', 'retry-delay="25h" on <step id="s"> is longer than the limit of 24h'),
        ('retry-delay="24h1ms"', "longer than the limit of 24h"),
        ('retry-max-delay="500ms"', 'retry-max-delay="500ms" on <step id="s"> is shorter than'),
        ('retry-delay="5s" retry-max-delay="4s"', "must be at least retry-delay"),
        ('retry-max-delay="25h"', "longer than the limit of 24h"),
        ('retry-max-delay="soon"', 'retry-max-delay on <step id="s">: invalid duration'),
        ('timeout="0s"', 'timeout="0s" on <step id="s"> must be longer than 0'),  # 0 timeout
        ('timeout="0ms"', "must be longer than 0"),
        ('timeout="0.0001ms"', "must be longer than 0"),  # rounds to zero microseconds
        ('timeout="30"', "has no unit"),
        ('timeout="48h"', "longer than the limit of 24h"),
        ('timeout="1m 30s"', "no spaces"),  # spaces in durations
    ],
)
def test_spec_2_2_invalid_attribute_names_attribute_value_and_what_is_allowed(
    attrs: str, says: str
) -> None:
    exc = error(step(attrs))
    assert says in exc.message
    name = attrs.rsplit("=", 1)[0].rsplit(maxsplit=1)[-1]  # the last attribute is the bad one
    assert (exc.line, exc.column) == (1, step(attrs).rindex(f'{name}="') + len(name) + 3)
    assert len(exc.message) < 300  # a huge value is shortened, not echoed whole


@pytest.mark.parametrize(
    ("step_id", "ok"),
    [
        ("a", True),
        ("_", True),
        ("createCustomer", True),
        ("step_1.v2-final", True),
        ("A" + "b" * 63, True),  # 64 characters
        ("A" + "b" * 64, False),  # 65 characters
        ("1st", False),
        ("-a", False),
        (".a", False),
        ("", False),
        ("a b", False),
        ("é", False),
        ("a/b", False),
    ],
)
def test_spec_2_2_step_id_pattern(step_id: str, ok: bool) -> None:
    text = f'<step id="{step_id}"><script>x</script></step>'
    if ok:
        assert parse(text).steps[0].id == step_id
    else:
        assert "is not a valid id" in error(text).message


def test_spec_2_2_step_id_is_required() -> None:
    exc = error("\n  <step retry='2'><script>x</script></step>")
    assert exc.message == '<step> needs an id attribute, e.g. <step id="charge">'
    assert (exc.line, exc.column) == (2, 3)


def test_spec_2_2_step_ids_are_unique_and_the_error_names_the_first() -> None:
    text = '<step id="a"><script>1</script></step>\n<step id="a"><script>2</script></step>'
    exc = error(text)
    assert exc.message.startswith('step id "a" is used twice (first on line 1)')
    assert (exc.line, exc.column) == (2, 11)


@pytest.mark.parametrize(
    ("attribute", "suggestion"),
    [
        ("retry-delay-max", "retry-max-delay"),  # the spec's own example: words, not letters
        ("max-delay", "retry-max-delay"),
        ("delay-max", "retry-max-delay"),
        ("retry-dealy", "retry-delay"),
        ("delay", "retry-delay"),
        ("backoff", "retry-backoff"),
        ("retry-back-off", "retry-backoff"),
        ("retries", "retry"),
        ("Retry", "retry"),
        ("retry_delay", "retry-delay"),
        ("timout", "timeout"),
        ("time-out", "timeout"),
        ("ID", "id"),
    ],
)
def test_spec_2_2_unknown_attribute_names_the_nearest_valid_attribute(
    attribute: str, suggestion: str
) -> None:
    text = f'<step id="charge" {attribute}="3s"><script>x</script></step>'
    exc = error(text)
    assert exc.message == (
        f'unknown attribute `{attribute}` on <step id="charge">; did you mean `{suggestion}`?'
    )
    assert exc.column == text.index(attribute) + 1


@pytest.mark.parametrize(
    "attribute", ["color", "xmlns", "xmlns:x", "onload", "attempts", "a" * 5000]
)
def test_spec_2_2_unknown_attribute_far_from_all_lists_the_allowed_ones(attribute: str) -> None:
    exc = error(f'<step id="charge" {attribute}="1"><script>x</script></step>')
    assert exc.message.startswith("unknown attribute `")
    assert "the attributes of <step> are id, retry, retry-backoff" in exc.message


# --- spec §2.3: children of <step> -----------------------------------------------------------


@pytest.mark.parametrize("depth", [33, 300, 5000])
def test_deep_nesting_is_refused_with_a_sentence_not_an_lxml_option(depth: int) -> None:
    # spec §2.5: errors teach; lxml alone would say "use XML_PARSE_HUGE option" at 256.
    cell = '<step id="s"><script>x</script>' + "<x>" * depth + "</x>" * depth + "</step>"
    with pytest.raises(WomlSyntaxError, match="nested more than 32 levels deep") as info:
        parse(cell)
    assert "XML_PARSE_HUGE" not in str(info.value)
    assert info.value.line == 1



@pytest.mark.parametrize(
    ("cell", "line", "value"),
    [
        ('<step id="s"><retry>3</retry><script>x</script></step>', 1, "3"),
        ('<step id="s">\n  <retry>\n    5\n  </retry>\n  <script>x</script>\n</step>', 2, "5"),
        ('<step id="s"><script>x</script><retry>10</retry></step>', 1, "10"),
        ('<step id="s"><retry>three</retry><script>x</script></step>', 1, "3"),
        ('<step id="s"><retry>3<script>x</script></retry></step>', 1, "3"),
    ],
)
def test_retry_with_any_content_teaches_the_attribute_rule_at_the_tag(
    cell: str, line: int, value: str
) -> None:
    # seed: "Retry is a step attribute, not a tag"; the error points at <retry> itself.
    with pytest.raises(WomlSyntaxError) as info:
        parse(cell)
    assert info.value.line == line
    assert f'retry is a step attribute, not a tag: write <step retry="{value}" …>' in str(
        info.value)



@pytest.mark.parametrize(
    ("inner", "says"),
    [
        (
            '<retry count="3"/><script>x</script>',
            'retry is a step attribute, not a tag: write <step retry="3" …>',
        ),
        ("<script>x</script><retry/>", "retry is a step attribute, not a tag"),
        ("", 'step id="s"> has no <script>; a step holds exactly one <script>…</script>'),
        ("<!-- no script -->", "has no <script>"),
        ("<script>1</script><script>2</script>", "has a second <script> (the first is on line 1)"),
        ("<scirpt/>", 'unexpected element <scirpt> inside <step id="s">; did you mean <script>?'),
        ("<step id='t'/>", 'unexpected element <step> inside <step id="s">'),
        ("<script>x</script>tail", "unexpected text 'tail' inside <step id=\"s\">"),
        ('<script lang="python">x</script>', 'lang="python" on the <script> of <step id="s">'),
        ('<script lang="JavaScript">x</script>', "the only script language is javascript"),
        ('<script type="module">x</script>', "unknown attribute `type` on <script>"),
    ],
)
def test_spec_2_3_step_holds_exactly_one_script(inner: str, says: str) -> None:
    assert says in error(f'<step id="s">{inner}</step>').message


def test_spec_2_3_script_lang_javascript_is_the_default_and_may_be_written() -> None:
    assert parse(step(script="x").replace("<script>", '<script lang="javascript">')).steps


def test_spec_2_3_script_is_raw_text_needing_no_escapes() -> None:
    js = 'if (a < b && c > d) { s = "&amp; <b>bold</b> <!DOCTYPE x> <![CDATA[ ]]>"; }'
    assert parse(step(script=js)).steps[0].script == js


@pytest.mark.parametrize(
    ("script", "line", "column"),
    [
        ('\nconst s = "</script>";\nreturn s;\n', 2, 12),
        ("\nconst s = '<b></script>';\n", 2, 15),
        ("\nconst t = `a\n</script>`;\nreturn t;\n", 3, 1),
        ('\n// a "</script>" here\nreturn 1;\n', 2, 7),
        ("\n/* </script> */ return 1;\n", 2, 4),
    ],
    ids=["double-quoted", "single-quoted", "template", "line-comment", "block-comment"],
)
def test_spec_2_3_a_closing_script_tag_inside_a_js_string_says_how_to_write_it(
    script: str, line: int, column: int
) -> None:
    # spec §2.3: the script ends at the first </script>, even inside a string; the
    # message points at that </script> and says how to write it, instead of calling the
    # rest of the script "unexpected text" and telling to put code inside <script>.
    err = error(f'<step id="s"><script>{script}</script></step>')
    assert "this </script> ends the script early" in err.message
    assert "<\\/script>" in err.message
    assert (err.line, err.column) == (line, column)


def test_a_document_without_stray_text_reads_no_script_as_javascript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spec §2.3's early-</script> diagnosis reads a script as JavaScript only when text
    stands after its </script>: every script used to be tokenized on every parse (a
    1,000-step document: 148 ms, against 40 ms without; bench/parse.py)."""
    from woml_magic import scan

    def read(body: str) -> bool:
        raise AssertionError(f"a script was read as JavaScript: {body!r}")

    monkeypatch.setattr(scan, "ends_inside_a_string", read)
    doc = "".join(f'<step id="s{i}"><script>return "{i}";</script></step>' for i in range(50))
    assert len(parse(f"<workflow id='w'>{doc}</workflow>").steps) == 50
    with pytest.raises(AssertionError, match="read as JavaScript"):
        parse('<step id="s"><script>const s = "</script>"; return s;</script></step>')


def test_spec_2_3_escaped_closing_tag_stays_in_the_script() -> None:
    text = '<step id="s"><script>return "<\\/script>";</script></step>'
    assert parse(text).steps[0].script == 'return "<\\/script>";'


def test_spec_2_3_script_ends_at_the_next_closing_script_tag() -> None:
    text = '<step id="s"><script>a = "</scripts>"; b = 1</script  ></step>'
    assert parse(text).steps[0].script == 'a = "</scripts>"; b = 1'


def test_spec_2_3_markup_inside_a_comment_is_not_a_script() -> None:
    text = "<!-- <script> --><step id='s'><!-- </script> --><script>ok</script></step>"
    assert parse(text).steps[0].script == "ok"


@pytest.mark.parametrize(
    ("body", "script"),
    [
        ("<![CDATA[a < b]]>", "a < b"),
        ("\n  <![CDATA[\n  return 1;\n  ]]>\n  ", "\n  return 1;\n  "),
        ("<![CDATA[]]>", ""),
        ("<![CDATA[ x ]] > y ]]>", " x ]] > y "),
    ],
)
def test_spec_2_3_one_cdata_section_loses_its_markers(body: str, script: str) -> None:
    assert parse(step(script=body)).steps[0].script == script


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("<![CDATA[ a ]]> b", "must hold the whole script, but text follows this ]]>"),
        ("<![CDATA[ a ]]><![CDATA[ b ]]>", "must hold the whole script"),
        ("<![CDATA[ a ", "never closed; end it with ]]>"),
    ],
)
def test_spec_2_3_a_cdata_section_that_is_not_the_whole_script_is_an_error(
    body: str, says: str
) -> None:
    assert says in error(step(script=body)).message


def test_spec_2_3_text_around_a_cdata_section_keeps_the_markers() -> None:
    # Not "apart from surrounding whitespace one section": the text is raw, markers included.
    js = "x = 1; <![CDATA[ y ]]>"
    assert parse(step(script=js)).steps[0].script == js


def test_spec_2_3_empty_script_element_is_an_empty_script() -> None:
    (s,) = parse('<step id="s"><script/></step>').steps
    assert s.script == ""
    assert (s.script_line, s.script_column) == (1, 23)


def test_spec_2_3_script_line_endings_are_normalised_like_xml() -> None:
    text = '<step id="s"><script>a\r\nb\rc\n</script></step>'
    assert parse(text).steps[0].script == "a\nb\nc\n"


# --- spec §2.3/§2.5: lines and columns -------------------------------------------------------


def test_spec_2_3_script_line_and_column_point_at_the_first_script_character() -> None:
    (s,) = parse(SEED_CREATE_CUSTOMER).steps
    assert s.line == 1
    assert (s.script_line, s.script_column) == (8, 11)  # right after "  <script>"
    # JS line k of the script is cell line script_line + k - 1
    js_line = next(i for i, t in enumerate(s.script.split("\n"), 1) if "return response" in t)
    cell_lines = SEED_CREATE_CUSTOMER.split("\n")
    assert "return response" in cell_lines[s.script_line + js_line - 2]


def test_spec_2_3_cdata_script_starts_after_the_marker() -> None:
    text = '<workflow id="w">\n  <step id="s">\n    <script>  <![CDATA[x]]></script>\n'
    text += "  </step>\n</workflow>"
    (s,) = parse(text).steps
    assert (s.line, s.script_line, s.script_column) == (2, 3, 24)


def test_spec_2_5_error_after_a_multi_line_script_has_the_right_line_and_column() -> None:
    text = (
        '<step id="a">\n'
        "  <script>\n"
        "    if (x < 1) {\n"
        "      return '<step id=\"fake\">';\n"
        "    }\n"
        "  </script>\n"
        "</step>\n"
        '<step id="b" retry="12">\n'
        "  <script>1</script>\n"
        "</step>\n"
    )
    exc = error(text)
    assert (exc.line, exc.column) == (8, 21)
    assert exc.source_line == '<step id="b" retry="12">'


def test_spec_2_5_error_on_the_line_a_script_ends_has_the_right_column() -> None:
    text = '<step id="a"><script>\nlong_script_line();</script></step> oops'
    exc = error(text)
    assert (exc.line, exc.column) == (2, 37)
    assert "'oops'" in exc.message


def test_spec_2_5_line_offset_is_added_to_every_reported_line() -> None:
    text = '<step id="a">\n  <script>x</script>\n</step>\n<step id="b" retry="0"><script/></step>'
    wf = parse(text.split('\n<step id="b"', maxsplit=1)[0], line_offset=1)
    (a,) = wf.steps
    assert (a.line, a.script_line, a.script_column) == (2, 3, 11)
    exc = error(text, line_offset=1)
    assert (exc.line, exc.column) == (5, 21)
    assert exc.source_line == '<step id="b" retry="0"><script/></step>'
    assert "    5 | <step" in exc.pretty()


def test_spec_2_5_crlf_and_cr_each_end_one_line() -> None:
    text = '<step id="a">\r\n<script>x</script>\r</step>\r\n<step id="b" retry="x"/>'
    exc = error(text)
    assert (exc.line, exc.column) == (4, 21)
    assert exc.source_line == '<step id="b" retry="x"/>'


def test_spec_2_5_columns_count_characters_not_bytes() -> None:
    text = '<!-- héllo wörld --><step id="a" retry="x"><script>x</script></step>'
    assert error(text).column == text.index('x"') + 1


def test_spec_2_5_pretty_shows_sentence_line_and_caret() -> None:
    exc = error('<step id="charge" retry-delay-max="3s"><script/></step>')
    assert exc.pretty().splitlines() == [
        'WomlSyntaxError: unknown attribute `retry-delay-max` on <step id="charge">; '
        "did you mean `retry-max-delay`?",
        "  line 1, column 19",
        '     1 | <step id="charge" retry-delay-max="3s"><script/></step>',
        "       |                   ^",
    ]


# --- spec §2.5: XML well-formedness, translated --------------------------------------------


@pytest.mark.parametrize(
    ("text", "says", "column"),
    [
        (
            '<step id="a"><script>x</script></stepp>',
            "closing tag </stepp> does not match <step>",
            32,
        ),
        ('<step id="a"><script>x</script>', "<step> is never closed; end it with </step>", 1),
        ('<step id="a"><script>x</step>', "<script> is never closed", 14),
        ('<step id="a"><script>x</script></step></step>', "has no matching opening tag", 39),
        ('<step id="a" retry=3><script/></step>', 'must be in quotes: retry="3"', 20),
        ('<step id="a" retry><script/></step>', 'has no value; write retry="…"', 14),
        ('<step id="a"retry="2"><script/></step>', "needs a space before it", 13),
        ('<step id="a><script/></step>', "never ends with a closing", 10),
        ('<step id="a" <script/></step>', "never closed with '>'", 1),
        ('<step id="a" retry="1" retry="2"><script/></step>', "appears twice", 24),
        ('<step id="a<b"><script/></step>', "contains '<'; write it as &lt;", 12),
        ('<step id="a&b"><script/></step>', "bare '&'; write it as &amp;", 12),
        ('<step id="a&foo;"><script/></step>', "bare '&'", 12),
        ("< step id='a'/>", "'<' must start a tag here", 1),
        ('<step id="a"><script>x</script></step><!-- open', "comment is never closed", 39),
        ('<step id="a"><script>x</script></step><!-- a -- b -->', "not well-formed XML", None),
        ('<step id="a" retry="&#0;"><script/></step>', "not well-formed XML", None),
        ("<1step/>", "not well-formed XML", None),
        ("<step id='a' x:y='1'><script/></step>", "not well-formed XML", None),
        ("<step id='a'>\x00<script/></step>", "character U+0000 is not allowed", 14),
        ("<step id='a'><script>\ud800</script></step>", "character U+D800 is not allowed", 22),
    ],
)
def test_spec_2_5_xml_errors_are_sentences_with_positions(
    text: str, says: str, column: int | None
) -> None:
    exc = error(text)
    assert says in exc.message
    assert "Traceback" not in exc.message
    assert exc.line == 1
    if column is not None:
        assert exc.column == column


def test_spec_2_5_deep_nesting_is_refused_with_a_sentence_not_a_crash() -> None:
    exc = error('<workflow id="w">' + "<x>" * 300 + "</x>" * 300 + "</workflow>")
    assert "elements are nested more than 32 levels deep here" in exc.message


# --- spec §2.5: limits and XML attacks -------------------------------------------------------


def test_spec_2_5_documents_over_1_mib_are_refused_naming_the_limit() -> None:
    filler = "<!--" + "x" * (1 << 20) + "-->"
    exc = error(step() + filler)
    assert "over the limit of 1 MiB (1,048,576 bytes)" in exc.message
    assert (exc.line, exc.column) == (1, 1)


def test_spec_2_5_the_size_limit_counts_utf8_bytes() -> None:
    body = "é" * ((1 << 20) // 2 + 10)  # under 1 MiB of characters, over 1 MiB of UTF-8
    assert "over the limit of 1 MiB" in error(step(script=body)).message


def test_spec_2_5_a_document_just_under_1_mib_is_accepted() -> None:
    text = step(script="x" * ((1 << 20) - len(step(script=""))))
    assert len(text.encode()) == 1 << 20
    assert len(parse(text).steps[0].script) > 1_000_000


@pytest.mark.timeout(60)
def test_spec_2_5_at_most_10000_steps() -> None:
    one = '<step id="s{}"><script/></step>'
    at_limit = "".join(one.format(i) for i in range(MAX_STEPS))
    assert len(parse(at_limit).steps) == MAX_STEPS
    exc = error(at_limit + one.format("x"))
    assert exc.message == "this is step 10,001; a document holds at most 10,000 steps"
    assert exc.column == len(at_limit) + 1


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        body = b'<!ENTITY secret "leaked">'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def dtd_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 that serves a DTD and records every request."""
    requests: list[str] = []
    handler = type("Handler", (_RecordingHandler,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(
        f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
        for i in range(1, 10)
    )
    + ']>\n<step id="a"><script>&lol9;</script></step>'
)


@pytest.mark.timeout(5)
def test_spec_2_5_billion_laughs_is_refused() -> None:
    exc = error(BILLION_LAUGHS)
    assert "<!DOCTYPE declarations are not allowed" in exc.message
    assert exc.line == 2


@pytest.mark.timeout(5)
def test_spec_2_5_external_file_entity_is_refused_and_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    text = (
        f'<!DOCTYPE step [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        '<step id="a" retry="&xxe;"><script>&xxe;</script></step>'
    )
    exc = error(text)
    assert "not allowed" in exc.message
    assert "TOP-SECRET" not in str(exc)


@pytest.mark.timeout(5)
def test_spec_2_5_external_dtd_is_refused_without_any_request(
    dtd_server: tuple[str, list[str]],
) -> None:
    url, requests = dtd_server
    text = f'<!DOCTYPE step SYSTEM "{url}/evil.dtd">\n<step id="a"><script>x</script></step>'
    assert "<!DOCTYPE declarations are not allowed" in error(text).message
    closed_port = '<!DOCTYPE step SYSTEM "http://127.0.0.1:1/x.dtd"><step id="a"><script/></step>'
    assert "not allowed" in error(closed_port).message
    assert requests == []


@pytest.mark.timeout(5)
def test_spec_2_5_parameter_entity_is_refused_without_any_request(
    dtd_server: tuple[str, list[str]],
) -> None:
    url, requests = dtd_server
    text = (
        f'<!DOCTYPE step [<!ENTITY % remote SYSTEM "{url}/p.dtd"> %remote;]>\n'
        '<step id="a"><script>x</script></step>'
    )
    assert "not allowed" in error(text).message
    assert requests == []


@pytest.mark.timeout(5)
def test_spec_2_5_entity_reference_without_a_dtd_is_an_error_not_an_expansion() -> None:
    exc = error('<step id="a" retry="&lol9;"><script>x</script></step>')
    assert "bare '&'" in exc.message


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    "text",
    [
        # quadratic blowup: one huge attribute value, one huge name, many attributes
        '<step id="' + "a" * 1_000_000 + '"><script/></step>',
        '<step id="a" ' + "r" * 1_000_000 + '="1"><script/></step>',
        "<" + "s" * 1_000_000 + "/>",
        '<step id="a" ' + " ".join(f'a{i}="1"' for i in range(80_000)) + "><script/></step>",
        '<step id="a" retry="' + "&amp;" * 200_000 + '"><script/></step>',
        '<step id="a" retry-delay="' + "1" * 1_000_000 + 's"><script/></step>',
        "<step id='a'" + " " * 1_000_000,
        "<!--" + "-" * 1_000_000,
        "<" * 1_000_000,
        "<a>" * 300_000,
    ],
    ids=[
        "huge-id",
        "huge-attribute-name",
        "huge-element-name",
        "80000-attributes",
        "200000-references",
        "huge-duration",
        "unclosed-huge-tag",
        "unclosed-huge-comment",
        "million-lt",
        "300000-open-tags",
    ],
)
def test_spec_2_5_huge_inputs_are_refused_quickly(text: str) -> None:
    exc = error(text)
    assert len(exc.message) < 400


def test_default_timeout_applies_only_to_steps_without_a_timeout() -> None:
    """spec §6.1: `Woml.default_timeout` replaces the 30s default, never an explicit value."""
    from datetime import timedelta

    wf = parse(
        '<step id="a"><script>1</script></step><step id="b" timeout="2s"><script>1</script></step>',
        default_timeout=timedelta(seconds=5),
    )
    assert [s.timeout for s in wf.steps] == [timedelta(seconds=5), timedelta(seconds=2)]
    with pytest.raises(ValueError, match="default_timeout"):
        parse('<step id="a"><script>1</script></step>', default_timeout=timedelta(0))
