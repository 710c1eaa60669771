"""The lab's model path (spec §11): the server model, the simulation, what-ifs, plots.

The qualitative claims the lab's notebook shows are asserted here over several seeds:
un-jittered exponential backoff against contention sends synchronized waves and more
calls than full jitter (the AWS "Exponential Backoff And Jitter" result); after an
outage, retries keep a server overloaded unless a retry budget sheds them; two
retrying layers multiply calls. What-ifs never change WOML's own schedule.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from woml_magic.lab.server import (
    PRESETS,
    LabModelError,
    ModelServer,
    parse_outage,
    server_model,
)
from woml_magic.lab.simulate import (
    WOML_LABEL,
    Arrivals,
    SimResult,
    calls_vs_clients,
    percentile,
    simulate,
    simulate_many,
)
from woml_magic.lab.whatif import NOT_WOML, RetryBudget, WhatIf, WhatIfError
from woml_magic.policy import RetryPolicy

SEEDS = range(5)


def seconds(s: float) -> timedelta:
    return timedelta(seconds=s)


def exponential(attempts: int, delay: float, cap: float | None = None) -> RetryPolicy:
    return RetryPolicy(attempts, "exponential", seconds(delay),
                       None if cap is None else seconds(cap))


#: A server that fails every request: an outage longer than any run.
DOWN = ModelServer(outage=(0.0, 1e9), latency=0.05)

#: The contention scenario (AWS article): 50 clients at once against one record,
#: exponential backoff from 50 ms capped at 1 s, ten attempts.
OCC_POLICY = exponential(10, 0.05, 1.0)

#: The outage scenario: 1,000 clients over 100 s (10/s) against 15 requests/s, down
#: from 10 s to 40 s; WOML's `retry="10" exponential 1s max 30s`.
OUTAGE_POLICY = exponential(10, 1.0, 30.0)
OUTAGE_SERVER = ModelServer(capacity=15.0, outage=(10.0, 40.0))
OUTAGE_ARRIVALS = Arrivals.uniform(100.0)


# --- the server model -------------------------------------------------------------

@pytest.mark.parametrize(("text", "window"), [
    ("10s..40s", (10.0, 40.0)),
    ("0s..1m30s", (0.0, 90.0)),
    ("250ms..1s", (0.25, 1.0)),
])
def test_an_outage_is_two_durations(text: str, window: tuple[float, float]) -> None:
    assert parse_outage(text) == window


@pytest.mark.parametrize(("text", "message"), [
    ("10s-40s", "no '..'"),
    ("40s..10s", "not after it starts"),
    ("10s..10s", "not after it starts"),
    ("10..40s", "has no unit"),
    ("", "no '..'"),
])
def test_a_bad_outage_says_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(LabModelError, match=message) as info:
        parse_outage(text)
    assert "10s..40s" in str(info.value)


def test_every_request_in_the_outage_window_gets_503() -> None:
    state = ModelServer(outage=(10.0, 40.0)).start()
    statuses = [state.handle(t, 1).status for t in (9.999, 10.0, 25.0, 39.999, 40.0)]
    assert statuses == [201, 503, 503, 503, 201]
    assert [r.cause for r in state.traffic] == ["ok", "outage", "outage", "outage", "ok"]


def test_capacity_admits_that_many_requests_in_a_sliding_second() -> None:
    state = ModelServer(capacity=20.0).start()
    first = [state.handle(0.5, c).status for c in range(21)]
    assert first == [201] * 20 + [503]
    assert state.handle(1.499, 99).status == 503  # still within a second of t=0.5
    assert state.handle(1.5, 99).status == 201  # the window has moved past them


def test_throttling_answers_429_with_retry_after_in_whole_seconds() -> None:
    state = ModelServer(capacity=1.0, throttle=True, retry_after=2.5).start()
    assert state.handle(0.0, 1).status == 201
    answer = state.handle(0.1, 2)
    assert (answer.status, answer.cause) == (429, "throttled")
    assert answer.headers["Retry-After"] == "3"
    assert answer.data["status"] == 429
    assert "capacity of 1 requests/s" in answer.data["detail"]


def test_occ_refuses_a_write_that_races_another_clients_write() -> None:
    state = ModelServer(occ=True, conflict_window=0.02).start()
    assert state.handle(0.0, 1).status == 201
    assert state.handle(0.01, 2).status == 409  # client 1's write landed 10 ms ago
    assert state.handle(0.015, 1).status == 201  # its own write is no conflict
    assert state.handle(0.02, 3, "GET").status == 200  # reads never conflict
    assert state.handle(0.04, 2).status == 201  # 25 ms after the last write
    assert state.traffic[1].cause == "conflict"


def test_a_2xx_answer_carries_demo_like_data_and_every_request_is_logged() -> None:
    state = ModelServer().start()
    answer = state.handle(1.0, 7, "post", "/charges", {"amount": 1}, attempt=3)
    assert answer.ok
    assert answer.data == {"ok": True, "client": 7, "id": 1, "method": "POST",
                           "path": "/charges"}
    (request,) = state.traffic
    assert (request.time, request.client, request.attempt, request.status) == (1.0, 7, 3, 201)


def test_requests_must_come_in_time_order() -> None:
    state = ModelServer().start()
    state.handle(2.0, 1)
    with pytest.raises(LabModelError, match="time order"):
        state.handle(1.0, 1)


def test_one_description_serves_many_runs() -> None:
    server = ModelServer(capacity=1.0)
    assert server.start().handle(0.0, 1).status == 201
    assert server.start().handle(0.0, 1).status == 201  # a fresh state each time


@pytest.mark.parametrize(("fields", "message"), [
    ({"capacity": 0}, "capacity must be a positive"),
    ({"capacity": 0.5}, "at least one request"),
    ({"outage": (5.0, 1.0)}, "0 <= start < end"),
    ({"latency": -1.0}, "latency must be zero or more"),
    ({"window": 0.0}, "window must be a positive"),
])
def test_a_bad_server_model_is_refused_with_a_reason(fields: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(LabModelError, match=message):
        ModelServer(**fields)  # type: ignore[arg-type]


def test_server_models_by_name() -> None:
    assert server_model("occ").occ
    assert server_model("throttle").throttle
    with pytest.raises(LabModelError, match="choose one of unlimited, capacity"):
        server_model("ocd")
    assert "optimistic concurrency" in PRESETS["occ"].describe()
    assert OUTAGE_SERVER.describe() == "capacity 15/s · outage 10s..40s"


# --- what-if overlays ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "overlay"), [
    ("jitter=full", WhatIf(jitter="full")),
    ("jitter=equal", WhatIf(jitter="equal")),
    ("jitter=decorrelated", WhatIf(jitter="decorrelated")),
    ("budget=10%", WhatIf(budget=0.1)),
    ("jitter=full,budget=5%", WhatIf(jitter="full", budget=0.05)),
    ("budget=10% jitter=equal", WhatIf(jitter="equal", budget=0.1)),
])
def test_what_ifs_are_read_from_the_magics_text(text: str, overlay: WhatIf) -> None:
    assert WhatIf.parse(text) == overlay


@pytest.mark.parametrize(("text", "message"), [
    ("jitter=fulll", "did you mean full"),
    ("budgte=10%", "did you mean budget"),
    ("jitter=none", "choose one of full, equal, decorrelated"),
    ("budget=10", "not a percentage"),
    ("budget=ten%", "not a percentage"),
    ("budget=-5%", "from 0% to 1000%"),
    ("jitter=full,jitter=equal", "given twice"),
    ("jitter", "no '='"),
    ("", "empty what-if"),
])
def test_a_bad_what_if_says_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(WhatIfError, match=message):
        WhatIf.parse(text)


def test_every_overlay_says_it_is_not_woml_semantics() -> None:
    overlay = WhatIf.parse("jitter=full,budget=10%")
    assert overlay.label == "what-if: full jitter + retry budget 10% (not WOML semantics)"
    assert str(overlay) == overlay.label
    assert NOT_WOML not in WOML_LABEL


def test_jitter_formulas_of_the_aws_article() -> None:
    import random

    policy = exponential(6, 1.0, 10.0)
    rng = random.Random(0)
    for k in range(1, 6):
        w = policy.wait(k).total_seconds()
        full = [WhatIf("full").wait(policy, k, 1.0, rng) for _ in range(200)]
        equal = [WhatIf("equal").wait(policy, k, 1.0, rng) for _ in range(200)]
        assert all(0 <= x <= w for x in full)
        assert max(full) > w * 0.9
        assert min(full) < w * 0.1
        assert all(w / 2 <= x <= w for x in equal)
    previous = 1.0
    for _ in range(50):  # min(cap, U(base, previous × 3))
        wait = WhatIf("decorrelated").wait(policy, 1, previous, rng)
        assert 1.0 <= wait <= min(10.0, previous * 3)
        previous = wait


def test_decorrelated_jitter_is_capped_by_the_largest_woml_wait_without_a_max() -> None:
    import random

    policy = exponential(4, 1.0)  # waits 1, 2, 4: cap 4
    rng = random.Random(1)
    assert max(WhatIf("decorrelated").wait(policy, 1, 100.0, rng) for _ in range(50)) <= 4


def test_a_retry_budget_buys_one_retry_per_ten_first_attempts_at_ten_percent() -> None:
    budget = RetryBudget(0.1)
    for _ in range(10):
        budget.deposit()
    assert budget.withdraw()
    assert not budget.withdraw()


# --- the simulation: WOML's schedule ------------------------------------------------

def test_one_client_follows_woml_schedule_exactly() -> None:
    """spec §3.1: attempt k+1 starts wait(k) after attempt k's answer; no jitter."""
    policy = exponential(5, 1.0, 4.0)  # waits 1, 2, 4, 4
    result = simulate(policy, 1, DOWN, seed=3)
    times = [r.time for r in result.traffic]
    expected, t = [0.0], 0.0
    for wait in policy.waits():
        t += 0.05 + wait.total_seconds()
        expected.append(t)
    assert times == pytest.approx(expected, abs=1e-12)
    assert [r.attempt for r in result.traffic] == [1, 2, 3, 4, 5]
    assert result.outcomes == ["gave-up"]
    assert result.ends == pytest.approx([expected[-1] + 0.05])


