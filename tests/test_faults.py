"""Injected faults (spec §10.2) against the real demo API, with the outcomes of §3.2/§4.2.

Every kind acts on a managed call by name and attempt: ``drop-response`` and
``timeout-after-send`` really send and then discard the answer (``AmbiguousError``),
``network-error`` and ``status=NNN`` send nothing, ``delay=D`` waits on the run's
clock first. ``api.records("charges")`` shows what really happened on the server.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.engine import EngineConfig
from woml_magic.errors import WomlRunError
from woml_magic.events import CallFinished, event_from_dict
from woml_magic.journal import Journal
from woml_magic.services import Fault, parse_fault, parse_faults
from woml_magic.timeline import render_text

KEYED = 'idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey},'


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as server:
        yield server


def charge(url: str, *, keyed: bool, retry: int = 3, name: str | None = "create-charge",
           then: str = "return response.data;") -> str:
    options = f', {{name: "{name}"}}' if name else ""
    return f"""<step id="charge" retry="{retry}" retry-delay="100ms"><script>
const response = await services.http.request({{
  method: "POST", url: "{url}/charges", json: {{amount: 2500, currency: "eur"}},
  {KEYED if keyed else ""} timeout: "2s"
}}{options});
{then}
</script></step>"""


def outcomes(run: wm.Run) -> list[str]:
    return [a.outcome for a in run.steps["charge"].attempts]


def injected(run: wm.Run) -> list[str | None]:
    return [c.injected for a in run.steps["charge"].attempts for c in a.calls]


# --- drop-response -----------------------------------------------------------------------


def test_drop_response_on_an_unkeyed_call_is_ambiguous_and_fails_closed(api: DemoAPI) -> None:
    """Sent, executed, answer discarded: without a key a retry could charge twice."""
    run = wm.run(charge(api.url, keyed=False), clock="simulated",
                 faults=["create-charge@1=drop-response"])
    step = run.steps["charge"]
    assert outcomes(run) == ["ambiguous"]
    assert step.status == "failed-closed"
    assert len(api.records("charges")) == 1  # it did happen
    [call] = step.attempts[0].calls
    assert call.outcome == "ambiguous"
    assert call.status is None
    assert call.injected == "drop-response (--fault create-charge@1=drop-response)"
    assert "the server answered 201" in (call.error or "")
    error = step.attempts[0].error
    assert error is not None
    assert error.name == "AmbiguousError"
    assert "(an injected drop-response)" in error.message
    # The script learns only what a client would: not the status (the URL's port may
    # hold the digits 201 by chance, so the URL is left out of the check).
    assert "201" not in error.message.replace(api.url, "")
    assert step.attempts[0].explanation == (
        "Attempt 1 of 3 was not retried: it made an HTTP call without an idempotency key "
        "whose outcome is unknown and then failed; a retry could repeat that effect, so WOML "
        "fails closed; this attempt met an injected fault (create-charge: drop-response "
        "(--fault create-charge@1=drop-response))."
    )


def test_drop_response_on_a_keyed_call_threw_and_the_retry_is_replayed(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["create-charge@1=drop-response"])
    step = run.steps["charge"]
    assert outcomes(run) == ["threw", "succeeded"]
    assert step.status == "succeeded"
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["executed", "replayed"]
    assert injected(run) == ["drop-response (--fault create-charge@1=drop-response)", None]
    first = step.attempts[0]
    assert "carried an idempotency key" in first.explanation
    assert first.explanation.endswith(
        "; this attempt met an injected fault (create-charge: drop-response "
        "(--fault create-charge@1=drop-response)).")
    # The second attempt's explanation is the usual one: no fault acted there.
    assert step.attempts[1].explanation == "Attempt 2 of 3 succeeded; no retry needed."
    assert step.result["id"] == api.records("charges")[0]["id"]


# --- timeout-after-send ------------------------------------------------------------------


def test_timeout_after_send_on_an_unkeyed_call_is_ambiguous(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False), clock="simulated",
                 faults=["create-charge@1=timeout-after-send"])
    assert outcomes(run) == ["ambiguous"]
    assert run.steps["charge"].status == "failed-closed"
    assert len(api.records("charges")) == 1
    error = run.steps["charge"].attempts[0].error
    assert error is not None
    assert error.name == "AmbiguousError"
    assert "no response arrived within 2s after the request was sent (an injected " \
           "timeout-after-send)" in error.message
    assert injected(run) == ["timeout-after-send (--fault create-charge@1=timeout-after-send)"]


def test_timeout_after_send_on_a_keyed_call_is_retried_and_replayed(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["create-charge@1=timeout-after-send"])
    assert outcomes(run) == ["threw", "succeeded"]
    assert len(api.records("charges")) == 1
    assert [r.outcome for r in api.requests] == ["executed", "replayed"]


# --- network-error -----------------------------------------------------------------------


def test_network_error_sends_nothing_and_the_throw_is_retried(api: DemoAPI) -> None:
    """Definitive: nothing was sent, so even an unkeyed call retries."""
    run = wm.run(charge(api.url, keyed=False), clock="simulated",
                 faults=["create-charge@1=network-error"])
    step = run.steps["charge"]
    assert outcomes(run) == ["threw", "succeeded"]
    assert len(api.requests) == 1  # attempt 1 sent nothing
    assert len(api.records("charges")) == 1
    first_call = step.attempts[0].calls[0]
    assert first_call.outcome == "network-error"
    assert first_call.injected == "network-error (--fault create-charge@1=network-error)"
    error = step.attempts[0].error
    assert error is not None
    assert error.name == "NetworkError"
    assert error.message == (
        f"POST {api.url}/charges: could not connect (an injected network-error); "
        "nothing was sent"
    )
    assert step.attempts[0].explanation == (
        "Attempt 1 of 3 failed because the script threw NetworkError, a definitive script "
        "failure, so WOML retries after waiting 100ms; this attempt met an injected fault "
        "(create-charge: network-error (--fault create-charge@1=network-error))."
    )


# --- status=NNN --------------------------------------------------------------------------


def test_status_answers_here_without_sending_and_the_http_error_is_retried(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False), clock="simulated",
                 faults=["create-charge@1=status=503"])
    step = run.steps["charge"]
    assert outcomes(run) == ["threw", "succeeded"]
    assert len(api.requests) == 1
    call = step.attempts[0].calls[0]
    assert (call.outcome, call.status) == ("response", 503)
    assert call.injected == "status=503 (--fault create-charge@1=status=503)"
    assert isinstance(call.response, dict)
    assert call.response["data"]["status"] == 503
    assert "injected fault create-charge@1=status=503" in call.response["data"]["detail"]
    error = step.attempts[0].error
    assert error is not None
    assert error.name == "HttpError"
    assert error.message == (
        f"POST {api.url}/charges answered 503 Service Unavailable: answered by the injected "
        "fault create-charge@1=status=503; the request was not sent"
    )


def test_the_script_sees_the_status_and_problem_of_an_injected_status(api: DemoAPI) -> None:
    run = wm.run(f"""<step id="charge" retry="1"><script>
