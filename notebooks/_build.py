"""Build the teaching notebooks from this one file (docs are executed: STYLE 12).

    python notebooks/_build.py          # rewrites notebooks/0*.ipynb, without outputs

The notebooks are generated so they stay reproducible and reviewable as plain Python:
edit the cells here, run this script, and commit both. tests/test_notebooks.py
executes every notebook in a real kernel and checks the facts each one prints.
"""

# nbformat ships no type information (STYLE 8); the markdown tables below are table
# rows that cannot be wrapped without breaking them.
# mypy: disable-error-code="no-untyped-call,no-any-return"
# ruff: noqa: E501

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

HERE = Path(__file__).resolve().parent

Cell = NotebookNode


def md(text: str) -> Cell:
    """A markdown cell; ``text`` is dedented and stripped."""
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip())


def code(text: str) -> Cell:
    """A code cell; ``text`` is dedented and stripped."""
    return nbformat.v4.new_code_cell(textwrap.dedent(text).strip())


def notebook(cells: list[Cell]) -> NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


# A helper every notebook defines once: the explanation the timeline gives, as text.
EXPLAIN_HELPER = '''
def explain(run):
    """Print each attempt's outcome, explanation and error (what the timeline shows)."""
    for step in run.steps.values():
        print(f"step {step.id}: {step.status}")
        for a in step.attempts:
            print(f"  attempt {a.number}: {a.outcome}")
            print(f"    {a.explanation}")
            if a.error is not None:
                print(f"    {a.error.name}: {a.error.message}")
'''


# --- 01 ---------------------------------------------------------------------------

