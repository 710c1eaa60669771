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
# # 07 · Retry storms
#
# WOML's backoff has no jitter, by design: exponential backoff "doubles from the
# initial delay up to the maximum and currently adds no jitter" (the seed), and
# `wait(k)` is the same number every time (spec §3.1). One client cannot show what
# that costs. Many can: when a thousand clients fail together, they retry together.
#
# The **lab** (spec §11) runs N clients of one workflow on one simulated clock
# against a server model — a capacity, an outage window, write conflicts — or the
# demo API, and plots what the server saw. It never changes how a WOML step runs:
# the lab's clients are ordinary runs with the ordinary outcome rules (§3.2) and
# keys (§3.5). Jitter and retry budgets appear only as **what-ifs**, simulated
# beside the real runs and labelled *not WOML semantics*.
#
# Two ways in, the same lab: `%%woml --clients 50 --server occ --what-if jitter=full`
# on a cell, or `wm.lab(text, clients=50, server="occ", what_if=["jitter=full"])`
# from Python, as below. For scenarios too big to run real scripts for,
# `woml_magic.lab.simulate` is the model-only path: the same schedule and server,
# no scripts, up to 100,000 clients (`limits.MAX_MODEL_CLIENTS`; a lab's clients are
# real runs, up to 10,000, `limits.MAX_CLIENTS`).

# %%
import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.lab.plots import LabFigure, load_plot
from woml_magic.lab.server import PRESETS, ModelServer
from woml_magic.lab.simulate import simulate
from woml_magic.lint import lint

SEEDS = range(5)   # the contention result, seed by seed: not one lucky seed

# %% [markdown]
# ## 50 clients, one record
#
# The contention case from Marc Brooker's "Exponential Backoff And Jitter" (AWS
# Architecture Blog, 2015): every client reads a record and writes it back, and a
# write fails with `409 Conflict` when another client's write landed in the 20 ms
# since its read (optimistic concurrency, `server="occ"`). Fifty clients start at
# once. The step retries a conflict with WOML's own schedule: ten attempts,
# exponential from 50 ms, capped at 1 s.
#
# Each client below is a real run of the script: its attempts, waits and
# `console.log` lines are in its timeline (three are sampled under the plots).
# The what-if row beside it is the same scenario with full jitter, model only.

# %%
WRITE = """
<step id="write" retry="10" retry-delay="50ms" retry-backoff="exponential" retry-max-delay="1s">
  <script>
    const res = await services.http.request({
      method: "PUT", url: `${context.payload.api}/record`,
      json: { client: context.payload.client },
    });
    console.log(`client ${context.payload.client}: written on attempt ${attempt.number}`);
    return res.status;
  </script>
</step>
"""
occ_lab = wm.lab(WRITE, clients=50, seed=1, server="occ", what_if=["jitter=full"])
(jittered,) = occ_lab.overlays.values()
print(f"real scripts: {occ_lab.clients} clients, {occ_lab.calls} calls, "
      f"{occ_lab.succeeded} succeeded")
print(f"full jitter, model only: {jittered.clients} clients, {jittered.calls} calls, "
      f"{jittered.succeeded} succeeded")
occ_lab

# %% [markdown]
# Every client failed at the same instant, so every client waits the same 50 ms,
# 100 ms, 200 ms … and they all come back at the same instant again: in each wave
# exactly one write wins and the rest conflict. Ten waves, ten winners; forty
# clients run out of attempts — 1 + 2 + … + 10 calls for the winners and 40 × 10
# for the rest, 455 calls for 10 writes. Full jitter (`wait = uniform(0, wait(k))`) breaks
# the waves up, so writes stop colliding.
#
# The same comparison on the model path over several seeds, with the article's
# network model (10 ms ± 2 ms each way, `PRESETS["occ"]`). "Busiest 10% of bins" is
# the share of all calls that land in the busiest tenth of 20 ms bins: near 100%
# when the calls come in synchronized waves.

# %%
policy = wm.parse(WRITE).steps[0].policy
occ = PRESETS["occ"]
print(occ.describe())
more_calls = []
for seed in SEEDS:
    plain = simulate(policy, 50, occ, seed=seed)
    full = simulate(policy, 50, occ, seed=seed, overlay="jitter=full")
    plain_load, full_load = plain.load(bin=0.02), full.load(bin=0.02)
    print(f"seed {seed} · calls: WOML {plain.calls}, full jitter {full.calls}"
          f" · clients succeeded: {plain.succeeded} vs {full.succeeded}"
          f" · calls in the busiest 10% of 20 ms bins: "
          f"{plain_load.busiest_share(0.1):.0%} vs {full_load.busiest_share(0.1):.0%}"
          f" · peak/mean: {plain_load.peak_to_mean():.1f} vs {full_load.peak_to_mean():.1f}")
    more_calls.append(plain.calls > full.calls)
print("WOML's schedule sent more calls than full jitter at every seed:", all(more_calls))

# %% [markdown]
# What the server saw for seed 0: with WOML's schedule the calls come in spikes at
# the schedule's instants; with full jitter the same clients spread out and finish
# sooner.

