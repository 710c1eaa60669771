"""Secrets (spec §10.1): sent to the server, never anywhere else.

A real loopback server records what it received and echoes it back, in its body, in a
response header and in an error message; the tests then search every byte the product
produced — the journal file, the ``Run``, the timelines, the widget, the logs, errors,
an executed and exported notebook — for the value. Nothing is mocked.
"""

# nbformat ships no type information.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, quote_plus, unquote, urlsplit

import pytest
from loopback import Answer, Loopback

import woml_magic as wm
from woml_magic.engine import EngineConfig
from woml_magic.errors import ServiceRejection, WomlRunError
from woml_magic.events import CallFinished, CallStarted, Event
from woml_magic.journal import Journal
from woml_magic.runtime import AttemptRequest
from woml_magic.runtime.worker import ScriptWorker
from woml_magic.services import CallScope, HttpService, Secrets, StepCalls
from woml_magic.services.registry import SERVICE_NAMES, RunServices
from woml_magic.services.secrets import reference
from woml_magic.timeline import mimebundle, render_html, render_text

STRIPE = "sk_test_51HsEcReTvAlUe9xYz"
#: A value with characters every encoder changes: found in its encoded echoes too.
DB_PASS = "p@ss/w+rd&q=1;x"
VALUES = (STRIPE, DB_PASS)


def forms_of(value: str) -> list[str]:
    """The ways a value could be written down: as is, percent-encoded, JSON-escaped."""
    return sorted({value, quote(value, safe=""), quote_plus(value), quote(value),
                   json.dumps(value)[1:-1]})


