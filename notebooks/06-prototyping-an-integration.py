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
# # 06 · Prototyping an integration
#
# Before you point a workflow at a payment provider's test mode, try it against one
# that runs in this notebook: `PaymentProvider` mimics the most used payment API on
# 127.0.0.1 — `/v1/customers` and `/v1/charges`, form-encoded parameters, a
# `Bearer` test key, `Idempotency-Key` with `Idempotent-Replayed: true`. Three tools
# of spec §10 make the prototype honest: **secrets** the script never sees,
# **injected faults** on any API, and the **key lineage** beside the provider's
# ledger.

# %%
import os
import secrets
import tempfile
from pathlib import Path

# The test key comes from the environment (CI sets PROVIDER_TEST_KEY); when it is not
# set we invent one. With a real provider you would run `%woml secret PROVIDER_TEST_KEY`
# instead: it asks for the key with a password prompt and keeps it in kernel memory only.
if "PROVIDER_TEST_KEY" in os.environ:
    print("PROVIDER_TEST_KEY: taken from the environment")
else:
    os.environ["PROVIDER_TEST_KEY"] = "sk_test_" + secrets.token_hex(12)
    print("PROVIDER_TEST_KEY: none was set, so this notebook made one up")

%load_ext woml_magic
%config Woml.secrets = ["PROVIDER_TEST_KEY"]
workdir = tempfile.TemporaryDirectory()
journal = str(Path(workdir.name) / "journal.sqlite3")   # a real journal, to search later
%config Woml.journal = journal

from woml_magic.demo import PaymentProvider
from woml_magic.timeline import lineage_table

provider = PaymentProvider(secret_key=os.environ["PROVIDER_TEST_KEY"]).start()
shop = {"url": provider.url, "email": "ada@example.com", "order": 7}   # --payload shop
print(provider)

# %% [markdown]
# ## A checkout whose charge response is lost
#
# One step, two named calls. `services.secret("PROVIDER_TEST_KEY")` is a reference,
# not the key: the kernel puts the value in when it sends (spec §10.1). `form`
# sends the parameters the way this family of APIs reads them: `metadata: {order: 7}`
# goes as `metadata[order]=7`.
#
# Two keys, for two kinds of repeat. The customer's comes from the shop's own data,
# so however many runs ask, there is one customer for ada@example.com. The charge's is
# the step's `attempt.idempotencyKey`, the same for every attempt of this run
# (spec §3.5).
#
# `--fault "create-charge@1=drop-response"` sends attempt 1's charge, lets the
# provider charge, and throws the answer away: a lost response, on demand, on any API
# (spec §10.2).

# %%
%%woml --simulate --payload shop --out keyed --fault "create-charge@1=drop-response"
<step id="checkout" retry="3" retry-delay="200ms">
  <script>
    const auth = { Authorization: "Bearer " + services.secret("PROVIDER_TEST_KEY") };
    const customer = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/customers`, headers: auth,
      form: { email: context.payload.email },
      idempotency: { header: "Idempotency-Key", value: `customer-${context.payload.email}` },
    }, { name: "create-customer" });
    const charge = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/charges`, headers: auth,
      form: { amount: 2500, currency: "eur", customer: customer.data.id,
              metadata: { order: context.payload.order } },
      idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },
    }, { name: "create-charge" });
    return { customer: customer.data.id, charge: charge.data.id };
  </script>
</step>

# %% [markdown]
# Attempt 1 met an `AmbiguousError`; the charge carried a key, so WOML retried
# (spec §4.2). The key lineage says what the provider did with each request that
# carried the step's key, and its ledger says what really happened:

# %%
lineage_table(keyed, records=provider.records("charges"))

# %% [markdown]
# Request 1 got no answer, but the provider *replayed* request 2 — it had stored an
# answer under the key — so request 1 did execute, and its answer was lost. One
# charge. (Attempt 2 did not send the customer again: its answer was in the journal,
# so the named call was reattached, spec §4.3.)
#
# ## The same checkout without the charge's key
#
# A fresh ledger, then the same cell with the charge's `idempotency` line left out.
# (It says `--no-lint`: without it, the key linter would warn above the timeline
# that the named `POST` create-charge carries no idempotency key — the very mistake
# this cell shows.)

# %%
provider.reset()

