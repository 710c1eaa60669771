# ---
# jupyter:
#   jupytext:
#     comment_magics: false
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Failing closed
#
# Only a definitive script-thrown failure retries. Timeout, invalid JSON, oversized
# results, crashes, interruption, cancellation and ambiguous HTTP outcomes **fail
# closed**: the step ends `failed-closed` after that one attempt, whatever `retry`
# says, "because repeating them may be unsafe or meaningless" (the seed). Each
# attempt carries a one-sentence `explanation` of why it did or did not retry.
#
# Below, every step has `retry="3"`, and every one of them stops after attempt 1.
# After each, the kernel is healthy and the next cell runs normally.

# %%
%load_ext woml_magic
%config Woml.journal = ":memory:"


# %%
def explain(run):
    """Print each attempt's outcome, explanation and error (what the timeline shows)."""
    for step in run.steps.values():
        print(f"step {step.id}: {step.status}")
        for a in step.attempts:
            print(f"  attempt {a.number}: {a.outcome}")
            print(f"    {a.explanation}")
            if a.error is not None:
                print(f"    {a.error.name}: {a.error.message}")


# %% [markdown]
# ## `timeout`: an endless loop
#
# The script runs in a separate worker process (spec §4.5). When an attempt runs
# past the step's `timeout`, the kernel kills the worker. The attempt may have done
# part of its work — or be doing it still — so repeating it is not safe.

# %%
%%woml --simulate --out busy
<step id="busy" retry="3" timeout="500ms">
  <script>
    while (true) {}
  </script>
</step>

# %%
explain(busy)

# %% [markdown]
# ## `timeout` on the simulated clock
#
# Timeouts are judged on the run's clock. `services.sleep("1h")` against a `30s`
# timeout ends `timeout` at once in simulated time — no need to wait 30 seconds to
# see it.

# %%
%%woml --simulate --out slept
<step id="sleepy" retry="3" timeout="30s">
  <script>
    await services.sleep("1h");
    return "never";
  </script>
</step>

# %%
explain(slept)
a = slept.steps["sleepy"].attempts[0]
print(f"timed out at {a.ended_at - a.started_at:.0f}s of simulated time")

# %% [markdown]
# ## `invalid-json`: NaN
#
# A result must be JSON (spec §3.3). `NaN` is not silently turned into `null`; the
# message names the path. The same code would return the same value again, so a
# retry is meaningless.

# %%
%%woml --simulate --out nan
<step id="invoice" retry="3">
  <script>
    const items = [{amount: 10}, {amount: 20}, {amount: 30}, {amount: 0 / 0}];
    return { items };
  </script>
</step>

# %%
explain(nan)

# %% [markdown]
# ## `oversized`
#
# A result's JSON text may be at most 256 KiB by default
# (`%config Woml.max_result_bytes`).

# %%
%%woml --simulate --out big
<step id="export" retry="3">
  <script>
    return "x".repeat(300 * 1024);
  </script>
</step>

# %%
explain(big)

# %% [markdown]
# ## `crash`: a memory bomb
#
# Each attempt's script has a memory limit (128 MiB by default,
# `%config Woml.memory_limit_mb`). Running out of it ends the attempt `crash` — and
# only the attempt: the kernel never feels it.

# %%
%%woml --simulate --out bomb
<step id="hog" retry="3">
  <script>
    const hoard = [];
    while (true) hoard.push(new Array(1e6).fill(1.5));
  </script>
</step>

# %%
explain(bomb)

# %% [markdown]
# ## `cancelled`
#
# `--background` returns at once with a live timeline and a Cancel button; the run
# goes on in the kernel's event loop. `%woml cancel RUN_ID` (or the button) ends the
# running attempt `cancelled`. You stopped it on purpose, so WOML never retries it.

# %%
%%woml --background --run-id long-job --out job
<step id="long" retry="3" timeout="2h">
  <script>
    await services.sleep("1h");
    return "done";
  </script>
</step>

# %%
%woml cancel long-job

# %%
explain(job)

# %% [markdown]
# The Python API does the same with `wm.start(...)`, `handle.cancel()` and
# `await handle`:

# %%
import asyncio

import woml_magic as wm

handle = wm.start('''
<step id="long" retry="3" timeout="2h">
  <script>await services.sleep("1h"); return "done";</script>
</step>''')
await asyncio.to_thread(handle.wait_started, 30)  # the run is under way
await asyncio.sleep(0.5)                          # and its attempt is sleeping
handle.cancel()
cancelled = await handle
print("outcome:", cancelled.steps["long"].attempts[-1].outcome)

