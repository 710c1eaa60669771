"""The lab's real clients (spec §11): real scripts, one simulated clock, a server model.

Every lab here runs the document's scripts in the QuickJS worker with the local engine;
the server is ``lab.server.ModelServer`` in-process, or the demo API on 127.0.0.1.
Times are exact: the lab's clock does not move while scripts run.
"""

from __future__ import annotations

import asyncio
import html
import sys
import time
import uuid

import pytest
from conftest import child_pids
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.errors import WomlExtraMissing
from woml_magic.lab import LabModelError, LabResult, ModelServer, lab_async, labclock
from woml_magic.lab.simulate import simulate
from woml_magic.lab.whatif import NOT_WOML

CALL = """<step id="charge" retry="{retry}" retry-delay="{delay}"{backoff}><script>
console.log("client " + context.payload.client + " attempt " + attempt.number);
const r = await services.http.request({{method: "POST", url: context.payload.api + "/charges",
  json: {{amount: 100, currency: "eur"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}});
return r.status;
</script></step>"""


THROWING_DOC = ('<step id="s" retry="2" retry-delay="1s"><script>throw new Error("x");'
                "</script></step>")


def call_doc(retry: int = 4, delay: str = "5s", backoff: str = "") -> str:
    return CALL.format(retry=retry, delay=delay,
                       backoff=f' retry-backoff="{backoff}"' if backoff else "")


def fingerprint(result: LabResult) -> tuple[object, ...]:
    """Everything the seed decides: the traffic, and every client's events."""
    return (result.traffic,
            tuple(tuple(e.to_dict().items()) for run in result.runs for e in run.events))


# -- real scripts, one clock ----------------------------------------------------------------
def test_clients_really_run_the_scripts_as_runs_of_their_own() -> None:
    result = wm.lab(call_doc(retry=1), clients=3, seed=7, workers=2)
    assert [r.id for r in result.runs] == ["lab-7-0", "lab-7-1", "lab-7-2"]
    for n, run in enumerate(result.runs):
        step = run.steps["charge"]
        assert step.attempts[0].logs == [f"client {n} attempt 1"]  # console.log, captured
        assert step.result == 201
        assert step.idempotency_key == str(uuid.uuid5(
            uuid.UUID("b7c33995-d21b-55a8-81d6-82ec4d685111"), f"lab-7-{n}/charge"))  # §3.5
        assert run.clock == "simulated"
    assert result.calls == 3
    assert result.succeeded == 3


def test_the_same_seed_gives_the_same_traffic_and_outcomes() -> None:
    doc = call_doc(retry=5, delay="1s", backoff="exponential")
    first = wm.lab(doc, clients=40, seed=11, capacity=5, start_spread=3.0)
    again = wm.lab(doc, clients=40, seed=11, capacity=5, start_spread=3.0, workers=1)
    assert first.deterministic
    assert fingerprint(first) == fingerprint(again)
    other = wm.lab(doc, clients=40, seed=12, capacity=5, start_spread=3.0)
    assert other.traffic != first.traffic  # another seed: other arrivals


def test_an_outage_fails_attempts_and_the_retries_land_on_the_schedule() -> None:
    result = wm.lab(call_doc(retry=4, delay="5s"), clients=2, seed=0, outage="0s..12s")
    for run in result.runs:
        step = run.steps["charge"]
        assert [a.outcome for a in step.attempts] == ["threw", "threw", "threw", "succeeded"]
        assert [a.started_at for a in step.attempts] == [0.0, 5.0, 10.0, 15.0]
        assert step.waits == [5.0, 5.0, 5.0]
        error = step.attempts[0].error
        assert error is not None
        assert error.name == "HttpError"
        assert error.message == ("POST http://model.lab/charges answered 503 Service "
                                 "Unavailable: the server is down from 0s to 12s (the "
                                 "model's outage window)")
    assert [(r.time, r.status, r.cause) for r in result.traffic if r.client == 0] == [
        (0.0, 503, "outage"), (5.0, 503, "outage"), (10.0, 503, "outage"), (15.0, 201, "ok")]


