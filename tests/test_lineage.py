"""The key lineage (spec §10.3): every request that carried a step's idempotency key and
what the server did with it, beside the server's own ledger (spec §8).

The verdicts are checked on real runs against the real demo API on 127.0.0.1 (real
scripts in the real worker, real HTTP), and on hand-written event sequences where a
server other than the demo is needed (no replay header, a hidden key, injected faults).
The details panel and the text timeline are read as a user would: the HTML parsed with
lxml, the text line by line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from lxml import etree
from timeline_runs import Recorder, workflow

import woml_magic as wm
from woml_magic import timeline
from woml_magic.demo import DemoAPI
from woml_magic.events import CallFinished, CallStarted
from woml_magic.model import Run
from woml_magic.policy import RetryPolicy
from woml_magic.redaction import REDACTED
from woml_magic.timeline import LineageTable, ledger_line, lineage_table, render_html, render_text
from woml_magic.timeline.faults import fault_kinds
from woml_magic.timeline.lineage import (
    VERDICT_WORDS,
    KeyUse,
    lineage,
    step_lineage,
)

KEYED = 'idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey},'
EVIL = "<script>alert('x')</script>"
DROP = "drop-response (--fault create-charge@1=drop-response)"


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as server:
        yield server


def charge(url: str, *, keyed: bool, name: str | None = "create-charge",
           attrs: str = 'retry="3" retry-delay="100ms"') -> str:
    """One step charging 25 EUR, as in test_http_engine.py."""
    options = f', {{name: "{name}"}}' if name else ""
    return f"""<step id="charge" {attrs}><script>
const response = await services.http.request({{
  method: "POST", url: "{url}/charges", json: {{amount: 2500, currency: "eur"}},
  {KEYED if keyed else ""} timeout: "2s"
}}{options});
return response.data;
</script></step>"""


def verdicts(uses: list[KeyUse] | tuple[KeyUse, ...]) -> list[str]:
    return [u.verdict for u in uses]


def by_class(root: etree._Element, cls: str) -> list[etree._Element]:
    return root.xpath(f".//*[contains(concat(' ', @class, ' '), ' {cls} ')]")  # type: ignore[no-any-return]


def text_of(el: etree._Element) -> str:
    return " ".join("".join(el.itertext()).split())


def lineage_rows(page: str, step: str) -> list[dict[str, str]]:
    """The key lineage table of ``step`` in a rendered page: one dict per row, by column."""
    root = etree.fromstring(page.encode())
    (box,) = root.xpath(f".//div[@class='woml-lineage'][@data-step='{step}']")
    tables = by_class(box, "woml-lineage-table")
    if not tables:
        return []
    (table,) = tables
    head = [th.text for th in table.findall("tr")[0].findall("th")]
    return [
        {**dict(zip(head, [text_of(td) for td in tr.findall("td")], strict=True)),
         "data-verdict": tr.get("data-verdict"), "data-n": tr.get("data-n")}
        for tr in table.findall("tr")[1:]
    ]


def text_block(text: str, start: str) -> list[str]:
    """The text timeline's lines from the one starting (stripped) with ``start`` to the
    end of its step."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    block = []
    for line in lines[i:]:
        if not line.strip() or line.startswith("step "):
            break
        block.append(line)
    return block


# --- real runs against the demo API ---------------------------------------------------


def test_a_lost_keyed_response_is_retried_and_replayed_one_charge_recorded(
    api: DemoAPI,
) -> None:
    """spec §4.2, §8: the first request executed and its answer was lost; the retry with
    the same key is replayed by the server, which proves the first executed."""
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    uses = lineage(run, "charge")
    assert verdicts(uses) == ["no-answer", "replayed"]
    lost, replay = uses
    assert (lost.attempt, lost.status, replay.attempt, replay.status) == (1, None, 2, 201)
    assert "ambiguous" in lost.reason
    assert "executed this one and its answer was lost" in lost.reason
    assert "Idempotent-Replayed: true" in replay.reason
    assert {u.key for u in uses} == {run.steps["charge"].idempotency_key}
    assert (replay.name, replay.method, replay.url) == ("create-charge", "POST",
                                                        f"{api.url}/charges")
    assert ledger_line(api.records("charges")) == "1 charge recorded"
    assert step_lineage(run, "charge").unkeyed == ()
    assert step_lineage(run, "charge").summary() == (
        "2 requests carried the key: 1 no answer, 1 replayed"
    )


