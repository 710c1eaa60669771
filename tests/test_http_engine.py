"""Managed HTTP calls through the whole engine against the real demo API (spec §4.1–§4.3, §8).

Each test runs real scripts in the real worker; the kernel process performs the calls
with httpx against a real server on 127.0.0.1. Nothing is mocked.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.journal import Journal
from woml_magic.timeline import render_html, render_text

KEYED = 'idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey},'


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as server:
        yield server


def charge(url: str, *, keyed: bool, attrs: str = 'retry="3" retry-delay="100ms"',
           name: str | None = "create-charge", extra: str = "") -> str:
    options = f', {{name: "{name}"}}' if name else ""
    return f"""<step id="charge" {attrs}><script>
const response = await services.http.request({{
  method: "POST", url: "{url}/charges", json: {{amount: 2500, currency: "eur"}},
  {KEYED if keyed else ""} {extra} timeout: "2s"
}}{options});
return response.data;
</script></step>"""


def test_the_key_header_sent_is_the_steps_key_in_every_attempt(api: DemoAPI) -> None:
    """spec §3.5/§4.1: 503 twice then 201 with retry="3" → succeeded on attempt 3."""
    api.fail_next(2, status=503)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    sr = run.steps["charge"]
    assert [a.outcome for a in sr.attempts] == ["threw", "threw", "succeeded"]
    assert [a.error.name for a in sr.attempts[:2] if a.error] == ["HttpError", "HttpError"]
    sent = [r.headers["Idempotency-Key"] for r in api.requests]
    assert sent == [sr.idempotency_key] * 3
    assert [c.idempotency_value for a in sr.attempts for c in a.calls] == [sr.idempotency_key] * 3
    assert len(api.records("charges")) == 1


def test_connection_refused_is_a_definitive_network_error_and_is_retried() -> None:
    """spec §4.1: no byte can have reached the server, so the script's throw retries."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    run = wm.run(charge(f"http://127.0.0.1:{port}", keyed=False), clock="simulated")
    sr = run.steps["charge"]
    assert [a.outcome for a in sr.attempts] == ["threw", "threw", "threw"]
    assert {a.error.name for a in sr.attempts if a.error} == {"NetworkError"}
    assert {c.outcome for a in sr.attempts for c in a.calls} == {"network-error"}
    assert sr.status == "failed"


def test_a_lost_response_without_a_key_fails_closed_after_one_attempt(api: DemoAPI) -> None:
    """spec §4.2, the first half of the duplicate-charge lesson: the charge happened."""
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=False), clock="simulated")
    sr = run.steps["charge"]
    assert [a.outcome for a in sr.attempts] == ["ambiguous"]
    assert sr.status == "failed-closed"
    assert sr.attempts[0].calls[0].outcome == "ambiguous"
    assert "idempotency key" in sr.attempts[0].explanation
    assert len(api.records("charges")) == 1  # it did happen: a retry would charge twice


def test_a_caught_ambiguous_error_rethrown_as_another_still_fails_closed(api: DemoAPI) -> None:
    """spec §4.2: even if the script caught that error and threw another."""
    api.drop_response_next(1)
    doc = f"""<step id="charge" retry="3" retry-delay="0s"><script>
try {{
  await services.http.request({{method: "POST", url: "{api.url}/charges",
                                json: {{amount: 1, currency: "eur"}}}});
}} catch (e) {{
  throw new Error("payment failed: " + e.name);
}}
</script></step>"""
    run = wm.run(doc, clock="simulated")
    attempt = run.steps["charge"].attempts[0]
    assert [a.outcome for a in run.steps["charge"].attempts] == ["ambiguous"]
    assert attempt.error is not None
    assert attempt.error.message == "payment failed: AmbiguousError"


