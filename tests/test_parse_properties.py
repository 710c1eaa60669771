"""Properties of the parser over generated documents (spec §2.5).

For any ``str`` at all, ``parse`` returns a ``Workflow`` or raises ``WomlSyntaxError``
with a position inside the text — never another exception, never a hang. Valid
documents built from random parts parse to exactly what was built. The examples of
the tests below add up to 11,000.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from woml_magic.errors import WomlSyntaxError
from woml_magic.model import Workflow
from woml_magic.parse import parse

FAST = settings(
    deadline=None,
    database=None,  # no .hypothesis/ directory in the checkout
    # The same 11,000 generated documents on every run: CI must not turn red at random.
    # To explore new inputs, run once with derandomize=False.
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SEEDS = [
    '<step id="charge" retry="3" retry-backoff="exponential" retry-delay="1s" '
    'retry-max-delay="30s">\n  <script>...</script>\n</step>',
    '<?xml version="1.0"?>\n<!-- c -->\n<workflow id="w">\n'
    '  <step id="a" timeout="5s"><script><![CDATA[\n return a < b && c; ]]></script></step>\n'
    "  <step id='b' retry='2'><script lang=\"javascript\">if (x &amp; y) {}</script></step>\n"
    "</workflow>\n",
    '<step id="a"><script/></step>\r\n<step id="b"><script>1</script></step>',
]
FRAGMENTS = [
    "<", ">", "&", ";", "]]>", "<![CDATA[", "<!DOCTYPE x>", "<!--", "-->", "<?", "?>",
    "</script>", "<script>", "</step>", "<step>", '<step id="x">', "<workflow>",
    '"', "'", "=", " retry=\"2\"", " retry-delay-max=\"1s\"", " timeout=\"0s\"", " id=\"\"",
    "&amp;", "&#0;", "&#x41;", "&lol;", "\n", "\r", "\t", "\x00", "\ud800", "é", "\u2028",
    "<retry/>", "<!ENTITY a 'b'>", "<?xml version='1.0'?>", "%", "xmlns:p='u'", "p:x='1'",
]  # fmt: skip

ANY_CHAR = st.characters(codec=None)  # every code point, lone surrogates included
MARKUP_CHAR = st.sampled_from([*"<>/=\"'&;!?[]-x \n\r\t", "é", "\x00"])


def check(text: str) -> Workflow | None:
    """The parser's contract: a Workflow or a WomlSyntaxError at a real position."""
    try:
        return parse(text)
    except WomlSyntaxError as caught:
        exc = caught
    lines = max(1, text.count("\n") + text.count("\r") + 1)
    assert 1 <= exc.line <= lines
    assert exc.column >= 1
    assert exc.message
    assert "\n" not in exc.message
    return None


@pytest.mark.timeout(120)
@settings(FAST, max_examples=3000)
@given(st.text(alphabet=st.one_of(ANY_CHAR, MARKUP_CHAR), max_size=300))
def test_any_random_text_gives_a_workflow_or_a_woml_syntax_error(text: str) -> None:
    check(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid document with characters inserted, deleted, replaced or spliced in."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "splice", "cut"]))
        if kind == "insert":
            text = text[:at] + draw(st.one_of(ANY_CHAR, MARKUP_CHAR)) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + 1 :]
        elif kind == "replace":
            text = text[:at] + draw(MARKUP_CHAR) + text[at + 1 :]
        elif kind == "splice":
            text = text[:at] + draw(st.sampled_from(FRAGMENTS)) + text[at:]
        else:
            end = draw(st.integers(at, min(len(text), at + 20)))
            text = text[:at] + text[end:]
    return text


@pytest.mark.timeout(120)
@settings(FAST, max_examples=6000)
@given(mutated())
def test_mutated_documents_give_a_workflow_or_a_woml_syntax_error(text: str) -> None:
    check(text)


IDS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", fullmatch=True)
SPACE = st.sampled_from(["", " ", "\n", "\n  ", "\r\n", " <!-- note --> ", "\t"])
TAG_SPACE = st.sampled_from([" ", "\n", "\n  ", "\r\n", "\t"])  # inside a tag
SCRIPT = (
    st.lists(
        st.sampled_from([*"abc <>&;=()[]{}\"'\n\t!?/*+-é", "]]", "</scrip", "<!--", "&amp;"]),
        max_size=40,
    )
    .map("".join)
    .filter(lambda s: "</script" not in s and not s.strip(" \t\r\n").startswith("<![CDATA["))
)


@st.composite
def valid_document(draw: st.DrawFn) -> tuple[str, list[dict[str, object]], str]:
    """A valid document and the steps it must parse to."""
    ids = draw(st.lists(IDS, min_size=1, max_size=5, unique=True))
    parts, expected = [], []
    for step_id in ids:
        attempts = draw(st.integers(1, 10))
        backoff = draw(st.sampled_from(["fixed", "exponential"]))
        delay_ms = draw(st.integers(0, 5000))
        timeout_ms = draw(st.integers(1, 86_400_000))
        script = draw(SCRIPT)
        cdata = draw(st.booleans()) and "]]>" not in script
        body = f"<![CDATA[{script}]]>" if cdata else script
        parts.append(
            f'<step{draw(TAG_SPACE)}id="{step_id}" retry="{attempts}" '
            f'retry-backoff="{backoff}"{draw(TAG_SPACE)}retry-delay="{delay_ms}ms" '
            f'timeout="{timeout_ms}ms">{draw(SPACE)}<script>{body}</script>{draw(SPACE)}</step>'
        )
        expected.append(
            {
                "id": step_id,
                "attempts": attempts,
                "backoff": backoff,
                "delay": timedelta(milliseconds=delay_ms),
                "timeout": timedelta(milliseconds=timeout_ms),
                "script": script.replace("\r\n", "\n").replace("\r", "\n"),
            }
        )
    joined = draw(SPACE).join(parts)
    if draw(st.booleans()):
        workflow_id = draw(IDS)
        return (
            f'<workflow id="{workflow_id}">{draw(SPACE)}{joined}</workflow>',
            expected,
            workflow_id,
        )
    return f"{draw(SPACE)}{joined}{draw(SPACE)}", expected, "cell"


@pytest.mark.timeout(120)
@settings(FAST, max_examples=2000)
@given(valid_document())
def test_valid_documents_parse_to_exactly_what_they_say(
    case: tuple[str, list[dict[str, object]], str],
) -> None:
    text, expected, workflow_id = case
    wf = parse(text)
    assert wf.id == workflow_id
    got = [
        {
            "id": s.id,
            "attempts": s.policy.attempts,
            "backoff": s.policy.backoff,
            "delay": s.policy.delay,
            "timeout": s.timeout,
            "script": s.script,
        }
        for s in wf.steps
    ]
    assert got == expected
    lines = text.replace("\r\n", "\n").split("\n")
    for s in wf.steps:
        assert f'id="{s.id}"' in "\n".join(lines[s.line - 1 :])
        # the script's first line starts at script_line/script_column in the cell
        first = s.script.split("\n", 1)[0]
        assert lines[s.script_line - 1][s.script_column - 1 :].startswith(first)