def test_throttling_answers_429_with_retry_after_to_the_script() -> None:
    doc = """<step id="s"><script>
    try {
      const r = await services.http.request({method: "POST", url: "http://api.test/x"});
      return {status: r.status};
    } catch (e) {
      return {name: e.name, status: e.status, retryAfter: e.headers["retry-after"]};
    }
    </script></step>"""
    result = wm.lab(doc, clients=5, seed=3, capacity=2, throttle=True)
    answers = sorted((r.steps["s"].result for r in result.runs), key=str)
    assert answers.count({"status": 201}) == 2
    assert answers.count({"name": "HttpError", "status": 429, "retryAfter": "1"}) == 3
    assert sorted(r.status for r in result.traffic) == [201, 201, 429, 429, 429]


def test_timeouts_are_judged_on_the_lab_clock() -> None:
    doc = '<step id="s" timeout="30s"><script>await services.sleep("1h");</script></step>'
    result = wm.lab(doc, clients=2, seed=0, sample=0)
    for run in result.runs:
        attempt = run.steps["s"].attempts[0]
        assert (attempt.outcome, attempt.started_at, attempt.ended_at) == ("timeout", 0.0, 30.0)


def test_demo_api_mode_sends_real_requests_to_127_0_0_1() -> None:
    with DemoAPI() as api:
        result = wm.lab(call_doc(retry=2), clients=3, seed=1, server=api, workers=2)
        charges, url = api.records("charges"), api.url
    assert len(charges) == 3
    assert result.succeeded == 3
    assert result.server is None
    assert not result.deterministic  # a real server
    assert [r.status for r in result.traffic] == [201, 201, 201]
    assert all(c.url.startswith(url) for r in result.runs
               for a in r.steps["charge"].attempts for c in a.calls)


def test_a_real_api_is_reached_only_on_this_machine_and_only_itself() -> None:
    doc = """<step id="s"><script>
    await services.http.request({method: "GET", url: context.payload.api + "/charges"});
    await services.http.request({method: "GET", url: "http://example.com/"});
    </script></step>"""
    with DemoAPI() as api:
        result = wm.lab(doc, clients=1, seed=0, server=api.url + "/", sample=0)
    error = result.runs[0].steps["s"].attempts[0].error
    assert error is not None
    assert error.name == "NetworkError"
    assert "not in the http_allow list" in error.message
    with pytest.raises(LabModelError, match="only to this machine"):
        wm.lab(doc, clients=1, server="http://example.com")
    with pytest.raises(LabModelError, match="does not start the demo API"):
        wm.lab(doc, clients=1, server="demo")


def test_lab_async_runs_on_the_run_loop_while_another_loop_awaits() -> None:
    result = asyncio.run(lab_async(call_doc(retry=1), clients=2, seed=4, sample=0))
    assert [r.id for r in result.runs] == ["lab-4-0", "lab-4-1"]
    assert result.succeeded == 2


def test_payload_is_a_value_or_a_function_of_the_client() -> None:
    doc = '<step id="s"><script>return context.payload;</script></step>'
    same = wm.lab(doc, clients=2, seed=0, payload={"k": 1}, sample=0)
    assert [r.steps["s"].result for r in same.runs] == [{"k": 1}, {"k": 1}]
    each = wm.lab(doc, clients=2, seed=0, payload=lambda n: {"n": n}, sample=0)
    assert [r.steps["s"].result for r in each.runs] == [{"n": 0}, {"n": 1}]


def test_a_syntax_error_stops_the_lab_before_any_client_runs() -> None:
    with pytest.raises(wm.WomlSyntaxError, match="JavaScript syntax error"):
        wm.lab('<step id="s"><script>return (;</script></step>', clients=3)


def test_scripts_waiting_on_the_clock_with_every_worker_held_start_late_and_say_so() -> None:
    doc = '<step id="s"><script>await services.sleep("1s"); return 1;</script></step>'
    result = wm.lab(doc, clients=3, seed=0, workers=1, sample=0)
    assert sorted(r.steps["s"].attempts[0].ended_at or 0 for r in result.runs) == [1.0, 2.0, 3.0]
    assert result.late == 2
    assert any("ran late" in note for note in result.notes())


