"""Cassettes (spec §10.4): a run's managed calls recorded from a real server on
127.0.0.1, then replayed with that server stopped.

Nothing is mocked: the recordings come from the demo API and the secrets echo server;
each replay runs after the server is closed, so a request that reached the network
would fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_secrets import DB_PASS, STRIPE, EchoServer, assert_nowhere, workflow

import woml_magic as wm
from woml_magic.demo.api import DemoAPI
from woml_magic.demo.lesson import charge_document
from woml_magic.errors import CassetteError, WomlRunError
from woml_magic.timeline.lineage import lineage


def shape(run: wm.Run) -> list[tuple[Any, ...]]:
    """What a learner reads off a run: per attempt its outcome, the wait after it, and
    per call its status, outcome, whether the server replayed it, and whether it carried
    the step's own key."""
    rows: list[tuple[Any, ...]] = []
    for step in run.steps.values():
        for attempt in step.attempts:
            calls = tuple(
                (c.status, c.outcome, c.replayed, c.idempotency_value == step.idempotency_key)
                for c in attempt.calls
            )
            # The explanation says the wait before the next attempt (spec §3.2).
            rows.append((step.id, attempt.number, attempt.outcome, attempt.explanation, calls))
    return rows


def verdicts(run: wm.Run, step_id: str) -> list[tuple[Any, ...]]:
    return [(use.attempt, use.verdict, use.status) for use in lineage(run, step_id)]


def record_lesson(path: Path, *, with_key: bool) -> tuple[wm.Run, str, int]:
    """The duplicate-charge lesson against a live demo API whose first response is
    lost; returns the run, its document and how many charges the server made."""
    with DemoAPI() as api:
        api.drop_response_next(1)
        doc = charge_document(api.url, with_key=with_key)
        live = wm.run(doc, clock="simulated", record=path)
        charges = len(api.records("charges"))
    return live, doc, charges


@pytest.mark.parametrize("with_key", [True, False], ids=["with-key", "without-key"])
def test_a_recording_replays_with_the_server_stopped(tmp_path: Path, with_key: bool) -> None:
    """spec §10.4: the same outcomes, waits, keys and lineage, with no network."""
    cassette = tmp_path / "lesson.cassette"
    live, doc, charges = record_lesson(cassette, with_key=with_key)
    assert charges == 1
    assert live.status == ("succeeded" if with_key else "failed")

    replayed = wm.run(doc, clock="simulated", replay=cassette)  # the server is gone
    assert replayed.id != live.id
    assert shape(replayed) == shape(live)
    assert verdicts(replayed, "charge") == verdicts(live, "charge")
    assert replayed.status == live.status
    if with_key:
        assert replayed.steps["charge"].result == live.steps["charge"].result
        # Idempotent-Replayed: true, as the provider said.
        assert [v for _, v, _ in verdicts(replayed, "charge")][-1] == "replayed"


def test_the_cassette_is_one_line_an_exchange_holding_the_request_as_written(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "lesson.cassette"
    live, _, _ = record_lesson(cassette, with_key=True)
    lines = cassette.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"woml-cassette": 1}
    lost, answered = (json.loads(line) for line in lines[1:])
    key = live.steps["charge"].idempotency_key
    for exchange in (lost, answered):
        assert exchange["request"]["method"] == "POST"
        assert exchange["request"]["url"].endswith("/charges")
        assert json.loads(exchange["request"]["body"]) == {"amount": 2500, "currency": "eur"}
        assert exchange["request"]["idempotency"] == {"header": "Idempotency-Key", "value": key}
        assert (exchange["step"], exchange["stepKey"], exchange["name"]) == \
            ("charge", key, "create-charge")
    assert lost["error"]["type"] == "RemoteProtocolError"
    assert answered["response"]["status"] == 201
    headers = {name.lower(): value for name, value in answered["response"]["headers"]}
    assert headers["idempotent-replayed"] == "true"
    assert "content-length" not in headers  # the body is kept decoded, as text
    assert json.loads(answered["response"]["body"])["amount"] == 2500


