"""Clocks (spec §5.1): one interface, real and simulated, the same behaviour on both."""

from __future__ import annotations

import asyncio
import time

import pytest

from woml_magic.clock import MAX_DEFERRALS, RealClock, SimulatedClock, make_clock


@pytest.mark.parametrize("kind", ["real", "simulated"])
@pytest.mark.parametrize("wait", ["sleep", "alarm"])
def test_sleep_and_alarm_advance_the_clock_by_the_wait(kind: str, wait: str) -> None:
    """An alarm (an attempt's timeout without a task) rings once its seconds have
    passed, as a sleep returns."""
    clock = make_clock(kind)

    async def main() -> float:
        before = clock.now()
        await getattr(clock, wait)(0.05)
        return clock.now() - before

    elapsed = asyncio.run(main())
    assert elapsed >= 0.05
    assert elapsed < 5


@pytest.mark.parametrize("kind", ["real", "simulated"])
@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_a_wait_of_nothing_returns_without_yielding_to_the_loop(kind: str, seconds: float) -> None:
    clock = make_clock(kind)
    order: list[str] = []

    async def other() -> None:
        order.append("other task")

    async def main() -> float:
        task = asyncio.ensure_future(other())
        before = clock.now()
        await clock.sleep(seconds)
        order.append("after the wait")
        await task
        return clock.now() - before

    elapsed = asyncio.run(main())
    assert order == ["after the wait", "other task"]  # no turn of the loop was taken
    assert 0 <= elapsed < 1


def test_simulated_sleep_skips_time_at_once() -> None:
    clock = SimulatedClock()

    async def main() -> float:
        await clock.sleep(3600)
        return clock.now()

    wall = time.monotonic()
    now = asyncio.run(main())
    assert now >= 3600
    assert time.monotonic() - wall < 2  # an hour of run time in well under real seconds


def test_simulated_clock_fires_the_earliest_timer_first() -> None:
    """spec §5.1: `services.sleep("1h")` with `timeout="30s"` ends by the timeout at 30s."""
    clock = SimulatedClock()
    order: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        order.append((name, clock.now()))

    async def main() -> None:
        long = asyncio.ensure_future(sleeper("sleep-1h", 3600))
        timeout = asyncio.ensure_future(sleeper("timeout-30s", 30))
        await timeout
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long

    asyncio.run(main())
    assert [name for name, _ in order] == ["timeout-30s"]
    assert 30 <= order[0][1] < 31


def test_simulated_clock_does_not_skip_while_busy() -> None:
    """Real work (a script running) advances simulated time only by its real duration."""
    clock = SimulatedClock()

    async def main() -> float:
        with clock.busy():
            timer = asyncio.ensure_future(clock.sleep(30))
            await asyncio.sleep(0.05)
            assert not timer.done()
            timer.cancel()
        return clock.now()

    now = asyncio.run(main())
    assert 0.05 <= now < 5


def test_busy_timer_fires_after_real_time_reaches_it() -> None:
    clock = SimulatedClock()

    async def main() -> float:
        with clock.busy():
            await clock.sleep(0.1)
        return clock.now()

    assert 0.1 <= asyncio.run(main()) < 5


@pytest.mark.parametrize("cls", [RealClock, SimulatedClock])
def test_resumed_clock_starts_at_the_journaled_time(cls: type[RealClock]) -> None:
    """spec §5.3: a resumed run keeps its journaled clock."""
    clock = cls(start_at=42.0)
    assert 42.0 <= clock.now() < 43.0


@pytest.mark.parametrize("kind", ["real", "simulated"])
def test_epoch_ms_follows_the_run_clock(kind: str) -> None:
    clock = make_clock(kind)

    async def main() -> float:
        before = clock.epoch_ms()
        await clock.sleep(0.02)
        return clock.epoch_ms() - before

    assert asyncio.run(main()) >= 20


def test_real_epoch_is_wall_time_and_simulated_epoch_includes_skipped_time() -> None:
    real, simulated = RealClock(), SimulatedClock()
    asyncio.run(simulated.sleep(3600))
    assert abs(real.epoch_ms() - time.time() * 1000) < 1000
    assert simulated.epoch_ms() - time.time() * 1000 >= 3600 * 1000 - 1000


def test_make_clock_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="use 'real' or 'simulated'"):
        make_clock("fast")


# -- the one virtual clock's knobs (STYLE 13: the lab's clock is this one, spec §11) --------
def test_at_rate_0_time_stands_still_while_busy_and_jumps_exactly_when_idle() -> None:
    clock = SimulatedClock(rate=0.0)

    async def main() -> list[float]:
        seen = []
        with clock.busy():
            timer = asyncio.ensure_future(clock.sleep(0.3))
            await asyncio.sleep(0.05)  # real time passes; virtual time does not
            seen.append(clock.now())
            assert not timer.done()
        await timer  # busy no more: the clock jumps to the timer, exactly
        seen.append(clock.now())
        await clock.sleep(0.1)
        seen.append(clock.now())
        return seen

    assert asyncio.run(main()) == [0.0, 0.3, 0.3 + 0.1]


def test_at_rate_0_work_that_holds_time_past_stall_s_is_stepped_around_and_counted() -> None:
    clock = SimulatedClock(rate=0.0, stall_s=0.1)

    async def main() -> float:
        with clock.busy():  # work that never ends: time moves on around it
            await clock.sleep(30)
            return clock.now()

    wall = time.monotonic()
    assert asyncio.run(main()) == 30.0
    assert 0.1 <= time.monotonic() - wall < 5
    assert clock.stalls == 1