def test_a_lost_unkeyed_response_is_ambiguous_and_a_second_run_charges_twice(
    api: DemoAPI,
) -> None:
    """spec §4.2: without a key the step fails closed; charging again in another run
    (the user re-runs the cell) duplicates the charge, and the ledger says so."""
    api.drop_response_next(1)
    first = wm.run(charge(api.url, keyed=False), clock="simulated")
    assert first.steps["charge"].status == "failed-closed"
    assert lineage(first, "charge") == []
    lin = step_lineage(first, "charge")
    assert lin.summary() == "no request carried the key"
    assert verdicts(lin.unkeyed) == ["no-answer"]
    assert "ambiguous" in lin.unkeyed[0].reason
    assert lin.unkeyed_summary() == (
        "1 request carried no key (a repeated unkeyed POST can duplicate its effect)"
    )
    assert ledger_line(api.records("charges")) == "1 charge recorded"

    second = wm.run(charge(api.url, keyed=False), clock="simulated")
    assert verdicts(step_lineage(second, "charge").unkeyed) == ["executed"]
    assert ledger_line(api.records("charges")) == "2 charges recorded: a duplicate"


def test_a_script_that_resends_by_itself_without_a_key_charges_twice(api: DemoAPI) -> None:
    """The script catches the lost response and sends again: the attempt succeeds (the
    guard of spec §4.2 applies only when the attempt then fails), the effect is doubled."""
    api.drop_response_next(1)
    doc = f"""<step id="charge"><script>
const req = {{method: "POST", url: "{api.url}/charges", json: {{amount: 2500, currency: "eur"}}}};
try {{
  return (await services.http.request(req)).data;
}} catch (e) {{
  return (await services.http.request(req)).data;  // "it failed, try again"
}}
</script></step>"""
    run = wm.run(doc, clock="simulated")
    assert run.steps["charge"].status == "succeeded"
    lin = step_lineage(run, "charge")
    assert verdicts(lin.unkeyed) == ["no-answer", "executed"]
    assert [u.attempt for u in lin.unkeyed] == [1, 1]
    assert "can duplicate" in (lin.unkeyed_summary() or "")
    table = lineage_table(run, records=api.records("charges"))
    assert table.ledger == "2 charges recorded: a duplicate"
    assert str(table).rstrip().endswith("ledger: 2 charges recorded: a duplicate")


def test_a_concurrent_duplicate_is_rejected_409_while_the_first_is_in_flight(
    api: DemoAPI,
) -> None:
    """docs/demo-api.md rule 7: the same key while the first request is still being
    processed (its response delayed) → 409 with Retry-After; the retry later replays."""
    api.delay_next(1, 0.5)
    doc = f"""<step id="charge" retry="2" retry-delay="1s"><script>
const req = {{method: "POST", url: "{api.url}/charges", json: {{amount: 2500, currency: "eur"}},
             {KEYED}}};
if (attempt.number === 1) {{
  const both = await Promise.allSettled([services.http.request(req), services.http.request(req)]);
  throw new Error("sent twice: " + both.map(r => r.status).join(", "));
}}
return (await services.http.request(req)).data;
</script></step>"""
    run = wm.run(doc, clock="simulated")
    assert sorted(r.outcome for r in api.requests) == ["conflict", "executed", "replayed"]
    uses = lineage(run, "charge")
    assert [u.attempt for u in uses] == [1, 1, 2]
    # Which of the two concurrent requests arrived first is up to the network.
    assert sorted(verdicts(uses[:2])) == ["executed", "rejected-409"]
    assert uses[2].verdict == "replayed"
    (conflict,) = [u for u in uses if u.verdict == "rejected-409"]
    assert conflict.status == 409
    assert conflict.words == "rejected 409 (in flight)"
    assert "still in flight (Retry-After: 1)" in conflict.reason
    assert "still being processed" in conflict.reason  # the server's own words
    assert ledger_line(api.records("charges")) == "1 charge recorded"


