"""Clocks (spec §5.1): one interface, real and simulated, the same behaviour on both."""

from __future__ import annotations

import asyncio
import time

import pytest

from woml_magic.clock import RealClock, SimulatedClock, make_clock


@pytest.mark.parametrize("kind", ["real", "simulated"])
def test_sleep_advances_the_clock_by_the_wait(kind: str) -> None:
    clock = make_clock(kind)

    async def main() -> float:
        before = clock.now()
        await clock.sleep(0.05)
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