def assert_nowhere(
    text: str | bytes, where: str, values: Iterable[str] = VALUES,
    forms: Callable[[str], list[str]] = forms_of,
) -> None:
    """No ``forms`` of any of ``values`` is in ``text`` (bytes are searched as UTF-8)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    for value in values:
        for form in forms(value):
            assert form.encode() not in data, f"the secret value ({form!r}) is in {where}"


def assert_run_holds_none(
    run: wm.Run, journal: Path, values: Iterable[str] = VALUES,
    forms: Callable[[str], list[str]] = forms_of,
) -> None:
    """Search every byte the product made of ``run`` for ``values``: the ``Run``, its
    events, the text and HTML timelines, the mimebundle, the widget's state, the
    attempts' logs and errors, the journal's files (raw bytes, ``-wal`` included) and
    the run loaded back from it."""
    from woml_magic.timeline import TimelineWidget

    def nowhere(text: str | bytes, where: str) -> None:
        assert_nowhere(text, where, values, forms)

    nowhere(repr(run), "repr(run)")
    nowhere(repr(run.steps), "the steps' repr")
    nowhere(repr(run.events), "the run's events")
    nowhere(json.dumps([e.to_dict() for e in run.events], ensure_ascii=False),
            "the events as JSON")
    nowhere(render_text(run), "render_text")
    nowhere(render_html(run), "render_html")
    nowhere(json.dumps(mimebundle(run), ensure_ascii=False), "the mimebundle")
    for step in run.steps.values():
        for attempt in step.attempts:
            nowhere("\n".join(attempt.logs), f"the logs of {step.id}")
            nowhere(repr(attempt.error), f"the error of {step.id}")
    widget = TimelineWidget(run)
    try:
        nowhere(json.dumps(widget.get_state(), default=str, ensure_ascii=False),
                "the widget state")
    finally:
        widget.close()
    files = journal_files(journal)
    assert journal in files
    for path in files:
        nowhere(path.read_bytes(), f"the journal file {path.name}")
    opened = Journal(journal)
    try:
        loaded = opened.load(run.id)
    finally:
        opened.close()
    nowhere(repr(loaded.steps), "the journaled run")
    nowhere(repr(loaded.events), "the journaled events")


def journal_files(journal: Path) -> list[Path]:
    """The journal's file and every file beside it that SQLite or the journal writes
    (``-wal``, ``-shm``, and those in a directory named after it), raw bytes to search."""
    found = sorted(journal.parent.glob(journal.name + "*"))
    return [path for top in found for path in ([top] if top.is_file() else sorted(
        p for p in top.rglob("*") if p.is_file()))]


class EchoServer(Loopback):
    """Records every request and echoes it: in the JSON body, in ``X-Echo-Auth`` and
    ``X-Echo-Query`` headers, and (for ``/fail``) in a 400 problem's detail."""

    def __init__(self) -> None:
        super().__init__(self._echo)

    @staticmethod
    def _echo(request: dict[str, Any]) -> Answer:
        parts = urlsplit(request["path"])
        request.update(path=parts.path, query=parts.query)  # as the tests read it
        record = {key: request[key] for key in ("method", "path", "query", "headers", "body")}
        status, text, ctype = 200, json.dumps(record), "application/json"
        if parts.path.startswith("/fail"):
            status, ctype = 400, "application/problem+json"
            text = json.dumps({"title": "Bad key",
                               "detail": f"the key {unquote(parts.query)} is revoked"})
        headers = {"Content-Type": ctype,
                   "X-Echo-Auth": request["headers"].get("Authorization", ""),
                   "X-Echo-Query": unquote(parts.query)}
        return status, headers, text.encode()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def workflow(url: str) -> str:
    """Sends STRIPE in a header, the query, a form field, JSON and a body; DB_PASS in
    the query (percent-encoded on the wire) and JSON; logs every echo; then a call that
    fails with the value in its error message; then a step that throws with the echo."""
    return f"""<workflow id="secrets">
<step id="send" retry="1"><script>
const key = services.secret("STRIPE");
const pass = services.secret("DB_PASS");
console.log("reference:", key);
const form = await services.http.request({{
  method: "POST", url: "{url}/charges/" + encodeURIComponent(key),
  headers: {{Authorization: "Bearer " + key, "X-Custom-Token": key}},
  query: {{api_key: key, pass: pass}},
  form: {{amount: 2500, card: {{token: key}}, tags: [key]}},
}}, {{name: "form-call"}});
console.log(JSON.stringify(form));
const js = await services.http.request({{
  method: "POST", url: "{url}/json",
  json: {{secret: key, nested: [{{pass: pass}}], ["k-" + key]: 1}},
}}, {{name: "json-call"}});
console.log(JSON.stringify(js));
const raw = await services.http.request({{
  method: "POST", url: "{url}/raw", body: "token=" + key,
  headers: {{"Content-Type": "text/plain"}},
}});
console.log(JSON.stringify(raw.data), JSON.stringify(raw.headers));
try {{
  await services.http.request({{method: "POST", url: "{url}/fail?" + key}}, {{name: "fail-call"}});
}} catch (e) {{
  console.log(e.name, e.message, JSON.stringify(e.data), JSON.stringify(e.headers));
}}
return {{form: form.data, json: js.data, headers: form.headers, key}};
</script></step>
<step id="complain" retry="2"><script>
throw new Error("the server said " + JSON.stringify(context.steps.send.form));
</script></step>
</workflow>"""