def test_reusing_the_key_with_a_different_body_is_rejected_422(api: DemoAPI) -> None:
    """docs/demo-api.md rule 6: a body that changes between attempts (here the amount)
    reuses the key for another operation → 422; the lost first request had executed."""
    api.drop_response_next(1)
    doc = f"""<step id="charge" retry="2" retry-delay="1s"><script>
return (await services.http.request({{method: "POST", url: "{api.url}/charges",
  json: {{amount: 1000 + attempt.number, currency: "eur"}}, {KEYED}}})).data;
</script></step>"""
    run = wm.run(doc, clock="simulated")
    assert run.steps["charge"].status == "failed"
    lost, reused = lineage(run, "charge")
    assert (lost.verdict, reused.verdict, reused.status) == ("no-answer", "rejected-422", 422)
    assert "reused with a different body" in reused.reason
    assert "refused as reused, so the server executed this one" in lost.reason
    assert ledger_line(api.records("charges")) == "1 charge recorded"


def test_a_missing_key_is_rejected_400_when_the_api_requires_keys() -> None:
    """spec §8: DemoAPI(require_keys=True) refuses a POST without a key with 400; the
    request is listed among those that carried no key."""
    with DemoAPI(require_keys=True) as api:
        run = wm.run(charge(api.url, keyed=False, attrs=""), clock="simulated")
    lin = step_lineage(run, "charge")
    assert lin.uses == ()
    (refused,) = lin.unkeyed
    assert (refused.verdict, refused.status) == ("rejected-400", 400)
    assert refused.words == "rejected 400 (key missing)"
    assert "requires a key and none was sent" in refused.reason
    assert api.records("charges") == []
    assert ledger_line(api.records("charges")) == "0 charges recorded"


def test_errors_before_execution_are_not_key_verdicts_and_were_not_stored(
    api: DemoAPI,
) -> None:
    """fail_next answers 503 before anything runs: an error, not a verdict on the key;
    the request that then executes shows the key had not been used up."""
    api.fail_next(2, status=503)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    uses = lineage(run, "charge")
    assert verdicts(uses) == ["error", "error", "executed"]
    assert [u.status for u in uses] == [503, 503, 201]
    assert "not a verdict on the key" in uses[0].reason
    assert "executed afresh: this was not stored" in uses[1].reason
    assert step_lineage(run, "charge").summary() == (
        "3 requests carried the key: 2 errors, 1 executed"
    )


def test_a_reattached_named_call_is_listed_as_not_sent(api: DemoAPI) -> None:
    """spec §4.3: attempt 2 reattaches the named call's journaled 2xx answer; the server
    saw the request once."""
    doc = f"""<step id="checkout" retry="2" retry-delay="0s"><script>
const customer = await services.http.request(
  {{method: "POST", url: "{api.url}/customers", json: {{email: "a@example.com"}}, {KEYED}}},
  {{name: "create-customer"}});
if (attempt.number === 1) throw new Error("something later failed");
return customer.data.id;
</script></step>"""
    run = wm.run(doc, clock="simulated")
    assert len(api.requests) == 1
    sent, reattached = lineage(run, "checkout")
    assert (sent.verdict, reattached.verdict) == ("executed", "reattached")
    assert reattached.status == 201
    assert reattached.words == "reattached (not sent)"
    assert "not sent" in reattached.reason
    assert "create-customer" in reattached.reason
    table = lineage_table(run, records=api.records("customers"), noun="customer")
    assert table.ledger == "1 customer recorded"


