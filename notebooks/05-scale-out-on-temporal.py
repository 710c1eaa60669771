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
# # 05 · Scale out on Temporal
#
# The cell you prototyped *is* the production workflow. `--engine temporal` runs the
# same WOML document on a [Temporal](https://temporal.io) cluster: the run outlives
# the kernel that started it, its waits are durable timers, and workers on many
# machines share the work. The semantics, the `Run` and the timeline stay the same
# (spec §9).
#
# This notebook runs one cell on both engines and compares them, rebuilds the
# Temporal run from its workflow history alone, and checks that failing closed holds
# there too. Without `--temporal HOST:PORT` the magic starts a local Temporal dev
# server on 127.0.0.1 on first use, and a worker inside this kernel.

# %%
%load_ext woml_magic
%config Woml.journal = ":memory:"

# %% [markdown]
# ## One cell, the local engine
#
# A `reserve` step whose script throws twice and then succeeds (exponential backoff
# from 200 ms: waits of 0.2 s and 0.4 s), and a `confirm` step that reads its result
# from `context.steps`. Both engines run here on the real clock: on Temporal a wait
# is a durable timer kept by the server, and the dev server cannot skip time as the
# simulated clock does, so `--simulate` with `--engine temporal` is refused (spec §9).

# %%
%%woml --out local_run
<workflow id="checkout">
  <step id="reserve" retry="4" retry-backoff="exponential" retry-delay="200ms">
    <script>
      if (attempt.number < 3) throw new Error(`inventory busy (attempt ${attempt.number})`);
      return { sku: "book-1", reserved: true };
    </script>
  </step>
  <step id="confirm">
    <script>
      return { confirmed: context.steps.reserve.sku };
    </script>
  </step>
</workflow>

# %% [markdown]
# ## The same cell on Temporal
#
# One option more. The run becomes one execution of WOML's generic `woml` workflow
# (its workflow id is the WOML run id), each attempt one activity, each wait a
# durable timer. The kernel follows it and draws the same timeline. The first
# Temporal cell also starts the dev server (a fraction of a second).

# %%
%%woml --engine temporal --out temporal_run
<workflow id="checkout">
  <step id="reserve" retry="4" retry-backoff="exponential" retry-delay="200ms">
    <script>
      if (attempt.number < 3) throw new Error(`inventory busy (attempt ${attempt.number})`);
      return { sku: "book-1", reserved: true };
    </script>
  </step>
  <step id="confirm">
    <script>
      return { confirmed: context.steps.reserve.sku };
    </script>
  </step>
</workflow>

# %% [markdown]
# ## Side by side
#
# The same outcomes, the same schedule, the same results. The keys differ because
# the runs differ (each run is a new logical execution), but both come from the same
# formula (spec §3.5): `uuid5(NAMESPACE, "<run id>/<step id>")`. On Temporal the run
# id is the workflow id, never Temporal's own run id, which changes when a workflow
# is reset.
#
# The waits are scheduled alike; the *measured* gaps on Temporal are usually a little
# longer, because each also includes handing the next attempt to a worker (tens of
# milliseconds, more on the very first run).

# %%
import uuid

from woml_magic.events import WaitScheduled

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:woml:idempotency-key")


def follows_the_formula(run):
    """Every attempt of every step carries uuid5(NAMESPACE, "<run id>/<step id>")."""
    return all(
        a.idempotency_key == str(uuid.uuid5(NAMESPACE, f"{run.id}/{step.id}"))
        for step in run.steps.values() for a in step.attempts
    )


def facts(run):
    reserve, confirm = run.steps["reserve"], run.steps["confirm"]
    return {
        "run id": run.id,
        "status": run.status,
        "reserve outcomes": [a.outcome for a in reserve.attempts],
        "waits scheduled (s)": [e.seconds for e in run.events
                                if isinstance(e, WaitScheduled) and e.step_id == "reserve"],
        "waits measured (s)": [round(w, 2) for w in reserve.waits],
        "reserve key": reserve.idempotency_key,
        "keys follow §3.5": follows_the_formula(run),
        "confirm result": confirm.result,
    }


local, temporal = facts(local_run), facts(temporal_run)
print(f"{'':20} {'local':38} temporal")
for name in local:
    print(f"{name:20} {str(local[name]):38} {temporal[name]}")
print()
for name in ("status", "reserve outcomes", "waits scheduled (s)", "confirm result"):
    print(f"same {name}:", local[name] == temporal[name])
print("keys follow §3.5 on both engines:",
      local["keys follow §3.5"] and temporal["keys follow §3.5"])

# %% [markdown]
# ## The Run from Temporal's history alone
#
# `%woml show RUN_ID --engine temporal` reads no journal: it fetches the workflow's
# event history from the server and replays it through the workflow code. So a run
# started from one kernel can be shown from another, finished or still going.
# (IPython expands `{…}` in a magic's line to the Python value.)

# %%
rebuilt = %woml show {temporal_run.id} --engine temporal
rebuilt

# %%
same = [e.to_dict() for e in rebuilt.events] == [e.to_dict() for e in temporal_run.events]
print("rebuilt from the history:", rebuilt.status,
      [a.outcome for a in rebuilt.steps["reserve"].attempts])
print("the same events as the run the kernel followed:", same)

# %% [markdown]
# ## Scale out
#
# Here the server and the worker live in this kernel. In production, start workers
# wherever the work should run — as many as it needs; any worker runs any document:
#
# ```bash
# woml worker --temporal temporal.internal:7233 --task-queue payments
# ```
#
# and point the cell at the cluster (or set `%config Woml.engine`, `Woml.temporal`,
# `Woml.temporal_task_queue` once):
#
# ```
# %%woml --engine temporal --temporal temporal.internal:7233 --task-queue payments
# ```
#
# Temporal has retries of its own, and left alone they would break WOML's rules.
# The engine turns them into WOML's:
#
# | | Temporal by default | WOML on Temporal |
# |---|---|---|
# | retries | server-side; the history keeps only the last attempt | off (`maximum_attempts=1`): **one activity per attempt**, every attempt in the history |
# | what retries | timeouts, worker loss and most errors | only `threw` (spec §3.2); the workflow applies WOML's own schedule |
# | waits | default policy (cap 100 × initial, 0 becomes 1 s) | **durable timers** of exactly §3.1's waits; a wait of 0 is no timer |
# | a worker dies mid-attempt | the activity times out and runs again | the attempt ends **`interrupted`** with §5.3's sentence; the step fails closed |
#
# More in [docs/temporal.md](../docs/temporal.md).

# %% [markdown]
# ## Failing closed on Temporal
#
# Temporal retries an activity that timed out. WOML does not: the attempt may have
# done part of its work, so a `timeout` fails closed on Temporal as it does locally
# (notebook 02), whatever `retry` says. The activity enforces the step's `timeout`
# itself and stops the script.

# %%
%%woml --engine temporal --out stuck
<step id="busy" retry="3" timeout="500ms">
  <script>
    while (true) {}
  </script>
</step>

# %%
busy = stuck.steps["busy"]
print("run:", stuck.status, "| busy:", busy.status,
      "| attempts:", [a.outcome for a in busy.attempts])
print(busy.attempts[-1].explanation)