def test_a_client_stops_at_its_first_success() -> None:
    server = ModelServer(outage=(0.0, 2.5), latency=0.0)
    result = simulate(RetryPolicy(5, "fixed", seconds(1)), 1, server)
    assert [r.status for r in result.traffic] == [503, 503, 503, 201]
    assert result.outcomes == ["succeeded"]
    assert result.completion_times == [3.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_same_seed_gives_the_same_run(seed: int) -> None:
    def run() -> SimResult:
        return simulate(OCC_POLICY, 200, PRESETS["occ"], seed=seed,
                        arrivals=Arrivals.uniform(2.0), overlay="jitter=full")
    first, second = run(), run()
    assert first == second
    assert first.traffic == second.traffic
    other = simulate(OCC_POLICY, 200, PRESETS["occ"], seed=seed + 100,
                     arrivals=Arrivals.uniform(2.0), overlay="jitter=full")
    assert other.traffic != first.traffic


@pytest.mark.parametrize("seed", SEEDS)
def test_an_overlay_never_changes_the_woml_run(seed: int) -> None:
    args = (OUTAGE_POLICY, 300, OUTAGE_SERVER)
    plain = simulate(*args, seed=seed, arrivals=OUTAGE_ARRIVALS)
    beside = [simulate(*args, seed=seed, arrivals=OUTAGE_ARRIVALS, overlay=o)
              for o in ("jitter=full", "jitter=decorrelated,budget=10%")]
    again = simulate(*args, seed=seed, arrivals=OUTAGE_ARRIVALS)
    assert again == plain
    assert plain.label == WOML_LABEL
    assert plain.overlay is None
    for b in beside:  # compared fairly: the same clients arrive at the same times
        assert b.starts == plain.starts
        assert NOT_WOML in b.label


# --- the qualitative results ---------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_unjittered_backoff_sends_synchronized_waves_and_more_calls_than_full_jitter(
        seed: int) -> None:
    """The AWS article's result: 50 clients contend for one record (OCC)."""
    woml = simulate(OCC_POLICY, 50, PRESETS["occ"], seed=seed)
    full = simulate(OCC_POLICY, 50, PRESETS["occ"], seed=seed, overlay="jitter=full")
    assert woml.calls > full.calls * 1.3
    assert full.succeeded > woml.succeeded
    # Waves: WOML's calls land in a few bins; full jitter's spread over many.
    woml_waves = woml.load(bin=0.02).busiest_share(0.1)
    full_waves = full.load(bin=0.02).busiest_share(0.1)
    assert woml_waves > 0.95
    assert woml_waves > full_waves + 0.15