def test_the_details_panel_has_a_key_lineage_table_per_step_that_made_calls(
    api: DemoAPI,
) -> None:
    api.drop_response_next(1)
    doc = charge(api.url, keyed=True) + '<step id="later"><script>return 1;</script></step>'
    run = wm.run(doc, clock="simulated")
    page = render_html(run)
    root = etree.fromstring(page.encode())
    boxes = by_class(root, "woml-lineage")
    assert [b.get("data-step") for b in boxes] == ["charge"]  # "later" made no calls
    (charge_step,) = root.xpath(".//div[@class='woml-step'][@data-step='charge']")
    assert charge_step[-1] is boxes[0]  # after the step's attempts
    (summary,) = by_class(boxes[0], "woml-lineage-summary")
    assert text_of(summary) == (
        "Key lineage · 2 requests carried the key: 1 no answer, 1 replayed"
    )
    rows = lineage_rows(page, "charge")
    assert [(r["attempt"], r["call"], r["method"], r["status"], r["server's verdict"])
            for r in rows] == [
        ("#1", "create-charge", "POST", "—", "no answer"),
        ("#2", "create-charge", "POST", "201", "replayed"),
    ]
    assert [(r["data-verdict"], r["data-n"]) for r in rows] == [("no-answer", "1"),
                                                              ("replayed", "2")]
    assert all(r["URL"] == f"{api.url}/charges" for r in rows)
    assert "its answer was lost" in rows[0]["why"]
    for row in by_class(boxes[0], "woml-lineage-row"):
        assert row.get("data-step") == "charge"
    assert not by_class(boxes[0], "woml-lineage-unkeyed")
    assert "<script" not in page


def test_the_text_timeline_has_the_key_lineage_in_a_few_lines_per_step(api: DemoAPI) -> None:
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    block = text_block(render_text(run), "key lineage")
    flat = [" ".join(line.split()) for line in " \n".join(block).split("\n    #")]
    assert flat[0] == "key lineage 2 requests carried the key: 1 no answer, 1 replayed"
    assert flat[1].startswith(f"1 create-charge POST {api.url}/charges → no answer · ")
    assert flat[2].startswith(f"2 create-charge POST {api.url}/charges → 201 replayed · ")
    assert all(len(line) <= 100 for line in block)


def test_the_text_timeline_lists_requests_without_a_key(api: DemoAPI) -> None:
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=False), clock="simulated")
    block = " ".join(" ".join(text_block(render_text(run), "key lineage")).split())
    assert "key lineage no request carried the key" in block
    assert ("no key 1 request carried no key (a repeated unkeyed POST can duplicate its "
            "effect)") in block
    assert f"#1 create-charge POST {api.url}/charges → no answer ·" in block


def test_lineage_table_shows_as_html_in_jupyter_and_as_text_in_a_terminal(
    api: DemoAPI,
) -> None:
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    table = timeline.lineage_table(run, records=api.records("charges"))
    assert isinstance(table, LineageTable)
    assert "lineage_table" in timeline.__all__
    page = table._repr_html_()
    root = etree.fromstring(page.encode())
    assert root.get("class") == "woml-lineage-view"
    assert root.get("data-run") == run.id
    assert [c.get("class") or c.tag for c in root] == [
        "style", "woml-lineage-head", "woml-step", "woml-ledger",
    ]
    (ledger,) = by_class(root, "woml-ledger")
    assert text_of(ledger) == "ledger: 1 charge recorded"
    assert [r["data-verdict"] for r in lineage_rows(page, "charge")] == ["no-answer", "replayed"]
    (key,) = by_class(root, "woml-key")
    assert key.text == run.steps["charge"].idempotency_key
    css = root.find("style").text or ""
    for group in re.findall(r"(?:^|})([^{}]+)\{", css):
        for sel in group.split(","):
            assert sel.strip().startswith(".woml-lineage-view"), sel  # nothing leaks out
    text = str(table)
    assert repr(table) == text
    lines = text.splitlines()
    assert lines[0] == f"key lineage · workflow cell · run {run.id}"
    assert f"step charge · key {run.steps['charge'].idempotency_key}" in lines
    assert lines[-1] == "ledger: 1 charge recorded"
    assert "<" not in text