def test_a_secret_reaches_the_server_and_nothing_else(
    echo: EchoServer, tmp_path: Path
) -> None:
    """spec §10.1: the value is sent where the reference stands and is found in no byte
    the product wrote or shows; the server's echoes come back as the reference."""
    journal = tmp_path / "journal.sqlite3"
    run = wm.run(workflow(echo.url), clock="simulated", journal=journal,
                 secrets={"STRIPE": STRIPE, "DB_PASS": DB_PASS})

    # The server got the real value in every place the script put a reference.
    form_req, json_req, raw_req, fail_req = echo.requests
    assert form_req["headers"]["Authorization"] == f"Bearer {STRIPE}"
    assert form_req["headers"]["X-Custom-Token"] == STRIPE
    assert unquote(form_req["path"]) == f"/charges/{STRIPE}"
    query = parse_qs(form_req["query"])
    assert query == {"api_key": [STRIPE], "pass": [DB_PASS]}
    assert form_req["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(form_req["body"]) == {"amount": ["2500"], "card[token]": [STRIPE],
                                          "tags[0]": [STRIPE]}
    assert json.loads(json_req["body"]) == {"secret": STRIPE, "nested": [{"pass": DB_PASS}],
                                            f"k-{STRIPE}": 1}
    assert raw_req["body"] == f"token={STRIPE}"
    assert fail_req["query"] == STRIPE

    # The script saw only references, in the echoes too.
    send = run.steps["send"]
    assert send.status == "succeeded"
    result = send.result
    assert result["key"] == reference("STRIPE") == "\u27e6woml-secret:STRIPE\u27e7"
    echoed = result["form"]
    assert echoed["headers"]["Authorization"] == f"Bearer {reference('STRIPE')}"
    assert parse_qs(echoed["body"])["card[token]"] == [reference("STRIPE")]
    assert reference("DB_PASS") in unquote(echoed["query"])
    assert result["json"]["body"].count(reference("STRIPE")) == 2
    assert reference("DB_PASS") in result["json"]["body"]
    assert result["headers"]["x-echo-auth"] == f"Bearer {reference('STRIPE')}"
    logs = "\n".join(send.attempts[0].logs)
    assert f"reference: {reference('STRIPE')}" in logs
    assert f"HttpError POST {echo.url}/fail?{reference('STRIPE')} answered 400 Bad Request: " \
           f"the key {reference('STRIPE')} is revoked" in logs

    # The calls as shown and journaled keep the reference (or •••).
    form_call, json_call, raw_call, fail_call = send.attempts[0].calls
    assert form_call.url.startswith(f"{echo.url}/charges/{reference('STRIPE')}?")
    assert f"api_key={reference('STRIPE')}" in form_call.url
    assert form_call.request_headers["Authorization"] == "•••"
    assert form_call.request_headers["X-Custom-Token"] == reference("STRIPE")
    assert (json_call.name, json_call.url, json_call.status) == ("json-call", f"{echo.url}/json",
                                                                 200)
    assert (raw_call.name, raw_call.status) == (None, 200)
    assert fail_call.status == 400
    assert reference("STRIPE") in (fail_call.error or "")

    complain = run.steps["complain"]
    assert [a.outcome for a in complain.attempts] == ["threw", "threw"]
    error = complain.attempts[-1].error
    assert error is not None
    assert reference("STRIPE") in error.message

    # Every byte the product produced, searched.
    assert_nowhere(logs, "the script's logs")
    assert_nowhere(repr(error), "the error")
    assert_run_holds_none(run, journal)
    opened = Journal(journal)
    try:
        loaded = opened.load(run.id)
    finally:
        opened.close()
    assert loaded.steps["send"].result == result


def test_the_widget_state_holds_no_secret(echo: EchoServer) -> None:
    from woml_magic.timeline import TimelineWidget

    run = wm.run(workflow(echo.url), clock="simulated",
                 secrets={"STRIPE": STRIPE, "DB_PASS": DB_PASS})
    widget = TimelineWidget(run)
    try:
        state = widget.get_state()
        assert "form-call" in json.dumps(state, default=str)
        assert_nowhere(json.dumps(state, default=str, ensure_ascii=False), "the widget state")
        for name in widget.trait_names():
            assert_nowhere(repr(getattr(widget, name)), f"the widget trait {name}")
    finally:
        widget.close()


