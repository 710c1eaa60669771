"""Completion in a ``%%woml`` cell at many cursor positions (spec §6.4).

``complete`` is a pure function of the cell's text and the cursor; the flags are the
magic's own (read from its argparse parser), the secrets those a kernel would hold. In
each case ``|`` marks the cursor; the table gives the text the completions replace and
every completion's text and kind, in order.
"""

from __future__ import annotations

import pytest

from woml_magic.editing.complete import complete
from woml_magic.editing.flags import flags_of
from woml_magic.magic import WomlMagics

FLAGS = flags_of(WomlMagics.woml_cell.parser)
SECRETS = ("STRIPE_KEY", "API_TOKEN")
STEP = '%%woml --simulate\n<step id="charge" retry="3">\n  <script>\n    {}\n  </script>\n</step>'
TWO_STEPS = ('%%woml\n<workflow id="w">\n  <step id="createCustomer"><script>return 1;</script>'
             '</step>\n  <step id="charge"><script>{}</script></step>\n</workflow>')
REQUEST = "await services.http.request({{ {} }});"
ATTEMPT = ["number", "maxAttempts", "idempotencyKey"]
KEYS = ["method", "url", "headers", "query", "json", "body", "timeout", "idempotency", "form"]


def completions(case: str) -> tuple[str, list[tuple[str, str]]]:
    """(the replaced text, [(text, kind)]) at the ``|`` of ``case``."""
    cursor = case.index("|")
    cell = case.replace("|", "", 1)
    found = complete(cell, cursor, flags=FLAGS, secrets=SECRETS)
    assert found is not None, "a %%woml cell always gets an answer"
    assert found.end == cursor
    return cell[found.start : found.end], [(c.text, c.kind) for c in found.items]


def options(*names: str) -> list[tuple[str, str]]:
    return [(n, "option") for n in names]


def values(*names: str) -> list[tuple[str, str]]:
    return [(n, "value") for n in names]


def kinds(kind: str, names: list[str]) -> list[tuple[str, str]]:
    return [(n, kind) for n in names]