# %%
%%woml --simulate --payload shop --out unkeyed --fault "create-charge@1=drop-response" --no-lint
<step id="checkout" retry="3" retry-delay="200ms">
  <script>
    const auth = { Authorization: "Bearer " + services.secret("PROVIDER_TEST_KEY") };
    const customer = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/customers`, headers: auth,
      form: { email: context.payload.email },
      idempotency: { header: "Idempotency-Key", value: `customer-${context.payload.email}` },
    }, { name: "create-customer" });
    const charge = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/charges`, headers: auth,
      form: { amount: 2500, currency: "eur", customer: customer.data.id,
              metadata: { order: context.payload.order } },
    }, { name: "create-charge" });
    return { customer: customer.data.id, charge: charge.data.id };
  </script>
</step>

# %%
a = unkeyed.steps["checkout"].attempts[-1]
print("run:", unkeyed.status, "| attempts:", len(unkeyed.steps["checkout"].attempts),
      "| outcome:", a.outcome)
print("charges recorded:", len(provider.records("charges")))

# %% [markdown]
# The guard did its job: nothing proved a repeat safe, so WOML failed the step
# closed instead of charging again. But the run *failed*, and the obvious thing to do
# with a failed cell is to run it again. The network is fine this time (no
# `--fault`):

# %%
%%woml --simulate --payload shop --out again --no-lint
<step id="checkout" retry="3" retry-delay="200ms">
  <script>
    const auth = { Authorization: "Bearer " + services.secret("PROVIDER_TEST_KEY") };
    const customer = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/customers`, headers: auth,
      form: { email: context.payload.email },
      idempotency: { header: "Idempotency-Key", value: `customer-${context.payload.email}` },
    }, { name: "create-customer" });
    const charge = await services.http.request({
      method: "POST", url: `${context.payload.url}/v1/charges`, headers: auth,
      form: { amount: 2500, currency: "eur", customer: customer.data.id,
              metadata: { order: context.payload.order } },
    }, { name: "create-charge" });
    return { customer: customer.data.id, charge: charge.data.id };
  </script>
</step>

# %%
lineage_table(again, records=provider.records("charges"))

# %% [markdown]
# The customer was replayed (its key came from the shop's data), the charge was not:
# Ada has paid twice for order 7. Without a key the provider cannot tell a retry from
# a new charge; notebook 03 shows the key at work, and `--run-id` there makes the
# key survive a re-run too.
#
# ## Where the key went
#
# A provider that gets a wrong key quotes it back in its 401. Here the script sends
# the key with a stray `x` pasted after it, catches the error and returns what the
# provider said — as the script saw it:

# %%
%%woml --simulate --payload shop --out typo
<step id="list">
  <script>
    try {
      await services.http.request({
        url: `${context.payload.url}/v1/charges`,
        headers: { Authorization: "Bearer " + services.secret("PROVIDER_TEST_KEY") + "x" },
      }, { name: "list-charges" });
    } catch (e) {
      return `${e.status}: ${e.data.error.message}`;
    }
  </script>
</step>

# %%
print("the provider said:", typo.steps["list"].result)

# %% [markdown]
# The echo was scrubbed before the script, the `Run` or the journal saw it: the key
# became its reference again. The journal on disk holds every run of this notebook:

# %%
%woml runs

# %% [markdown]
# Search it, and every `Run`, for the key. Then ask the provider — the one party
# that should have it — what it received:

# %%
key = os.environ["PROVIDER_TEST_KEY"]
runs = [keyed, unkeyed, again, typo]
print("the key in any Run:", any(key in repr(r.steps) + repr(r.events) for r in runs))
print("the key in the journal's files:",
      any(key.encode() in f.read_bytes() for f in Path(workdir.name).rglob("*") if f.is_file()))
sent = [r.headers.get("Authorization") for r in provider.requests]
print("requests the provider received since the reset:", len(sent))
print("  with the key:", sent.count("Bearer " + key))
print("  with the key and a stray x:", sent.count("Bearer " + key + "x"))

# %%
provider.stop()

# %% [markdown]
# ## Summary
#
# | tool | what it gives a prototype |
# |---|---|
# | `services.secret("NAME")`, `%woml secret NAME`, `Woml.secrets` | the key is sent, never seen: not by the script, the `Run`, the journal or the notebook, even when a server echoes it |
# | `--fault "CALL@ATTEMPT=KIND"` | the failures a real network has, on any API, when you want them |
# | `lineage_table(run, records=...)` | every request that carried the key, the server's verdict, and its ledger |
#
# When the real test mode comes, the URL and the key change; what the prototype
# showed about keys, lost responses and secrets does not.