def test_httpx_logs_show_references_not_values(
    echo: EchoServer, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx logs every request's URL at INFO: the value is scrubbed there too."""
    with caplog.at_level(logging.DEBUG):
        run = wm.run(workflow(echo.url), clock="simulated",
                     secrets={"STRIPE": STRIPE, "DB_PASS": DB_PASS})
    assert run.steps["send"].status == "succeeded"
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request: POST" in text
    assert reference("STRIPE") in text
    assert_nowhere(text, "the log records")


# --- services.secret in the script (spec §10.1) -------------------------------------------


def test_services_secret_is_synchronous_and_concatenates() -> None:
    run = wm.run("""<step id="s" retry="1"><script>
const r = services.secret("STRIPE");
return {type: typeof r, header: "Bearer " + r, isPromise: r instanceof Promise};
</script></step>""", secrets={"STRIPE": STRIPE})
    assert run.steps["s"].result == {"type": "string", "isPromise": False,
                                     "header": "Bearer \u27e6woml-secret:STRIPE\u27e7"}


def test_an_unknown_name_is_a_type_error_listing_the_names_set() -> None:
    run = wm.run("""<step id="s" retry="1"><script>
const ok = services.secret("STRIPE");
services.secret("STRIPE_KEY");
</script></step>""", secrets={"STRIPE": STRIPE, "GITHUB": "ghp_abcdef"})
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert error.name == "TypeError"
    assert error.message == (
        'services.secret("STRIPE_KEY"): no secret "STRIPE_KEY"; the secrets set are: '
        "GITHUB, STRIPE. Set one with %woml secret NAME, Woml.secrets, or "
        "wm.run(..., secrets={...})"
    )
    assert error.line == 3  # the line of the call
    assert "ghp_abcdef" not in repr(run.steps)


def test_without_secrets_the_error_says_none_are_set() -> None:
    run = wm.run('<step id="s" retry="1"><script>services.secret("X");</script></step>')
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert 'services.secret("X"): no secret "X"; no secrets are set. Set one with' \
        in error.message


@pytest.mark.parametrize("call", ["services.secret()", "services.secret(1)",
                                  'services.secret("A", "B")'])
def test_services_secret_takes_one_name(call: str) -> None:
    run = wm.run(f'<step id="s" retry="1"><script>{call};</script></step>',
                 secrets={"A": "aaaa-value"})
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert (error.name, error.message) == (
        "TypeError",
        'services.secret(name) takes the name of a secret as a string, e.g. '
        'services.secret("STRIPE")',
    )


def test_the_attempt_carries_names_never_values(
    echo: EchoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's run command holds the names: the value never enters the JS context."""
    seen: list[AttemptRequest] = []
    from woml_magic.runtime import worker as worker_module

    original = worker_module.run_line

    def spy(request: AttemptRequest, attempt_id: int) -> bytes:
        seen.append(request)
        line = original(request, attempt_id)
        assert_nowhere(line.decode("ascii"), "the worker's run command")
        assert json.loads(line)["secrets"] == ["DB_PASS", "STRIPE"]
        return line

    monkeypatch.setattr(worker_module, "run_line", spy)
    run = wm.run(workflow(echo.url), clock="simulated",
                 secrets={"STRIPE": STRIPE, "DB_PASS": DB_PASS})
    assert run.steps["send"].status == "succeeded"
    assert seen
    assert {r.secret_names for r in seen} == {("DB_PASS", "STRIPE")}


def test_the_stub_answers_without_a_round_trip() -> None:
    """No services call reaches the kernel for services.secret."""
    calls: list[str] = []

    async def services(name: str, args: list[Any]) -> Any:
        calls.append(name)
        return None

    async def main() -> Any:
        worker = ScriptWorker()
        try:
            return await worker.run_attempt(AttemptRequest(
                script='return services.secret("A") + services.secret("B");',
                script_line=1, script_column=1, context={"payload": None, "steps": {}},
                attempt={"number": 1, "maxAttempts": 1, "idempotencyKey": "k"},
                now_ms=lambda: 0.0, secret_names=("A", "B"),
            ), services, lambda level, text: None)
        finally:
            await worker.aclose()

    result = asyncio.run(main())
    assert result.outcome == "succeeded"
    assert result.result == reference("A") + reference("B")
    assert calls == []


def test_secret_is_a_registered_service_with_a_kernel_handler() -> None:
    assert "secret" in SERVICE_NAMES
    from woml_magic.clock import make_clock

    services = RunServices(make_clock("simulated"),
                           EngineConfig(secrets=Secrets({"STRIPE": STRIPE})))
    scope = CallScope(run_id="r", step_id="s", attempt_number=1, step_calls=StepCalls(),
                      emit=lambda e: None, now=lambda: 0.0, busy=_no_busy)
    assert asyncio.run(services.call("secret", ["STRIPE"], scope)) == reference("STRIPE")
    with pytest.raises(ServiceRejection) as info:
        asyncio.run(services.call("secret", ["NOPE"], scope))
    assert info.value.name == "TypeError"
    assert "the secrets set are: STRIPE" in info.value.message


def _no_busy() -> Any:
    import contextlib

    return contextlib.nullcontext()


# --- the store ---------------------------------------------------------------------------


def test_the_store_shows_names_only() -> None:
    store = Secrets({"STRIPE": STRIPE, "DB_PASS": DB_PASS})
    assert repr(store) == str(store) == "Secrets(DB_PASS, STRIPE)"
    assert store.names == ("DB_PASS", "STRIPE")
    assert "STRIPE" in store
    assert "sk" not in store
    assert repr(Secrets()) == "Secrets(none)"
    assert_nowhere(repr(vars(type(store))), "the class")
    assert not hasattr(store, "__dict__")


def test_the_store_is_never_serialised() -> None:
    store = Secrets({"STRIPE": STRIPE})
    with pytest.raises(TypeError, match="not serialised"):
        pickle.dumps(store)
    assert copy.deepcopy(store) is store


def test_a_secret_is_never_in_the_engine_config_repr() -> None:
    config = EngineConfig(secrets=Secrets({"STRIPE": STRIPE}))
    assert_nowhere(repr(config), "repr(EngineConfig)")
    assert "STRIPE" not in repr(config)
    assert config == EngineConfig()  # secrets are not compared


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"1ABC": "long-enough"}, "'1ABC' is not a secret name"),
        ({"A-B": "long-enough"}, "'A-B' is not a secret name"),
        ({"": "long-enough"}, "'' is not a secret name"),
        ({"K": 12345}, "the secret K must be a string, not int"),
        ({"K": "abc"}, "the secret K is shorter than 4 characters"),
    ],
)
def test_bad_names_and_values_are_refused_naming_the_secret(
    values: dict[str, Any], says: str
) -> None:
    with pytest.raises(WomlRunError) as info:
        Secrets(values)
    assert says in str(info.value)
    for value in values.values():
        if isinstance(value, str) and len(value) >= 4:
            assert value not in str(info.value)