try {{
  await services.http.request({{method: "POST", url: "{api.url}/charges",
    json: {{amount: 1, currency: "eur"}}}}, {{name: "create-charge"}});
}} catch (e) {{
  return {{name: e.name, status: e.status, type: e.headers["content-type"],
           title: e.data.title}};
}}
</script></step>""", clock="simulated", faults=["create-charge@*=status=429"])
    assert run.steps["charge"].result == {"name": "HttpError", "status": 429,
                                          "type": "application/problem+json",
                                          "title": "Too Many Requests"}
    assert api.requests == []


# --- delay=D -----------------------------------------------------------------------------


def test_delay_waits_on_the_run_clock_then_sends(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False), clock="simulated",
                 faults=["create-charge@1=delay=2s"])
    step = run.steps["charge"]
    assert outcomes(run) == ["succeeded"]
    assert len(api.records("charges")) == 1
    attempt = step.attempts[0]
    [call] = attempt.calls
    assert call.status == 201
    assert call.injected == "delay=2s (--fault create-charge@1=delay=2s)"
    assert call.ended_at is not None
    assert call.ended_at - call.started_at >= 2.0
    assert attempt.ended_at is not None
    assert attempt.ended_at - attempt.started_at >= 2.0
    assert attempt.explanation == (
        "Attempt 1 of 3 succeeded; no retry needed; this attempt met an injected fault "
        "(create-charge: delay=2s (--fault create-charge@1=delay=2s))."
    )


def test_delay_on_the_real_clock_really_waits(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False), faults=["create-charge@1=delay=300ms"])
    [call] = run.steps["charge"].attempts[0].calls
    assert call.ended_at is not None
    assert call.ended_at - call.started_at >= 0.3
    assert call.status == 201


def test_a_delay_past_the_step_timeout_ends_the_attempt_timeout_and_sends_nothing(
    api: DemoAPI,
) -> None:
    doc = charge(api.url, keyed=False).replace('retry="3"', 'retry="3" timeout="1s"')
    run = wm.run(doc, clock="simulated", faults=["create-charge@1=delay=1m"])
    step = run.steps["charge"]
    assert outcomes(run) == ["timeout"]
    assert api.requests == []
    [call] = step.attempts[0].calls
    assert call.outcome == "network-error"
    assert "before the request was sent" in (call.error or "")


def test_a_delay_and_a_status_both_act(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False, retry=1), clock="simulated",
                 faults=["create-charge@1=delay=5s", "create-charge@1=status=503",
                         "create-charge@1=network-error"])
    [call] = run.steps["charge"].attempts[0].calls
    assert call.status == 503  # the first non-delay fault that matches
    assert call.injected == ("delay=5s (--fault create-charge@1=delay=5s); "
                             "status=503 (--fault create-charge@1=status=503)")
    assert call.ended_at is not None
    assert call.ended_at - call.started_at >= 5.0
    assert api.requests == []


# --- which calls and attempts ------------------------------------------------------------


def test_star_acts_on_every_attempt(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["create-charge@*=status=503"])
    assert outcomes(run) == ["threw", "threw", "threw"]
    assert run.steps["charge"].status == "failed"
    assert api.requests == []
    assert injected(run) == ["status=503 (--fault create-charge@*=status=503)"] * 3


def test_a_numbered_fault_acts_on_that_attempt_only(api: DemoAPI) -> None:
    api.fail_next(1, status=500)  # attempt 1 fails for real, attempt 2 by injection
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["create-charge@2=network-error"])
    assert outcomes(run) == ["threw", "threw", "succeeded"]
    assert injected(run) == [None, "network-error (--fault create-charge@2=network-error)", None]
    assert len(api.requests) == 2


def test_unnamed_calls_and_unknown_names_are_left_alone(api: DemoAPI) -> None:
    run = wm.run(charge(api.url, keyed=False, name=None), clock="simulated",
                 faults=["create-charge@*=network-error", "no-such-call@1=status=500"])
    assert outcomes(run) == ["succeeded"]
    assert injected(run) == [None]
    assert len(api.records("charges")) == 1


def test_a_reattached_call_is_not_sent_so_no_fault_acts(api: DemoAPI) -> None:
    """spec §4.3: attempt 2 reattaches the journaled 201; its network-error never acts."""
    run = wm.run(charge(api.url, keyed=True, then="""
