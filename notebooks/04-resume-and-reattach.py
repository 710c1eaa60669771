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
# # 04 · Resume and reattach
#
# Every event of a run is journaled to SQLite before it takes effect (spec §5.2):
# "attempt started" and "call started" are committed before the script or the
# request proceeds. So when the process running a workflow dies — `kill -9`, a
# crashed kernel, a lost machine — the journal knows exactly which attempt was in
# flight, and `--resume` can continue the run without guessing (spec §5.3).
#
# Here a separate Python process runs a checkout on the real clock, and we kill it
# with SIGKILL while its charge request is in flight.

# %%
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

# %% [markdown]
# The workflow: an `order` step, then a `pay` step that creates a customer and a
# charge through two **named** calls, both with the step's idempotency key.

# %%
CHECKOUT = '''
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
'''

# %% [markdown]
# ## Kill a run mid-flight
#
# The child process runs the workflow with `wm.run(..., journal=...)`, as a kernel
# would. The demo API answers the customer at once but holds the charge's response
# for 2 s — the charge itself already exists. As soon as the API has received the
# charge, we kill the child.

# %%
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

# %% [markdown]
# The child died without hearing back, but the charge exists. Wait until the API
# has stored the held response under its key, then look at the journal:
# `%woml runs` lists the run as `unfinished`. (IPython expands `$journal` in a
# magic's line to the Python variable's value.)

# %%
while not all(r.answered for r in api.requests):
    time.sleep(0.05)

# %%
%woml runs --journal $journal

# %% [markdown]
# ## Resume: the interrupted attempt fails closed
#
# `%%woml --resume RUN_ID` re-executes the run with the same document (its
# fingerprint is checked) and keeps its id, clock and payload. The `order` step
# already succeeded, so it is **reattached**: its result comes from the journal and
# it does not run again. The `pay` attempt started but never finished: WOML cannot
# know whether its effects happened, so it records it `interrupted` and fails
# closed, telling you what to do.

# %%
%%woml --journal $journal --resume checkout-1 --out resumed
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

# %%
print("order:", resumed.steps["order"].status)
pay = resumed.steps["pay"]
print("pay:", pay.status, "| attempt 1:", pay.attempts[0].outcome)
print(pay.attempts[0].error.message)

# %% [markdown]
# ## Check, then `--retry-interrupted`
#
# The message says: check the external system. The API shows one customer and one
# charge. Because `pay` sends idempotency keys, running it again is safe:
# `--retry-interrupted` counts the interrupted attempt as used and starts attempt 2
# at once, **with the same idempotency key**.
#
# Within the step, the `create-customer` call's 2xx response is in the journal, so
# attempt 2 does not send it again: it is **reattached** (`replayed: true`, spec §4.3)
# and the API receives no new customer request. The `create-charge` call never got
# its response, so it is sent again with the same key — and the *server* replays
# its stored charge.

# %%
print("customers:", len(api.records("customers")), "| charges:", len(api.records("charges")))
customer_requests_before = sum(r.path == "/customers" for r in api.requests)
requests_before = len(api.requests)

# %%
%%woml --journal $journal --resume checkout-1 --retry-interrupted --out retried
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

# %%
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

# %% [markdown]
# ## The whole history
#
# A resumed run's `Run` shows everything — attempts and waits from before the
# crash included. `%woml show RUN_ID` draws it again from the journal at any time.

# %%
%woml runs --journal $journal

# %%
%woml show checkout-1 --journal $journal

# %%
api.stop()
workdir.cleanup()