def test_run_refuses_bad_secrets_before_anything_runs(echo: EchoServer) -> None:
    with pytest.raises(WomlRunError, match="not a secret name"):
        wm.run(workflow(echo.url), secrets={"not ok": "long-enough"})
    with pytest.raises(WomlRunError, match="dict of name to value"):
        wm.run(workflow(echo.url), secrets=["STRIPE"])  # type: ignore[arg-type]
    assert echo.requests == []


def test_secrets_from_the_config_and_the_option_merge(echo: EchoServer) -> None:
    config = EngineConfig(secrets=Secrets({"STRIPE": "from-config", "DB_PASS": DB_PASS}))
    run = wm.run(workflow(echo.url), clock="simulated", config=config,
                 secrets=Secrets({"STRIPE": STRIPE}))
    assert run.steps["send"].status == "succeeded"
    assert echo.requests[0]["headers"]["X-Custom-Token"] == STRIPE  # the option wins


# --- references in requests (spec §10.1) -------------------------------------------------


class Harness:
    def __init__(self, service: HttpService) -> None:
        self.service = service
        self.events: list[Event] = []
        self.scope = CallScope(run_id="r", step_id="s", attempt_number=1,
                               step_calls=StepCalls(), emit=self.events.append,
                               now=lambda: 0.0, busy=_no_busy)


def call(request: Any, secrets: Secrets | None, options: Any = None) -> tuple[Any, Harness]:
    async def main() -> tuple[Any, Harness]:
        service = HttpService(secrets=secrets)
        harness = Harness(service)
        try:
            try:
                return await service.request(request, options, harness.scope), harness
            except ServiceRejection as rejection:
                return rejection, harness
        finally:
            await service.aclose()

    return asyncio.run(main())


def test_a_reference_to_an_unknown_name_is_a_type_error_naming_it(echo: EchoServer) -> None:
    ref = reference("NOPE")
    result, harness = call({"url": echo.url, "headers": {"X-Key": ref}},
                           Secrets({"STRIPE": STRIPE}))
    assert isinstance(result, ServiceRejection)
    assert result.name == "TypeError"
    assert result.message == (
        'the request refers to the secret "NOPE", which is not set; the secrets set are: '
        "STRIPE. Set one with %woml secret NAME, Woml.secrets, or wm.run(..., secrets={...})"
    )
    assert harness.events == []  # refused before anything is journaled
    assert echo.requests == []


