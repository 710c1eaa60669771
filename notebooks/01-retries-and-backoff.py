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
# # 01 · Retries and backoff
#
# WOML retries only one thing: a script that **threw** (spec §3.2). This notebook is
# about *how often* and *how long between*: attempts versus retries, fixed versus
# exponential backoff, the maximum delay, the simulated and the real clock, and how
# Temporal and AWS Step Functions count the same policy.
#
# Every `%%woml` cell below draws a timeline: one lane per step, one bar per attempt,
# labelled gaps for the waits. Its value is the `Run`; `--out NAME` also keeps it in
# a variable so the Python cells can read it.

# %%
%load_ext woml_magic
# Throwaway runs: keep them in memory (notebook 04 is about the journal on disk).
%config Woml.journal = ":memory:"

# %% [markdown]
# ## `retry` counts attempts, not retries
#
# `retry="4"` means **at most four attempts in total**: the first one and up to three
# retries (the seed: "retry is the total attempt count from 1 through 10"). This
# script always throws, so the step uses all four and then ends `failed`.
# `--simulate` runs the waits on a simulated clock, so the cell finishes at once.

# %%
%%woml --simulate --out four
<step id="flaky" retry="4" retry-delay="1s">
  <script>
    throw new Error(`attempt ${attempt.number} of ${attempt.maxAttempts} failed`);
  </script>
</step>

# %%
step = four.steps["flaky"]
print("attempts:", len(step.attempts))
print("step status:", step.status)
print("last explanation:", step.attempts[-1].explanation)

# %% [markdown]
# ## Fixed versus exponential
#
# After a retryable failure of attempt *k* the engine waits `wait(k)` (spec §3.1):
#
# - `fixed`: `wait(k) = retry-delay`
# - `exponential`: `wait(k) = min(retry-delay × 2^(k−1), retry-max-delay)`
#
# No jitter in either. The policy is known before anything runs: `wm.parse` returns
# the frozen `Workflow`, and `policy.waits()` is the whole planned schedule.

# %%
import woml_magic as wm

schedules = {}
for backoff in ("fixed", "exponential"):
    wf = wm.parse(f'''
<step id="s" retry="5" retry-backoff="{backoff}" retry-delay="1s">
  <script>throw new Error("no");</script>
</step>''')
    policy = wf.steps[0].policy
    print(f"{backoff:<12} {policy.describe():<40} waits:",
          [w.total_seconds() for w in policy.waits()])
    schedules[backoff] = wm.run(wf, clock="simulated")

# %% [markdown]
# The runs wait exactly that. `wm.compare` draws both runs' lanes on **one** time axis,
# each run's time from its own start, so equal waits are drawn equal and a wait twice
# as long is drawn twice as long: the fixed run is over after 4 s, the exponential one
# after 15 s. (`%woml compare RUN_A RUN_B` does the same for runs in the journal.)

# %%
wm.compare(schedules["fixed"], schedules["exponential"],
           labels=["fixed 1s", "exponential from 1s"])

# %% [markdown]
# Here the card network is busy twice; the third attempt succeeds after waiting 1 s
# and then 2 s (the README's first cell).

# %%
%%woml --simulate --out expo
<step id="charge" retry="4" retry-backoff="exponential" retry-delay="1s" retry-max-delay="10s">
  <script>
    if (attempt.number < 3) throw new Error("card network busy");
    return { charged: true, attempt: attempt.number };
  </script>
</step>

# %%
s = expo.steps["charge"]
print("outcomes:", [a.outcome for a in s.attempts])
print("waits (s):", [round(w, 3) for w in s.waits])
print("result:", s.result)

# %% [markdown]
# ## The maximum delay
#
# `retry-max-delay` caps the exponential growth. The spec's example: `retry="10"`,
# exponential from 1 s with a 30 s cap waits 1, 2, 4, 8, 16, 30, 30, 30, 30 s.
# On the simulated clock those 151 s pass at once.

# %%
%%woml --simulate --out capped
<step id="poll" retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
  <script>
    throw new Error("not ready");
  </script>
</step>

# %%
waits = [round(w) for w in capped.steps["poll"].waits]
print("capped waits:", waits)
print(f"simulated time at the end: {capped.now:.0f}s")

# %% [markdown]
# With `fixed` backoff there is nothing to cap: `retry-max-delay` is accepted but has
# **no effect**, and the timeline's header says so.

# %%
fixed_capped = wm.parse('''
<step id="s" retry="3" retry-delay="5s" retry-max-delay="10s">
  <script>return 1;</script>
</step>''').steps[0].policy
print(fixed_capped.describe())
print("waits:", [w.total_seconds() for w in fixed_capped.waits()])

# %% [markdown]
# ## Simulated versus real clock
#
# The default clock is `real`: waits really elapse and the timeline counts down. The
# simulated clock jumps over waits and `services.sleep`, while script execution
# still advances it by its real duration (spec §5.1). Every time the API shows is
# seconds since the run started, on the run's clock.
#
# A short real-clock run: three attempts, 200 ms apart.

# %%
%%woml --out real
<step id="flaky" retry="3" retry-delay="200ms">
  <script>
    if (attempt.number < 3) throw new Error("try again");
    return "ok";
  </script>
</step>

# %%
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

# %% [markdown]
# ## The same policy in Temporal and AWS Step Functions
#
# The three systems count the same schedule differently:
#
# | | WOML | Temporal `RetryPolicy` | Step Functions `Retry` |
# |---|---|---|---|
# | how many | `retry` = **total attempts** (1–10, default 1) | `maximum_attempts` = **total attempts** (default 0 = unlimited; 1 = no retry) | `MaxAttempts` = **retries after the first** (default 3; 0 = no retry) |
# | first wait | `retry-delay` (default 1s) | `initial_interval` (default 1s) | `IntervalSeconds` (default 1, whole seconds) |
# | growth | `retry-backoff`: `fixed` or `exponential` (×2) | `backoff_coefficient` (default 2.0; 1.0 = fixed) | `BackoffRate` (default 2.0; 1.0 = fixed) |
# | cap | `retry-max-delay` (default none) | `maximum_interval` (default 100 × `initial_interval`) | `MaxDelaySeconds` (default none) |
# | jitter | none | no jitter setting | `JitterStrategy`: `NONE` (default) or `FULL` |
#
# So WOML's `retry="4"` is Temporal's `maximum_attempts=4` and Step Functions'
# `MaxAttempts: 3`. The next cell computes the equivalent settings for a WOML step
# and checks, with each system's own formula, that the waits are the same.

# %%
import json
import math


def temporal_policy(policy):
    """Keyword arguments of temporalio.common.RetryPolicy with the same schedule."""
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
    """A Step Functions Retrier with the same schedule (None if not expressible)."""
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

# %% [markdown]
# What the table does not show: *which* failures each system retries. Temporal and
# Step Functions retry activity/task timeouts when the policy matches them; WOML
# never does — a timeout, like every outcome other than `threw`, fails closed.
# That is notebook 02. For a longer comparison (timeouts, idempotency keys,
# tenacity) see `docs/comparison.md`.