NB01 = [
    md("""
    # 01 · Retries and backoff

    WOML retries only one thing: a script that **threw** (spec §3.2). This notebook is
    about *how often* and *how long between*: attempts versus retries, fixed versus
    exponential backoff, the maximum delay, the simulated and the real clock, and how
    Temporal and AWS Step Functions count the same policy.

    Every `%%woml` cell below draws a timeline: one lane per step, one bar per attempt,
    labelled gaps for the waits. Its value is the `Run`; `--out NAME` also keeps it in
    a variable so the Python cells can read it.
    """),
    code("""
    %load_ext woml_magic
    # Throwaway runs: keep them in memory (notebook 04 is about the journal on disk).
    %config Woml.journal = ":memory:"
    """),
    md("""
    ## `retry` counts attempts, not retries

    `retry="4"` means **at most four attempts in total**: the first one and up to three
    retries (the seed: "retry is the total attempt count from 1 through 10"). This
    script always throws, so the step uses all four and then ends `failed`.
    `--simulate` runs the waits on a simulated clock, so the cell finishes at once.
    """),
    code("""
    %%woml --simulate --out four
    <step id="flaky" retry="4" retry-delay="1s">
      <script>
        throw new Error(`attempt ${attempt.number} of ${attempt.maxAttempts} failed`);
      </script>
    </step>
    """),
    code("""
    step = four.steps["flaky"]
    print("attempts:", len(step.attempts))
    print("step status:", step.status)
    print("last explanation:", step.attempts[-1].explanation)
    """),
    md("""
    ## Fixed versus exponential

    After a retryable failure of attempt *k* the engine waits `wait(k)` (spec §3.1):

    - `fixed`: `wait(k) = retry-delay`
    - `exponential`: `wait(k) = min(retry-delay × 2^(k−1), retry-max-delay)`

    No jitter in either. The policy is known before anything runs: `wm.parse` returns
    the frozen `Workflow`, and `policy.waits()` is the whole planned schedule.
    """),
    code("""
    import woml_magic as wm

    for backoff in ("fixed", "exponential"):
        wf = wm.parse(f'''
    <step id="s" retry="5" retry-backoff="{backoff}" retry-delay="1s">
      <script>throw new Error("no");</script>
    </step>''')
        policy = wf.steps[0].policy
        print(f"{backoff:<12} {policy.describe():<40} waits:",
              [w.total_seconds() for w in policy.waits()])
    """),
    md("""
    The run waits exactly that. Here the card network is busy twice; the third attempt
    succeeds after waiting 1 s and then 2 s (the README's first cell).
    """),
    code("""
    %%woml --simulate --out expo
    <step id="charge" retry="4" retry-backoff="exponential" retry-delay="1s" retry-max-delay="10s">
      <script>
        if (attempt.number < 3) throw new Error("card network busy");
        return { charged: true, attempt: attempt.number };
      </script>
    </step>
    """),
    code("""
    s = expo.steps["charge"]
    print("outcomes:", [a.outcome for a in s.attempts])
    print("waits (s):", [round(w, 3) for w in s.waits])
    print("result:", s.result)
    """),
    md("""
    ## The maximum delay

    `retry-max-delay` caps the exponential growth. The spec's example: `retry="10"`,
    exponential from 1 s with a 30 s cap waits 1, 2, 4, 8, 16, 30, 30, 30, 30 s.
    On the simulated clock those 151 s pass at once.
    """),
    code("""
    %%woml --simulate --out capped
    <step id="poll" retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
      <script>
        throw new Error("not ready");
      </script>
    </step>
    """),
    code("""
    waits = [round(w) for w in capped.steps["poll"].waits]
    print("capped waits:", waits)
    print(f"simulated time at the end: {capped.now:.0f}s")
    """),
    md("""
    With `fixed` backoff there is nothing to cap: `retry-max-delay` is accepted but has
    **no effect**, and the timeline's header says so.
    """),
    code("""
    fixed_capped = wm.parse('''
    <step id="s" retry="3" retry-delay="5s" retry-max-delay="10s">
      <script>return 1;</script>
    </step>''').steps[0].policy
    print(fixed_capped.describe())
    print("waits:", [w.total_seconds() for w in fixed_capped.waits()])
    """),
    md("""
    ## Simulated versus real clock

    The default clock is `real`: waits really elapse and the timeline counts down. The
    simulated clock jumps over waits and `services.sleep`, while script execution
    still advances it by its real duration (spec §5.1). Every time the API shows is
    seconds since the run started, on the run's clock.

    A short real-clock run: three attempts, 200 ms apart.
    """),
    code("""
    %%woml --out real
    <step id="flaky" retry="3" retry-delay="200ms">
      <script>
        if (attempt.number < 3) throw new Error("try again");
        return "ok";
      </script>
    </step>
    """),
    code("""
    import time

    print("real-clock waits (s):", [round(w, 1) for w in real.steps["flaky"].waits])

    # The same long policy on both clocks, timed from outside.
    LONG = '''
    <step id="s" retry="3" retry-delay="2s">
      <script>if (attempt.number < 3) throw new Error("busy"); return 1;</script>
    </step>'''
    t0 = time.monotonic()
    simulated = wm.run(LONG, clock="simulated")
    wall = time.monotonic() - t0
    print(f"simulated: the run's clock says {simulated.now:.1f}s; "
          f"the wall clock says {wall:.2f}s")
    """),
    md("""
    ## The same policy in Temporal and AWS Step Functions

    The three systems count the same schedule differently:

    | | WOML | Temporal `RetryPolicy` | Step Functions `Retry` |
    |---|---|---|---|
    | how many | `retry` = **total attempts** (1–10, default 1) | `maximum_attempts` = **total attempts** (default 0 = unlimited; 1 = no retry) | `MaxAttempts` = **retries after the first** (default 3; 0 = no retry) |
    | first wait | `retry-delay` (default 1s) | `initial_interval` (default 1s) | `IntervalSeconds` (default 1, whole seconds) |
    | growth | `retry-backoff`: `fixed` or `exponential` (×2) | `backoff_coefficient` (default 2.0; 1.0 = fixed) | `BackoffRate` (default 2.0; 1.0 = fixed) |
    | cap | `retry-max-delay` (default none) | `maximum_interval` (default 100 × `initial_interval`) | `MaxDelaySeconds` (default none) |
    | jitter | none | no jitter setting | `JitterStrategy`: `NONE` (default) or `FULL` |

    So WOML's `retry="4"` is Temporal's `maximum_attempts=4` and Step Functions'
    `MaxAttempts: 3`. The next cell computes the equivalent settings for a WOML step
    and checks, with each system's own formula, that the waits are the same.
    """),
    code("""
    import json
    import math


    def temporal_policy(policy):
        \"\"\"Keyword arguments of temporalio.common.RetryPolicy with the same schedule.\"\"\"
        initial = policy.delay.total_seconds()
        coefficient = 1.0 if policy.backoff == "fixed" else 2.0
        if policy.backoff == "fixed" or policy.max_delay is None:
            # Temporal caps at 100 × initial by default; WOML is uncapped: set the cap
            # to the largest wait this policy can reach so the default never bites.
            maximum = initial * coefficient ** max(policy.attempts - 2, 0)
        else:
            maximum = policy.max_delay.total_seconds()
        return {"maximum_attempts": policy.attempts, "initial_interval": initial,
                "backoff_coefficient": coefficient, "maximum_interval": maximum}


    def step_functions_retrier(policy):
        \"\"\"A Step Functions Retrier with the same schedule (None if not expressible).\"\"\"
        interval = policy.delay.total_seconds()
        if interval < 1 or not float(interval).is_integer():
            return None  # IntervalSeconds is a whole number of seconds, at least 1
        # States.TaskFailed matches task errors but not States.Timeout: like WOML,
        # this retrier does not repeat a timed-out task.
        retrier = {"ErrorEquals": ["States.TaskFailed"],
                   "MaxAttempts": policy.attempts - 1,  # retries, not attempts
                   "IntervalSeconds": int(interval),
                   "BackoffRate": 1.0 if policy.backoff == "fixed" else 2.0,
                   "JitterStrategy": "NONE"}
        if policy.backoff == "exponential" and policy.max_delay is not None:
            retrier["MaxDelaySeconds"] = math.ceil(policy.max_delay.total_seconds())
        return retrier


    def temporal_waits(p):
        # Temporal: interval(n) = min(initial × coefficient^(n−1), maximum_interval)
        return [min(p["initial_interval"] * p["backoff_coefficient"] ** (n - 1),
                    p["maximum_interval"]) for n in range(1, p["maximum_attempts"])]


    def step_functions_waits(r):
        # Step Functions: before retry n, IntervalSeconds × BackoffRate^(n−1), capped.
        cap = r.get("MaxDelaySeconds", math.inf)
        return [min(r["IntervalSeconds"] * r["BackoffRate"] ** (n - 1), cap)
                for n in range(1, r["MaxAttempts"] + 1)]


    policy = expo.workflow.steps[0].policy
    woml_waits = [w.total_seconds() for w in policy.waits()]
    temporal = temporal_policy(policy)
    retrier = step_functions_retrier(policy)
    print("WOML:          ", policy.describe(), "→ waits", woml_waits)
    print("Temporal:      ", temporal, "→ waits", temporal_waits(temporal))
    print("Step Functions:", json.dumps(retrier), "→ waits", step_functions_waits(retrier))
    print("same schedule:",
          woml_waits == temporal_waits(temporal) == step_functions_waits(retrier))
    """),
    md("""
    What the table does not show: *which* failures each system retries. Temporal and
    Step Functions retry activity/task timeouts when the policy matches them; WOML
    never does — a timeout, like every outcome other than `threw`, fails closed.
    That is notebook 02. For a longer comparison (timeouts, idempotency keys,
    tenacity) see `docs/comparison.md`.
    """),
]


