"""The Python API surface (spec §7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.errors import WomlError, WomlRunError
from woml_magic.journal import Journal

DOC = '<step id="s" retry="2" retry-delay="1s"><script>' \
      'if (attempt.number === 1) throw new Error("x"); return context.payload;</script></step>'


def test_public_surface_is_exactly_all() -> None:
    """STYLE 9: __all__ is explicit and every name in it resolves."""
    assert sorted(wm.__all__) == sorted([
        "Attempt", "AttemptError", "Call", "RetryPolicy", "Run", "RunHandle", "Step",
        "StepRun", "Workflow", "__version__", "lab",
        "load_ipython_extension", "parse", "run", "run_async", "start",
        "unload_ipython_extension",
        # what run() takes (spec §7)
        "EngineConfig", "Fault", "Journal", "Limits", "RunOptions", "Secrets",
        # the whole error tree (tests/test_errors.py draws it)
        "WomlError", "WomlSyntaxError", "WomlRunError", "WomlLimitError", "WomlExtraMissing",
        "WomlJournalError", "WomlImageError", "LabModelError", "LabArgumentError",
        "WhatIfError", "TargetError", "DemoAPIError", "CassetteError",
        # runs on one time axis (spec §10.4)
        "compare", "Comparison",
    ])
    assert wm.Journal is Journal
    assert wm.WomlRunError is WomlRunError
    assert wm.EngineConfig().limits == wm.Limits()
    for name in wm.__all__:
        assert getattr(wm, name) is not None
    with pytest.raises(AttributeError):
        _ = wm.nothing_here  # type: ignore[attr-defined]


def test_import_is_cheap_and_free_of_side_effects(tmp_path: Path) -> None:
    """`import woml_magic` loads no engine, parser, HTTP client or widgets, writes nothing."""
    code = (
        "import sys, woml_magic\n"
        "heavy = [m for m in ('lxml', 'httpx', 'ipywidgets', 'IPython', 'quickjs', 'sqlite3',"
        " 'woml_magic.engine', 'woml_magic.api') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True)
    assert out.stdout.strip() == "[]"
    assert list(tmp_path.iterdir()) == []


def test_run_journals_to_a_file_and_the_journal_rebuilds_the_same_run(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    run = wm.run(DOC, payload={"n": 1}, clock="simulated", journal=str(path))
    assert run.steps["s"].result == {"n": 1}
    with Journal(path) as journal:
        again = journal.load(run.id)
    assert [a.outcome for a in again.steps["s"].attempts] == ["threw", "succeeded"]
    assert again.steps["s"].waits == run.steps["s"].waits
    assert again.status == run.status == "succeeded"
    assert (path.stat().st_mode & 0o777) == 0o600


def test_a_pinned_run_id_cannot_be_reused_in_the_same_journal(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite3")
    wm.run(DOC, clock="simulated", journal=path, run_id="run-a")
    with pytest.raises(WomlRunError, match="already in the journal"):
        wm.run(DOC, clock="simulated", journal=path, run_id="run-a")


@pytest.mark.parametrize("payload", [{1, 2}, float("nan"), object(), {"a": b"bytes"}])
def test_a_payload_that_is_not_json_is_refused_before_anything_runs(payload: object) -> None:
    with pytest.raises(WomlRunError, match="payload must be a JSON value"):
        wm.run(DOC, payload=payload, clock="simulated")


def test_unknown_clock_and_bad_input_are_clear_errors() -> None:
    with pytest.raises(WomlRunError, match="use 'real' or 'simulated'"):
        wm.run(DOC, clock="fast")
    with pytest.raises(TypeError, match="WOML text or a Workflow"):
        wm.run(42)  # type: ignore[arg-type]
    with pytest.raises(wm.WomlSyntaxError):
        wm.run("<nope/>")
    assert issubclass(wm.WomlSyntaxError, WomlError)
    # It was a bare AttributeError from deep in the engine (issue 24).
    bad_config = r"config= takes a woml_magic\.engine\.EngineConfig, not int"
    with pytest.raises(WomlRunError, match=bad_config):
        wm.run(DOC, clock="simulated", config=5)  # type: ignore[arg-type]


def test_resume_of_an_unknown_run_is_an_error(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite3")
    with pytest.raises(WomlRunError, match="no run 'run-zzz'"):
        wm.run(DOC, clock="simulated", journal=path, resume="run-zzz")


def test_resume_with_a_changed_document_names_the_run(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite3")
    run = wm.run(DOC, clock="simulated", journal=path)
    changed = DOC.replace('retry="2"', 'retry="3"')
    with pytest.raises(WomlError, match=run.id):
        wm.run(changed, clock="simulated", journal=path, resume=run.id)


def test_a_workflow_object_runs_like_its_text() -> None:
    wf = wm.parse(DOC)
    assert wm.run(wf, clock="simulated").steps["s"].status == "succeeded"


def test_start_with_resume_of_a_finished_run_hands_back_the_journaled_run(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "j.sqlite3")
    first = wm.run(DOC, clock="simulated", journal=path)
    handle = wm.start(DOC, clock="simulated", journal=path, resume=first.id)
    again = handle.result(timeout=30)
    assert again.id == first.id
    assert handle.run.status == "succeeded"
    assert [a.outcome for a in again.steps["s"].attempts] == ["threw", "succeeded"]


# -- spec §6.3, §7: every run executes on the package's run loop ---------------------------


def test_cancel_of_a_finished_run_does_nothing() -> None:
    """spec §7: cancelling a run that already ended is a no-op, not an error."""
    handle = wm.start(DOC, clock="simulated")
    run = handle.result(timeout=30)
    handle.cancel()
    handle.cancel()
    assert handle.done()
    assert run.status == "succeeded"
    assert [a.outcome for a in run.steps["s"].attempts] == ["threw", "succeeded"]


def test_a_run_sees_the_context_of_the_thread_that_started_it() -> None:
    """The run loop runs each task in a copy of the caller's contextvars (ipykernel 7
    keeps a cell's parent header there, so outputs land in the cell that ran it)."""
    import contextvars

    from woml_magic.events import RunStarted

    cell: contextvars.ContextVar[str] = contextvars.ContextVar("cell")
    seen: list[str] = []

    def sink(event: object) -> None:
        if isinstance(event, RunStarted):
            seen.append(cell.get("no context"))

    cell.set("cell 7")
    wm.run(DOC, clock="simulated", sinks=[sink])
    assert seen == ["cell 7"]