def test_a_reference_with_no_secrets_at_all_is_refused_too(echo: EchoServer) -> None:
    result, _ = call({"url": echo.url, "json": {"k": reference("STRIPE")}}, None)
    assert isinstance(result, ServiceRejection)
    assert 'refers to the secret "STRIPE", which is not set; no secrets are set' \
        in result.message


def test_call_started_keeps_the_reference_and_the_request_sends_the_value(
    echo: EchoServer,
) -> None:
    store = Secrets({"STRIPE": STRIPE})
    result, harness = call(
        {"method": "POST", "url": echo.url + "/x", "query": {"k": reference("STRIPE")},
         "headers": {"X-Key": reference("STRIPE")},
         "idempotency": {"header": "Idempotency-Key", "value": "key-" + reference("STRIPE")}},
        store, {"name": "c"})
    started, finished = harness.events
    assert isinstance(started, CallStarted)
    assert isinstance(finished, CallFinished)
    assert started.url == f"{echo.url}/x?k={reference('STRIPE')}"
    assert started.request_headers["X-Key"] == reference("STRIPE")
    assert started.idempotency_value == "key-" + reference("STRIPE")
    sent = echo.requests[0]
    assert sent["headers"]["X-Key"] == STRIPE
    assert sent["headers"]["Idempotency-Key"] == f"key-{STRIPE}"
    assert_nowhere(repr(harness.events), "the events")
    assert_nowhere(json.dumps(result), "the value returned to the script")
    assert result["headers"]["x-echo-query"] == f"k={reference('STRIPE')}"
    # What a later attempt would reattach (spec §4.3) is the scrubbed answer too.
    stored = harness.scope.step_calls.reattach["c"]
    assert stored["headers"]["x-echo-query"] == f"k={reference('STRIPE')}"
    assert_nowhere(repr(harness.scope.step_calls.reattach), "the reattach store")


def test_a_bad_header_value_after_substitution_is_refused_without_the_value(
    echo: EchoServer,
) -> None:
    """A value that cannot stand in a header: the message names the header, not it."""
    store = Secrets({"MULTI": "line1\nline2"})
    result, harness = call({"url": echo.url, "headers": {"X-Key": reference("MULTI")}}, store)
    assert isinstance(result, ServiceRejection)
    assert result.name == "TypeError"
    assert "header 'X-Key' contains a line break" in result.message
    assert "line1" not in result.message
    assert harness.events == []


def test_an_invalid_url_after_substitution_is_refused_without_the_value(
    echo: EchoServer,
) -> None:
    store = Secrets({"HOSTPART": "exa mple\x00.com"})
    result, _ = call({"url": "http://" + reference("HOSTPART") + "/x"}, store)
    assert isinstance(result, ServiceRejection)
    assert "exa mple" not in result.message


