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
# # 03 · Idempotency keys
#
# "A retry does not prove an interrupted external effect never happened" (the seed).
# The lesson, with a real HTTP API: a charge whose response is lost, without and
# then with `attempt.idempotencyKey`.

# %%
%load_ext woml_magic
%config Woml.journal = ":memory:"

import httpx

import woml_magic as wm
from woml_magic.demo import DemoAPI

api = DemoAPI().start()      # a payments-like API on 127.0.0.1 (spec §8)
demo = {"url": api.url}      # passed to the cells with --payload demo
print(api)

# %% [markdown]
# ## What a naive retry does
#
# `drop_response_next(1)`: the next request is executed (a charge is created and
# stored) and then the connection closes without a response. A client that treats
# every error as "try again" charges the customer twice.

# %%
api.drop_response_next(1)
with httpx.Client(base_url=api.url) as client:
    try:
        client.post("/charges", json={"amount": 2500, "currency": "eur"})
    except httpx.RemoteProtocolError as exc:
        print("first try:", exc)
        client.post("/charges", json={"amount": 2500, "currency": "eur"})
print("naive retry, charges recorded:", len(api.records("charges")))
api.reset()

# %% [markdown]
# ## WOML without a key: fail closed
#
# The same lost response in a WOML step with `retry="3"`. The request carried no
# idempotency key, so the ambiguity guard (spec §4.2) ends the attempt `ambiguous`
# and does **not** retry. The run fails — and the API shows why that matters: the
# charge *did* happen.
#
# (The cell leaves the key out on purpose, so it says `--no-lint`: without it, the
# key linter would warn above the timeline that a named `POST` carries no
# idempotency key — the very mistake this cell demonstrates.)

# %%
api.drop_response_next(1)

# %%
%%woml --simulate --payload demo --out no_key --no-lint
<step id="charge" retry="3" retry-delay="200ms">
  <script>
    const res = await services.http.request({
      method: "POST",
      url: `${context.payload.url}/charges`,
      json: { amount: 2500, currency: "eur" },
    }, { name: "create-charge" });
    console.log(`attempt ${attempt.number}: key ${attempt.idempotencyKey}, `
      + `Idempotent-Replayed: ${res.headers["idempotent-replayed"] || "absent"}`);
    return res.data;
  </script>
</step>

# %%
a = no_key.steps["charge"].attempts[-1]
print("run:", no_key.status, "| attempts:", len(no_key.steps["charge"].attempts),
      "| outcome:", a.outcome)
print(a.explanation)
print("without a key, charges recorded:", len(api.records("charges")))

# %% [markdown]
# ## WOML with `attempt.idempotencyKey`: one charge
#
# Now the request sends `Idempotency-Key: <attempt.idempotencyKey>`. The first
# attempt still sees an `AmbiguousError`, but the API's key contract makes a repeat
# safe, so the attempt ends `threw` and WOML retries. The retry carries the *same*
# key; the server finds the stored response and replays it
# (`Idempotent-Replayed: true`) instead of charging again.

# %%
api.reset()
api.drop_response_next(1)

# %%
%%woml --simulate --payload demo --out with_key
<step id="charge" retry="3" retry-delay="200ms">
  <script>
    const res = await services.http.request({
      method: "POST",
      url: `${context.payload.url}/charges`,
      json: { amount: 2500, currency: "eur" },
      idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },
    }, { name: "create-charge" });
    console.log(`attempt ${attempt.number}: key ${attempt.idempotencyKey}, `
      + `Idempotent-Replayed: ${res.headers["idempotent-replayed"] || "absent"}`);
    return res.data;
  </script>
</step>

# %%
s = with_key.steps["charge"]
print("run:", with_key.status, "| outcomes:", [a.outcome for a in s.attempts])
for line in s.attempts[-1].logs:
    print(line)
print("what the server did:", [r.outcome for r in api.requests])
print("with a key, charges recorded:", len(api.records("charges")))

# %% [markdown]
# The two runs on one time axis (`wm.compare`, each run's time from its own start):
# without a key the first attempt ends `ambiguous` and nothing follows; with the key
# the same lost response ends `threw`, and 200 ms later the retry succeeds. Select an
# attempt to see its call and what the server did with its key.

# %%
wm.compare(no_key, with_key, labels=["no key", "Idempotency-Key"])

# %% [markdown]
# Two different "replays" are in play — do not mix them up:
#
# - **`Idempotent-Replayed: true`** is the *server's* answer: it saw the key before
#   and returned the stored response without executing again.
# - **`response.replayed: true`** is *WOML's*: a named call whose 2xx response is in
#   the journal is not sent again at all (spec §4.3, notebook 04).
#
# Idempotency is an external contract: the key only helps because this API documents
# how it stores repeated keys. Without that contract a retry may still duplicate.

# %% [markdown]
# ## One key per logical step
#
# The key is the same for every attempt of a step (spec §3.5) — that is what lets
# the server recognise the retry. Do not build a new key per attempt.

# %%
%%woml --simulate --out three
<step id="charge" retry="3" retry-delay="1s">
  <script>
    console.log(attempt.idempotencyKey);
    if (attempt.number < 3) throw new Error("busy");
    return attempt.idempotencyKey;
  </script>
</step>

# %%
s = three.steps["charge"]
keys = [a.idempotency_key for a in s.attempts]
for a in s.attempts:
    print(f"attempt {a.number}: {a.idempotency_key}")
print("one key for all attempts:", len(set(keys)) == 1 and keys[0] == s.result)

# %% [markdown]
# A new run is a new logical execution, so it gets a new key — run ids are random:

# %%
%%woml --simulate --out again
<step id="charge" retry="3" retry-delay="1s">
  <script>
    console.log(attempt.idempotencyKey);
    if (attempt.number < 3) throw new Error("busy");
    return attempt.idempotencyKey;
  </script>
</step>

# %%
print(three.id, three.steps["charge"].idempotency_key)
print(again.id, again.steps["charge"].idempotency_key)
print("a new run, a new key:",
      three.steps["charge"].idempotency_key != again.steps["charge"].idempotency_key)

# %% [markdown]
# ## Pinning the run id
#
# The key is a UUIDv5 of the run id and the step id (spec §3.5):
#
#     NAMESPACE = uuid5(NAMESPACE_URL, "urn:woml:idempotency-key")
#     key       = str(uuid5(NAMESPACE, f"{run_id}/{step_id}"))
#
# `--run-id` pins the run id, so the key is reproducible — use a business identifier
# (an order number) and a resubmission of the same order sends the same key.

# %%
%%woml --simulate --run-id order-42 --out pinned
<step id="charge">
  <script>
    return attempt.idempotencyKey;
  </script>
</step>

# %%
import uuid

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:woml:idempotency-key")
print("namespace:", NAMESPACE)
expected = str(uuid.uuid5(NAMESPACE, "order-42/charge"))
print("computed: ", expected)
print("WOML:     ", pinned.steps["charge"].result)
print("the formula matches:", expected == pinned.steps["charge"].result)
print("spec example run-1/charge:", uuid.uuid5(NAMESPACE, "run-1/charge"))

# %%
api.stop()
