"""The teaching notebooks run top to bottom in a real kernel (STYLE 12: docs are executed).

Every ``notebooks/*.ipynb`` is executed with nbclient in a fresh ipykernel whose working
directory is a temporary one (so no ``.woml`` journal lands in the repository). A
notebook fails on any error output or any traceback on stderr, and each lesson is
checked against the facts it prints: the charge counts of the duplicate-charge lesson
(spec §4.2, §8), the schedules of spec §3.1, the fail-closed outcomes of spec §3.2,
the key formula of spec §3.5, the resume message of spec §5.3, the parity of the
local and Temporal engines of spec §9, the secrets, faults and key lineage of spec
§10 and the retry storms of the lab, spec §11. Each committed notebook is also exactly
what its percent-format source builds (``notebooks/build.py``).
"""

# nbformat ships no type information (STYLE 8).
# mypy: disable-error-code="no-untyped-call,no-any-return"

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.kernel

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))

#: spec §5.3, verbatim: the interrupted attempt's error message.
INTERRUPTED_MESSAGE = (
    "attempt 1 of pay was interrupted; whether its effects happened is unknown. Check the "
    "external system, then resume with --retry-interrupted to run it again with the same "
    "idempotency key."
)

#: Lines each notebook must print (exactly, as whole lines). A notebook not listed is
#: still executed and checked for errors.
FACTS: dict[str, list[str]] = {
    "01-retries-and-backoff.ipynb": [
        # spec §2.2: retry counts attempts, not retries after the first
        "attempts: 4",
        # spec §3.1: exponential 1s → waits 1s, 2s before attempt 3 succeeds
        "outcomes: ['threw', 'threw', 'succeeded']",
        "waits (s): [1.0, 2.0]",
        # spec §3.1's own example: retry="10" exponential 1s max 30s
        "capped waits: [1, 2, 4, 8, 16, 30, 30, 30, 30]",
        "simulated time at the end: 151s",
        # spec §2.2: retry-max-delay has no effect with fixed (the header says so)
        "3 attempts · fixed 5s (retry-max-delay has no effect with fixed backoff)",
        "real-clock waits (s): [0.2, 0.2]",
        "same schedule: True",
    ],
    "02-failing-closed.ipynb": [
        "    TypeError: result.items[3].amount is NaN",  # spec §3.3: the path is named
        "timed out at 30s of simulated time",  # spec §5.1: judged on the run's clock
        "outcome: cancelled",
        "charges the API recorded: 1",
        "the cell was interrupted",
        "after all that: succeeded",  # spec §3.2: the kernel stays healthy
    ],
    "03-idempotency-keys.ipynb": [
        "naive retry, charges recorded: 2",
        # spec §4.2: without a key the run fails closed, but the charge did happen
        "run: failed | attempts: 1 | outcome: ambiguous",
        "without a key, charges recorded: 1",
        # with the key the retry is replayed by the server: exactly one charge
        "run: succeeded | outcomes: ['threw', 'succeeded']",
        "what the server did: ['dropped', 'replayed']",
        "with a key, charges recorded: 1",
        "one key for all attempts: True",
        "a new run, a new key: True",
        # spec §3.5: the namespace, the formula, and the spec's example key
        "namespace: b7c33995-d21b-55a8-81d6-82ec4d685111",
        "the formula matches: True",
        "spec example run-1/charge: 4e3b1916-7901-53c2-9575-f70651305d8b",
    ],
    "04-resume-and-reattach.ipynb": [
        "child exit code: -9",
        "charges the API recorded: 1",
        # spec §5.3: succeeded steps are reattached; the open attempt fails closed
        "order: reattached",
        "pay: failed-closed | attempt 1: interrupted",
        INTERRUPTED_MESSAGE,
        # --retry-interrupted: the next attempt, the same key
        "run: succeeded | pay: ['interrupted', 'succeeded']",
        "same key on both attempts: True",
        # spec §4.3: the journaled call is reattached and not sent again
        "  create-customer: status 201, replayed True",
        "  create-charge: status 201, replayed False",
        "new requests to the API: [('/charges', 'replayed')]",
        "customer requests unchanged: True",
        "after resume, customers: 1 | charges: 1",
    ],
    "05-scale-out-on-temporal.ipynb": [
        # spec §9: the same document on both engines, the same semantics and Run
        "same status: True",
        "same reserve outcomes: True",
        "same waits scheduled (s): True",
        "same confirm result: True",
        # spec §3.5 from the WOML run id, which is the Temporal workflow id
        "keys follow §3.5 on both engines: True",
        # spec §9: the Run rebuilt from the workflow's history alone
        "rebuilt from the history: succeeded ['threw', 'threw', 'succeeded']",
        "the same events as the run the kernel followed: True",
        # spec §3.2 on Temporal: a timeout fails closed after one attempt of three
        "run: failed | busy: failed-closed | attempts: ['timeout']",
    ],
    "06-prototyping-an-integration.ipynb": [
        # the test's key reached the kernel through Woml.secrets' environment variable
        "PROVIDER_TEST_KEY: taken from the environment",
        # spec §4.2: without the charge's key the lost response fails closed...
        "run: failed | attempts: 1 | outcome: ambiguous",
        "charges recorded: 1",
        # spec §10.1: a server's echo of the key is scrubbed back to its reference
        "the provider said: 401: Invalid API Key provided: "
        "\u27e6woml-secret:PROVIDER_TEST_KEY\u27e7x",
        "the key in any Run: False",
        "the key in the journal's and the cassettes' files: False",
        # spec §10.4: the keyed run replayed from its recording has its lineage, line for line
        "the same lineage, live and replayed: True",
        # ...and the provider did receive it: 4 requests with the key, 1 with the typo
        "requests the provider received since the reset: 5",
        "  with the key: 4",
        "  with the key and a stray x: 1",
    ],
    "07-retry-storms.ipynb": [
        # spec §3.1 against contention: every wave has one winner, 1 + … + 10 + 40 × 10
        "real scripts: 50 clients, 455 calls, 10 succeeded",
        "WOML's schedule sent more calls than full jitter at every seed: True",
        "the outage ends at 40s",
        "with a 10% budget the server recovered earlier: True",
        # spec §10.4: one client's real runs, compared: attempts ** layers requests
        "1 layer: 4 requests for one client",
        "2 layers: 16 requests for one client",
        # spec §11: the same policy in other engines, with what cannot be said
        "temporal: same waits and attempts as WOML: True",
        "stepfunctions: same waits and attempts as WOML: False",
    ],
}

