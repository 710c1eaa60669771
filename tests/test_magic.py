"""The %%woml cell magic and %woml line magic in an in-process IPython shell (spec §6.1, §6.2).

One ``InteractiveShell`` singleton for the module (IPython allows one per process,
like jupysql's testing shell); each test loads the extension fresh in its own working
directory and unloads it afterwards, so no journal, handle or setting leaks.
"""

from __future__ import annotations

import logging
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from woml_magic.magic import WomlMagics
from woml_magic.model import Run

SUCCEEDS = '<step id="ok"><script>return {answer: 42, payload: context.payload};</script></step>'
THROWS = (
    '<step id="flaky" retry="3" retry-delay="2s">\n'
    '  <script>throw new Error("down " + attempt.number);</script>\n'
    "</step>"
)
SLEEPS = (
    '<step id="slow" timeout="2h"><script>await services.sleep("1h"); return 1;</script></step>'
)


def displayed(ip: InteractiveShell, obj: Any) -> dict[str, Any]:
    """The one output ``display(obj)`` produces in this shell (spec §6.3: one per cell)."""
    with capture_output() as cap:
        ip.display_formatter.format(obj)
    assert len(cap.outputs) == 1
    data: dict[str, Any] = cap.outputs[0].data
    return data


def magics(ip: InteractiveShell) -> WomlMagics:
    found = ip.magics_manager.registry[WomlMagics.__name__]
    assert isinstance(found, WomlMagics)
    return found


def woml(ip: InteractiveShell, line: str, cell: str) -> Any:
    return ip.run_cell_magic("woml", line, cell)


# -- loading and help --------------------------------------------------------------------


def test_load_ext_registers_both_magics_and_the_woml_configurable(ip: InteractiveShell) -> None:
    assert ip.find_cell_magic("woml") is not None
    assert ip.find_line_magic("woml") is not None
    assert magics(ip).settings in ip.configurables
    assert type(magics(ip).settings).__name__ == "Woml"


def test_cell_magic_help_is_the_argument_usage(ip: InteractiveShell) -> None:
    # spec §6.1: `%%woml?` shows the options (magic_arguments puts usage in __doc__).
    doc = ip.find_cell_magic("woml").__doc__
    for option in (
        "--clock",
        "--simulate",
        "--payload",
        "--run-id",
        "--resume",
        "--retry-interrupted",
        "--journal",
        "--out",
        "--background",
        "--no-timeline",
    ):
        assert option in doc


def test_unload_removes_the_magics_and_closes_journals(ip: InteractiveShell) -> None:
    woml(ip, "--simulate --journal :memory:", SUCCEEDS)
    journal = magics(ip)._journals[":memory:"]
    ip.run_line_magic("unload_ext", "woml_magic")
    try:
        assert ip.find_cell_magic("woml") is None
        assert ip.find_line_magic("woml") is None
        assert not any(type(c).__name__ == "Woml" for c in ip.configurables)
        with pytest.raises(Exception, match="closed"):
            journal.runs()
    finally:
        ip.run_line_magic("load_ext", "woml_magic")


# -- runs ----------------------------------------------------------------------------------


def test_simulated_run_that_succeeds_returns_the_run(ip: InteractiveShell) -> None:
    run = woml(ip, "--simulate", SUCCEEDS)
    assert isinstance(run, Run)
    assert run.clock == "simulated"
    assert run.status == "succeeded"
    assert run.steps["ok"].result == {"answer": 42, "payload": None}


def test_thrown_errors_retry_on_the_simulated_clock_then_fail(ip: InteractiveShell) -> None:
    # spec §3.1/§3.2: `threw` retries while attempts remain; fixed 2s waits.
    run = woml(ip, "--simulate", THROWS)
    step = run.steps["flaky"]
    assert run.status == "failed"
    assert step.status == "failed"
    assert [a.outcome for a in step.attempts] == ["threw", "threw", "threw"]
    assert step.waits == pytest.approx([2.0, 2.0], abs=0.05)
    # spec §2.3: the error's line counts the %%woml line, so the script is on line 3.
    assert step.attempts[-1].error is not None
    assert step.attempts[-1].error.message == "down 3"
    assert step.attempts[-1].error.line == 3


def test_config_clock_is_the_default_and_flags_override_it(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'Woml.clock = "simulated"')
    assert woml(ip, "", SUCCEEDS).clock == "simulated"
    assert woml(ip, "--clock real", SUCCEEDS).clock == "real"


