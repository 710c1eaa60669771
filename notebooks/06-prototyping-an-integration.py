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
# ledger. A fourth, **record and replay** (spec §10.4), lets the notebook run with no
# provider and no network at all.
#
# **One switch, `MODE`**, in the cell below (or the environment variable
# `WOML_06_MODE`):
#
# | `MODE` | what runs |
# |---|---|
# | `"live"` (the default) | the provider runs in this notebook; each run's calls are recorded in a temporary folder |
# | `"offline"` | no provider is started and no socket is opened: every call is answered from the recording shipped beside this notebook, `cassettes/06-prototyping-an-integration/`, and what the provider saw comes from that recording |
# | `"record"` | live, and the shipped recording is made afresh from this run |

# %% tags=["parameters"]
import os

MODE = os.environ.get("WOML_06_MODE", "live")   # "live", "offline" or "record"

# %%
import secrets
import shutil
import tempfile
from pathlib import Path

if MODE not in ("live", "offline", "record"):
    raise ValueError(f"MODE (WOML_06_MODE) is {MODE!r}; use 'live', 'offline' or 'record'")

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

from woml_magic.demo import PaymentProvider, ProviderRecording
from woml_magic.timeline import lineage_table

SHIPPED = Path("cassettes/06-prototyping-an-integration")   # beside this notebook
if MODE == "record":   # made afresh: one cassette a run, NAME.jsonl
    shutil.rmtree(SHIPPED, ignore_errors=True)
    SHIPPED.mkdir(parents=True)
if MODE == "offline":
    provider = ProviderRecording(SHIPPED)   # files only: nothing listens, nothing is sent
else:
    provider = PaymentProvider(secret_key=os.environ["PROVIDER_TEST_KEY"]).start()
tapes = Path(workdir.name) if MODE == "live" else SHIPPED


def tape(name):
    """The cassette flag of the cell that runs `name` (spec §10.4)."""
    if MODE == "offline":
        return f"--replay {provider.tape(name)}"
    return f"--record {tapes / name}.jsonl --record-mode overwrite"


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
#
# `{tape("keyed")}` at the end of the line is IPython putting in the value of
# `tape("keyed")`: live, `--record …/keyed.jsonl` (the run's calls are written to a
# cassette as they end); offline, `--replay cassettes/…/keyed.jsonl` (they are answered
# from the shipped one). The cell is the same either way.

# %%
%%woml --simulate --payload shop --out keyed --fault "create-charge@1=drop-response" {tape("keyed")}
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
# carried the step's key, and its ledger says what really happened. (Offline,
# `provider` is the recording: its ledger is the charges the provider answered that it
# created while the recording was made, lost answers included.)

# %%
lineage_table(keyed, records=provider.records("charges"))

# %% [markdown]
# Request 1 got no answer, but the provider *replayed* request 2 — it had stored an
# answer under the key — so request 1 did execute, and its answer was lost. One
# charge. (Attempt 2 did not send the customer again: its answer was in the journal,
# so the named call was reattached, spec §4.3.)
#
# ## The same lineage, live and from a recording
#
# Live, the cell above recorded its calls. Replay them: the same workflow, the same
# run id (so the same key, spec §3.5) and the same fault, with no provider behind it.
# The replay matches each request by method, URL, body and key, and keeps the
# provider's key contract (spec §10.4); the lineage must come out the same, line for
# line.

# %%
import woml_magic as wm

if MODE == "offline":
    print("offline, `keyed` above is already the replay of the shipped recording; the live "
          "half needs the provider: set MODE = \"live\" to see both")
    display(lineage_table(keyed))
else:
    replayed = wm.run(keyed.workflow, shop, clock="simulated", run_id=keyed.id,
                      replay=tapes / "keyed.jsonl", faults=["create-charge@1=drop-response"],
                      secrets={"PROVIDER_TEST_KEY": os.environ["PROVIDER_TEST_KEY"]})
    display(lineage_table(keyed), lineage_table(replayed))
    print("the same lineage, live and replayed:",
          str(lineage_table(keyed)) == str(lineage_table(replayed)))

# %% [markdown]
# ## The same checkout without the charge's key
#
# A fresh ledger, then the same cell with the charge's `idempotency` line left out.
# (It says `--no-lint`: without it, the key linter would warn above the timeline
# that the named `POST` create-charge carries no idempotency key — the very mistake
# this cell shows.)

# %%
provider.reset()

# %%
%%woml --simulate --payload shop --out unkeyed --fault "create-charge@1=drop-response" --no-lint {tape("unkeyed")}
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
%%woml --simulate --payload shop --out again --no-lint {tape("again")}
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
%%woml --simulate --payload shop --out typo {tape("typo")}
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
# Search it, the cassettes, and every `Run`, for the key. Then ask the provider — the
# one party that should have it — what it received. (Offline there is no provider to
# ask: the recording says what it received, and it keeps every `Authorization` header
# as `•••`, so which key came is known only to the provider that was recorded. What it
# *answered* is in the recording: 401 to a wrong key.)

# %%
key = os.environ["PROVIDER_TEST_KEY"]
runs = [keyed, unkeyed, again, typo]
print("the key in any Run:", any(key in repr(r.steps) + repr(r.events) for r in runs))
files = [f for f in [*Path(workdir.name).rglob("*"), *tapes.glob("*.jsonl")] if f.is_file()]
print("the key in the journal's and the cassettes' files:",
      any(key.encode() in f.read_bytes() for f in files))
print("requests the provider received since the reset:", len(provider.requests))
if MODE == "offline":
    answered = [r.status for r in provider.requests]
    print("  with Authorization kept as •••:",
          sum(r.headers.get("Authorization") == "•••" for r in provider.requests))
    print("  answered 200 (the key was right):", answered.count(200))
    print("  answered 401 (the key was wrong):", answered.count(401))
else:
    sent = [r.headers.get("Authorization") for r in provider.requests]
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
# | `--record FILE`, `--replay FILE`, `ProviderRecording(folder)` | a prototype's calls recorded once and replayed offline, the same lineage, no network and no secret in the files |
#
# When the real test mode comes, the URL and the key change; what the prototype
# showed about keys, lost responses and secrets does not.