@pytest.mark.parametrize("seed", range(3))
def test_after_an_outage_retries_keep_the_server_overloaded_unless_budgeted(
        seed: int) -> None:
    """1,000 clients, a 30 s outage: without a budget the load stays above capacity
    long after the outage ends; a 10% retry budget recovers within seconds."""
    end = OUTAGE_SERVER.outage[1]  # type: ignore[index]
    woml = simulate(OUTAGE_POLICY, 1000, OUTAGE_SERVER, seed=seed, arrivals=OUTAGE_ARRIVALS)
    budget = simulate(OUTAGE_POLICY, 1000, OUTAGE_SERVER, seed=seed,
                      arrivals=OUTAGE_ARRIVALS, overlay="budget=10%")
    load = woml.load(bin=1.0).total
    after = load[int(end):int(end) + 20]
    assert sum(after) / len(after) > 1.5 * OUTAGE_SERVER.capacity  # type: ignore[operator]
    assert woml.recovered_at(end) >= end + 30
    assert budget.recovered_at(end) <= end + 5
    assert budget.recovered_at(end) < woml.recovered_at(end)
    assert budget.calls < woml.calls / 2
    assert "budget-denied" in budget.outcomes  # the price: clients that gave up early


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_retrying_layers_multiply_calls(layers: int) -> None:
    """Each outer attempt is a whole retried inner call: attempts ** layers."""
    result = simulate(RetryPolicy(3, "fixed", seconds(0.1)), 10, DOWN, layers=layers)
    assert result.calls == 10 * 3 ** layers
    assert result.amplification == 3 ** layers
    assert max(r.attempt for r in result.traffic) == 3
    assert max(r.outer for r in result.traffic) == 3