# %% [markdown]
# ## `ambiguous`: a lost response without an idempotency key
#
# The demo API (spec §8) runs on 127.0.0.1 inside this notebook.
# `api.drop_response_next(1)` makes the next request happen — the charge is
# created — and then closes the connection without a response. The script sees an
# `AmbiguousError`: the charge may or may not exist. Without an idempotency key a
# retry could charge twice, so the attempt ends `ambiguous` and the step fails
# closed (the ambiguity guard, spec §4.2). Notebook 03 shows the fix.

# %%
from woml_magic.demo import DemoAPI

api = DemoAPI().start()
demo = {"url": api.url}
api.drop_response_next(1)

# %%
%%woml --simulate --payload demo --out lost
<step id="charge" retry="3" retry-delay="200ms">
  <script>
    const res = await services.http.request({
      method: "POST",
      url: `${context.payload.url}/charges`,
      json: { amount: 2500, currency: "eur" },
    });
    return res.data;
  </script>
</step>

# %%
explain(lost)
print("charges the API recorded:", len(api.records("charges")))

# %% [markdown]
# Catching the error does not help: if the attempt then fails for any reason, the
# outcome is still `ambiguous` — the uncertainty about the charge is still there.

# %%
api.reset()                # forget the first charge, so the count starts at 0
api.drop_response_next(1)

# %%
%%woml --simulate --payload demo --out caught
<step id="charge" retry="3" retry-delay="200ms">
  <script>
    try {
      await services.http.request({
        method: "POST",
        url: `${context.payload.url}/charges`,
        json: { amount: 2500, currency: "eur" },
      });
    } catch (e) {
      throw new Error("payment failed, please retry");
    }
  </script>
</step>

# %%
explain(caught)
print("charges the API recorded:", len(api.records("charges")))

# %% [markdown]
# ## `interrupted`
#
# Interrupting the kernel (■, or *Kernel → Interrupt*) during a foreground run ends
# the running attempt `interrupted`; whether its effects happened is unknown, so
# WOML fails closed, and the cell stops with `KeyboardInterrupt` as any interrupted
# cell does. A process that dies mid-attempt leaves the same question behind: on
# `--resume` the open attempt is recorded `interrupted` (notebook 04 kills a real
# process to show it).
#
# Interrupting the kernel from inside the notebook would stop "Run all", so here
# the Python API receives the very signal the interrupt button sends (SIGINT) once
# the attempt has started, and we catch the `KeyboardInterrupt`.

# %%
import os
import signal
import threading

from woml_magic.events import AttemptStarted

def interrupt_once_started(event):
    # Like pressing ■ 0.3 s after the attempt began.
    if isinstance(event, AttemptStarted):
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()

handle = wm.start('''
<step id="upload" retry="3" timeout="1m">
  <script>await services.sleep("10s"); return "uploaded";</script>
</step>''', sinks=[interrupt_once_started])
try:
    handle.wait()  # what wm.run does: wait for the run; an interrupt ends the attempt
except KeyboardInterrupt:
    print("the cell was interrupted")
explain(handle.run)

# %% [markdown]
# ## The kernel is fine
#
# After a timeout, a memory bomb, a cancellation and an interrupt, the next cell
# runs normally.

# %%
%%woml --simulate --out healthy
<step id="ok" retry="3">
  <script>return { fine: true };</script>
</step>

# %%
print("after all that:", healthy.status)
api.stop()

# %% [markdown]
# ## Summary
#
# | outcome | when | why WOML does not repeat it |
# |---|---|---|
# | `timeout` | the attempt ran past `timeout` on the run's clock | its effects may be partial or still under way |
# | `invalid-json` | the result is not JSON (NaN, `Map`, a cycle, …) | the same code returns the same kind of value: meaningless |
# | `oversized` | the result's JSON is over the limit | repeating produces the same result: meaningless |
# | `crash` | out of memory, the worker died, an internal error | not a definitive failure of the script |
# | `interrupted` | kernel interrupt, or the process died (found on resume) | whether its effects happened is unknown |
# | `cancelled` | you cancelled the run | you asked it to stop |
# | `ambiguous` | an HTTP call without an idempotency key may have happened, then the attempt failed | a retry could repeat the effect |
#
# Only `threw` — the script itself said "this failed" — retries, while attempts remain.