# -- what-if overlays: model only ------------------------------------------------------------
def test_overlays_are_model_only_and_labelled() -> None:
    doc = call_doc(retry=6, delay="1s", backoff="exponential")
    plain = wm.lab(doc, clients=30, seed=5, capacity=5, outage="2s..8s", start_spread=4)
    overlaid = wm.lab(doc, clients=30, seed=5, capacity=5, outage="2s..8s", start_spread=4,
                      what_if=["jitter=full", "budget=10%"])
    assert fingerprint(plain) == fingerprint(overlaid)
    assert list(overlaid.overlays) == [
        f"what-if: full jitter ({NOT_WOML})", f"what-if: retry budget 10% ({NOT_WOML})"]
    model = ModelServer(capacity=5, outage=(2.0, 8.0), latency=0.0)
    again = simulate(wm.parse(doc).steps[0].policy, 30, model, seed=5, arrivals="uniform:4s",
                     overlay="jitter=full")
    assert overlaid.overlays[f"what-if: full jitter ({NOT_WOML})"].traffic == again.traffic


def test_overlays_need_a_model_server() -> None:
    with pytest.raises(LabModelError, match="model-only"):
        wm.lab(call_doc(), clients=1, server="http://127.0.0.1:9", what_if="jitter=full")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"clients": 0}, "clients must be"),
    ({"clients": 1, "outage": "40s..10s"}, "invalid outage"),
    ({"clients": 1, "what_if": "jitter=fulll"}, "did you mean full"),
    ({"clients": 1, "server": "nope"}, "unknown server model"),
    ({"clients": 1, "start_spread": -1.0}, "start_spread"),
])
def test_bad_arguments_are_refused_before_anything_runs(kwargs: dict[str, object],
                                                        match: str) -> None:
    with pytest.raises(wm.WomlError, match=match):
        wm.lab(call_doc(), **kwargs)  # type: ignore[arg-type]


# -- display -------------------------------------------------------------------------------
def test_a_lab_displays_a_table_plots_and_sampled_timelines() -> None:
    result = wm.lab(call_doc(retry=3, delay="1s"), clients=12, seed=2, outage="0s..1500ms",
                    what_if="jitter=equal", sample=2)
    bundle = result._repr_mimebundle_()
    text, page = bundle["text/plain"], bundle["text/html"]
    assert "WOML, real scripts" in text
    assert f"what-if: equal jitter ({NOT_WOML}) · model only" in text
    assert page.count("<svg ") >= 4 + 2  # four plots, two timelines
    assert page.count('class="woml-timeline"') == 2
    assert "<script" not in page  # static: renders in nbconvert and on GitHub
    assert len(result.sampled()) == 2



def test_a_lab_whose_scripts_make_no_request_draws_no_server_charts() -> None:
    """spec §11: the lab plots server load; with no request there is none to draw. A
    script that cannot call the server gets the completion times only and a note saying
    why, not empty server charts, and no modelled calls-against-clients line (the model
    path counts a request for every attempt, which such a script never makes)."""
    doc = ('<step id="s" retry="3" retry-delay="1s"><script>'
           'if (context.payload.client % 2) throw new Error("x"); return 1;</script></step>')
    result = wm.lab(doc, clients=20, seed=1, sample=1)
    assert result.calls == 0
    assert [figure.title for figure in result.figures()] == ["Completion time"]
    assert result.calls_vs_clients == {}
    assert any(note.startswith("No client made a request to the server") for note in
               result.notes())
    page = result._repr_mimebundle_()["text/html"]
    assert "Server load" not in page
    assert "No client made a request to the server" in html.unescape(page)
    calling = wm.lab(call_doc(retry=2, delay="1s"), clients=4, seed=1, sample=0)
    assert [figure.title for figure in calling.figures()] == [
        "Server load", "Requests per client", "Completion time", "Total calls vs clients"]
    assert not any(note.startswith("No client made a request") for note in calling.notes())