@pytest.mark.parametrize("seed", range(3))
def test_two_layers_amplify_the_outage(seed: int) -> None:
    """A layer multiplies only once the layer below it runs out of attempts, so the
    inner schedule here (waits 1s, 2s, 4s) is shorter than the 30 s outage."""
    policy = exponential(4, 1.0)
    one = simulate(policy, 1000, OUTAGE_SERVER, seed=seed, arrivals=OUTAGE_ARRIVALS)
    two = simulate(policy, 1000, OUTAGE_SERVER, seed=seed, arrivals=OUTAGE_ARRIVALS,
                   layers=2)
    assert two.calls > 2.5 * one.calls
    assert two.recovered_at(40.0) > one.recovered_at(40.0) + 20


def test_a_zero_budget_allows_no_retry() -> None:
    result = simulate(exponential(5, 1.0), 20, DOWN, overlay=WhatIf(budget=0.0))
    assert result.calls == 20
    assert set(result.outcomes) == {"budget-denied"}


def test_ten_thousand_clients_run_on_the_model_path() -> None:
    """The bench's size, once, with no timing assert (bench/lab.py times it)."""
    result = simulate(OUTAGE_POLICY, 10_000, ModelServer(capacity=150.0, outage=(10, 40)),
                      seed=1, arrivals=Arrivals.uniform(100.0))
    assert 10_000 < result.calls <= 100_000
    assert result.succeeded + result.gave_up == 10_000
    assert len(result.attempts) == 10_000


# --- results -----------------------------------------------------------------------

def test_load_counts_every_request_once() -> None:
    result = simulate(OUTAGE_POLICY, 300, OUTAGE_SERVER, seed=2, arrivals=OUTAGE_ARRIVALS)
    for bin_ in (0.5, 1.0, 7.0):
        load = result.load(bin_)
        assert sum(load.ok) * bin_ == pytest.approx(result.successes)
        assert sum(load.failed) * bin_ == pytest.approx(result.failures)
        assert load.starts[1] == bin_
    assert result.successes + result.failures == result.calls == sum(result.attempts)


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([3.0, 1.0, 2.0], 50, 2.0),
    ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
    (list(range(1, 101)), 99, 99),
    ([5.0], 99, 5.0),
])
def test_percentiles_are_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_percentiles_of_completion_times() -> None:
    result = simulate(RetryPolicy(1), 100, ModelServer(latency=0.25))
    assert result.percentiles == (0.25, 0.25)


@pytest.mark.parametrize(("text", "arrivals"), [
    ("at-once", Arrivals.at_once()),
    ("uniform:60s", Arrivals.uniform(60.0)),
    ("poisson:20/s", Arrivals.poisson(20.0)),
])
def test_arrivals_by_name(text: str, arrivals: Arrivals) -> None:
    assert Arrivals.parse(text) == arrivals


@pytest.mark.parametrize("text", ["uniform", "uniform:60", "poisson:20", "poisson:x/s",
                                  "soon"])
