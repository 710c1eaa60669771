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
        "StepRun", "Workflow", "WomlError", "WomlSyntaxError", "__version__",
        "load_ipython_extension", "parse", "run", "run_async", "start",
        "unload_ipython_extension",
    ])
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