# --- 02 ---------------------------------------------------------------------------

NB02 = [
    md("""
    # 02 · Failing closed

    Only a definitive script-thrown failure retries. Timeout, invalid JSON, oversized
    results, crashes, interruption, cancellation and ambiguous HTTP outcomes **fail
    closed**: the step ends `failed-closed` after that one attempt, whatever `retry`
    says, "because repeating them may be unsafe or meaningless" (the seed). Each
    attempt carries a one-sentence `explanation` of why it did or did not retry.

    Below, every step has `retry="3"`, and every one of them stops after attempt 1.
    After each, the kernel is healthy and the next cell runs normally.
    """),
    code("""
    %load_ext woml_magic
    %config Woml.journal = ":memory:"
    """),
    code(EXPLAIN_HELPER),
    md("""
    ## `timeout`: an endless loop

    The script runs in a separate worker process (spec §4.5). When an attempt runs
    past the step's `timeout`, the kernel kills the worker. The attempt may have done
    part of its work — or be doing it still — so repeating it is not safe.
    """),
    code("""
    %%woml --simulate --out busy
    <step id="busy" retry="3" timeout="500ms">
      <script>
        while (true) {}
      </script>
    </step>
    """),
    code("explain(busy)"),
    md("""
    ## `timeout` on the simulated clock

    Timeouts are judged on the run's clock. `services.sleep("1h")` against a `30s`
    timeout ends `timeout` at once in simulated time — no need to wait 30 seconds to
    see it.
    """),
    code("""
    %%woml --simulate --out slept
    <step id="sleepy" retry="3" timeout="30s">
      <script>
        await services.sleep("1h");
        return "never";
      </script>
    </step>
    """),
    code("""
    explain(slept)
    a = slept.steps["sleepy"].attempts[0]
    print(f"timed out at {a.ended_at - a.started_at:.0f}s of simulated time")
    """),
    md("""
    ## `invalid-json`: NaN

    A result must be JSON (spec §3.3). `NaN` is not silently turned into `null`; the
    message names the path. The same code would return the same value again, so a
    retry is meaningless.
    """),
    code("""
    %%woml --simulate --out nan
    <step id="invoice" retry="3">
      <script>
        const items = [{amount: 10}, {amount: 20}, {amount: 30}, {amount: 0 / 0}];
        return { items };
      </script>
    </step>
    """),
    code("explain(nan)"),
    md("""
    ## `oversized`

    A result's JSON text may be at most 256 KiB by default
    (`%config Woml.max_result_bytes`).
    """),
    code("""
    %%woml --simulate --out big
    <step id="export" retry="3">
      <script>
        return "x".repeat(300 * 1024);
      </script>
    </step>
    """),
    code("explain(big)"),
    md("""
    ## `crash`: a memory bomb

    Each attempt's script has a memory limit (128 MiB by default,
    `%config Woml.memory_limit_mb`). Running out of it ends the attempt `crash` — and
    only the attempt: the kernel never feels it.
    """),
    code("""
    %%woml --simulate --out bomb
    <step id="hog" retry="3">
      <script>
        const hoard = [];
        while (true) hoard.push(new Array(1e6).fill(1.5));
      </script>
    </step>
    """),
    code("explain(bomb)"),
    md("""
    ## `cancelled`

    `--background` returns at once with a live timeline and a Cancel button; the run
    goes on in the kernel's event loop. `%woml cancel RUN_ID` (or the button) ends the
    running attempt `cancelled`. You stopped it on purpose, so WOML never retries it.
    """),
    code("""
    %%woml --background --run-id long-job --out job
    <step id="long" retry="3" timeout="2h">
      <script>
        await services.sleep("1h");
        return "done";
      </script>
    </step>
    """),
    code("%woml cancel long-job"),
    code("explain(job)"),
    md("""
    The Python API does the same with `wm.start(...)`, `handle.cancel()` and
    `await handle`:
    """),
    code("""
    import asyncio

    import woml_magic as wm

    handle = wm.start('''
    <step id="long" retry="3" timeout="2h">
      <script>await services.sleep("1h"); return "done";</script>
    </step>''')
    await asyncio.sleep(0.5)
    handle.cancel()
    cancelled = await handle
    print("outcome:", cancelled.steps["long"].attempts[-1].outcome)
    """),
    md("""
    ## `ambiguous`: a lost response without an idempotency key

    The demo API (spec §8) runs on 127.0.0.1 inside this notebook.
    `api.drop_response_next(1)` makes the next request happen — the charge is
    created — and then closes the connection without a response. The script sees an
    `AmbiguousError`: the charge may or may not exist. Without an idempotency key a
    retry could charge twice, so the attempt ends `ambiguous` and the step fails
    closed (the ambiguity guard, spec §4.2). Notebook 03 shows the fix.
    """),
    code("""
    from woml_magic.demo import DemoAPI

    api = DemoAPI().start()
    demo = {"url": api.url}
    api.drop_response_next(1)
    """),
    code("""
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
    """),
    code("""
    explain(lost)
    print("charges the API recorded:", len(api.records("charges")))
    """),
    md("""
    Catching the error does not help: if the attempt then fails for any reason, the
    outcome is still `ambiguous` — the uncertainty about the charge is still there.
    """),
    code("""
    api.reset()                # forget the first charge, so the count starts at 0
    api.drop_response_next(1)
    """),
    code("""
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
    """),
    code("""
    explain(caught)
    print("charges the API recorded:", len(api.records("charges")))
    """),
    md("""
    ## `interrupted`

    Interrupting the kernel (■, or *Kernel → Interrupt*) during a foreground run ends
    the running attempt `interrupted`; whether its effects happened is unknown, so
    WOML fails closed, and the cell stops with `KeyboardInterrupt` as any interrupted
    cell does. A process that dies mid-attempt leaves the same question behind: on
    `--resume` the open attempt is recorded `interrupted` (notebook 04 kills a real
    process to show it).

    Interrupting the kernel from inside the notebook would stop "Run all", so here
    the Python API receives the very signal the interrupt button sends (SIGINT) once
    the attempt has started, and we catch the `KeyboardInterrupt`.
    """),
    code("""
    import os
    import signal
    import threading

    from woml_magic.events import AttemptStarted

    seen = []

    def interrupt_once_started(event):
        # Like pressing ■ 0.3 s after the attempt began.
        if isinstance(event, AttemptStarted):
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()

    try:
        wm.run('''
    <step id="upload" retry="3" timeout="1m">
      <script>await services.sleep("10s"); return "uploaded";</script>
    </step>''', sinks=[interrupt_once_started], on_engine=lambda e: seen.append(e.run))
    except KeyboardInterrupt:
        print("the cell was interrupted")
    explain(seen[0])
    """),
    md("""
    ## The kernel is fine

    After a timeout, a memory bomb, a cancellation and an interrupt, the next cell
    runs normally.
    """),
    code("""
    %%woml --simulate --out healthy
    <step id="ok" retry="3">
      <script>return { fine: true };</script>
    </step>
    """),
    code("""
    print("after all that:", healthy.status)
    api.stop()
    """),
    md("""
    ## Summary

    | outcome | when | why WOML does not repeat it |
    |---|---|---|
    | `timeout` | the attempt ran past `timeout` on the run's clock | its effects may be partial or still under way |
    | `invalid-json` | the result is not JSON (NaN, `Map`, a cycle, …) | the same code returns the same kind of value: meaningless |
    | `oversized` | the result's JSON is over the limit | repeating produces the same result: meaningless |
    | `crash` | out of memory, the worker died, an internal error | not a definitive failure of the script |
    | `interrupted` | kernel interrupt, or the process died (found on resume) | whether its effects happened is unknown |
    | `cancelled` | you cancelled the run | you asked it to stop |
    | `ambiguous` | an HTTP call without an idempotency key may have happened, then the attempt failed | a retry could repeat the effect |

    Only `threw` — the script itself said "this failed" — retries, while attempts remain.
    """),
]