CASES = [
    # -- the %%woml line: flags from the magic's parser, choices where a flag has them
    ("%%woml --cl|", "--cl", options("--clock", "--clients")),
    ("%%woml --si|", "--si", options("--simulate")),
    ("%%woml --clock |", "", values("real", "simulated")),
    ("%%woml --clock s|", "s", values("simulated")),
    ("%%woml --clock=r|", "r", values("real")),
    ("%%woml --engine |", "", values("local", "temporal")),
    ("%%woml --simulate --no-|", "--no-", options("--no-timeline", "--no-lint")),
    ("%%woml --payload |", "", []),  # an expression: nothing to offer
    ("%%woml --payload '{\"a|", "", []),  # inside quotes
    # -- a start tag: elements allowed there
    ("%%woml\n<st|", "st", [("step", "element")]),
    ("%%woml\n<|", "", [("step", "element"), ("workflow", "element")]),
    ("%%woml\n<step id=\"a\"><script>1</script></step>\n<|", "", [("step", "element")]),
    ("%%woml\n<workflow id=\"w\">\n  <|", "", [("step", "element")]),
    ("%%woml\n<step id=\"a\">\n  <sc|", "sc", [("script", "element")]),
    ("%%woml\n<step id=\"a\"><script>1</script><|", "", []),  # a second <script>: no
    ("%%woml\n<step id=\"a\"><script>1</script></|", "", [("step", "element")]),
    # -- attributes not yet used, and their values
    ('%%woml\n<step id="a" retry-b|', "retry-b", [("retry-backoff", "attribute")]),
    ('%%woml\n<step id="a" retry-|', "retry-", kinds("attribute", [
        "retry-backoff", "retry-delay", "retry-max-delay"])),
    ('%%woml\n<step id="a" | retry="3" timeout="5s">', "", kinds("attribute", [
        "retry-backoff", "retry-delay", "retry-max-delay"])),
    ('%%woml\n<step id="a" retry-backoff="fixed" retry-b|', "retry-b", []),
    ('%%woml\n<workflow |', "", [("id", "attribute")]),
    ('%%woml\n<step id="a"><script l|', "l", [("lang", "attribute")]),
    ('%%woml\n<step id="a" retry-backoff="|', "", values("fixed", "exponential")),
    ('%%woml\n<step id="a" retry-backoff="e|', "e", values("exponential")),
    ("%%woml\n<step id='a' retry-backoff='|", "", values("fixed", "exponential")),
    ('%%woml\n<step id="a" retry-backoff=|', "", values('"fixed"', '"exponential"')),
    ('%%woml\n<step id="a" retry="|', "", values(*map(str, range(1, 11)))),
    ('%%woml\n<step id="a" retry="1|', "1", values("1", "10")),
    ('%%woml\n<step id="a" retry-delay="|', "", values("1s", "250ms", "500ms", "2s", "5s",
                                                        "0s")),
    ('%%woml\n<step id="a" retry-delay="3|', "3", values("3ms", "3s", "3m", "3h")),
    ('%%woml\n<step id="a" timeout="1|', "1", values("1ms", "1s", "1m", "1h", "10s")),
    ('%%woml\n<step id="a" retry-max-delay="|', "", values("10s", "30s", "1m", "5m")),
    ('%%woml\n<step id="|', "", []),  # an id: nothing to offer
    # -- a script: members, request keys, secrets, the scope
    (STEP.format("services.|"), "", [("sleep", "function"), ("http", "module"),
                                    ("secret", "function")]),
    (STEP.format("services.s|"), "s", [("sleep", "function"), ("secret", "function")]),
    (STEP.format("await services.http.|"), "", [("request", "function")]),
    (STEP.format("attempt.|"), "", kinds("property", ATTEMPT)),
    (STEP.format("const k = attempt.idem|"), "idem", [("idempotencyKey", "property")]),
    (STEP.format("context.|"), "", kinds("property", ["payload", "steps", "run"])),
    (STEP.format("context.run.|"), "", kinds("property", ["id", "workflow"])),
    (TWO_STEPS.format("context.steps.|"), "", [("createCustomer", "property")]),
    (TWO_STEPS.replace('<step id="charge">', "<step>").format("context.steps.|"), "",
     [("createCustomer", "property")]),  # a step still without its id
    (STEP.format("console.|"), "", kinds("function", ["log", "info", "warn", "error",
                                                      "debug"])),
    (STEP.format(REQUEST.format("me|")), "me", [("method", "key")]),
    (STEP.format(REQUEST.format("|")), "", kinds("key", KEYS)),
    (STEP.format(REQUEST.format('url: "https://x", |')), "", kinds(
        "key", [k for k in KEYS if k != "url"])),
    (STEP.format(REQUEST.format('| url: "https://x"')), "", kinds(
        "key", [k for k in KEYS if k != "url"])),
    (STEP.format("await services.http.request({ url }, { | });"), "", [("name", "key")]),
    (STEP.format(REQUEST.format("url, idempotency: { | }")), "", kinds("key", ["header",
                                                                               "value"])),
    (STEP.format(REQUEST.format('method: "P|"')), "P", values("POST", "PUT", "PATCH")),
    (STEP.format("const http = services.http;\n    await http.request({ ur| });"), "ur",
     [("url", "key")]),
    (STEP.format('services.secret("|'), "", [("API_TOKEN", "secret"), ("STRIPE_KEY", "secret")]),
    (STEP.format('services.secret("ST|")'), "ST", [("STRIPE_KEY", "secret")]),
    (STEP.format("return ser|"), "ser", [("services", "variable")]),
    (STEP.format("const x = { url: 1, m| };"), "", []),  # not a request: no keys
    (STEP.format("// services.|"), "", []),  # a comment
    (STEP.format("/* attempt.|"), "", []),
    (STEP.format("const s = `${attempt.|}`;"), "", kinds("property", ATTEMPT)),
    (STEP.format('const s = "services.|";'), "", []),  # a string
    (STEP.format("const serv|"), "", []),  # declaring a name
    ("%%woml\n<step id=\"a\"><script><![CDATA[ attempt.| ]]></script></step>", "",
     kinds("property", ATTEMPT)),
    # -- between elements, in comments: nothing
    ("%%woml\n<step id=\"a\"><script>1</script></step>\n  |", "", []),
    ("%%woml\n<!-- <st|", "", []),
]


@pytest.mark.parametrize(("case", "replaced", "expected"), CASES, ids=[c[0] for c in CASES])
def test_completions_at_the_cursor(case: str, replaced: str,
                                   expected: list[tuple[str, str]]) -> None:
    assert completions(case) == (replaced, expected)


def test_flags_are_the_magics_own_not_a_second_list() -> None:
    parser = WomlMagics.woml_cell.parser
    declared = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    assert [f.name for f in FLAGS] == declared
    clock = next(f for f in FLAGS if f.name == "--clock")
    assert clock.choices == ("real", "simulated")
    assert clock.usage == "--clock real|simulated"
    assert next(f for f in FLAGS if f.name == "--fault").repeatable


def test_a_used_flag_is_not_offered_again_but_a_repeatable_one_is() -> None:
    assert ("--clock", "option") not in completions("%%woml --clock real --|")[1]
    assert ("--fault", "option") in completions("%%woml --fault a@1=network-error --f|")[1]


def test_a_completion_carries_a_one_line_detail() -> None:
    found = complete('%%woml\n<step id="a" retry-b', 27, flags=FLAGS)
    assert found is not None
    (backoff,) = found.items
    assert backoff.detail.startswith("How the wait between attempts grows")
    assert backoff.detail.endswith("Default: fixed.")
    sleep = complete(STEP.format("services.sl"), STEP.index("{}") + 11)
    assert sleep is not None
    assert sleep.items[0].detail.startswith("services.sleep(duration): ")


@pytest.mark.parametrize("cell", ["print(1)", "%%time\nx = 1", "%%wom", "%woml runs",
                                  " %%woml", "%%womlx --clock"])
def test_outside_a_woml_cell_there_is_no_answer(cell: str) -> None:
    assert complete(cell, len(cell), flags=FLAGS) is None


def test_on_the_word_woml_itself_ipython_completes_the_magics_name() -> None:
    assert complete("%%woml --simulate", 4, flags=FLAGS) is None
