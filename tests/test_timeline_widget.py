"""The live timeline widget (spec §6.3), kernel-less: traits, batching on the engine's
loop, the countdown, Cancel, close, and a drawing failure shown instead of raised.

The widget is a real ``anywidget.AnyWidget`` (outside a kernel its comm is inert); runs
come from hand-written event sequences applied through ``Run.apply``. What its ES module
does in a browser is tested in test_timeline_js.py.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anywidget
import pytest
from timeline_runs import Recorder, failed_closed, unpicture, waiting, workflow

from woml_magic.events import RunFinished
from woml_magic.policy import RetryPolicy
from woml_magic.timeline import (
    TimelineWidget,
    interactive_html,
    mimebundle,
    render_html,
    render_text,
    timeline_js,
    widget_esm,
)
from woml_magic.timeline.widget import RUNNING_TICK_S


@pytest.fixture
def made() -> Iterator[list[TimelineWidget]]:
    """Widgets a test creates; closed afterwards so no comm outlives the test."""
    out: list[TimelineWidget] = []
    yield out
    for w in out:
        w.close()


def labels(w: TimelineWidget, step: str = "charge") -> list[str]:
    """The labels of ``step``'s attempts in the widget's drawing, in order."""
    lane = re.search(rf'<g class="woml-lane" data-step="{step}">(.*?)</g></g>', w.html + "</g>")
    assert lane, f"no lane {step}"
    return re.findall(
        r'<g class="woml-seg woml-(?:attempt|planned) [^"]*"[^>]*>.*?'
        r'<text class="woml-label[^"]*"[^>]*>([^<]*)</text>',
        w.html[lane.start() :],
    )


def statuses(w: TimelineWidget) -> list[str]:
    return re.findall(r'<div class="woml-timeline"[^>]* data-status="([^"]+)"', w.html)


# --- what it syncs --------------------------------------------------------------------


def test_it_is_an_anywidget_whose_module_is_the_timeline_script(made: list[Any]) -> None:
    w = TimelineWidget(waiting().run)
    made.append(w)
    assert isinstance(w, anywidget.AnyWidget)
    assert w._esm == widget_esm()
    assert timeline_js() in w._esm
    assert "export default" in w._esm
    assert {"html", "status", "cancellable", "cancelling", "_esm"} <= set(w.keys)


def test_html_is_the_static_drawing_of_the_current_state(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run)
    made.append(w)
    assert statuses(w) == ["running"]
    assert w.status == "running"
    assert "<script" not in w.html  # the module brings the drawing to life
    assert w.html.count('class="woml-seg woml-attempt') == 1
    assert w.html.count('class="woml-seg woml-planned ') == 4  # charge #2..#4, email #1


def test_cancellable_only_with_on_cancel(made: list[Any]) -> None:
    plain = TimelineWidget(waiting().run)
    with_cancel = TimelineWidget(waiting().run, on_cancel=lambda: None)
    made += [plain, with_cancel]
    assert plain.cancellable is False
    assert with_cancel.cancellable is True
    assert with_cancel.cancelling is False


def test_the_countdown_of_a_live_wait_reads_the_injected_clock(made: list[Any]) -> None:
    now = [0.52]
    w = TimelineWidget(waiting().run, clock_now=lambda: now[0])
    made.append(w)
    assert ">wait 0.6s left<" in w.html
    now[0] = 1.0
    w.refresh()
    assert ">wait 0.1s left<" in w.html


def test_without_a_clock_the_drawing_stops_at_the_latest_event(made: list[Any]) -> None:
    w = TimelineWidget(waiting().run)
    made.append(w)
    assert ">wait 1s left<" in w.html or ">wait 1.0s left<" in w.html


# --- the EventSink side ---------------------------------------------------------------


def test_without_a_running_loop_each_event_renders_at_once(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run)
    made.append(w)
    r.sinks.append(w)
    before = w.renders
    r.start("charge", 2, 1.12)
    assert w.renders == before + 1
    assert labels(w)[:2] == ["#1 threw", "#2 running"]


def test_live_updates_inside_a_running_loop_are_batched(made: list[Any]) -> None:
    # spec §6.3 live timeline: 100 quick events give a handful of renders, and the
    # final state is rendered at RunFinished.
    async def main() -> tuple[int, int, TimelineWidget]:
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
        return len(r.run.events), during, w

    n_events, during, w = asyncio.run(main())
    assert n_events > 100
    assert during <= 2  # the first render at construction, then at most one per second
    assert w.renders == during + 1  # RunFinished renders at once
    assert w.status == "succeeded"
    assert statuses(w) == ["succeeded"]
    assert not w.render_scheduled
    assert labels(w, "poll") == [f"#{n} threw" for n in range(1, 10)] + ["#10 succeeded"]


def test_a_batched_render_follows_after_the_rate_interval(made: list[Any]) -> None:
    async def main() -> tuple[int, int, TimelineWidget]:
        r = waiting()
        w = TimelineWidget(r.run, max_rate_hz=50.0)
        made.append(w)
        r.sinks.append(w)
        r.start("charge", 2, 1.12)
        before = w.renders
        await asyncio.sleep(0.1)
        return before, w.renders, w

    before, after, w = asyncio.run(main())
    assert after - before == 1
    assert labels(w)[:2] == ["#1 threw", "#2 running"]


def test_a_live_wait_keeps_counting_down_without_events(made: list[Any]) -> None:
    now = [0.5]

    async def main() -> tuple[int, str]:
        r = waiting()
        w = TimelineWidget(r.run, clock_now=lambda: now[0], max_rate_hz=20.0)
        made.append(w)
        r.sinks.append(w)
        r.log("charge", 1, 0.5, "an event starts the loop's timer")
        first = w.renders
        for _ in range(6):
            now[0] += 0.1
            await asyncio.sleep(0.06)
        return w.renders - first, w.html

    ticks, html = asyncio.run(main())
    assert ticks >= 3
    assert ">wait 0.1s left<" in html or ">wait 0.0s left<" in html


def test_a_running_attempt_grows_and_the_clock_advances_without_events(
    made: list[Any],
) -> None:
    # spec §6.3: while an attempt runs (a slow API call, services.sleep), its bar grows
    # and t advances on screen at least twice a second, though no event arrives.
    now = [1.2]

    async def main() -> tuple[int, list[str], float]:
        r = waiting()
        r.start("charge", 2, 1.12)  # the wait is over: attempt 2 runs
        w = TimelineWidget(r.run, clock_now=lambda: now[0], max_rate_hz=10.0)
        made.append(w)
        r.sinks.append(w)
        r.log("charge", 2, 1.2, "an event starts the loop's timer")
        first, shown = w.renders, []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.6:
            now[0] = 1.2 + (time.monotonic() - t0)
            await asyncio.sleep(0.05)
            header = re.search(r"t = ([0-9.]+s)", w.html)
            if header and (not shown or shown[-1] != header.group(1)):
                shown.append(header.group(1))
        return w.renders - first, shown, time.monotonic() - t0

    ticks, shown, took = asyncio.run(main())
    assert ticks >= 2 * int(took), (ticks, took)  # at least twice a second
    assert ticks <= took / RUNNING_TICK_S + 2  # and no faster than the running tick
    assert len(shown) >= 3, shown  # t moved on screen


def test_events_from_the_engines_own_loop_thread_render_on_that_loop(made: list[Any]) -> None:
    # The engine runs its loop in a thread of its own and calls sinks there.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        r = waiting()
        w = TimelineWidget(r.run, max_rate_hz=100.0)
        made.append(w)
        rendered = threading.Event()
        seen: list[str] = []

        def on_html(change: dict[str, Any]) -> None:
            seen.append(threading.current_thread().name)
            rendered.set()

        w.observe(on_html, names="html")

        async def emit() -> None:
            r.sinks.append(w)
            r.start("charge", 2, 1.12)

        asyncio.run_coroutine_threadsafe(emit(), loop).result(timeout=5)
        assert rendered.wait(5)
        assert seen == [thread.name]
        assert labels(w)[1] == "#2 running"
        w.close()  # from this thread while the loop runs: nothing left scheduled
        assert not w.render_scheduled
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


# --- cancel -----------------------------------------------------------------------------


def test_a_cancel_message_calls_on_cancel_once_and_says_cancelling(made: list[Any]) -> None:
    calls: list[str] = []
    w = TimelineWidget(waiting().run, on_cancel=lambda: calls.append("cancel"))
    made.append(w)
    w._handle_custom_msg({"type": "cancel"}, [])
    w._handle_custom_msg({"type": "cancel"}, [])
    assert calls == ["cancel"]
    assert w.cancelling is True


def test_a_failing_on_cancel_lets_the_button_work_again(made: list[Any]) -> None:
    calls: list[str] = []

    def on_cancel() -> None:
        calls.append("cancel")
        if len(calls) == 1:
            raise RuntimeError("not yet")

    w = TimelineWidget(waiting().run, on_cancel=on_cancel)
    made.append(w)
    w._handle_custom_msg({"type": "cancel"}, [])
    assert not w.cancelling
    w._handle_custom_msg({"type": "cancel"}, [])
    assert calls == ["cancel", "cancel"]
    assert w.cancelling


def test_other_messages_and_cancel_without_on_cancel_are_ignored(made: list[Any]) -> None:
    calls: list[str] = []
    w = TimelineWidget(waiting().run, on_cancel=lambda: calls.append("cancel"))
    plain = TimelineWidget(waiting().run)
    made += [w, plain]
    w._handle_custom_msg({"type": "play"}, [])
    w._handle_custom_msg("cancel", [])
    plain._handle_custom_msg({"type": "cancel"}, [])
    assert calls == []
    assert not w.cancelling
    assert not plain.cancelling


def test_cancel_after_the_run_finished_is_ignored(made: list[Any]) -> None:
    calls: list[str] = []
    r = waiting()
    w = TimelineWidget(r.run, on_cancel=lambda: calls.append("cancel"))
    made.append(w)
    r.sinks.append(w)
    r.step_done("charge", 0.5, "failed-closed")
    r.run_done(0.5, "failed")
    assert w.status == "failed"
    w._handle_custom_msg({"type": "cancel"}, [])
    assert calls == []


# --- ownership and failures -------------------------------------------------------------


def test_close_closes_the_comm_and_ignores_later_events(made: list[Any]) -> None:
    r = waiting()
    w = TimelineWidget(r.run)
    r.sinks.append(w)
    w.close()
    assert w.comm is None
    renders = w.renders
    r.start("charge", 2, 1.12)
    r.run_done(1.2, "failed")
    assert w.renders == renders
    w.close()  # twice is harmless


def test_close_inside_the_loop_cancels_a_pending_render(made: list[Any]) -> None:
    async def main() -> tuple[int, int]:
        r = waiting()
        w = TimelineWidget(r.run, max_rate_hz=1.0)
        r.sinks.append(w)
        r.start("charge", 2, 1.12)  # a render is due within a second
        assert w.render_scheduled
        before = w.renders
        w.close()
        await asyncio.sleep(0.05)
        return before, w.renders

    before, after = asyncio.run(main())
    assert before == after


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
    good = w.html
    fail[0] = True
    r.start("charge", 2, 1.12)  # does not raise
    assert "The timeline could not render: OSError: clock gone" in w.html
    assert w.html.endswith(good)  # the last drawing that worked stays below the message


def test_a_failure_message_is_escaped(made: list[Any]) -> None:
    def clock_now() -> float:
        raise ValueError("<b>boom</b>")

    w = TimelineWidget(waiting().run, clock_now=clock_now)
    made.append(w)
    assert "ValueError: &lt;b&gt;boom&lt;/b&gt;" in w.html


def test_max_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_rate_hz must be a positive number, got 0"):
        TimelineWidget(waiting().run, max_rate_hz=0)


def test_run_finished_renders_even_when_the_loop_batches(made: list[Any]) -> None:
    async def main() -> TimelineWidget:
        r = failed_closed()
        w = TimelineWidget(r.run, max_rate_hz=0.5)
        made.append(w)
        w(RunFinished(r.run.id, 33.3, status="failed"))
        return w

    w = asyncio.run(main())
    assert w.renders == 2
    assert w.status == "failed"


# --- the static bundle and the script ---------------------------------------------------


def test_mimebundle_is_text_and_the_drawing_with_its_script() -> None:
    run = failed_closed().run
    bundle = mimebundle(run)
    assert bundle["text/plain"] == render_text(run)
    html = bundle["text/html"]
    assert html.startswith('<div class="woml-timeline"')
    drawing, _, script = html.partition("<script>")
    assert re.sub(r"woml-tl-[0-9a-f]+", "ID", unpicture(drawing)) == re.sub(
        r"woml-tl-[0-9a-f]+", "ID", render_html(run)
    )
    root_id = re.search(r' id="(woml-tl-[^"]+)"', drawing)
    assert root_id
    assert f'womlTimeline.fromScript(document.currentScript, "{root_id.group(1)}")' in script
    assert interactive_html(run).count("<script>") == 1


def test_the_script_is_read_once_per_process() -> None:
    assert timeline_js() is timeline_js()


def test_importing_the_timeline_loads_neither_anywidget_nor_ipywidgets() -> None:
    code = (
        "import sys, woml_magic, woml_magic.timeline as t\n"
        "from timeline_runs import failed_closed\n"
        "t.mimebundle(failed_closed().run)\n"
        "print([m for m in ('anywidget', 'ipywidgets') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parent,
    )
    assert out.stdout.strip() == "[]"
