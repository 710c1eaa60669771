"""``python -m woml_magic check`` in a real subprocess (spec §2, §3.1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from woml_magic.__main__ import main

GOOD = """\
<workflow id="signup">
  <step id="charge" retry="3" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
    <script>return 1;</script>
  </step>
  <step id="notify" retry="4" retry-delay="250ms"><script>return 2;</script></step>
  <step id="ping"><script>return 3;</script></step>
</workflow>
"""

BAD = """\
<step id="charge"
      retry-delay-max="3s">
  <script>return 1;</script>
</step>
"""


def woml(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "woml_magic", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def test_check_prints_each_steps_planned_schedule_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "good.woml"
    path.write_text(GOOD, encoding="utf-8")
    done = woml("check", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "workflow signup: 3 steps",
        "charge: 3 attempts, exponential; waits 1s, 2s",
        "notify: 4 attempts, fixed; waits 250ms, 250ms, 250ms",
        "ping: 1 attempt; no retry",
    ]
    assert done.stderr == ""


def test_check_prints_the_error_sentence_line_and_caret_to_stderr_and_exits_1(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.woml"
    path.write_text(BAD, encoding="utf-8")
    done = woml("check", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{path}:2:7: invalid WOML document",
        'WomlSyntaxError: unknown attribute `retry-delay-max` on <step id="charge">; '
        "did you mean `retry-max-delay`?",
        "  line 2, column 7",
        '     2 |       retry-delay-max="3s">',
        "       |       ^",
    ]
    assert "Traceback" not in done.stderr


def test_check_reads_stdin_for_dash() -> None:
    done = woml(
        "check",
        "-",
        stdin='<step id="a" retry="10" retry-backoff="exponential" '
        'retry-max-delay="30s"><script/></step>',
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == (
        "a: 10 attempts, exponential; waits 1s, 2s, 4s, 8s, 16s, 30s, 30s, 30s, 30s"
    )


def test_check_of_a_missing_file_exits_1_with_one_line(tmp_path: Path) -> None:
    done = woml("check", str(tmp_path / "missing.woml"))
    assert done.returncode == 1
    assert done.stderr.startswith("woml check: cannot read")
    assert "Traceback" not in done.stderr


def test_check_of_a_file_that_is_not_utf8_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "latin1.woml"
    path.write_bytes('<step id="a"><script>"café"</script></step>'.encode("latin-1"))
    done = woml("check", str(path))
    assert done.returncode == 1
    assert "is not UTF-8 text" in done.stderr


def test_check_accepts_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.woml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert woml("check", str(path)).returncode == 0


@pytest.mark.parametrize("argv", [[], ["nonsense"], ["check"], ["check", "a", "b"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: woml" in capsys.readouterr().err


def test_run_prints_the_text_timeline_and_exits_by_the_run_status(tmp_path: Path) -> None:
    good = tmp_path / "good.woml"
    good.write_text('<step id="a" retry="2" retry-delay="1s"><script>'
                    'if (attempt.number < 2) throw new Error("x"); return 1;</script></step>')
    out = subprocess.run([sys.executable, "-m", "woml_magic", "run", "--simulate",
                          "--run-id", "run-1", str(good)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "step a · succeeded" in out.stdout
    assert "wait 1s" in out.stdout
    bad = tmp_path / "bad.woml"
    bad.write_text('<step id="a"><script>throw new Error("x");</script></step>')
    out = subprocess.run([sys.executable, "-m", "woml_magic", "run", "--simulate", str(bad)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 1
    assert "Error: x" in out.stdout


def test_demo_teaches_the_duplicate_charge_lesson() -> None:
    """The README's main job: without a key the run fails closed; with it, one charge."""
    out = subprocess.run([sys.executable, "-m", "woml_magic", "demo", "--simulate"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ambiguous" in out.stdout
    assert out.stdout.count("The demo API recorded 1 charge(s).") == 2


@pytest.mark.skipif(__import__("shutil").which("woml") is None,
                    reason="the `woml` script exists once the package is pip-installed")
def test_the_woml_script_is_the_same_command_line(tmp_path: Path) -> None:
    doc = tmp_path / "charge.woml"
    doc.write_text('<step id="charge" retry="4" retry-backoff="exponential">'
                   "<script>return 1;</script></step>")
    out = subprocess.run(["woml", "check", str(doc)], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "charge: 4 attempts, exponential; waits 1s, 2s, 4s" in out.stdout


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        # Deeper than Python's own reader recurses (3.10-3.12 raise RecursionError inside
        # json.loads; 3.13 does not): the user sees the same sentence either way.
        ("[" * 3000 + "]" * 3000, "--payload: nested more than 64 levels deep; the limit is 64"),
        ("[" * 100 + "]" * 100, "--payload: nested more than 64 levels deep; the limit is 64"),
    ],
    ids=["3000-deep", "100-deep"],
)
def test_run_refuses_a_too_deep_payload_in_one_line(
    payload: str, says: str, tmp_path: Path
) -> None:
    # spec §4.5: refused before anything runs, a sentence naming the limit, no traceback.
    doc = tmp_path / "doc.xml"
    doc.write_text('<step id="a"><script>return 1;</script></step>')
    out = woml("run", "--simulate", "--payload", payload, str(doc))
    assert out.returncode == 1
    assert says in out.stderr
    assert "max_json_depth" in out.stderr
    assert "Traceback" not in out.stderr


def test_version_prints_the_installed_distributions_version() -> None:
    # One version, declared in woml_magic/__init__.py and read by the build (pyproject's
    # dynamic version): what `woml --version` says is what pip installed.
    from importlib.metadata import version

    out = woml("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"woml {version('woml-magic')}"


def test_the_quick_start_lists_every_subcommand() -> None:
    # The quick start's table is the command line's only overview: a subcommand added
    # to the parser and not to the table (the worker was) is one users never find.
    import argparse
    import re

    from woml_magic.__main__ import _build_parser

    parser = _build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    names = sorted(actions[0].choices)
    quickstart = (Path(__file__).parents[1] / "docs" / "quickstart.md").read_text()
    table = sorted(set(re.findall(r"^\| `woml (\w+)", quickstart, flags=re.MULTILINE)))
    assert table == names
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    assert f"has {words[len(names)]} subcommands" in quickstart