#: Environment variables a notebook's kernel gets besides the test's own. Notebook 06
#: reads its provider's test key from PROVIDER_TEST_KEY (Woml.secrets, spec §10.1): a
#: fresh one per session, so a leak cannot hide behind a value written in the notebook.
PROVIDER_TEST_KEY = "sk_test_" + secrets.token_hex(12)
NOTEBOOK_ENV: dict[str, dict[str, str]] = {
    "06-prototyping-an-integration.ipynb": {"PROVIDER_TEST_KEY": PROVIDER_TEST_KEY},
}

#: spec §3.2: in notebook 02 every step has retry="3" and each ends after attempt 1.
FAIL_CLOSED_OUTCOMES = [
    "timeout",
    "timeout",
    "invalid-json",
    "oversized",
    "crash",
    "cancelled",
    "ambiguous",
    "ambiguous",
    "interrupted",
]


def kernel_env(tmp_path: Path) -> dict[str, str]:
    """A kernel environment that writes nothing outside ``tmp_path``."""
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        path = tmp_path / name.lower()
        path.mkdir(exist_ok=True)
        env[name] = str(path)
    env["PYTHONPATH"] = os.pathsep.join([str(NOTEBOOKS_DIR.parent), env.get("PYTHONPATH", "")])
    return env