def test_a_lost_response_with_the_key_retries_and_charges_once(api: DemoAPI) -> None:
    """spec §4.2, the second half: the API's key contract makes the repeat safe."""
    api.drop_response_next(1)
    run = wm.run(charge(api.url, keyed=True), clock="simulated")
    sr = run.steps["charge"]
    assert [a.outcome for a in sr.attempts] == ["threw", "succeeded"]
    assert sr.attempts[0].error is not None
    assert sr.attempts[0].error.name == "AmbiguousError"
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["dropped", "replayed"]
    assert sr.result is not None
    assert sr.result["id"] == api.records("charges")[0]["id"]


def test_a_named_2xx_call_is_reattached_not_sent_again(api: DemoAPI) -> None:
    """spec §4.3: within one logical step a journaled 2xx named call is not re-sent."""
    doc = f"""<step id="checkout" retry="2" retry-delay="0s"><script>
const customer = await services.http.request(
  {{method: "POST", url: "{api.url}/customers", json: {{email: "a@example.com"}}}},
  {{name: "create-customer"}});
if (attempt.number === 1) throw new Error("something later failed");
return {{customer: customer.data.id, replayed: customer.replayed}};
</script></step>"""
    run = wm.run(doc, clock="simulated")
    sr = run.steps["checkout"]
    assert [a.outcome for a in sr.attempts] == ["threw", "succeeded"]
    assert len(api.requests) == 1  # the server saw the call once
    assert sr.result == {"customer": api.records("customers")[0]["id"], "replayed": True}
    assert [c.replayed for a in sr.attempts for c in a.calls] == [False, True]


def test_unnamed_calls_are_always_sent(api: DemoAPI) -> None:
    api.fail_next(1, status=500)
    doc = charge(api.url, keyed=True, name=None)
    run = wm.run(doc, clock="simulated")
    assert [a.outcome for a in run.steps["charge"].attempts] == ["threw", "succeeded"]
    assert len(api.requests) == 2


def test_an_authorization_value_appears_nowhere_it_is_recorded_or_shown(
    api: DemoAPI, tmp_path: Path
) -> None:
    """spec §4.1: sensitive headers are shown and journaled as •••."""
    # The script builds the secret at run time: a secret written whole into a document is
    # part of the document, which is journaled (docs/journal.md).
    secret = "sk_live_" + "4f9a1c77e2"
    extra = ('headers: {Authorization: "Bearer " + ["sk_live", "4f9a1c77e2"].join("_"), '
             '"X-Api-Key": ["sk_live", "4f9a1c77e2"].join("_")},')
    path = tmp_path / "journal.sqlite3"
    run = wm.run(charge(api.url, keyed=True, extra=extra), clock="simulated",
                 journal=str(path))
    assert api.requests[0].headers["Authorization"] == f"Bearer {secret}"  # it was sent
    call = run.steps["charge"].attempts[0].calls[0]
    assert call.request_headers["Authorization"] == "•••"
    assert call.request_headers["X-Api-Key"] == "•••"
    shown = [
        json.dumps([e.to_dict() for e in run.events]),
        render_text(run),
        render_html(run),
        json.dumps(run._repr_mimebundle_()),
    ]
    for text in shown:
        assert secret not in text
    with Journal(path) as journal:
        assert secret not in render_text(journal.load(run.id))
    for file in tmp_path.rglob("*"):  # the journal, its -wal and its claims directory
        if file.is_file():
            assert secret.encode() not in file.read_bytes()


def test_the_host_allow_list_refuses_other_hosts_before_sending(api: DemoAPI) -> None:
    """Config `http_allow`: a request elsewhere rejects with a clear error, nothing sent."""
    from woml_magic.engine import EngineConfig

    config = EngineConfig(http_allow=("example.invalid",))
    run = wm.run(charge(api.url, keyed=True, attrs=""), clock="simulated", config=config)
    attempt = run.steps["charge"].attempts[0]
    assert attempt.error is not None
    assert attempt.error.name == "NetworkError"
    assert api.requests == []