def test_lineage_table_of_one_step_without_records_or_of_a_run_without_calls() -> None:
    run = wm.run('<step id="a"><script>return 1;</script></step>', clock="simulated")
    empty = lineage_table(run)
    assert empty.lineages == ()
    assert empty.ledger is None
    assert "no step made an HTTP call" in str(empty)
    assert "no step made an HTTP call" in empty._repr_html_()
    one = lineage_table(run, "a")
    assert [lin.step_id for lin in one.lineages] == ["a"]
    assert "no request carried the key" in str(one)
    with pytest.raises(ValueError, match=r"has no step 'b'; its steps are: 'a'"):
        lineage_table(run, "b")


# --- verdicts that need another server than the demo -----------------------------------


def call(r: Recorder, step: str, number: int, index: int, *, status: int | None = 201,
         outcome: str = "response", data: Any = None, headers: dict[str, str] | None = None,
         key: str | None = "step", name: str | None = "create-charge", replayed: bool = False,
         injected: str | None = None, url: str = "http://127.0.0.1:9/charges",
         method: str = "POST") -> None:
    """One call of attempt ``number`` with its answer: ``key`` "step" sends the step's
    key, None none, anything else that value."""
    value = r.key(step) if key == "step" else key
    at = number + index / 10
    r.emit(CallStarted(r.run.id, at, step_id=step, number=number, call_index=index, name=name,
                       method=method, url=url, request_headers={},
                       idempotency_header=None if key is None else "Idempotency-Key",
                       idempotency_value=value))
    response = None if status is None else {"status": status, "headers": headers or {},
                                            "data": data}
    r.emit(CallFinished(r.run.id, at + 0.01, step_id=step, number=number, call_index=index,
                        name=name, outcome=outcome, status=status, replayed=replayed,
                        response=response, injected=injected))


def recorded(*calls: dict[str, Any], attempts: int = 2) -> Run:
    """A run of one step ``charge`` whose attempts made ``calls`` (``call``'s keywords
    plus ``n``, the attempt, and ``i``, the call's index in it)."""
    r = Recorder(workflow(("charge", RetryPolicy(attempts=attempts))))
    r.step("charge", 0.0)
    started: set[int] = set()
    for c in calls:
        n, i = c.pop("n"), c.pop("i", 0)
        if n not in started:
            r.start("charge", n, float(n))
            started.add(n)
        call(r, "charge", n, i, **c)
    return r.run


CHARGE = {"id": "ch_0001", "object": "charge", "amount": 2500, "currency": "eur"}


def test_a_2xx_body_identical_to_the_first_executed_one_is_a_replay() -> None:
    """A server that replays without saying so (no Idempotent-Replayed header): the
    same record again is its stored answer, not a second execution."""
    run = recorded({"n": 1, "data": CHARGE}, {"n": 2, "data": dict(CHARGE)})
    first, again = lineage(run, "charge")
    assert (first.verdict, again.verdict) == ("executed", "replayed")
    assert again.reason == "its body is identical to the first executed answer (attempt 1)"


@pytest.mark.parametrize(
    ("headers", "verdict"),
    [
        ({"Idempotent-Replayed": "true"}, "replayed"),
        ({"IDEMPOTENT-REPLAYED": " TRUE "}, "replayed"),
        ({"idempotent-replayed": "false"}, "executed"),
        ({"idempotent-replayed": REDACTED}, "executed"),  # configured as sensitive
        ({}, "executed"),
    ],
)
def test_the_replay_header_is_read_case_insensitively(
    headers: dict[str, str], verdict: str
) -> None:
    run = recorded({"n": 1, "data": CHARGE, "headers": headers})
    assert verdicts(lineage(run, "charge")) == [verdict]