# %%
plain = simulate(policy, 50, occ, seed=0)
full = simulate(policy, 50, occ, seed=0, overlay="jitter=full")
LabFigure(load_plot([plain, full], bin=0.05, title="50 clients, one record"),
          "50 clients, one record")

# %% [markdown]
# ## 1,000 clients and a 30 s outage
#
# Now the failures are the server's: it serves 15 requests/s and is down from 10 s
# to 40 s, while 1,000 clients arrive over 100 s (10/s, well under capacity). The
# step is `retry="10" exponential 1s max 30s`, spec §3.1's example. A thousand
# clients are more than this notebook should run real scripts for, so this is the
# model path.
#
# Three scenarios, the same arrivals: WOML's schedule; full jitter; and a **retry
# budget** of 10% (a token bucket the clients share: each first attempt earns 0.1
# of a retry, each retry spends one; with no token, no retry — the SRE book's
# per-client budget, Finagle's `RetryBudget`). "Recovered at" is when the offered
# load fell to the capacity and stayed there for 5 s.

# %%
ORDER = """
<step id="order" retry="10" retry-delay="1s" retry-backoff="exponential" retry-max-delay="30s">
  <script>
    const res = await services.http.request({method: "POST", url: `${context.payload.api}/orders`});
    return res.status;
  </script>
</step>
"""
order_policy = wm.parse(ORDER).steps[0].policy
outage_server = ModelServer(capacity=15.0, outage=(10.0, 40.0))
end = outage_server.outage[1]
print(f"{outage_server.describe()} · 1,000 clients arriving uniformly over 100s")
print(f"the outage ends at {end:.0f}s")
storm = {overlay or "WOML": simulate(order_policy, 1000, outage_server, seed=0,
                                     arrivals="uniform:100s", overlay=overlay)
         for overlay in (None, "jitter=full", "budget=10%")}
for result in storm.values():
    after = result.load(bin=1.0).total[int(end):int(end) + 20]
    denied = result.outcomes.count("budget-denied")
    print(f"{result.label}: {result.calls:,} calls"
          f" · mean load {end:.0f}s–{end + 20:.0f}s: {sum(after) / len(after):.1f}/s"
          f" · recovered at {result.recovered_at(end):.0f}s"
          f" · succeeded {result.succeeded:,}, gave up {result.gave_up:,}"
          + (f" ({denied:,} denied a retry by the budget)" if denied else ""))
late = storm["WOML"].recovered_at(end) - end
print(f"without a budget the server stayed over capacity {late:.0f}s after the outage")
print("with a 10% budget the server recovered earlier:",
      storm["budget=10%"].recovered_at(end) < storm["WOML"].recovered_at(end))
LabFigure(load_plot(list(storm.values()), title="1,000 clients, a 30 s outage"),
          "1,000 clients, a 30 s outage")

# %% [markdown]
# Without a budget the outage outlives itself: every client that failed during it is
# still working through its schedule, and their retries, piled on the new arrivals,
# keep the server over capacity for about a minute after it came back. Jitter
# spreads those retries out but does not remove any: it does not help here. The
# budget sheds them — the server is calm within seconds of the outage's end — and
# the price is in the last column: clients that gave up early instead of waiting.
# Which price is right is a product decision; the lab shows both.

# %% [markdown]
# ## Two retrying layers
#
# A client retries a service that itself retries its database: each outer attempt is
# a whole retried inner call, so with everything failing one request becomes
# `attempts ** layers` requests (*Site Reliability Engineering*, "Addressing
# Cascading Failures"). A layer multiplies only once the layer under it has run out
# of attempts, so this uses a short schedule — `retry="4" exponential 1s`, waits of
# 1 s, 2 s, 4 s — shorter than the outage.

# %%
# Only the policy matters on the model path: one attempt is one request.
short = wm.parse('<step id="call" retry="4" retry-delay="1s" retry-backoff="exponential">'
                 '<script>return 1;</script></step>').steps[0].policy
down = ModelServer(outage=(0.0, 1e9))   # a server that never answers 2xx
layered = {}
for layers in (1, 2):
    dead = simulate(short, 10, down, layers=layers)
    layered[layers] = simulate(short, 1000, outage_server, seed=0,
                               arrivals="uniform:100s", layers=layers)
    print(f"{layers} layer{'s' if layers > 1 else ''}: a dead server gets "
          f"{dead.amplification:.0f} calls per client; the outage: "
          f"{layered[layers].calls:,} calls, {layered[layers].amplification:.2f} per client,"
          f" recovered at {layered[layers].recovered_at(end):.0f}s")
print(f"two layers multiply the outage's calls by "
      f"{layered[2].calls / layered[1].calls:.2f}")
LabFigure(load_plot({"1 layer": layered[1], "2 layers": layered[2]},
                    title="retry=\"4\" exponential 1s, one and two layers"),
          "one and two layers")