def test_out_binds_the_run_in_the_user_namespace(ip: InteractiveShell) -> None:
    run = woml(ip, "--simulate --out r", SUCCEEDS)
    assert ip.user_ns["r"] is run


def test_payload_is_evaluated_in_the_user_namespace(ip: InteractiveShell) -> None:
    ip.user_ns["data"] = {"amount": 1200, "tags": ("a", "b")}
    run = woml(ip, '--simulate --payload "dict(data, n=1)"', SUCCEEDS)
    assert run.steps["ok"].result["payload"] == {"amount": 1200, "tags": ["a", "b"], "n": 1}


def test_payload_that_is_not_json_is_a_usage_error_and_nothing_runs(
    ip: InteractiveShell,
) -> None:
    ip.user_ns["bad"] = {"when": {1, 2}}
    with pytest.raises(UsageError, match=r"--payload bad: the payload must be a JSON value"):
        woml(ip, "--simulate --journal :memory: --payload bad", SUCCEEDS)
    assert magics(ip).journal(":memory:").runs() == []


def test_payload_expression_that_raises_is_a_usage_error(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="NameError"):
        woml(ip, "--simulate --payload no_such_name", SUCCEEDS)


def test_pinned_run_id_gives_the_spec_idempotency_key(ip: InteractiveShell) -> None:
    cell = '<step id="charge"><script>return attempt.idempotencyKey;</script></step>'
    run = woml(ip, "--simulate --run-id run-1", cell)
    # spec §3.5's worked example.
    assert run.steps["charge"].idempotency_key == "4e3b1916-7901-53c2-9575-f70651305d8b"
    assert run.steps["charge"].result == "4e3b1916-7901-53c2-9575-f70651305d8b"


def test_pinned_run_id_already_journaled_is_a_usage_error(ip: InteractiveShell) -> None:
    woml(ip, "--simulate --run-id twice", SUCCEEDS)
    with pytest.raises(UsageError, match="already in the journal"):
        woml(ip, "--simulate --run-id twice", SUCCEEDS)


def test_default_journal_is_under_the_working_directory_with_mode_0600(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    run = woml(ip, "--simulate", SUCCEEDS)
    path = tmp_path / ".woml" / "journal.sqlite3"
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [r.run_id for r in magics(ip).journal(None).runs()] == [run.id]


def test_journal_option_then_runs_lists_it_and_show_renders_it(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    path = tmp_path / "elsewhere.sqlite3"
    run = woml(ip, f"--simulate --journal {path} --run-id listed", THROWS)
    table = ip.run_line_magic("woml", f"runs --journal {path}")
    assert "listed" in repr(table)
    assert "failed" in repr(table)
    assert '<table class="woml-runs">' in table._repr_html_()
    assert "<td>listed</td>" in table._repr_html_()
    # the default journal did not get it
    assert "listed" not in repr(ip.run_line_magic("woml", "runs"))
    shown = ip.run_line_magic("woml", f"show listed --journal {path}")
    assert isinstance(shown, Run)
    assert [a.outcome for a in shown.steps["flaky"].attempts] == ["threw"] * 3
    assert shown.steps["flaky"].idempotency_key == run.steps["flaky"].idempotency_key
    bundle = displayed(ip, shown)
    assert "woml-timeline" in bundle["text/html"]
    assert "flaky" in bundle["text/plain"]


def test_show_of_an_unknown_run_is_a_usage_error(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="no run 'nope'"):
        ip.run_line_magic("woml", "show nope")


def test_compare_draws_journaled_runs_on_one_axis_labelled_by_run(ip: InteractiveShell) -> None:
    """spec §10.4: ``%woml compare RUN_A RUN_B [--labels A,B]`` loads the runs as
    ``show`` does and draws their lanes on one time axis."""
    from woml_magic.timeline.compare import Comparison

    woml(ip, "--simulate --run-id cmp-a", THROWS)
    woml(ip, "--simulate --run-id cmp-b", SUCCEEDS)
    shown = ip.run_line_magic("woml", "compare cmp-a cmp-b --labels 'throws, succeeds'")
    assert isinstance(shown, Comparison)
    assert [r.id for r in shown.runs] == ["cmp-a", "cmp-b"]
    assert shown.labels == ("throws", "succeeds")
    formatter = ip.display_formatter
    assert formatter is not None
    bundle, _ = formatter.format(shown)  # its own bundle: it displays itself
    assert bundle["text/plain"].startswith("compare 2 runs · throws · succeeds")
    assert 'data-status="compared"' in bundle["text/html"]
    three = ip.run_line_magic("woml", "compare cmp-a cmp-b cmp-a")
    assert three.labels[0].endswith("· cmp-a")
    assert len(three.runs) == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("compare cmp-x nope", "%woml compare nope: no run 'nope' in the journal"),
        ("compare cmp-x", "needs two run ids or more: %woml compare cmp-x RUN_ID"),
        ("compare cmp-x cmp-x --labels one", "got 1 label for 2 runs"),
        ("show cmp-x --labels a,b", "takes no --labels; only %woml compare does"),
        ("show cmp-x cmp-x", "%woml show takes no file"),
        ("save cmp-x a.svg b.svg", "%woml save takes one file; got also 'b.svg'"),
    ],
)
def test_compare_misuse_is_a_usage_error_saying_what_is_allowed(
    ip: InteractiveShell, line: str, message: str
) -> None:
    woml(ip, "--simulate --run-id cmp-x", SUCCEEDS)
    with pytest.raises(UsageError, match=re.escape(message)):
        ip.run_line_magic("woml", line)