def test_a_key_executed_twice_with_different_answers_warns_of_a_duplicate() -> None:
    """A server that does not honour keys (or whose key expired) executes the repeat."""
    run = recorded({"n": 1, "data": CHARGE}, {"n": 2, "data": {**CHARGE, "id": "ch_0002"}})
    lin = step_lineage(run, "charge")
    assert verdicts(lin.uses) == ["executed", "executed"]
    (warning,) = lin.warnings()
    assert warning.startswith("the key was executed 2 times: the server did not replay it")
    root = etree.fromstring(render_html(run).encode())
    (shown,) = by_class(root, "woml-lineage-warning")
    assert "executed 2 times" in text_of(shown)
    assert "warning the key was executed 2 times" in " ".join(render_text(run).split())


def test_requests_with_another_or_a_hidden_key_are_listed_apart() -> None:
    run = recorded(
        {"n": 1, "key": "refund-42", "url": "http://127.0.0.1:9/refunds"},
        {"n": 1, "i": 1, "key": REDACTED},
        {"n": 1, "i": 2, "key": None, "method": "GET", "url": "http://127.0.0.1:9/charges"},
    )
    lin = step_lineage(run, "charge")
    assert lin.uses == ()
    assert [u.key for u in lin.other_keys] == ["refund-42", REDACTED]
    assert lin.other_keys[0].reason.startswith("another key; ")
    assert "hidden" in lin.other_keys[1].reason
    assert lin.other_summary() == "2 requests carried another key"
    # A GET repeats safely: no warning about duplicates.
    assert lin.unkeyed_summary() == "1 request carried no key"
    assert lin.requests == 3
    root = etree.fromstring(render_html(run).encode())
    (other,) = by_class(root, "woml-lineage-other")
    assert "2 requests carried another key: #1 POST http://127.0.0.1:9/refunds → 201" in (
        text_of(other))
    (unkeyed,) = by_class(root, "woml-lineage-unkeyed")
    assert text_of(unkeyed).startswith("1 request carried no key: #1 GET")


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        ("network-error", "not delivered (network error): nothing reached the server"),
        ("running", "in flight: no answer yet"),
        ("ambiguous", "effect unknown (ambiguous): the request may have reached the server"),
    ],
)
def test_requests_without_an_answer_say_why(outcome: str, reason: str) -> None:
    run = recorded({"n": 1, "status": None, "outcome": outcome})
    (use,) = lineage(run, "charge")
    assert (use.verdict, use.reason) == ("no-answer", reason)


def test_two_lost_requests_before_a_replay_do_not_say_which_one_executed() -> None:
    run = recorded(
        {"n": 1, "status": None, "outcome": "ambiguous"},
        {"n": 2, "status": None, "outcome": "ambiguous"},
        {"n": 3, "data": CHARGE, "headers": {"Idempotent-Replayed": "true"}},
        attempts=3,
    )
    first, second, _ = lineage(run, "charge")
    for use in (first, second):
        assert use.reason.endswith("one of the 2 unanswered requests before it executed")


def test_every_verdict_has_words() -> None:
    assert set(VERDICT_WORDS) == {
        "executed", "replayed", "rejected-409", "rejected-422", "rejected-400", "error",
        "no-answer", "reattached",
    }


# --- injected faults (spec §10.2) -----------------------------------------------------


