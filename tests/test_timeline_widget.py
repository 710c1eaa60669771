"""The live timeline widget (spec §6.3): bars, details, Cancel, batching, replay, close.

Widgets are real ipywidgets 8 objects (outside a kernel their comms are inert); runs
come from hand-written event sequences applied through ``Run.apply``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import ipywidgets as widgets
import pytest
from ipywidgets.widgets.widget import _instances
from timeline_runs import Recorder, failed_closed, succeeded, waiting, workflow

from woml_magic.model import idempotency_key
from woml_magic.policy import RetryPolicy
from woml_magic.timeline import TimelineWidget
from woml_magic.timeline.widget import TRACK_PX


@pytest.fixture
def made() -> Iterator[list[TimelineWidget]]:
    """Widgets a test creates; closed afterwards so no comm outlives the test."""
    out: list[TimelineWidget] = []
    yield out
    for w in out:
        w.close()


def tree(w: Any) -> Iterator[Any]:
    yield w
    for child in getattr(w, "children", ()):
        yield from tree(child)


def bars(w: TimelineWidget, step: str = "charge") -> list[Any]:
    lane = next(x for x in w._lanes_box.children if step in x.children[0].value)
    return [b for b in lane.children[2].children if isinstance(b, widgets.Button)]


def waits(w: TimelineWidget, step: str = "charge") -> list[str]:
    lane = next(x for x in w._lanes_box.children if step in x.children[0].value)
    track = lane.children[2].children
    return [g.value for g in track if "woml-wait" in g._dom_classes]


def test_one_bar_per_attempt_labelled_and_classed_by_outcome(made: list[Any]) -> None:
    w = TimelineWidget(failed_closed().run)
    made.append(w)
    got = [(b.description, b.disabled) for b in bars(w)]
    assert got == [("#1 threw", False), ("#2 threw", False), ("#3 timeout", False)]
    assert "woml-outcome-threw" in bars(w)[0]._dom_classes
    assert "woml-outcome-timeout" in bars(w)[2]._dom_classes
    assert bars(w)[0].style.button_color != bars(w)[2].style.button_color
    assert bars(w)[0].tooltip == "attempt 1 of charge · threw · 0s → 0.12s"
    assert bars(w, "email") == []  # not run: no bars


def px(value: str) -> float:
    return float(value.removesuffix("px").split()[-1]) if value else 0.0


def test_bars_end_at_their_time_on_the_shared_axis(made: list[Any]) -> None:
    w = TimelineWidget(failed_closed().run)
    made.append(w)
    lane = w._lanes_box.children[0]
    right = 0.0
    ends = []
    for child in lane.children[2].children:
        right += px(child.layout.margin) + px(child.layout.width)
        ends.append(right)
    # The axis runs 0..40s over TRACK_PX; #3 ended at 33.3s. Short bars keep a minimum
    # width for their label, but the lane snaps back to the axis at the next long segment.
    assert ends[-1] == pytest.approx(33.3 / 40 * TRACK_PX, abs=1)
    assert px(bars(w)[2].layout.width) > 3 * px(bars(w)[0].layout.width)


def test_waits_are_labelled_gaps(made: list[Any]) -> None:
    w = TimelineWidget(failed_closed().run)
    made.append(w)
    labels = waits(w)
    assert len(labels) == 2
    assert ">wait 1s<" in labels[0]
    assert ">wait 2s<" in labels[1]


def test_live_wait_counts_down_on_the_injected_clock(made: list[Any]) -> None:
    now = [0.52]
    w = TimelineWidget(waiting().run, clock_now=lambda: now[0])
    made.append(w)
    assert ">wait 0.6s left<" in waits(w)[0]
    now[0] = 1.0
    w.refresh()
    assert ">wait 0.1s left<" in waits(w)[0]


def test_planned_attempts_are_disabled_grey_buttons(made: list[Any]) -> None:
    w = TimelineWidget(waiting().run)
    made.append(w)
    planned = [(b.description, b.disabled) for b in bars(w) if "woml-planned" in b._dom_classes]
    assert planned == [("#2 planned", True), ("#3 planned", True), ("#4 planned", True)]
    assert [b.description for b in bars(w, "email")] == ["#1 planned"]


def test_lane_shows_policy_in_words_status_and_full_key(made: list[Any]) -> None:
    w = TimelineWidget(failed_closed().run)
    made.append(w)
    lane = w._lanes_box.children[0]
    assert "woml-lane" in lane._dom_classes
    assert "4 attempts · exponential 1s → max 10s" in lane.children[0].value
    assert "failed closed" in lane.children[0].value
    key = lane.children[1]
    assert "woml-key" in key._dom_classes
    assert f">{idempotency_key('run-1', 'charge')}</code>" in key.value


def test_clicking_a_bar_shows_outcome_error_line_calls_and_logs(made: list[Any]) -> None:
    r = failed_closed()
    w = TimelineWidget(r.run)
    made.append(w)
    assert "Click an attempt" in w._details.value
    bars(w)[0].click()
    details = w._details.value
    assert "woml-details" in w._details._dom_classes
    assert "attempt 1 · threw" in details
    assert "retrying after 1s" in details
    assert "TypeError: boom @ line 7" in details
    assert f"Idempotency-Key: {r.key('charge')}" in details
    assert "charging card" in details
    bars(w)[2].click()
    assert "attempt 3 · timeout" in w._details.value


def test_details_show_result_preview_of_a_success(made: list[Any]) -> None:
    w = TimelineWidget(succeeded({"id": "ch_1"}).run)
    made.append(w)
    bars(w, "fetch")[0].click()
    assert "&quot;ch_1&quot;" in w._details.value


def test_details_show_redacted_authorization_as_bullets(made: list[Any]) -> None:
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.call("s", 1, 0.1, headers={"authorization": "•••"})
    w = TimelineWidget(r.run)
    made.append(w)
    bars(w, "s")[0].click()
    assert "authorization: •••" in w._details.value


def test_cancel_button_calls_on_cancel_once_and_disables_itself(made: list[Any]) -> None:
    calls: list[str] = []
    w = TimelineWidget(waiting().run, on_cancel=lambda: calls.append("cancel"))
    made.append(w)
    (cancel,) = [x for x in tree(w) if "woml-cancel" in getattr(x, "_dom_classes", ())]
    assert isinstance(cancel, widgets.Button)
    assert cancel.layout.display != "none"
    assert not cancel.disabled
    cancel.click()
    cancel.click()
    assert calls == ["cancel"]
    assert cancel.disabled


def test_cancel_button_is_hidden_without_on_cancel_or_once_finished(made: list[Any]) -> None:
    w = TimelineWidget(waiting().run)
    made.append(w)
    assert w._cancel.layout.display == "none"
    r = waiting()
    w2 = TimelineWidget(r.run, on_cancel=lambda: None)
    made.append(w2)
    r.sinks.append(w2)
    r.step_done("charge", 0.5, "failed-closed")
    r.run_done(0.5, "failed")
    assert w2._cancel.layout.display == "none"


def test_live_updates_inside_a_running_loop_are_batched(made: list[Any]) -> None:
    # spec §6.3 live timeline: 100 quick events give a handful of renders, and the
    # final state is rendered at RunFinished.
    async def main() -> tuple[int, int, list[str]]:
        r = Recorder(workflow(("poll", RetryPolicy(attempts=10, delay=timedelta(0)))))
        w = TimelineWidget(r.run, max_rate_hz=1.0)
        made.append(w)
        r.sinks.append(w)
        r.step("poll", 0)
        t = 0.0
        for n in range(1, 11):
            r.start("poll", n, t)
            for i in range(7):
                r.log("poll", n, t, f"line {i}")
                await asyncio.sleep(0)
            outcome = "succeeded" if n == 10 else "threw"
            r.finish("poll", n, t + 0.1, outcome, error=None if n == 10 else ("E", "x", 1))
            if n < 10:
                r.wait("poll", n, t + 0.1, 0.0)
            t += 0.1
            await asyncio.sleep(0)
        during = w.renders
        r.step_done("poll", t, "succeeded")
        r.run_done(t, "succeeded")
        return len(r.run.events), during, [b.description for b in bars(w, "poll")]

    n_events, during, labels = asyncio.run(main())
    assert n_events > 100
    assert made[0].renders <= 4
    assert during <= 3  # the first render at construction, then at most one per second
    assert labels == [f"#{n} threw" for n in range(1, 10)] + ["#10 succeeded"]


def test_a_batched_render_follows_after_the_rate_interval(made: list[Any]) -> None:
    async def main() -> tuple[int, list[str]]:
        r = waiting()
        w = TimelineWidget(r.run, max_rate_hz=50.0)
        made.append(w)
        r.sinks.append(w)
        r.start("charge", 2, 1.12)
        before = w.renders
        await asyncio.sleep(0.1)
        return w.renders - before, [b.description for b in bars(w)]

    extra, labels = asyncio.run(main())
    assert extra == 1
    assert labels[:2] == ["#1 threw", "#2 running"]


def test_without_a_running_loop_each_event_renders_at_once(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run)
    made.append(w)
    r.sinks.append(w)
    r.start("charge", 2, 1.12)
    assert [b.description for b in bars(w)][:2] == ["#1 threw", "#2 running"]


def test_not_live_widget_waits_for_run_finished(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run, live=False)
    made.append(w)
    r.sinks.append(w)
    r.start("charge", 2, 1.12)
    assert w.renders == 1
    r.finish("charge", 2, 1.2, "succeeded")
    r.step_done("charge", 1.2, "succeeded")
    r.run_done(1.2, "failed")
    assert w.renders == 2
    assert [b.description for b in bars(w)] == ["#1 threw", "#2 succeeded"]


def test_bar_widgets_are_reused_and_a_planned_bar_becomes_the_attempt(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run)
    made.append(w)
    r.sinks.append(w)
    first, planned2 = bars(w)[:2]
    assert planned2.description == "#2 planned"
    r.start("charge", 2, 1.12)
    assert bars(w)[0] is first
    assert bars(w)[1] is planned2
    assert planned2.description == "#2 running"
    assert not planned2.disabled
    assert "woml-outcome-running" in planned2._dom_classes
    assert "woml-outcome-planned" not in planned2._dom_classes


def test_replay_controls_appear_only_for_finished_runs(made: list[Any]) -> None:
    live = TimelineWidget(waiting().run)
    done = TimelineWidget(failed_closed().run)
    made += [live, done]
    assert live._replay_box.children == ()
    play, slider = done._replay_box.children
    assert isinstance(play, widgets.Play)
    assert isinstance(slider, widgets.IntSlider)
    assert slider.max == 33300
    assert slider.value == slider.max


def test_moving_the_slider_shows_the_run_as_it_was_then(made: list[Any]) -> None:
    w = TimelineWidget(failed_closed().run)
    made.append(w)
    slider = w._replay_box.children[1]
    slider.value = 2000  # during the 2s wait after attempt 2
    assert [b.description for b in bars(w)][:2] == ["#1 threw", "#2 threw"]
    assert "#3 timeout" not in [b.description for b in bars(w)]
    assert "replay at t = 2s" in w._header.value
    slider.value = 10_000  # attempt 3 is running, cut at 10s
    assert [b.description for b in bars(w)][:3] == ["#1 threw", "#2 threw", "#3 running"]
    slider.value = 100  # attempt 1 still running
    assert next(b.description for b in bars(w)) == "#1 running"
    slider.value = slider.max
    assert [b.description for b in bars(w)] == ["#1 threw", "#2 threw", "#3 timeout"]


def test_close_closes_every_widget_the_timeline_created(made: list[Any]) -> None:
    before = set(_instances)
    r = waiting()
    w = TimelineWidget(r.run, on_cancel=lambda: None)
    r.sinks.append(w)
    r.start("charge", 2, 1.12)
    r.finish("charge", 2, 1.3, "succeeded")
    r.step_done("charge", 1.3, "succeeded")
    r.run_done(1.3, "failed")
    w._replay_box.children[1].value = 500  # replay hides bars: pooled, not lost
    bars(w)[0].click()
    assert set(_instances) - before
    w.close()
    assert set(_instances) - before == set()
    assert w.comm is None


def test_a_drawing_failure_is_shown_not_raised_into_the_engine(made: list[Any]) -> None:
    # The engine calls sinks inline; the run must go on if the timeline cannot draw.
    fail = [False]

    def clock_now() -> float:
        if fail[0]:
            raise OSError("clock gone")
        return 0.5

    r = waiting()
    w = TimelineWidget(r.run, clock_now=clock_now)
    made.append(w)
    r.sinks.append(w)
    fail[0] = True
    r.start("charge", 2, 1.12)  # does not raise
    assert "The timeline could not render: OSError: clock gone" in w._header.value


def test_max_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_rate_hz must be a positive number, got 0"):
        TimelineWidget(waiting().run, max_rate_hz=0)