def test_on_idle_gives_work_at_this_instant_before_time_jumps() -> None:
    clock = SimulatedClock(rate=0.0)
    gate: asyncio.Future[None] | None = None
    seen: list[tuple[str, float]] = []

    def on_idle() -> bool:
        if gate is not None and not gate.done():
            gate.set_result(None)
            return True  # the waiting task moves next; time stays
        return False

    clock.set_on_idle(on_idle)

    async def waiter() -> None:
        assert gate is not None
        await gate
        seen.append(("given", clock.now()))

    async def sleeper() -> None:
        await clock.sleep(5)
        seen.append(("timer", clock.now()))

    async def main() -> None:
        nonlocal gate
        gate = asyncio.get_running_loop().create_future()
        await asyncio.gather(waiter(), sleeper())

    asyncio.run(main())
    assert seen == [("given", 0.0), ("timer", 5.0)]


def test_epoch_s_pins_scripts_dates_and_a_view_counts_from_its_start() -> None:
    clock = SimulatedClock(rate=0.0, epoch_s=1_000.0)

    async def main() -> tuple[float, float, float]:
        await clock.sleep(10)
        view = clock.view(4.0)
        await view.sleep(1)  # the view's waits are the clock's
        return view.now(), view.epoch_ms(), clock.now()

    assert asyncio.run(main()) == (7.0, 1_011_000.0, 11.0)
    assert clock.view(0).kind == "simulated"


def test_a_loop_that_never_goes_idle_delays_a_jump_by_at_most_the_deferral_limit() -> None:
    """One limit (clock.MAX_DEFERRALS): a task yielding forever keeps the loop busy, and
    time still moves on, counted as a stall."""
    clock = SimulatedClock(rate=0.0)

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    async def main() -> float:
        spinner = asyncio.ensure_future(spin())
        try:
            await clock.sleep(60)
        finally:
            spinner.cancel()
        return clock.now()

    assert asyncio.run(main()) == 60.0
    assert clock.stalls == 1
    assert MAX_DEFERRALS >= 1000  # enough turns for woken tasks to settle (lab, 1000 clients)


def test_two_simulated_clocks_on_one_loop_both_move() -> None:
    """Two simulated runs on the run loop: each clock sees the other deferring, and both
    still reach their timers."""
    first, second = SimulatedClock(), SimulatedClock()

    async def main() -> tuple[float, float]:
        await asyncio.gather(first.sleep(3600), second.sleep(7200))
        return first.now(), second.now()

    wall = time.monotonic()
    a, b = asyncio.run(main())
    assert a >= 3600
    assert b >= 7200
    assert time.monotonic() - wall < 5
    # Neither waited out the other's looks: a look is not work (a lab next to a run, or
    # one lab after another, counted a stall and called itself not deterministic).
    assert (first.stalls, second.stalls) == (0, 0)


def test_two_lab_clocks_stepping_together_never_stall() -> None:
    """Two lab clocks (rate 0) on one loop, each with tasks that sleep many times: every
    sleep kicks a look, and each clock sees the other's look queued. The looks are not
    work, so neither defers to the other until MAX_DEFERRALS."""
    first, second = SimulatedClock(rate=0.0), SimulatedClock(rate=0.0)

    async def walker(clock: SimulatedClock, steps: int) -> None:
        for _ in range(steps):
            await clock.sleep(1)

    async def main() -> None:
        await asyncio.gather(*(walker(c, 200) for c in (first, second) for _ in range(3)))

    asyncio.run(main())
    assert (first.now(), second.now()) == (200.0, 200.0)
    assert (first.stalls, second.stalls) == (0, 0)


def test_a_negative_rate_is_refused() -> None:
    with pytest.raises(ValueError, match="rate must be 0 or more"):
        SimulatedClock(rate=-1.0)


# ---- alarms: an attempt's timeout without a task (Clock.alarm) ---------------------


@pytest.mark.parametrize("kind", ["real", "simulated"])
def test_a_cancelled_alarm_never_rings_and_holds_no_time(kind: str) -> None:
    """Cancelled (the attempt ended first), an alarm is dropped: a later wait on the
    same clock is not held up by it, and it never completes."""
    clock = make_clock(kind)

    async def main() -> tuple[bool, float]:
        alarm = clock.alarm(0.05)
        alarm.cancel()
        before = clock.now()
        await clock.sleep(0.1)
        return alarm.cancelled(), clock.now() - before

    cancelled, elapsed = asyncio.run(main())
    assert cancelled
    assert 0.1 <= elapsed < 5


def test_a_simulated_alarm_rings_at_exactly_its_time_among_sleepers() -> None:
    """The alarm is a timer of the clock's one heap: time jumps to it in order with the
    sleepers' timers (spec §5.1), on the lab's clock to the exact instant."""
    clock = SimulatedClock(rate=0.0)
    rang: list[tuple[str, float]] = []

    async def sleeper() -> None:
        await clock.sleep(30)
        rang.append(("sleep 30", clock.now()))

    async def main() -> None:
        alarm = clock.alarm(10)
        alarm.add_done_callback(lambda _: rang.append(("alarm 10", clock.now())))
        await sleeper()

    asyncio.run(main())
    assert rang == [("alarm 10", 10.0), ("sleep 30", 30.0)]


def test_a_shifted_clock_alarm_is_its_base_clock_timer() -> None:
    base = SimulatedClock(rate=0.0)
    view = base.view(5.0)

    async def main() -> tuple[float, float]:
        await view.alarm(2)
        return base.now(), view.now()

    assert asyncio.run(main()) == (2.0, -3.0)