def test_transport_errors_are_scrubbed() -> None:
    """A connection refused names the URL: the shown one, with the reference."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result, harness = call(
        {"url": f"http://127.0.0.1:{port}/" + reference("STRIPE")}, Secrets({"STRIPE": STRIPE}))
    assert isinstance(result, ServiceRejection)
    assert result.name == "NetworkError"
    assert reference("STRIPE") in result.message
    assert_nowhere(result.message, "the error")
    assert_nowhere(repr(harness.events), "the events")


def test_scrubbing_finds_encoded_echoes() -> None:
    store = Secrets({"DB_PASS": DB_PASS})
    for form in forms_of(DB_PASS):
        assert store.scrub(f"<{form}>") == f"<{reference('DB_PASS')}>"
    assert store.scrub_json({DB_PASS: [DB_PASS]}) == {
        reference("DB_PASS"): [reference("DB_PASS")]}


def test_an_encoded_reference_is_replaced_by_the_encoded_value(echo: EchoServer) -> None:
    store = Secrets({"DB_PASS": DB_PASS})
    encoded = quote(reference("DB_PASS"), safe="")
    call({"method": "POST", "url": echo.url + "/p", "body": f"pass={encoded}"}, store)
    assert echo.requests[0]["body"] == f"pass={quote(DB_PASS, safe='')}"


# --- engines -----------------------------------------------------------------------------


def test_temporal_refuses_secrets_with_a_clear_error() -> None:
    pytest.importorskip("temporalio")
    from woml_magic.clock import make_clock
    from woml_magic.parse import parse
    from woml_magic.temporal.executor import TemporalExecutor

    workflow_ = parse('<step id="s"><script>return 1;</script></step>')
    run = wm.Run(id="r", workflow=workflow_)
    with pytest.raises(WomlRunError) as info:
        TemporalExecutor("127.0.0.1:1").execution(
            run, make_clock("real"), sinks=[], config=EngineConfig(secrets=Secrets(
                {"STRIPE": STRIPE})), resume=False, retry_interrupted=False)
    message = str(info.value)
    assert message.startswith("secrets are not sent to Temporal: ")
    assert "STRIPE" in message
    assert "engine='local'" in message
    assert STRIPE not in message


def test_the_temporal_config_never_carries_secrets() -> None:
    pytest.importorskip("temporalio")
    from temporalio.converter import DataConverter

    from woml_magic.clock import make_clock
    from woml_magic.parse import parse
    from woml_magic.temporal.executor import TemporalExecution
    from woml_magic.temporal.options import TemporalOptions
    from woml_magic.temporal.workflow import RunInput

    # The workflow's input as the executor makes it, from a config that has secrets.
    run = wm.Run(id="r", workflow=parse('<step id="s"><script>return 1;</script></step>'))
    execution = TemporalExecution(
        TemporalOptions(), run, make_clock("real"), sinks=[],
        config=EngineConfig(secrets=Secrets({"STRIPE": STRIPE})), resume=False,
        retry_interrupted=False)
    (payload,) = DataConverter.default.payload_converter.to_payloads([execution._input()])
    assert_nowhere(payload.data.decode(), "the workflow's input")
    (back,) = DataConverter.default.payload_converter.from_payloads([payload], [RunInput])
    assert back.config.secrets is None


# --- an executed and exported notebook ----------------------------------------------------

NOTEBOOK_CELLS = [
    "import os\nimport woml_magic as wm\nfrom woml_magic.demo import DemoAPI\n"
    "api = DemoAPI().start()",
    # The value comes from the environment: it is in no cell's source.
    "secrets = {'STRIPE': os.environ['WOML_TEST_STRIPE']}\n"
    "doc = '''<step id=\"customer\" retry=\"2\"><script>\n"
    "const key = services.secret(\"STRIPE\");\n"
    "const r = await services.http.request({method: \"POST\", url: context.payload.url + "
    "\"/customers\",\n"
    "  headers: {Authorization: \"Bearer \" + key, \"X-Api-Key\": key},\n"
    "  json: {email: \"a@example.com\", name: key}}, {name: \"create-customer\"});\n"
    "console.log(JSON.stringify(r.data));\n"
    "return r.data;\n"
    "</script></step>'''\n"
    "run = wm.run(doc, {'url': api.url}, secrets=secrets)\n"
    "run",
    "print(run.steps['customer'].result)\n"
    "print(run.steps['customer'].attempts[0].logs)\n"
    "received = api.requests[0]\n"
    "print('server got the value:', received.json['name'] == os.environ['WOML_TEST_STRIPE'],"
    " received.headers['Authorization'] == 'Bearer ' + os.environ['WOML_TEST_STRIPE'])",
    "api.stop()",
]


@pytest.mark.kernel
def test_an_executed_and_exported_notebook_holds_no_secret(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        path = tmp_path / name.lower()
        path.mkdir()
        env[name] = str(path)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    env["WOML_TEST_STRIPE"] = STRIPE
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(cwd=str(tmp_path), env=env)
    path = tmp_path / "secrets.ipynb"
    nbformat.write(nb, path)

    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    assert [o for o in outputs if o.output_type == "error"] == []
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "server got the value: True True" in printed
    assert reference("STRIPE") in printed  # the echo, as the script saw it
    shown = [o for o in outputs if o.output_type == "execute_result"]
    assert shown
    assert "text/html" in shown[0]["data"]

    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(path)],
                   check=True, capture_output=True, env=env, cwd=tmp_path, timeout=120)
    html = tmp_path / "secrets.html"
    assert "create-customer" in html.read_text(encoding="utf-8")
    assert_nowhere(path.read_bytes(), "the executed notebook")
    assert_nowhere(html.read_bytes(), "the exported HTML")