def test_without_the_lab_extra_plots_say_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # spec §11: matplotlib is the lab extra's; without it figures() names the install
    # line (a bare ModuleNotFoundError did not), and the display keeps its table.
    result = wm.lab(call_doc(retry=2, delay="1s"), clients=3, seed=1, sample=1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    with pytest.raises(WomlExtraMissing, match=r'pip install "woml-magic\[lab\]"') as info:
        result.figures()
    assert info.value.extra == "lab"
    assert isinstance(info.value, ImportError)
    page = result._repr_mimebundle_()["text/html"]
    assert 'pip install "woml-magic[lab]"' in html.unescape(page)
    assert "<table" in page


def test_no_worker_is_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lab's workers wait ``KEEP_S`` for the next lab (``labclock.KeptWorkers``; spec
    §4.5: warm workers reused across runs), then stop: none is left behind."""
    monkeypatch.setattr(labclock, "KEEP_S", 0.3)
    labclock.KEPT.stop()
    before = child_pids()
    wm.lab(call_doc(retry=1), clients=4, seed=0, sample=0)
    kept = set(labclock.KEPT.pids)
    assert len(kept) == labclock.DEFAULT_WORKERS
    assert kept <= child_pids()
    deadline = time.monotonic() + 10
    while not child_pids() <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() <= before
    assert labclock.KEPT.pids == ()


def test_the_next_lab_starts_no_worker_and_a_smaller_one_stops_the_rest() -> None:
    """Spec §4.5 (warm workers reused across runs), §11: the next lab takes the last
    one's workers; a lab with fewer workers stops the others."""
    labclock.KEPT.stop()
    wm.lab(THROWING_DOC, clients=3, seed=0, sample=0)
    first = set(labclock.KEPT.pids)
    wm.lab(call_doc(retry=1), clients=3, seed=0, sample=0)  # one attempt per worker here
    assert set(labclock.KEPT.pids) == first
    before = child_pids()
    wm.lab(THROWING_DOC, clients=3, seed=0, sample=0, workers=1)
    (only,) = labclock.KEPT.pids
    assert only in first
    assert child_pids() <= before
    labclock.KEPT.stop()
    assert not first & child_pids()


# -- the property: a lab never changes a plain run ------------------------------------------
@st.composite
def documents(draw: st.DrawFn) -> str:
    steps = []
    for i in range(draw(st.integers(1, 2))):
        retry = draw(st.integers(1, 4))
        delay = draw(st.sampled_from(["0s", "500ms", "1s", "2s"]))
        backoff = draw(st.sampled_from(["fixed", "exponential"]))
        throws = draw(st.sets(st.integers(1, 4), max_size=4))
        steps.append(
            f'<step id="s{i}" retry="{retry}" retry-delay="{delay}" retry-backoff="{backoff}">'
            f"<script>if ({sorted(throws)}.includes(attempt.number)) throw new Error('no');"
            f" return attempt.number;</script></step>")
    return "\n".join(steps)


def shape(run: wm.Run) -> list[tuple[str, list[str], list[float], str]]:
    """What a plain run's outcome is: per step, its attempts, its waits, its key."""
    return [(s.status, [a.outcome for a in s.attempts], [round(w, 1) for w in s.waits],
             s.idempotency_key) for s in run.steps.values()]


@settings(deadline=None, database=None, derandomize=True, max_examples=15,
          suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), seed=st.integers(0, 2**16))
def test_a_lab_with_overlays_never_changes_a_plain_run(doc: str, seed: int) -> None:
    before = wm.run(doc, clock="simulated", run_id="plain")
    overlaid = wm.lab(doc, clients=2, seed=seed, what_if=["jitter=full", "budget=10%"],
                      capacity=1, workers=1, sample=0)
    after = wm.run(doc, clock="simulated", run_id="plain")
    assert shape(before) == shape(after)
    plain = wm.lab(doc, clients=2, seed=seed, capacity=1, workers=1, sample=0)
    assert fingerprint(plain) == fingerprint(overlaid)
    # A lab client is a plain run with its own id: the same outcomes and waits.
    lone = wm.run(doc, clock="simulated", run_id=f"lab-{seed}-0")
    assert shape(lone) == shape(plain.runs[0])


def test_lab_and_lab_async_take_one_set_of_options_and_name_the_allowed_ones() -> None:
    """One ``LabOptions`` for both (issue 13's rule: no repeated signatures); a typo is a
    TypeError that lists what is allowed, before anything runs."""
    import woml_magic as wm
    from woml_magic.lab import LabOptions

    with pytest.raises(TypeError, match=r"unexpected keyword argument 'outages'.*outage"):
        wm.lab('<step id="s"><script>return 1;</script></step>', clients=1,
               outages="1s..2s")  # type: ignore[call-arg]
    assert {"seed", "server", "outage", "what_if", "sample"} <= set(LabOptions.__annotations__)