def execute(path: Path, cwd: Path, nb: nbformat.NotebookNode | None = None,
            env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` (or ``nb``, its cells changed) in ``cwd``, its
    kernel's environment ``kernel_env`` with the notebook's own and ``env`` added."""
    nb = nbformat.read(path, as_version=4) if nb is None else nb
    client = NotebookClient(
        nb,
        timeout=90,
        kernel_name="python3",
        allow_errors=True,  # collect every error, then report them all below
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(cwd=str(cwd), env={**kernel_env(cwd), **NOTEBOOK_ENV.get(path.name, {}),
                                      **(env or {})})
    return nb


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """Every error output and every stderr traceback, with the cell that produced it."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                found.append(f"cell {i}: {out.ename}: {out.evalue}\n{cell.source}")
            elif out.output_type == "stream" and out.name == "stderr" and "Traceback" in out.text:
                found.append(f"cell {i} stderr:\n{out.text}")
    return found


def stdout_lines(nb: nbformat.NotebookNode) -> list[str]:
    text = "".join(
        out.text
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type == "stream" and out.name == "stdout"
    )
    return text.splitlines()


@pytest.fixture(scope="module")
def executed() -> dict[str, nbformat.NotebookNode]:
    """Each notebook executed once, lazily, in its own temporary working directory."""
    return {}


def run_once(
    name: str, executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> nbformat.NotebookNode:
    if name not in executed:
        cwd = tmp_path_factory.mktemp(name.split(".", maxsplit=1)[0])
        executed[name] = execute(NOTEBOOKS_DIR / name, cwd)
        # The notebooks keep their journals in memory or in their own temp dir.
        assert not (cwd / ".woml").exists(), f"{name} left a journal in its working directory"
    return executed[name]


def test_there_are_notebooks_to_run() -> None:
    assert len(NOTEBOOKS) >= 4, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_without_errors(
    path: Path,
    executed: dict[str, nbformat.NotebookNode],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    nb = run_once(path.name, executed, tmp_path_factory)
    assert problems(nb) == []
    lines = stdout_lines(nb)
    missing = [fact for fact in FACTS.get(path.name, []) if fact not in lines]
    assert missing == [], "\n".join(lines)


def test_failing_closed_notebook_stops_every_class_after_one_attempt(
    executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # spec §3.2: every outcome but `threw` fails closed, whatever `retry` says.
    nb = run_once("02-failing-closed.ipynb", executed, tmp_path_factory)
    pattern = re.compile(r"  attempt (\d+): (\S+)")
    attempts = [m.groups() for line in stdout_lines(nb) if (m := pattern.fullmatch(line))]
    assert attempts == [("1", outcome) for outcome in FAIL_CLOSED_OUTCOMES]


def test_notebook_04_reuses_the_interrupted_attempts_key(
    executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # spec §5.3: --retry-interrupted runs the step again with the same idempotency key;
    # the key itself is the spec §3.5 formula for run checkout-1, step pay.
    from woml_magic.model import idempotency_key

    nb = run_once("04-resume-and-reattach.ipynb", executed, tmp_path_factory)
    shown = "\n".join(
        out.data.get("text/plain", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
    )
    assert f"key     {idempotency_key('checkout-1', 'pay')}" in shown


def test_notebook_05_shows_the_temporal_run_alike_live_and_from_its_history(
    executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # spec §9: the timeline the kernel drew while following the Temporal run is the one
    # rebuilt from the workflow's history, and its keys are spec §3.5's from the WOML
    # run id (the workflow id), as the local run's are from its own.
    from woml_magic.model import idempotency_key

    nb = run_once("05-scale-out-on-temporal.ipynb", executed, tmp_path_factory)
    shown = {
        cell.source.splitlines()[0]: out.data["text/plain"]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
    }
    local = shown["%%woml --out local_run"]
    live = shown["%%woml --engine temporal --out temporal_run"]
    rebuilt = shown["rebuilt = %woml show {temporal_run.id} --engine temporal"]
    assert rebuilt == live
    for timeline in (local, live):
        match = re.search(r"· run (\S+) · real clock · succeeded ·", timeline)
        assert match is not None, timeline
        for step in ("reserve", "confirm"):
            assert f"key     {idempotency_key(match.group(1), step)}" in timeline


def test_notebook_06_replays_the_keyed_charge_duplicates_the_unkeyed_one_and_keeps_the_key(
    executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # spec §10.2, §10.3, §8: the injected lost response is replayed by the provider (one
    # charge), the unkeyed re-run charges twice; spec §10.1: the key the test put in the
    # environment was sent, and is nowhere in the executed notebook, echo included.
    from woml_magic.services.secrets import reference

    nb = run_once("06-prototyping-an-integration.ipynb", executed, tmp_path_factory)
    shown = {
        cell.source.splitlines()[0]: out.data["text/plain"]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
    }
    # The text wraps with the URL's length (the port): compare with whitespace folded.
    keyed = " ".join(shown['lineage_table(keyed, records=provider.records("charges"))'].split())
    assert "2 requests carried the key: 1 no answer, 1 replayed" in keyed
    assert "so the server executed this one and its answer was lost" in keyed
    assert "Idempotent-Replayed: true" in keyed
    assert keyed.endswith("ledger: 1 charge recorded")
    again = " ".join(shown['lineage_table(again, records=provider.records("charges"))'].split())
    assert "1 request carried no key" in again
    assert again.endswith("ledger: 2 charges recorded: a duplicate")
    assert "injected: drop-response" in shown[
        '%%woml --simulate --payload shop --out keyed --fault "create-charge@1=drop-response" '
        '{tape("keyed")}']
    assert f"Invalid API Key provided: {reference('PROVIDER_TEST_KEY')}x" in "\n".join(
        stdout_lines(nb))
    assert PROVIDER_TEST_KEY not in nbformat.writes(nb)


#: spec §10.4: the lessons that compare two runs draw them on one axis (wm.compare),
#: labelled by run, in these notebooks.
COMPARED: dict[str, tuple[str, ...]] = {
    "01-retries-and-backoff.ipynb": ("fixed 1s", "exponential from 1s"),
    "03-idempotency-keys.ipynb": ("no key", "Idempotency-Key"),
    "07-retry-storms.ipynb": ("1 layer", "2 layers"),
}


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_a_lesson_of_two_runs_draws_them_on_one_axis(
    name: str, executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    nb = run_once(name, executed, tmp_path_factory)
    shown = [
        out.data
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
        and "woml-compare" in out.data.get("text/html", "")
    ]
    assert len(shown) == 1, f"{name} shows {len(shown)} comparisons"
    labels = COMPARED[name]
    assert shown[0]["text/plain"].startswith(f"compare 2 runs · {' · '.join(labels)}")
    assert '<img class="woml-picture"' in shown[0]["text/html"]


def test_notebook_07_shows_the_retry_storm_results_of_spec_11(
    executed: dict[str, nbformat.NotebookNode], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # spec §11: the lab's qualitative claims, from the figures the notebook printed.
    nb = run_once("07-retry-storms.ipynb", executed, tmp_path_factory)
    lines = stdout_lines(nb)

    # Contention (the AWS "Exponential Backoff And Jitter" result), at every seed shown:
    # WOML's un-jittered schedule sends more calls, in synchronized waves.
    occ = re.compile(r"seed (\d+) · calls: WOML (\d+), full jitter (\d+) · clients succeeded: "
                     r"(\d+) vs (\d+) · calls in the busiest 10% of 20 ms bins: (\d+)% vs "
                     r"(\d+)% · peak/mean: [\d.]+ vs [\d.]+")
    seeds = [tuple(map(int, m.groups())) for line in lines if (m := occ.fullmatch(line))]
    assert [s[0] for s in seeds] == [0, 1, 2, 3, 4]
    for _, woml, jitter, woml_ok, jitter_ok, woml_waves, jitter_waves in seeds:
        assert woml > jitter * 1.3
        assert jitter_ok > woml_ok
        assert woml_waves >= 95
        assert woml_waves > jitter_waves + 15

    # 1,000 clients and a 30 s outage: overloaded long after it without a budget.
    outage = re.compile(r"(.+): ([\d,]+) calls · mean load 40s–60s: ([\d.]+)/s · "
                        r"recovered at (\d+)s · succeeded .*")
    storm = {m[1]: (int(m[2].replace(",", "")), float(m[3]), int(m[4]))
             for line in lines if (m := outage.fullmatch(line))}
    woml = storm["WOML schedule (no jitter)"]
    budget = storm["what-if: retry budget 10% (not WOML semantics)"]
    assert "what-if: full jitter (not WOML semantics)" in storm
    assert woml[1] > 1.5 * 15  # the capacity
    assert woml[2] >= 40 + 30
    assert budget[2] <= 40 + 5
    assert budget[2] < woml[2]
    assert budget[0] < woml[0] / 2

    # Two retrying layers: attempts ** layers on a dead server, more than 1.5× in the outage.
    layer = re.compile(r"(\d) layers?: a dead server gets (\d+) calls per client; the outage: "
                       r"[\d,]+ calls, ([\d.]+) per client, recovered at \d+s")
    layers = {int(m[1]): (int(m[2]), float(m[3])) for line in lines
              if (m := layer.fullmatch(line))}
    assert layers[1][0] == 4
    assert layers[2][0] == 16
    assert layers[2][1] > 1.5 * layers[1][1]
    assert layers[2][1] > 1.5

    # Duplicate charges against the demo API (spec §4.2, §3.5, §8): 5 responses lost.
    table = {}
    for line in lines:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 6 and cells[0] in ("no key", "stable key", "per-attempt key"):
            table[cells[0]] = (int(cells[1]), int(cells[2]), int(cells[3]), cells[4], cells[5])
    assert table["no key"] == (20, 20, 0, "15 succeeded, 5 failed closed (ambiguous)",
                               "unkeyed-post")
    assert table["stable key"] == (20, 20, 0, "20 succeeded, 0 failed closed (ambiguous)",
                                   "—")
    clients, charges, duplicates, runs, linter = table["per-attempt key"]
    assert runs == "20 succeeded, 0 failed closed (ambiguous)"  # every run "succeeded"...
    assert duplicates > 0  # ...and charged twice where a response was lost
    assert charges == clients + duplicates
    assert linter == "per-attempt-key"

    # What-ifs are labelled as not WOML semantics, beside the real runs, in the display.
    shown = "\n".join(
        out.data.get("text/html", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type in ("display_data", "execute_result")
    )
    assert "what-if: full jitter (not WOML semantics) · model only" in shown
    assert 'class="woml-timeline"' in shown  # the sampled clients' real runs
    assert shown.count('class="woml-lab-figure"') >= 4 + 3


def load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build", NOTEBOOKS_DIR / "build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_has_a_percent_source_and_every_source_a_notebook() -> None:
    sources = load_builder().sources()
    assert [p.with_suffix(".ipynb") for p in sources] == NOTEBOOKS, (
        "each notebooks/NN-name.ipynb is built from notebooks/NN-name.py: "
        "run python notebooks/build.py"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_is_what_its_source_builds_without_outputs(path: Path) -> None:
    build = load_builder()
    source = path.with_suffix(".py")
    assert source in build.sources(), f"{path.name} is not built from a notebooks/NN-name.py"
    stored = nbformat.read(path, as_version=4)
    nbformat.validate(stored)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in stored.cells if c.cell_type == "code")
    fresh = build.notebook(source)
    assert [(c.cell_type, c.source) for c in stored.cells] == [
        (c.cell_type, c.source) for c in fresh.cells
    ], "the notebook is stale: run python notebooks/build.py"
    assert [c.id for c in stored.cells] == [c.id for c in fresh.cells]
    assert stored.metadata == fresh.metadata
    assert json.loads(json.dumps(stored.metadata["kernelspec"]))["name"] == "python3"
