"""``ProviderRecording``: a payment provider as its cassettes recorded it (spec §10.4,
§8): the ledger and the requests a notebook reads offline, from real recordings of a
real ``PaymentProvider`` on 127.0.0.1, read after the provider is stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.demo import PaymentProvider, ProviderRecording
from woml_magic.errors import CassetteError
from woml_magic.timeline.lineage import ledger_line

KEY = "sk_test_" + "5eCr3t" * 4

#: One step, a customer and a charge; the charge's key is the step's when ``keyed``.
CHECKOUT = """
<step id="checkout" retry="3" retry-delay="200ms">
  <script>
    const auth = {{ Authorization: "Bearer " + services.secret("KEY") }};
    const customer = await services.http.request({{
      method: "POST", url: `${{context.payload}}/v1/customers`, headers: auth,
      form: {{ email: "ada@example.com" }},
      idempotency: {{ header: "Idempotency-Key", value: "customer-ada" }},
    }}, {{ name: "create-customer" }});
    const charge = await services.http.request({{
      method: "POST", url: `${{context.payload}}/v1/charges`, headers: auth,
      form: {{ amount: 2500, currency: "eur", customer: customer.data.id }},
      {key}
    }}, {{ name: "create-charge" }});
    return charge.data.id;
  </script>
</step>
"""
KEYED = CHECKOUT.format(
    key='idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey },'
)
UNKEYED = CHECKOUT.format(key="")
LOST = ["create-charge@1=drop-response"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A folder of three recorded runs (a keyed checkout whose answer is lost, then,
    after a reset, the unkeyed one twice) and what the live provider said at the end."""
    folder = tmp_path_factory.mktemp("recording")
    with PaymentProvider(secret_key=KEY) as provider:
        secrets = {"KEY": KEY}
        wm.run(
            KEYED,
            provider.url,
            clock="simulated",
            secrets=secrets,
            record=folder / "keyed.jsonl",
            faults=LOST,
        )
        keyed_charges = provider.records("charges")
        provider.reset()
        for name in ("unkeyed", "again"):
            wm.run(
                UNKEYED,
                provider.url,
                clock="simulated",
                secrets=secrets,
                record=folder / f"{name}.jsonl",
            )
        live: dict[str, object] = {
            "url": provider.url,
            "keyed": keyed_charges,
            "charges": provider.records("charges"),
            "requests": provider.requests,
        }
    return folder, live


def test_the_ledger_is_what_the_provider_answered_it_created(
    recorded: tuple[Path, dict[str, object]],
) -> None:
    # A lost answer's charge counts (the provider made it); a replay does not.
    folder, live = recorded
    recording = ProviderRecording(folder)
    assert recording.url == live["url"]
    assert recording.records("charges") == []  # nothing played yet
    assert recording.tape("keyed") == str(folder / "keyed.jsonl")
    assert recording.records("charges") == live["keyed"]
    assert ledger_line(recording.records("charges")) == "1 charge recorded"
    recording.reset()
    recording.tape("unkeyed")
    recording.tape("again")
    recording.tape("again")  # played again: the provider saw it once
    assert recording.records("charges") == live["charges"]
    assert ledger_line(recording.records("charges")) == "2 charges recorded: a duplicate"
    assert [c["id"] for c in recording.records("customers")] == ["cus_0001"]


def test_the_requests_are_the_providers_with_their_answers_and_no_key(
    recorded: tuple[Path, dict[str, object]],
) -> None:
    folder, live = recorded
    recording = ProviderRecording(folder)
    recording.tape("unkeyed")
    recording.tape("again")
    assert [(r.method, r.path, r.status) for r in recording.requests] == [
        (r.method, r.path, r.status)
        for r in live["requests"]  # type: ignore[attr-defined]
    ]
    assert [r.replayed for r in recording.requests] == [False, False, True, False]
    assert {r.headers["Authorization"] for r in recording.requests} == {"•••"}
    assert [r.tape for r in recording.requests] == ["unkeyed"] * 2 + ["again"] * 2
    assert [r.name for r in recording.requests] == ["create-customer", "create-charge"] * 2
    assert KEY not in repr(recording.requests)


def test_a_tape_replays_at_the_recorded_url_with_nothing_listening(
    recorded: tuple[Path, dict[str, object]],
) -> None:
    # spec §10.4: the URL is where the recorded provider listened; the replay sends
    # nothing (the provider is stopped), and gets the recorded charge.
    folder, live = recorded
    recording = ProviderRecording(folder)
    run = wm.run(
        KEYED,
        recording.url,
        clock="simulated",
        replay=recording.tape("keyed"),
        faults=LOST,
        secrets={"KEY": "another value"},
    )
    assert run.status == "succeeded"
    assert run.steps["checkout"].result == live["keyed"][0]["id"]  # type: ignore[index]
    assert "nothing listens at " + recording.url in repr(recording)
    assert "3 runs, 7 exchanges" in repr(recording)


def test_an_unknown_tape_is_refused_naming_the_recorded_ones(
    recorded: tuple[Path, dict[str, object]],
) -> None:
    with pytest.raises(
        CassetteError,
        match=r"holds no recording 'keyd'; it holds 'again', "
        r"'keyed', 'unkeyed'",
    ):
        ProviderRecording(recorded[0]).tape("keyd")


def test_a_folder_that_is_not_a_recording_is_refused_saying_why(
    recorded: tuple[Path, dict[str, object]],
    tmp_path: Path,
) -> None:
    with pytest.raises(CassetteError, match="no such folder of cassettes"):
        ProviderRecording(tmp_path / "none")
    with pytest.raises(CassetteError, match=r"holds no cassette \(\*\.jsonl\)"):
        ProviderRecording(tmp_path)
    # Two providers' recordings in one folder: which URL would a replay use?
    keyed = (recorded[0] / "keyed.jsonl").read_text(encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(keyed, encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(keyed.replace("127.0.0.1:", "localhost:"), encoding="utf-8")
    with pytest.raises(CassetteError, match="recorded against 2 base URLs"):
        ProviderRecording(tmp_path)
    # A broken cassette is the cassette reader's error, with its line.
    (tmp_path / "b.jsonl").write_text(json.dumps({"woml-cassette": 1}) + "\n{}\n", encoding="utf-8")
    with pytest.raises(CassetteError, match=r"b\.jsonl, line 2: an exchange needs"):
        ProviderRecording(tmp_path)