def test_an_injected_fault_is_marked_in_the_calls_the_lineage_the_text_and_the_bar() -> None:
    run = recorded(
        {"n": 1, "status": None, "outcome": "ambiguous", "injected": DROP},
        {"n": 2, "data": CHARGE, "headers": {"Idempotent-Replayed": "true"}},
    )
    lost, _ = lineage(run, "charge")
    assert lost.injected == DROP
    assert lost.reason.endswith("(injected: drop-response)")
    page = render_html(run)
    root = etree.fromstring(page.encode())
    (details,) = root.xpath(".//details[@data-n='1']")
    (badge,) = by_class(details, "woml-injected")
    assert (badge.tag, badge.text, badge.get("title")) == ("span", "injected: drop-response", DROP)
    (calls,) = by_class(details, "woml-calls")
    verdict_cell = calls.findall("tr")[1].findall("td")[5]
    assert verdict_cell.text.strip() == "effect unknown (ambiguous)"
    assert not by_class(root.xpath(".//details[@data-n='2']")[0], "woml-injected")
    rows = lineage_rows(page, "charge")
    assert rows[0]["server's verdict"] == "no answer injected: drop-response"
    assert rows[1]["server's verdict"] == "replayed"
    svg = "{http://www.w3.org/2000/svg}"
    bars = root.findall(f".//{svg}g")
    (marked,) = [g for g in bars if "woml-injected" in (g.get("class") or "").split()]
    assert marked.get("data-n") == "1"
    assert marked.findtext(f"{svg}title").endswith(" · injected: drop-response")
    assert marked.get("aria-label") == "attempt 1 of charge: running (injected: drop-response)"
    text = " ".join(render_text(run).split())
    assert "→ ambiguous · effect unknown (ambiguous) · injected: drop-response · name" in text
    assert "(injected: drop-response)" in text


def test_an_injected_status_was_not_sent_so_it_is_no_verdict_of_the_server() -> None:
    """status=NNN and network-error are answered without sending (spec §10.2)."""
    run = recorded({"n": 1, "status": 409,
                    "injected": "status=409 (--fault create-charge@1=status=409)"})
    (use,) = lineage(run, "charge")
    assert (use.verdict, use.status) == ("no-answer", 409)
    assert use.reason == (
        "not sent: the fault was injected before sending (injected: status=409)"
    )


@pytest.mark.parametrize(
    ("injected", "kinds"),
    [
        (DROP, ("drop-response",)),
        ("status=503 (--fault create-charge@*=status=503)", ("status=503",)),
        ("delay=2s (--fault a@1=delay=2s), drop-response (--fault a@1=drop-response)",
         ("delay=2s", "drop-response")),
        ("something  else", ("something else",)),
    ],
)
def test_fault_kinds_read_the_injected_description(injected: str, kinds: tuple[str, ...]) -> None:
    assert fault_kinds(injected) == kinds


# --- the ledger ------------------------------------------------------------------------


def record(n: int, amount: int = 2500, **extra: Any) -> dict[str, Any]:
    return {"id": f"ch_{n:04d}", "object": "charge", "amount": amount, "currency": "eur",
            "customer": None, "created": f"2025-01-01T00:00:0{n}Z", **extra}


@pytest.mark.parametrize(
    ("records", "line"),
    [
        ([], "0 charges recorded"),
        ([record(1)], "1 charge recorded"),
        ([record(1), record(2)], "2 charges recorded: a duplicate"),
        ([record(1), record(2, amount=99)], "2 charges recorded"),
        ([record(1), record(2), record(3)], "3 charges recorded: 2 duplicates"),
        ([record(1), record(2), record(3, amount=1), record(4, amount=1)],
         "4 charges recorded: 2 duplicates"),
    ],
)
def test_the_ledger_line_counts_records_and_duplicates(
    records: list[dict[str, Any]], line: str
) -> None:
    assert ledger_line(records) == line


def test_the_ledger_line_counts_any_noun() -> None:
    assert ledger_line([{"email": "a@example.com"}], "customer") == "1 customer recorded"
    assert ledger_line([], "entry", plural="entries") == "0 entries recorded"


# --- untrusted text ---------------------------------------------------------------------