if (attempt.number === 1) throw new Error("after the charge");
return response.data;"""), clock="simulated", faults=["create-charge@2=network-error"])
    step = run.steps["charge"]
    assert outcomes(run) == ["threw", "succeeded"]
    second = step.attempts[1].calls[0]
    assert second.replayed is True
    assert second.injected is None
    assert len(api.requests) == 1


def test_explanations_are_unchanged_when_no_fault_acted(api: DemoAPI) -> None:
    api.fail_next(1, status=503)
    run = wm.run(charge(api.url, keyed=True), clock="simulated",
                 faults=["other-call@*=network-error"])
    assert [a.explanation for a in run.steps["charge"].attempts] == [
        "Attempt 1 of 3 failed because the script threw HttpError, a definitive script "
        "failure, so WOML retries after waiting 100ms.",
        "Attempt 2 of 3 succeeded; no retry needed.",
    ]


# --- recorded and shown ------------------------------------------------------------------


def test_injected_is_journaled_and_folded_back(api: DemoAPI, tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    run = wm.run(charge(api.url, keyed=True), clock="simulated", journal=path,
                 faults=["create-charge@1=drop-response"])
    journal = Journal(path)
    try:
        loaded = journal.load(run.id)
        events = journal.events(run.id)
    finally:
        journal.close()
    assert [c.injected for a in loaded.steps["charge"].attempts for c in a.calls] == \
        injected(run)
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert finished[0].injected == "drop-response (--fault create-charge@1=drop-response)"
    round_trip = event_from_dict(json.loads(json.dumps(finished[0].to_dict())))
    assert round_trip == finished[0]
    assert "injected fault" in render_text(run)  # the explanation is in the timeline text


def test_faults_in_the_config_and_the_option_add_up(api: DemoAPI) -> None:
    config = EngineConfig(faults=parse_faults(["create-charge@1=network-error"]))
    run = wm.run(charge(api.url, keyed=False), clock="simulated", config=config,
                 faults=["create-charge@2=network-error"])
    assert outcomes(run) == ["threw", "threw", "succeeded"]
    assert len(api.requests) == 1


# --- the grammar -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("create-charge@1=drop-response", Fault("create-charge", 1, "drop-response")),
        ("create-charge@*=timeout-after-send", Fault("create-charge", None, "timeout-after-send")),
        ("c@10=network-error", Fault("c", 10, "network-error")),
        ("c@1=status=503", Fault("c", 1, "status", status=503)),
        ("c@*=delay=2s", Fault("c", None, "delay", seconds=2.0)),
        ("c@1=delay=250ms", Fault("c", 1, "delay", seconds=0.25)),
        ("a@b@2=network-error", Fault("a@b", 2, "network-error")),  # the last @ splits
        ("  c@1=drop-response ", Fault("c", 1, "drop-response")),
    ],
)
def test_faults_parse(text: str, fault: Fault) -> None:
    assert parse_fault(text) == fault
    assert parse_fault(fault.spec) == fault  # the canonical text reads back


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("create-charge", "is not CALL@ATTEMPT=KIND; write CALL@ATTEMPT=KIND, e.g. "
                          "create-charge@1=drop-response"),
        ("create-charge@1", "is not CALL@ATTEMPT=KIND"),
        ("create-charge@x=drop-response", "is not CALL@ATTEMPT=KIND"),
        ("@1=drop-response", "names no call"),
        (" @1=drop-response", "names no call"),
        ("c@0=drop-response", "names attempt 0; attempts are numbered from 1"),
        ("c@1=explode", "has the unknown kind 'explode'; KIND is one of drop-response, "
                        "timeout-after-send, network-error, status=NNN, delay=DURATION"),
        ("c@1=status=200", "status=NNN takes an error status from 400 to 599"),
        ("c@1=status=abc", "status=NNN takes an error status from 400 to 599"),
        ("c@1=delay=soon", "the fault 'c@1=delay=soon': "),
        ("c@1=delay=25h", "delays more than 24h"),
    ],
)
def test_bad_faults_are_refused_naming_what_is_allowed(text: str, says: str) -> None:
    with pytest.raises(WomlRunError) as info:
        parse_fault(text)
    assert says in str(info.value)


def test_bad_faults_are_refused_before_the_run(api: DemoAPI) -> None:
    with pytest.raises(WomlRunError, match="unknown kind 'boom'"):
        wm.run(charge(api.url, keyed=False), faults=["create-charge@1=boom"])
    with pytest.raises(WomlRunError, match="a fault must be a string, not int"):
        wm.run(charge(api.url, keyed=False), faults=[3])  # type: ignore[list-item]
    assert api.requests == []


def test_faults_round_trip_through_their_dicts() -> None:
    """How an EngineConfig travels to a Temporal activity (dataclasses.asdict)."""
    faults = parse_faults(["a@1=drop-response", "b@*=status=502", "c@2=delay=1.5s"])
    assert parse_faults([dataclasses.asdict(f) for f in faults]) == faults
    assert parse_faults("a@1=drop-response") == (Fault("a", 1, "drop-response"),)
    assert parse_faults(None) == ()


def test_faults_round_trip_through_the_temporal_activity_input() -> None:
    """The activity's input is read back by Temporal's converter from its fields."""
    pytest.importorskip("temporalio")
    from temporalio.converter import DataConverter

    from woml_magic.limits import Limits
    from woml_magic.temporal.activity import AttemptInput

    config = EngineConfig(faults=parse_faults(["a@1=drop-response", "b@*=delay=250ms"]),
                          limits=Limits(memory_limit_mb=16, max_log_lines=5),
                          http_allow=("api.test",), redact_headers=("X-Key",))
    sent = AttemptInput(run_id="r", document={}, payload=None, step_id="s", number=1,
                        config=config)
    convert = DataConverter.default.payload_converter
    (back,) = convert.from_payloads(convert.to_payloads([sent]), [AttemptInput])
    assert back.config == config
    assert back.config.faults == config.faults