def test_bad_arrivals_say_what_is_allowed(text: str) -> None:
    with pytest.raises(LabModelError, match="at-once, uniform:<duration>"):
        Arrivals.parse(text)


def test_poisson_arrivals_have_the_asked_rate() -> None:
    result = simulate(RetryPolicy(1), 2000, seed=4, arrivals="poisson:20/s")
    assert max(result.starts) == pytest.approx(100.0, rel=0.1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"clients": 0}, "clients must be"),
    ({"layers": 4}, "layers must be"),
])
def test_bad_simulation_sizes_are_refused(kwargs: dict[str, int], message: str) -> None:
    args = {"clients": 1, "layers": 1} | kwargs
    with pytest.raises(LabModelError, match=message):
        simulate(RetryPolicy(1), args["clients"], layers=args["layers"])


def test_simulate_many_runs_each_size_with_each_overlay() -> None:
    results = simulate_many(OCC_POLICY, [10, 20], PRESETS["occ"],
                            overlays=[None, "jitter=full"])
    assert [(r.clients, r.overlay is None) for r in results] == [
        (10, True), (10, False), (20, True), (20, False)]
    points = calls_vs_clients(results)
    assert list(points) == [WOML_LABEL, WhatIf("full").label]
    assert [n for n, _ in points[WOML_LABEL]] == [10, 20]


# --- plots ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outage_results() -> list[SimResult]:
    pytest.importorskip("matplotlib")
    return [simulate(OUTAGE_POLICY, 300, OUTAGE_SERVER, seed=0, arrivals=OUTAGE_ARRIVALS,
                     overlay=o) for o in (None, "budget=10%")]


def _svg_text(svg: str) -> str:
    from lxml import etree

    root = etree.fromstring(svg.encode())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return " ".join(" ".join(root.itertext()).split())


def test_the_load_plot_labels_scenarios_capacity_and_outage(
        outage_results: list[SimResult]) -> None:
    from woml_magic.lab.plots import load_plot

    svg = load_plot(outage_results)
    text = _svg_text(svg)
    for label in ("Server load", WOML_LABEL, "what-if: retry budget 10% (not WOML semantics)",
                  "capacity 15/s", "outage", "successes", "failures", "requests/s"):
        assert label in text
    assert load_plot(outage_results) == svg  # deterministic
    assert "dc:date" not in svg
    assert "<script" not in svg
    assert "currentColor" in svg


def test_a_named_what_if_panel_still_says_not_woml(outage_results: list[SimResult]) -> None:
    from woml_magic.lab.plots import load_plot

    text = _svg_text(load_plot({"plain": outage_results[0], "budget": outage_results[1]}))
    assert "plain" in text
    assert NOT_WOML in text


def test_attempts_completion_and_calls_plots_are_labelled_svg(
        outage_results: list[SimResult]) -> None:
    from woml_magic.lab.plots import attempts_plot, calls_vs_clients_plot, completion_plot

    attempts = _svg_text(attempts_plot(outage_results))
    assert "Attempts per client" in attempts
    assert "requests made by one client" in attempts
    completion = _svg_text(completion_plot(outage_results))
    assert "p50" in completion
    assert "p99" in completion
    assert NOT_WOML in completion
    many = simulate_many(OCC_POLICY, [10, 30, 50], PRESETS["occ"],
                         overlays=[None, "jitter=full"])
    calls = _svg_text(calls_vs_clients_plot(calls_vs_clients(many)))
    assert "Total calls vs clients" in calls
    assert "one call per client" in calls


def test_a_lab_figure_shows_as_svg_and_as_inline_html(outage_results: list[SimResult]) -> None:
    from woml_magic.lab.plots import INK, LabFigure, attempts_plot

    figure = LabFigure(attempts_plot(outage_results), "attempts")
    assert figure._repr_svg_() == figure.svg
    assert f'color="{INK}"' in figure.svg  # standalone: a grey that reads on both
    html = figure._repr_html_()
    assert html.startswith('<div class="woml-lab-figure"><svg ')
    assert f'color="{INK}"' not in html  # inline: the page's own text colour
    assert "*{stroke-linejoin" not in html  # no page-wide style rule leaks out


def test_importing_the_lab_model_does_not_load_matplotlib() -> None:
    code = ("import sys, woml_magic, woml_magic.lab.simulate, woml_magic.lab.plots; "
            "sys.exit('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