def test_the_lineage_escapes_what_the_server_and_the_script_wrote() -> None:
    run = recorded(
        {"n": 1, "status": 422, "data": {"detail": EVIL}, "url": f"http://127.0.0.1:9/{EVIL}",
         "name": EVIL},
    )
    page = render_html(run)
    root = etree.fromstring(page.encode())
    assert not root.xpath("//*[local-name()='script']")
    (row,) = lineage_rows(page, "charge")
    assert EVIL in row["why"]
    assert row["call"] == EVIL
    table = lineage_table(run)
    etree.fromstring(table._repr_html_().encode())
    assert "<script>" not in table._repr_html_()


def test_control_characters_from_the_server_are_harmless_in_the_text() -> None:
    run = recorded({"n": 1, "status": 422, "data": {"detail": "bad\x1b[31m red\r\nline"}})
    text = render_text(run) + str(lineage_table(run))
    assert "\x1b" not in text
    assert "bad^[[31m red line" in text


# --- in a browser: the rows follow the selection, and read in both themes ---------------




def replayed_run() -> Run:
    return recorded(
        {"n": 1, "status": None, "outcome": "ambiguous", "injected": DROP},
        {"n": 2, "data": CHARGE, "headers": {"Idempotent-Replayed": "true"}},
    )


def marked_rows(page: Any) -> list[str | None]:
    return [
        row.get_attribute("data-n")
        for row in page.query_selector_all("tr.woml-lineage-row.woml-selected")
    ]


@pytest.mark.browser
def test_selecting_an_attempt_marks_its_lineage_rows_and_a_row_selects_its_attempt(
    open_page: Any,
) -> None:
    page = open_page(timeline.interactive_html(replayed_run()))
    assert marked_rows(page) == []
    page.click('.woml-seg.woml-attempt[data-n="2"]')
    assert marked_rows(page) == ["2"]
    page.click('tr.woml-lineage-row[data-n="1"] td')
    assert marked_rows(page) == ["1"]
    assert page.eval_on_selector_all(
        ".woml-seg.woml-selected", "els => els.map(e => e.dataset.n)") == ["1"]
    assert page.eval_on_selector('details[data-n="1"]', "d => d.open")
    page.click('tr.woml-lineage-row[data-n="1"] td')  # again: unselected
    assert marked_rows(page) == []


@pytest.mark.browser
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_lineage_table_and_badge_meet_wcag_aa_in_light_and_dark(
    open_page: Any, theme: str
) -> None:
    from test_timeline_js import CONTRAST

    run = replayed_run()
    table = lineage_table(run, records=[CHARGE])
    page = open_page(timeline.interactive_html(run) + table._repr_html_(), theme)
    page.click('.woml-seg.woml-attempt[data-n="1"]')  # a selected row has a background
    for sel in (".woml-lineage-summary", "tr.woml-lineage-row td", "tr.woml-selected td",
                "span.woml-injected", ".woml-lineage-table th", ".woml-ledger",
                ".woml-lineage-view .woml-lineage-row td"):
        for ratio in page.eval_on_selector_all(sel, f"els => els.map({CONTRAST})"):
            assert ratio >= 4.5, f"{sel} in {theme}: contrast {ratio:.2f}"


def test_an_injected_drop_response_in_a_real_run_is_marked_injected(api: DemoAPI) -> None:
    """spec §10.2 with the demo API: the fault drops the answer the server sent; the
    retry with the key is replayed; every view says the fault was injected."""
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["create-charge@1=drop-response"])
    assert [r.outcome for r in api.requests] == ["executed", "replayed"]
    lost, replay = lineage(run, "charge")
    assert (lost.verdict, replay.verdict) == ("no-answer", "replayed")
    assert lost.injected == DROP
    assert lost.reason.startswith("sent and answered, but the injected fault discarded the answer")
    assert lost.reason.endswith("its answer was lost (injected: drop-response)")
    rows = lineage_rows(render_html(run), "charge")
    assert rows[0]["server's verdict"] == "no answer injected: drop-response"
    assert "injected: drop-response" in " ".join(render_text(run).split())
    assert ledger_line(api.records("charges")) == "1 charge recorded"