def test_the_line_magics_usage_and_help_list_compare(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as err:
        ip.run_line_magic("woml", "nothing")
    assert "compare RUN_ID RUN_ID [RUN_ID …] [--labels A,B,…]" in str(err.value)
    # %woml? shows the magic's docstring and its arguments' help.
    doc = magics(ip).woml_line.__doc__ or ""
    assert "%woml compare RUN_A RUN_B [...]" in " ".join(doc.split())
    assert "--labels A,B" in doc
    assert "compare: the runs' labels" in " ".join(doc.split())


def test_an_unknown_huge_run_id_is_quoted_as_an_excerpt(ip: InteractiveShell) -> None:
    # issue 24: a 100 KB id came back whole in "no run …", in each of these messages.
    # (5,000 characters here: IPython's own expansion of a line is quadratic in it.)
    huge = "r" * 5_000
    with pytest.raises(UsageError) as shown:
        ip.run_line_magic("woml", f"show {huge}")
    with pytest.raises(UsageError) as resumed:
        woml(ip, f"--resume {huge}", SUCCEEDS)
    for err in (shown, resumed):
        assert "no run 'rrr" in str(err.value)
        assert len(str(err.value)) < 400, len(str(err.value))


def test_resume_of_an_unknown_run_is_a_usage_error(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"--resume ghost: no run 'ghost' in the journal"):
        woml(ip, "--resume ghost", SUCCEEDS)


def test_resume_of_a_finished_run_reexecutes_nothing(ip: InteractiveShell) -> None:
    first = woml(ip, "--simulate --run-id done", SUCCEEDS)
    again = woml(ip, "--resume done", SUCCEEDS)
    assert again.id == "done"
    assert again.steps["ok"].status == "reattached"  # spec §5.3: result from the journal
    assert again.steps["ok"].result == first.steps["ok"].result
    assert len(again.steps["ok"].attempts) == 1


def test_resume_accepts_a_clock_option_that_matches_the_journaled_clock(
    ip: InteractiveShell,
) -> None:
    # spec §5.3: re-running a cell after adding --resume keeps its --simulate.
    woml(ip, "--simulate --run-id same", SUCCEEDS)
    again = woml(ip, "--simulate --resume same", SUCCEEDS)
    assert again.clock == "simulated"
    again = woml(ip, "--clock simulated --resume same", SUCCEEDS)
    assert again.clock == "simulated"


def test_resume_refuses_a_clock_option_that_conflicts_naming_both(ip: InteractiveShell) -> None:
    woml(ip, "--simulate --run-id sim", SUCCEEDS)
    with pytest.raises(UsageError, match=r"--clock real conflicts with run sim's journaled "
                       r"clock 'simulated'"):
        woml(ip, "--clock real --resume sim", SUCCEEDS)


def test_a_payload_over_its_limit_is_a_usage_error_naming_the_limit(
    ip: InteractiveShell,
) -> None:
    # spec §4.5, §6.1: refused before anything runs; configurable like the other limits.
    ip.user_ns["data"] = {"blob": "x" * 100}
    ip.run_line_magic("config", "Woml.max_payload_bytes = 50")
    with pytest.raises(UsageError, match=r"--payload data: .*max_payload_bytes"):
        woml(ip, "--simulate --payload data", SUCCEEDS)
    ip.run_line_magic("config", "Woml.max_json_depth = 2")
    ip.user_ns["data"] = [[[1]]]
    with pytest.raises(UsageError, match=r"--payload data: .*max_json_depth"):
        woml(ip, "--simulate --payload data", SUCCEEDS)


def test_no_timeline_returns_the_run_rendered_statically(ip: InteractiveShell) -> None:
    run = woml(ip, "--simulate --no-timeline", SUCCEEDS)
    data = displayed(ip, run)
    assert "woml-timeline" in data["text/html"]
    assert "ok" in data["text/plain"]


# -- misuse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--colour real", "unrecognized arguments: --colour real"),
        ("--clock fast", "invalid choice: 'fast'"),
        ("--simulate --clock real", "contradict"),
        ("--retry-interrupted", "--retry-interrupted needs --resume"),
        ("--resume a --run-id b", "disagree"),
        ("--resume a --payload 1", "keeps its journaled payload"),
        ("--out 1x", "not a Python variable name"),
        ("--out class", "not a Python variable name"),
        ("--payload '{\"a\": 1}", "No closing quotation"),
    ],
)
def test_misuse_of_the_cell_magic_is_a_usage_error(
    ip: InteractiveShell, line: str, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        woml(ip, line, SUCCEEDS)
    # STYLE 6: UsageError itself, not a subclass (IPython prints subclasses with a traceback)
    assert type(caught.value) is UsageError
    assert message in str(caught.value)


@pytest.mark.parametrize("line", ["", "list", "show", "cancel", "runs extra"])
def test_line_magic_without_a_valid_subcommand_lists_them(ip: InteractiveShell, line: str) -> None:
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("woml", line)
    assert type(caught.value) is UsageError
    text = str(caught.value)
    assert "runs" in text or "run id" in text


def test_unknown_subcommand_message_names_every_subcommand(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="has no subcommand 'list'") as caught:
        ip.run_line_magic("woml", "list")
    for sub in ("runs", "show RUN_ID", "cancel RUN_ID"):
        assert sub in str(caught.value)


def test_a_journal_path_that_is_not_a_journal_is_a_usage_error(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not sqlite at all\n" * 10)
    with pytest.raises(UsageError):
        woml(ip, f"--simulate --journal {bogus}", SUCCEEDS)
    assert bogus.read_text() == "not sqlite at all\n" * 10


# -- document errors ------------------------------------------------------------------------


def run_cell_output(ip: InteractiveShell, capsys: pytest.CaptureFixture[str], cell: str) -> str:
    result = ip.run_cell(cell)
    captured = capsys.readouterr()
    assert result.error_in_exec is not None
    return captured.out + captured.err


def test_syntax_error_renders_message_line_and_caret_counting_the_magic_line(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = '%%woml --simulate\n<step id="a">\n  <retry count="3"/>\n</step>\n'
    out = run_cell_output(ip, capsys, cell)
    assert "Traceback" not in out
    assert "retry is a step attribute, not a tag" in out
    assert "line 3" in out
    lines = out.splitlines()
    shown = next(i for i, text in enumerate(lines) if '<retry count="3"/>' in text)
    assert lines[shown].lstrip().startswith("3 |")
    assert lines[shown + 1].strip().endswith("^")


def test_javascript_syntax_error_points_at_the_cell_line(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = '%%woml --simulate\n<step id="a">\n<script>\nreturn 1 +;\n</script>\n</step>\n'
    out = run_cell_output(ip, capsys, cell)
    assert "Traceback" not in out
    assert "JavaScript syntax error" in out
    assert "line 4" in out
    assert any(text.lstrip().startswith("4 | return 1 +;") for text in out.splitlines())


def test_usage_errors_print_without_a_traceback(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_cell_output(ip, capsys, f"%%woml --clock fast\n{SUCCEEDS}\n")
    assert "UsageError" in out
    assert "Traceback" not in out


# -- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ('Woml.clock = "fast"', "Woml.clock 'fast' is not a clock"),
        ('Woml.journal = ""', "Woml.journal '' is empty"),
        ("Woml.max_result_bytes = 0", "Woml.max_result_bytes 0 is out of range"),
        ("Woml.memory_limit_mb = 1", "Woml.memory_limit_mb 1 is out of range"),
        ('Woml.default_timeout = "soon"', "Woml.default_timeout"),
        ('Woml.default_timeout = "0s"', "above 0"),
        ('Woml.default_timeout = "25h"', "at most 24h"),
        ('Woml.redact_headers = ["X Key"]', "'X Key' is not a header name"),
        ('Woml.http_allow = ["http://x.test"]', "'http://x.test' is not a host"),
        ('Woml.engine = "kubernetes"', "Woml.engine 'kubernetes' is not an engine; use "
                                       "'local' or 'temporal'"),
    ],
)
def test_config_rejects_bad_values_with_a_reason_and_keeps_the_old_one(
    ip: InteractiveShell, caplog: pytest.LogCaptureFixture, statement: str, message: str
) -> None:
    settings = magics(ip).settings
    name = statement.split("=", maxsplit=1)[0].strip().split(".")[1]
    before = getattr(settings, name)
    with caplog.at_level(logging.ERROR):
        ip.run_line_magic("config", statement)
    assert message in caplog.text
    assert getattr(settings, name) == before


def test_a_rejected_config_value_does_not_stop_the_extension_reloading(
    ip: InteractiveShell, caplog: pytest.LogCaptureFixture
) -> None:
    ip.run_line_magic("config", 'Woml.clock = "simulated"')
    ip.run_line_magic("config", "Woml.memory_limit_mb = 1")
    with caplog.at_level(logging.WARNING):
        ip.run_line_magic("reload_ext", "woml_magic")
    assert "ignoring Woml.memory_limit_mb" in caplog.text
    assert magics(ip).settings.clock == "simulated"
    assert magics(ip).settings.memory_limit_mb == 128


def test_config_lists_every_setting(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("config", "Woml")
    out = capsys.readouterr().out
    for name in (
        "clock",
        "journal",
        "max_result_bytes",
        "memory_limit_mb",
        "default_timeout",
        "redact_headers",
        "http_allow",
    ):
        assert f"Woml.{name}" in out


def test_config_max_result_bytes_limits_results(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "Woml.max_result_bytes = 100")
    cell = '<step id="big"><script>return "x".repeat(200);</script></step>'
    run = woml(ip, "--simulate", cell)
    assert run.steps["big"].attempts[0].outcome == "oversized"


def test_config_memory_limit_applies_to_scripts(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "Woml.memory_limit_mb = 16")
    cell = (
        '<step id="hog"><script>const a = []; '
        "for (let i = 0; i < 1e7; i++) a.push({i}); return a.length;</script></step>"
    )
    run = woml(ip, "--simulate", cell)
    assert run.steps["hog"].attempts[0].outcome == "crash"


def test_config_journal_memory_keeps_runs_for_the_session(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    ip.run_line_magic("config", 'Woml.journal = ":memory:"')
    run = woml(ip, "--simulate", SUCCEEDS)
    assert [r.run_id for r in magics(ip).journal(None).runs()] == [run.id]
    assert not (tmp_path / ".woml").exists()


def test_config_default_timeout_applies_to_steps_without_a_timeout(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'Woml.default_timeout = "5s"')
    cell = ('<step id="nap"><script>await services.sleep("10s"); return 1;</script></step>'
            '<step id="given" timeout="20s"><script>return 2;</script></step>')
    run = woml(ip, "--simulate", cell)
    assert run.steps["nap"].step.timeout.total_seconds() == 5
    assert run.steps["nap"].attempts[0].outcome == "timeout"
    assert run.workflow.step("given").timeout.total_seconds() == 20


# -- background runs and cancel -------------------------------------------------------------


def test_background_run_returns_at_once_and_cancel_ends_the_attempt_cancelled(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run = woml(ip, "--background --run-id bg-1 --out r", SLEEPS)
    assert ip.user_ns["r"] is run
    assert run.status == "running"
    ip.run_line_magic("woml", "cancel bg-1")
    assert "run bg-1 cancelled: attempt 1 of slow ended cancelled" in capsys.readouterr().out
    assert run.status == "failed"
    assert run.steps["slow"].status == "failed-closed"
    assert [a.outcome for a in run.steps["slow"].attempts] == ["cancelled"]
    journaled = magics(ip).journal(None).load("bg-1")
    assert [a.outcome for a in journaled.steps["slow"].attempts] == ["cancelled"]


def test_cancel_of_a_finished_background_run_is_a_usage_error(ip: InteractiveShell) -> None:
    woml(ip, "--background --simulate --run-id quick", SUCCEEDS)
    handle = magics(ip).handles["quick"]
    handle.result(timeout=30)
    with pytest.raises(UsageError, match="already finished"):
        ip.run_line_magic("woml", "cancel quick")


def test_cancel_of_an_unknown_run_is_a_usage_error(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"no background run 'ghost' in this session"):
        ip.run_line_magic("woml", "cancel ghost")


def test_background_syntax_error_fails_the_cell(ip: InteractiveShell) -> None:
    from woml_magic.errors import WomlSyntaxError

    cell = '<step id="a">\n<script>return 1 +;</script>\n</step>'
    with pytest.raises(WomlSyntaxError) as caught:
        woml(ip, "--background", cell)
    assert caught.value.line == 3


def test_unload_cancels_background_runs(ip: InteractiveShell) -> None:
    run = woml(ip, "--background --run-id bg-unload", SLEEPS)
    ip.run_line_magic("unload_ext", "woml_magic")
    try:
        assert [a.outcome for a in run.steps["slow"].attempts] == ["cancelled"]
    finally:
        ip.run_line_magic("load_ext", "woml_magic")


def test_temporal_flags_need_the_temporal_engine(ip: InteractiveShell) -> None:
    """spec §9: --temporal, --namespace and --task-queue say where the temporal engine
    runs; without --engine temporal they are a usage error, before anything runs."""
    for flag in ("--temporal 127.0.0.1:7233", "--namespace ns", "--task-queue q"):
        with pytest.raises(UsageError, match="applies to --engine temporal only"):
            woml(ip, flag, SUCCEEDS)
    assert magics(ip).settings.engine == "local"


def test_the_temporal_settings_give_where_it_runs_and_flags_win(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'Woml.engine = "temporal"')
    ip.run_line_magic("config", 'Woml.temporal = "127.0.0.1:7233"')
    settings = magics(ip).settings
    assert settings.engine == "temporal"
    assert settings.temporal_options(target=None, namespace=None, task_queue="q") == {
        "target": "127.0.0.1:7233", "namespace": "default", "task_queue": "q", "ui": False}
    assert settings.temporal_options(target="127.0.0.1:1", namespace="n",
                                     task_queue=None)["target"] == "127.0.0.1:1"


UNKEYED_POST = """<step id="charge" retry="2"><script>
const r = await services.http.request({method: "POST", url: "http://127.0.0.1:9/x"},
                                      {name: "create-charge"});
return r.status;
</script></step>"""


def test_key_warnings_show_above_the_run_and_no_lint_hides_them(ip: InteractiveShell) -> None:
    """Issue 15 / spec §10: the linter's warnings, with the script line, before the run;
    `--no-lint` silences them; a clean cell shows none."""
    with capture_output() as cap:
        woml(ip, "--simulate --out r", UNKEYED_POST)
    texts = [o.data.get("text/plain", "") for o in cap.outputs]
    warned = [t for t in texts if "idempotency-key warnings" in t]
    assert len(warned) == 1
    assert "line 3: step 'charge'" in warned[0]  # the cell's line (the %%woml line is 1)
    with capture_output() as cap:
        woml(ip, "--simulate --no-lint", UNKEYED_POST)
    assert not any("idempotency-key warnings" in o.data.get("text/plain", "")
                   for o in cap.outputs)
    with capture_output() as cap:
        woml(ip, "--simulate", SUCCEEDS)
    assert not any("idempotency-key warnings" in o.data.get("text/plain", "")
                   for o in cap.outputs)


def test_secret_asks_with_a_password_prompt_and_keeps_the_value_in_memory(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spec §10.1: `%woml secret NAME`; a script gets a reference, never the value."""
    import getpass

    prompts: list[str] = []
    monkeypatch.setattr(getpass, "getpass", lambda prompt: prompts.append(prompt) or "s3cr3t-v4lue")
    with capture_output() as cap:
        ip.run_line_magic("woml", "secret API_KEY")
    assert prompts == ["value of secret API_KEY (hidden): "]
    assert "s3cr3t-v4lue" not in cap.stdout
    run = woml(ip, "--simulate", '<step id="s"><script>return services.secret("API_KEY");'
                                 "</script></step>")
    assert run.steps["s"].result == "⟦woml-secret:API_KEY⟧"
    assert "s3cr3t-v4lue" not in repr(run)
    with capture_output() as cap:
        ip.run_line_magic("woml", "secret")
    assert "API_KEY" in cap.stdout
    monkeypatch.setattr(getpass, "getpass", lambda prompt: "")
    with pytest.raises(UsageError, match="nothing was entered"):
        ip.run_line_magic("woml", "secret API_KEY")
    with pytest.raises(UsageError, match="letters, digits and _"):
        ip.run_line_magic("woml", "secret 9lives")


def test_secrets_from_the_environment_by_name(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spec §10.1: `Woml.secrets` names environment variables; a missing one is a clear
    error; a script asking for a name not set gets an error listing the names."""
    monkeypatch.setenv("WOML_TEST_TOKEN", "tok-123456")
    ip.run_line_magic("config", 'Woml.secrets = ["WOML_TEST_TOKEN"]')
    run = woml(ip, "--simulate", '<step id="s"><script>'
                                 'return services.secret("WOML_TEST_TOKEN");</script></step>')
    assert run.steps["s"].result == "⟦woml-secret:WOML_TEST_TOKEN⟧"
    missing = woml(ip, "--simulate", '<step id="s"><script>return services.secret("NOPE");'
                                     "</script></step>")
    error = missing.steps["s"].attempts[0].error
    assert error is not None
    assert "WOML_TEST_TOKEN" in error.message
    monkeypatch.delenv("WOML_TEST_TOKEN")
    with pytest.raises(UsageError, match="environment has no WOML_TEST_TOKEN"):
        woml(ip, "--simulate", SUCCEEDS)


def test_fault_flags_reach_the_run_and_bad_ones_are_usage_errors(ip: InteractiveShell) -> None:
    """spec §10.2: `--fault CALL@ATTEMPT=KIND` (repeatable) acts on the named call."""
    from woml_magic.demo import DemoAPI

    with DemoAPI() as api:
        doc = f"""<step id="charge" retry="2" retry-delay="0s"><script>
const r = await services.http.request({{method: "POST", url: "{api.url}/charges",
  json: {{amount: 1, currency: "eur"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}},
  {{name: "create-charge"}});
return r.status;
</script></step>"""
        run = woml(ip, '--simulate --fault "create-charge@1=drop-response"', doc)
        attempts = run.steps["charge"].attempts
        assert [a.outcome for a in attempts] == ["threw", "succeeded"]
        assert attempts[0].calls[0].injected is not None
        assert "injected" in attempts[0].explanation
        assert len(api.records("charges")) == 1
    with pytest.raises(UsageError, match="create-charge@x=drop-response"):
        woml(ip, '--simulate --fault "create-charge@x=drop-response"', SUCCEEDS)


def test_record_and_replay_flags_reach_the_run_and_misuse_is_a_usage_error(
    ip: InteractiveShell, tmp_path: Path
) -> None:
    """spec §10.4: `--record FILE` writes the cassette, `--replay FILE` answers from it
    with the server gone, `--record-mode` says what to do with an existing file."""
    from woml_magic.demo import DemoAPI

    cassette = tmp_path / "charge.cassette"
    with DemoAPI() as api:
        api.drop_response_next(1)
        doc = f"""<step id="charge" retry="2" retry-delay="0s"><script>
const r = await services.http.request({{method: "POST", url: "{api.url}/charges",
  json: {{amount: 1, currency: "eur"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}},
  {{name: "create-charge"}});
return r.data.id;
</script></step>"""
        live = woml(ip, f"--simulate --record {cassette}", doc)
        with pytest.raises(UsageError, match="exists, and recording would replace it"):
            woml(ip, f"--simulate --record {cassette}", doc)
        woml(ip, f"--simulate --record {cassette} --record-mode overwrite", doc)
    replayed = woml(ip, f"--simulate --replay {cassette}", doc)
    assert [a.outcome for a in live.steps["charge"].attempts] == ["threw", "succeeded"]
    assert [a.outcome for a in replayed.steps["charge"].attempts] == ["succeeded"]
    with pytest.raises(UsageError, match="record= and replay= exclude each other"):
        woml(ip, f"--simulate --record {tmp_path / 'x'} --replay {cassette}", doc)
    with pytest.raises(UsageError, match="argument --record-mode: invalid choice"):
        woml(ip, f"--simulate --record {cassette} --record-mode sometimes", doc)
    with pytest.raises(UsageError, match="--replay does not apply to --clients"):
        woml(ip, f"--clients 2 --replay {cassette}", doc)


def test_clients_runs_the_lab_and_its_flags_need_it(ip: InteractiveShell) -> None:
    """spec §11: `%%woml --clients N` runs N real clients on the lab's simulated clock
    against a server model; the value is the LabResult; lab flags need --clients."""
    doc = """<step id="call" retry="3" retry-delay="1s"><script>
const r = await services.http.request({method: "POST", url: "http://model/orders"});
return r.status;
</script></step>"""
    result = woml(ip, '--clients 20 --seed 3 --outage 0s..1.5s --what-if "jitter=full" '
                      "--out lab_result", doc)
    assert ip.user_ns["lab_result"] is result
    assert len(result.runs) == 20
    assert all(run.status == "succeeded" for run in result.runs)
    # attempts at 0 s and 1 s fall in the outage (503), the one at 2 s gets 201
    assert {len(run.steps["call"].attempts) for run in result.runs} == {3}
    again = woml(ip, "--clients 20 --seed 3 --outage 0s..1.5s", doc)
    assert again.traffic == result.traffic  # deterministic from the seed
    assert any("not WOML semantics" in str(label) for label in result.overlays)
    with pytest.raises(UsageError, match="--outage applies to the retry lab only"):
        woml(ip, "--outage 0s..1s", doc)
    with pytest.raises(UsageError, match="--resume does not apply to --clients"):
        woml(ip, "--clients 2 --resume r", doc)
    with pytest.raises(UsageError, match="give 1 to 10,000 clients"):
        woml(ip, "--clients 0", doc)
    ip.user_ns.pop("lab_result", None)


def test_clients_take_faults_and_secrets_as_a_run_does(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spec §10.1, §10.2, §11: a lab's calls go through the run's HTTP service, so
    --fault and Woml.secrets act on every client (tests/test_lab_http.py compares a
    client with a plain run)."""
    monkeypatch.setenv("LAB_TOKEN", "t0ken-value-99")
    ip.run_line_magic("config", "Woml.secrets = ['LAB_TOKEN']")
    doc = """<step id="call" retry="2" retry-delay="1s"><script>
const r = await services.http.request({method: "POST",
  url: "http://model/orders/" + services.secret("LAB_TOKEN")}, {name: "order"});
return r.data.path;
</script></step>"""
    result = woml(ip, "--clients 3 --fault order@1=status=503", doc)
    for run in result.runs:
        step = run.steps["call"]
        assert [a.outcome for a in step.attempts] == ["threw", "succeeded"]
        assert step.attempts[0].calls[0].injected == "status=503 (--fault order@1=status=503)"
        assert step.result == "/orders/⟦woml-secret:LAB_TOKEN⟧"
    assert [r.attempt for r in result.traffic] == [2, 2, 2]  # status=503: nothing sent


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ("--clients 50000", "--clients 50000: give 1 to 10,000 clients"),
        ("--clients 3 --outage bogus", "--outage bogus: invalid outage 'bogus'"),
        ("--clients 3 --server nosuch", "--server nosuch: unknown server model 'nosuch'; "
                                        "choose one of unlimited, capacity, throttle, occ"),
        ("--clients 3 --what-if jitter=nope", "--what-if jitter=nope: unknown jitter 'nope'; "
                                              "choose one of full, equal, decorrelated"),
        ("--clients 3 --capacity -1", "--capacity -1: give a positive number"),
        ("--clients 3 --server http://127.0.0.1:9/ --what-if jitter=full",
         "--what-if needs a server model, and --server http://127.0.0.1:9/ is a real API"),
    ],
    ids=["clients", "outage", "server", "what-if", "capacity", "what-if-real-api"],
)
def test_a_bad_lab_flag_is_one_usage_line_naming_it(
    ip: InteractiveShell, flags: str, says: str
) -> None:
    # spec §11, STYLE 6: UsageError itself (one line, no traceback), naming the flag and
    # what is allowed; the lab's client limit (real runs).
    doc = '<step id="a"><script>return 1;</script></step>'
    with pytest.raises(UsageError) as info:
        woml(ip, flags, doc)
    assert type(info.value) is UsageError
    assert says in str(info.value)
    assert "\n" not in str(info.value)