# --- 03 ---------------------------------------------------------------------------

CHARGE_STEP = """
<step id="charge" retry="3" retry-delay="200ms">
  <script>
    const res = await services.http.request({
      method: "POST",
      url: `${context.payload.url}/charges`,
      json: { amount: 2500, currency: "eur" },%s
    }, { name: "create-charge" });
    console.log(`attempt ${attempt.number}: key ${attempt.idempotencyKey}, `
      + `Idempotent-Replayed: ${res.headers["idempotent-replayed"] || "absent"}`);
    return res.data;
  </script>
</step>
"""
WITH_KEY = """
      idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },"""

NB03 = [
    md("""
    # 03 · Idempotency keys

    "A retry does not prove an interrupted external effect never happened" (the seed).
    The lesson, with a real HTTP API: a charge whose response is lost, without and
    then with `attempt.idempotencyKey`.
    """),
    code("""
    %load_ext woml_magic
    %config Woml.journal = ":memory:"

    import httpx

    from woml_magic.demo import DemoAPI

    api = DemoAPI().start()      # a payments-like API on 127.0.0.1 (spec §8)
    demo = {"url": api.url}      # passed to the cells with --payload demo
    print(api)
    """),
    md("""
    ## What a naive retry does

    `drop_response_next(1)`: the next request is executed (a charge is created and
    stored) and then the connection closes without a response. A client that treats
    every error as "try again" charges the customer twice.
    """),
    code("""
    api.drop_response_next(1)
    with httpx.Client(base_url=api.url) as client:
        try:
            client.post("/charges", json={"amount": 2500, "currency": "eur"})
        except httpx.RemoteProtocolError as exc:
            print("first try:", exc)
            client.post("/charges", json={"amount": 2500, "currency": "eur"})
    print("naive retry, charges recorded:", len(api.records("charges")))
    api.reset()
    """),
    md("""
    ## WOML without a key: fail closed

    The same lost response in a WOML step with `retry="3"`. The request carried no
    idempotency key, so the ambiguity guard (spec §4.2) ends the attempt `ambiguous`
    and does **not** retry. The run fails — and the API shows why that matters: the
    charge *did* happen.
    """),
    code("api.drop_response_next(1)"),
    code("%%woml --simulate --payload demo --out no_key" + CHARGE_STEP % ""),
    code("""
    a = no_key.steps["charge"].attempts[-1]
    print("run:", no_key.status, "| attempts:", len(no_key.steps["charge"].attempts),
          "| outcome:", a.outcome)
    print(a.explanation)
    print("without a key, charges recorded:", len(api.records("charges")))
    """),
    md("""
    ## WOML with `attempt.idempotencyKey`: one charge

    Now the request sends `Idempotency-Key: <attempt.idempotencyKey>`. The first
    attempt still sees an `AmbiguousError`, but the API's key contract makes a repeat
    safe, so the attempt ends `threw` and WOML retries. The retry carries the *same*
    key; the server finds the stored response and replays it
    (`Idempotent-Replayed: true`) instead of charging again.
    """),
    code("""
    api.reset()
    api.drop_response_next(1)
    """),
    code("%%woml --simulate --payload demo --out with_key" + CHARGE_STEP % WITH_KEY),
    code("""
    s = with_key.steps["charge"]
    print("run:", with_key.status, "| outcomes:", [a.outcome for a in s.attempts])
    for line in s.attempts[-1].logs:
        print(line)
    print("what the server did:", [r.outcome for r in api.requests])
    print("with a key, charges recorded:", len(api.records("charges")))
    """),
    md("""
    Two different "replays" are in play — do not mix them up:

    - **`Idempotent-Replayed: true`** is the *server's* answer: it saw the key before
      and returned the stored response without executing again.
    - **`response.replayed: true`** is *WOML's*: a named call whose 2xx response is in
      the journal is not sent again at all (spec §4.3, notebook 04).

    Idempotency is an external contract: the key only helps because this API documents
    how it stores repeated keys. Without that contract a retry may still duplicate.
    """),
    md("""
    ## One key per logical step

    The key is the same for every attempt of a step (spec §3.5) — that is what lets
    the server recognise the retry. Do not build a new key per attempt.
    """),
    code("""
    %%woml --simulate --out three
    <step id="charge" retry="3" retry-delay="1s">
      <script>
        console.log(attempt.idempotencyKey);
        if (attempt.number < 3) throw new Error("busy");
        return attempt.idempotencyKey;
      </script>
    </step>
    """),
    code("""
    s = three.steps["charge"]
    keys = [a.idempotency_key for a in s.attempts]
    for a in s.attempts:
        print(f"attempt {a.number}: {a.idempotency_key}")
    print("one key for all attempts:", len(set(keys)) == 1 and keys[0] == s.result)
    """),
    md("""
    A new run is a new logical execution, so it gets a new key — run ids are random:
    """),
    code("""
    %%woml --simulate --out again
    <step id="charge" retry="3" retry-delay="1s">
      <script>
        console.log(attempt.idempotencyKey);
        if (attempt.number < 3) throw new Error("busy");
        return attempt.idempotencyKey;
      </script>
    </step>
    """),
    code("""
    print(three.id, three.steps["charge"].idempotency_key)
    print(again.id, again.steps["charge"].idempotency_key)
    print("a new run, a new key:",
          three.steps["charge"].idempotency_key != again.steps["charge"].idempotency_key)
    """),
    md("""
    ## Pinning the run id

    The key is a UUIDv5 of the run id and the step id (spec §3.5):

        NAMESPACE = uuid5(NAMESPACE_URL, "urn:woml:idempotency-key")
        key       = str(uuid5(NAMESPACE, f"{run_id}/{step_id}"))

    `--run-id` pins the run id, so the key is reproducible — use a business identifier
    (an order number) and a resubmission of the same order sends the same key.
    """),
    code("""
    %%woml --simulate --run-id order-42 --out pinned
    <step id="charge">
      <script>
        return attempt.idempotencyKey;
      </script>
    </step>
    """),
    code("""
    import uuid

    NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:woml:idempotency-key")
    print("namespace:", NAMESPACE)
    expected = str(uuid.uuid5(NAMESPACE, "order-42/charge"))
    print("computed: ", expected)
    print("WOML:     ", pinned.steps["charge"].result)
    print("the formula matches:", expected == pinned.steps["charge"].result)
    print("spec example run-1/charge:", uuid.uuid5(NAMESPACE, "run-1/charge"))
    """),
    code("api.stop()"),
]