def test_blocking_on_the_run_loop_itself_is_refused_clearly() -> None:
    """A sink that called wm.run would wait for its own loop: a clear error instead."""
    from woml_magic.events import RunStarted

    errors: list[str] = []

    def sink(event: object) -> None:
        if isinstance(event, RunStarted):
            try:
                wm.run(DOC, clock="simulated")
            except WomlError as exc:
                errors.append(str(exc))

    wm.run(DOC, clock="simulated", sinks=[sink])
    assert errors
    assert "await wm.run_async" in errors[0]


def test_runs_from_many_threads_share_one_loop_and_all_finish() -> None:
    import threading

    results: list[str] = []

    def one() -> None:
        results.append(wm.run(DOC, clock="simulated").status)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == ["succeeded"] * 4


# -- spec §4.5, §6.1: the payload is bounded before anything runs ---------------------------


def _nested(depth: int) -> list[object]:
    top: list[object] = []
    cur = top
    for _ in range(depth - 1):
        inner: list[object] = []
        cur.append(inner)
        cur = inner
    return top


@pytest.mark.parametrize(
    ("payload", "limit"),
    [(_nested(3000), "max_json_depth"), ({"blob": "x" * (11 << 20)}, "max_payload_bytes")],
    ids=["3000-deep", "11-MiB"],
)
def test_a_payload_over_a_limit_is_refused_naming_it_and_nothing_is_journaled(
    payload: object, limit: str, tmp_path: Path
) -> None:
    from woml_magic.errors import WomlLimitError

    path = tmp_path / "j.sqlite3"
    with pytest.raises(WomlLimitError, match=limit) as caught:
        wm.run(DOC, payload=payload, clock="simulated", journal=str(path), run_id="big")
    assert caught.value.limit == limit
    with Journal(path) as jr:
        assert not jr.has_run("big")


def test_the_payload_limits_come_from_the_run_config() -> None:
    from woml_magic.engine import EngineConfig
    from woml_magic.errors import WomlLimitError
    from woml_magic.limits import Limits

    small = EngineConfig(limits=Limits(max_payload_bytes=10, max_json_depth=2))
    with pytest.raises(WomlLimitError, match="max_payload_bytes"):
        wm.run(DOC, payload="x" * 20, clock="simulated", config=small)
    with pytest.raises(WomlLimitError, match="max_json_depth"):
        wm.run(DOC, payload=[[[1]]], clock="simulated", config=small)
    assert wm.run(DOC, payload=[1], clock="simulated", config=small).status == "succeeded"