def test_a_changed_body_fails_naming_the_request_and_the_nearest_recorded(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "lesson.cassette"
    _, doc, _ = record_lesson(cassette, with_key=True)
    run = wm.run(doc.replace("2500", "2600"), clock="simulated", replay=cassette)
    attempt = run.steps["charge"].attempts[0]
    assert attempt.error is not None
    message = attempt.error.message
    assert attempt.error.name == "NetworkError"
    assert f"the replay of {cassette} holds no exchange for POST" in message
    assert '"amount":2600' in message
    assert "the nearest recorded one (line 2)" in message
    assert '"amount":2500' in message
    assert "differing in its body" in message
    assert f"--record {cassette} --record-mode append" in message
    call = attempt.calls[0]
    assert call.outcome == "network-error"  # nothing was sent: not ambiguous


def test_a_keyless_repeat_the_recording_does_not_hold_is_an_error(tmp_path: Path) -> None:
    """Without a key a repeat is a second execution; a cassette of one cannot say what
    the provider did the second time (spec §10.4)."""
    call = ('await services.http.request({method: "POST", url: "URL/charges", '
            'json: {amount: 1, currency: "eur"}});')
    cassette = tmp_path / "one.cassette"
    with DemoAPI() as api:
        url = api.url
        wm.run(f'<step id="pay"><script>{call}</script></step>'.replace("URL", url),
               clock="simulated", record=cassette)
    twice = f'<step id="pay" retry="1"><script>{call}\n{call}</script></step>'
    run = wm.run(twice.replace("URL", url), clock="simulated", replay=cassette)
    attempt = run.steps["pay"].attempts[0]
    assert [c.outcome for c in attempt.calls] == ["response", "network-error"]
    assert attempt.error is not None
    assert "already answered: this request repeats it without a key" in attempt.error.message


def test_faults_apply_on_top_of_a_replay(tmp_path: Path) -> None:
    """A recorded happy path teaches a lost response: the fault drops the replayed
    answer, and the keyed retry meets the provider's stored answer (spec §10.2, §10.4)."""
    cassette = tmp_path / "happy.cassette"
    with DemoAPI() as api:
        doc = charge_document(api.url, with_key=True)
        happy = wm.run(doc, clock="simulated", record=cassette)
    assert [a.outcome for a in happy.steps["charge"].attempts] == ["succeeded"]
    run = wm.run(doc, clock="simulated", replay=cassette,
                 faults=["create-charge@1=drop-response"])
    attempts = run.steps["charge"].attempts
    assert [a.outcome for a in attempts] == ["threw", "succeeded"]
    assert attempts[0].calls[0].outcome == "ambiguous"
    assert attempts[1].calls[0].status == 201
    assert run.steps["charge"].result == happy.steps["charge"].result


def test_record_refuses_to_overwrite_without_a_mode(tmp_path: Path) -> None:
    cassette = tmp_path / "lesson.cassette"
    record_lesson(cassette, with_key=True)
    before = cassette.read_bytes()
    with DemoAPI() as api:
        doc = charge_document(api.url, with_key=True)
        with pytest.raises(CassetteError, match="exists, and recording would replace it; "
                           "pass --record-mode overwrite"):
            wm.run(doc, clock="simulated", record=cassette)
        assert cassette.read_bytes() == before  # nothing lost
        assert api.records("charges") == []  # nothing ran either

        wm.run(doc, clock="simulated", record=cassette, record_mode="append")
        assert len(cassette.read_text().splitlines()) == 1 + 2 + 1
        wm.run(doc, clock="simulated", record=cassette, record_mode="overwrite")
        assert len(cassette.read_text().splitlines()) == 1 + 1


@pytest.mark.parametrize(("options", "words"), [
    ({"record_mode": "sometimes", "record": "x"}, "record mode 'sometimes' is not one of "
                                                 "new, overwrite, append"),
    ({"record": "a", "replay": "b"}, "record= and replay= exclude each other"),
    ({"record_mode": "append"}, "record_mode= applies with record=FILE only"),
    ({"replay": "x", "engine": "temporal"}, "record= and replay= run on the local engine"),
])
def test_bad_cassette_options_are_refused_before_anything_runs(
    tmp_path: Path, options: dict[str, Any], words: str,
) -> None:
    for key in ("record", "replay"):
        if key in options:
            options[key] = tmp_path / options[key]
    with pytest.raises((WomlRunError, CassetteError), match=words.replace("(", r"\(")):
        wm.run('<step id="s"><script>return 1</script></step>', clock="simulated",
               **options)
    assert not (tmp_path / "x").exists() or options.get("replay")


@pytest.mark.parametrize(("text", "words"), [
    ("", "line 1 is not a cassette header"),
    ('{"woml-cassette": 2}\n', "line 1 is not a cassette header"),
    ('{"woml-cassette": 1}\nnot json\n', "line 2: not a JSON object"),
    ('{"woml-cassette": 1}\n{"request": {"method": "GET"}, "response": {"status": 200}}\n',
     'line 2: an exchange needs a "request" with a "method" and a "url"'),
    ('{"woml-cassette": 1}\n{"request": {"method": "GET", "url": "u"}}\n',
     'exactly one of "response" and "error"'),
    ('{"woml-cassette": 1}\n{"request": {"method": "GET", "url": "u"}, '
     '"response": {"status": 700}}\n', 'a "response" needs a "status" from 100 to 599'),
    ('{"woml-cassette": 1}\n{"request": {"method": "GET", "url": "u"}, '
     '"error": {"type": "Boom"}}\n', 'an "error" has a "type" of ConnectError'),
    ('{"woml-cassette": 1}\n{"request": {"method": "GET", "ur', "the last line is cut short"),
])
def test_a_damaged_cassette_is_refused_naming_its_line(
    tmp_path: Path, text: str, words: str
) -> None:
    cassette = tmp_path / "bad.cassette"
    cassette.write_text(text, encoding="utf-8")
    with pytest.raises(CassetteError, match=words.replace("(", r"\(")):
        wm.run('<step id="s"><script>return 1</script></step>', clock="simulated",
               replay=cassette)


def test_a_missing_cassette_says_how_to_record_one(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no such cassette \\(record one with --record"):
        wm.run('<step id="s"><script>return 1</script></step>', replay=tmp_path / "none")


def test_a_cassette_never_holds_a_secret_and_replays_without_it(tmp_path: Path) -> None:
    """spec §10.1 applied to §10.4: requests are kept as written (references), echoed
    values scrubbed, redacted headers masked; the replay needs no network and may use
    other values for the same names."""
    cassette = tmp_path / "secrets.cassette"
    echo = EchoServer()
    try:
        live = wm.run(workflow(echo.url), clock="simulated", record=cassette,
                      secrets={"STRIPE": STRIPE, "DB_PASS": DB_PASS})
    finally:
        echo.close()
    assert len(echo.requests) == 4
    data = cassette.read_bytes()
    assert_nowhere(data, "the cassette")
    assert "\u27e6woml-secret:STRIPE\u27e7".encode() in data
    replayed = wm.run(workflow(echo.url), clock="simulated", replay=cassette,
                      secrets={"STRIPE": "sk_other", "DB_PASS": "other"})
    assert shape(replayed) == shape(live)
    assert replayed.steps["send"].result == live.steps["send"].result


def test_an_attempt_cut_short_in_flight_is_cut_short_again(tmp_path: Path) -> None:
    """A request still in flight when the step's timeout ended the attempt is recorded
    as cancelled; replayed, it stays in flight until the timeout ends it again."""
    import time

    from loopback import Loopback

    def slow(request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(4)
        return 200, {"Content-Type": "application/json"}, b"{}"

    doc = """<step id="slow" timeout="2s"><script>
      await services.http.request({method: "POST", url: "URL/slow", json: {n: 1},
        idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey}});
    </script></step>"""
    cassette = tmp_path / "slow.cassette"
    with Loopback(slow) as server:
        doc = doc.replace("URL", server.url)
        live = wm.run(doc, clock="real", record=cassette)
    assert [a.outcome for a in live.steps["slow"].attempts] == ["timeout"]
    kept = [json.loads(line) for line in cassette.read_text().splitlines()[1:]]
    assert [line["error"]["type"] for line in kept] == ["cancelled"]
    replayed = wm.run(doc, clock="real", replay=cassette)
    assert shape(replayed) == shape(live)