# --- 04 ---------------------------------------------------------------------------

CHECKOUT = """
<workflow id="checkout">
  <step id="order">
    <script>
      return { order: "o-42", amount: 2500 };
    </script>
  </step>
  <step id="pay" retry="3" retry-delay="1s" timeout="1m">
    <script>
      const key = { header: "Idempotency-Key", value: attempt.idempotencyKey };
      const customer = await services.http.request({
        method: "POST",
        url: `${context.payload.url}/customers`,
        json: { email: "ada@example.com" },
        idempotency: key,
      }, { name: "create-customer" });
      const charge = await services.http.request({
        method: "POST",
        url: `${context.payload.url}/charges`,
        json: { amount: context.steps.order.amount, currency: "eur",
                customer: customer.data.id },
        idempotency: key,
      }, { name: "create-charge" });
      return {
        customer: customer.data.id, customerReplayed: customer.replayed,
        charge: charge.data.id,
        serverReplayed: charge.headers["idempotent-replayed"] === "true",
      };
    </script>
  </step>
</workflow>
"""

NB04 = [
    md("""
    # 04 · Resume and reattach

    Every event of a run is journaled to SQLite before it takes effect (spec §5.2):
    "attempt started" and "call started" are committed before the script or the
    request proceeds. So when the process running a workflow dies — `kill -9`, a
    crashed kernel, a lost machine — the journal knows exactly which attempt was in
    flight, and `--resume` can continue the run without guessing (spec §5.3).

    Here a separate Python process runs a checkout on the real clock, and we kill it
    with SIGKILL while its charge request is in flight.
    """),
    code("""
    %load_ext woml_magic

    import json
    import os
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from woml_magic.demo import DemoAPI

    workdir = tempfile.TemporaryDirectory()
    journal = str(Path(workdir.name) / "journal.sqlite3")   # used as --journal $journal
    api = DemoAPI().start()
    demo = {"url": api.url}
    """),
    md("""
    The workflow: an `order` step, then a `pay` step that creates a customer and a
    charge through two **named** calls, both with the step's idempotency key.
    """),
    code("CHECKOUT = '''" + CHECKOUT + "'''"),
    md("""
    ## Kill a run mid-flight

    The child process runs the workflow with `wm.run(..., journal=...)`, as a kernel
    would. The demo API answers the customer at once but holds the charge's response
    for 2 s — the charge itself already exists. As soon as the API has received the
    charge, we kill the child.
    """),
    code("""
    CHILD = '''
    import sys, json, woml_magic as wm
    args = json.loads(sys.argv[1])
    wm.run(sys.stdin.read(), payload=args["payload"], clock="real",
           run_id=args["run_id"], journal=args["journal"])
    '''
    api.delay_next(1, 0.0)    # the customer: answered at once
    api.delay_next(1, 2.0)    # the charge: executed, then its response is held 2 s

    args = json.dumps({"payload": demo, "run_id": "checkout-1", "journal": journal})
    child = subprocess.Popen([sys.executable, "-c", CHILD, args], stdin=subprocess.PIPE,
                             text=True)
    child.stdin.write(CHECKOUT)
    child.stdin.close()

    deadline = time.monotonic() + 60
    while not any(r.path == "/charges" for r in api.requests):
        if time.monotonic() > deadline or child.poll() is not None:
            raise RuntimeError("the child never sent its charge")
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    print("child exit code:", child.wait())
    print("charges the API recorded:", len(api.records("charges")))
    """),
    md("""
    The child died without hearing back, but the charge exists. Wait until the API
    has stored the held response under its key, then look at the journal:
    `%woml runs` lists the run as `unfinished`. (IPython expands `$journal` in a
    magic's line to the Python variable's value.)
    """),
    code("""
    while not all(r.answered for r in api.requests):
        time.sleep(0.05)
    """),
    code("%woml runs --journal $journal"),
    md("""
    ## Resume: the interrupted attempt fails closed

    `%%woml --resume RUN_ID` re-executes the run with the same document (its
    fingerprint is checked) and keeps its id, clock and payload. The `order` step
    already succeeded, so it is **reattached**: its result comes from the journal and
    it does not run again. The `pay` attempt started but never finished: WOML cannot
    know whether its effects happened, so it records it `interrupted` and fails
    closed, telling you what to do.
    """),
    code("%%woml --journal $journal --resume checkout-1 --out resumed" + CHECKOUT),
    code("""
    print("order:", resumed.steps["order"].status)
    pay = resumed.steps["pay"]
    print("pay:", pay.status, "| attempt 1:", pay.attempts[0].outcome)
    print(pay.attempts[0].error.message)
    """),
    md("""
    ## Check, then `--retry-interrupted`

    The message says: check the external system. The API shows one customer and one
    charge. Because `pay` sends idempotency keys, running it again is safe:
    `--retry-interrupted` counts the interrupted attempt as used and starts attempt 2
    at once, **with the same idempotency key**.

    Within the step, the `create-customer` call's 2xx response is in the journal, so
    attempt 2 does not send it again: it is **reattached** (`replayed: true`, spec §4.3)
    and the API receives no new customer request. The `create-charge` call never got
    its response, so it is sent again with the same key — and the *server* replays
    its stored charge.
    """),
    code("""
    print("customers:", len(api.records("customers")), "| charges:", len(api.records("charges")))
    customer_requests_before = sum(r.path == "/customers" for r in api.requests)
    requests_before = len(api.requests)
    """),
    code("%%woml --journal $journal --resume checkout-1 --retry-interrupted --out retried"
         + CHECKOUT),
    code("""
    pay = retried.steps["pay"]
    print("run:", retried.status, "| pay:", [a.outcome for a in pay.attempts])
    print("same key on both attempts:",
          {a.idempotency_key for a in pay.attempts} == {pay.idempotency_key})
    for call in pay.attempts[-1].calls:
        print(f"  {call.name}: status {call.status}, replayed {call.replayed}")
    print("result:", pay.result)
    new = api.requests[requests_before:]
    print("new requests to the API:", [(r.path, r.outcome) for r in new])
    print("customer requests unchanged:",
          sum(r.path == "/customers" for r in api.requests) == customer_requests_before)
    print("after resume, customers:", len(api.records("customers")),
          "| charges:", len(api.records("charges")))
    """),
    md("""
    ## The whole history

    A resumed run's `Run` shows everything — attempts and waits from before the
    crash included. `%woml show RUN_ID` draws it again from the journal at any time.
    """),
    code("%woml runs --journal $journal"),
    code("%woml show checkout-1 --journal $journal"),
    code("""
    api.stop()
    workdir.cleanup()
    """),
]


NOTEBOOKS = {
    "01-retries-and-backoff.ipynb": NB01,
    "02-failing-closed.ipynb": NB02,
    "03-idempotency-keys.ipynb": NB03,
    "04-resume-and-reattach.ipynb": NB04,
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = notebook(cells)
        nbformat.validate(nb)
        # Stable cell ids, so regenerating an unchanged notebook changes nothing.
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{name[:2]}-{i:02d}"
        nbformat.write(nb, HERE / name)
        print(f"wrote {name}: {len(cells)} cells")


if __name__ == "__main__":
    main()