# %% [markdown]
# The same two shapes with real scripts, one client each, against the demo API on
# 127.0.0.1 while it answers every request `503`. With one layer, each of the step's
# four attempts is one request. With two, the script is a service that itself retries
# its call four times (waits of 1 s, 2 s, 4 s on the run's clock) before it gives up:
# each outer attempt is a whole retried inner call. `wm.compare` draws both runs on
# one time axis, each from its own start.

# %%
LAYERS = """
<step id="call" retry="4" retry-delay="1s" retry-backoff="exponential">
  <script>
    const inner = context.payload.inner;   // the service's own attempts: 1 = no layer
    for (let n = 1; ; n++) {
      try {
        const res = await services.http.request({ url: `${context.payload.api}/charges` });
        return res.status;
      } catch (e) {
        if (n >= inner) throw e;
        await services.sleep(1000 * 2 ** (n - 1));   // 1s, 2s, 4s
      }
    }
  </script>
</step>
"""
with DemoAPI() as api:
    layer_runs = {}
    for inner, name in ((1, "1 layer"), (4, "2 layers")):
        api.reset()
        api.fail_next(100)   # the server is down: every request gets 503
        layer_runs[name] = wm.run(LAYERS, clock="simulated",
                                  payload={"api": api.url, "inner": inner})
        print(f"{name}: {len(api.requests)} requests for one client")
        print(f"  its run ended at {layer_runs[name].ended_at:.0f}s of its clock")
wm.compare(*layer_runs.values(), labels=list(layer_runs))

# %% [markdown]
# Retry at one layer — the one that knows whether a repeat is safe — and let the
# others fail fast.

# %% [markdown]
# ## Duplicate charges: what a key is worth
#
# Twenty clients each charge once against the demo API on 127.0.0.1 (spec §8), and
# the API loses the response to five of the charges it executes
# (`drop_response_next(5)`): the charge is made, the client never hears so. Each
# client charges its own amount (1000 + its number), so a duplicate is two charges
# of one amount. Three versions of the same step:
#
# - **no key**: the ambiguity guard (spec §4.2) fails the attempt closed, as
#   `ambiguous` — no retry, so no duplicate, but five runs that did charge report
#   failure;
# - **a stable key**, `attempt.idempotencyKey` (spec §3.5): the retry is safe, the
#   API recognises the key and replays the stored answer — exactly one charge each;
# - **a per-attempt key**, `attempt.idempotencyKey + "-" + attempt.number`: the
#   retry carries a new key, so the API sees a new charge.
#
# The lab sends each client's calls over HTTP to the API (and nowhere else). The
# linter (`woml_magic.lint`, run by the magic before every cell) flags the first and
# the last before anything runs.

# %%
CHARGE = """
<step id="charge" retry="3" retry-delay="1s">
  <script>
    const res = await services.http.request({
      method: "POST", url: `${context.payload.api}/charges`,
      json: { amount: 1000 + context.payload.client, currency: "eur" },{key}
    }, { name: "create-charge" });
    return res.data.id;
  </script>
</step>
"""
KEYS = {
    "no key": "",
    "stable key": """
      idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },""",
    "per-attempt key": """
      idempotency: { header: "Idempotency-Key",
                     value: attempt.idempotencyKey + "-" + attempt.number },""",
}
rows = [("key", "clients", "charges recorded", "duplicates", "runs", "linter")]
with DemoAPI() as api:
    for name, key in KEYS.items():
        doc = CHARGE.replace("{key}", key)
        api.reset()
        api.drop_response_next(5)
        charged = wm.lab(doc, clients=20, seed=7, server=api, sample=0)
        amounts = [c["amount"] for c in api.records("charges")]
        outcomes = [r.steps["charge"].attempts[-1].outcome for r in charged.runs]
        runs = (f"{charged.succeeded} succeeded, "
                f"{outcomes.count('ambiguous')} failed closed (ambiguous)")
        codes = ", ".join(sorted({w.code for w in lint(wm.parse(doc))})) or "—"
        rows.append((name, str(charged.clients), str(len(amounts)),
                     str(len(amounts) - len(set(amounts))), runs, codes))
widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
for row in rows:
    print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())

# %% [markdown]
# Only the stable key gives both: every client charged exactly once, and every run
# succeeded. The key is worth what the API's key contract is worth, and only if
# every attempt sends the same one.

# %% [markdown]
# ## The policy in other engines
#
# The same step's policy, said in Temporal and in AWS Step Functions
# (`step.policy.to(...)`; also `"tenacity"` and `"stamina"`), with a warning
# wherever the target cannot say what WOML means. Step Functions' retrier says
# `"JitterStrategy": "NONE"` to match.

# %%
step = wm.parse(WRITE).steps[0]
for target in ("temporal", "stepfunctions"):
    translation = step.policy.to(target)
    print(translation)
    print(f"{target}: same waits and attempts as WOML: {translation.same}")
    print()

# %% [markdown]
# Temporal says this schedule exactly. Step Functions cannot: its intervals are
# whole seconds, so a 50 ms start becomes 1 s flat — and with `"JitterStrategy":
# "NONE"`, fifty clients retrying a conflict there still come back together, one
# second after each failure. `"JitterStrategy": "FULL"` is that engine's what-if.
