"""The magics' arguments as typed objects, and ``%woml``'s subcommands as one table
(spec §6.1, §6.2, §11; ``magic/arguments.py``, ``magic/line.py``).

Every flag argparse parses reaches the frozen ``CellArgs``/``LineArgs`` built in one
place; the lab's flags are their own argparse group; the lab's checks run once; each
``%woml`` subcommand is a row of ``SUBCOMMANDS``, so its usage and its dispatch agree.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from woml_magic.editing.flags import flags_of
from woml_magic.magic import WomlMagics, line, options
from woml_magic.magic.arguments import CellArgs, LabArgs
from woml_magic.magic.line import SUBCOMMANDS, USAGE, LineArgs, Subcommand

DOC = '<step id="s"><script>return 1;</script></step>'


@pytest.fixture
def ip(ip: InteractiveShell) -> InteractiveShell:
    return ip


def magics(ip: InteractiveShell) -> WomlMagics:
    found = ip.magics_manager.registry[WomlMagics.__name__]
    assert isinstance(found, WomlMagics)
    return found


def leaves(value: Any) -> list[Any]:
    """Every field value of a (nested) dataclass, tuples opened."""
    if dataclasses.is_dataclass(value):
        return [leaf for f in dataclasses.fields(value)
                for leaf in leaves(getattr(value, f.name))]
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def marked(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """A Namespace holding a value of its own for each of ``parser``'s destinations."""
    ns = argparse.Namespace()
    for action in parser._actions:
        if action.dest == "help":
            continue
        mark: Any = f"<{action.dest}>"
        if action.dest == "clock":
            mark = "simulated"  # a clock is read as a ClockKind
        elif isinstance(action, argparse._AppendAction) or action.nargs == "*":
            mark = [mark]
        setattr(ns, action.dest, mark)
    return ns


@pytest.mark.parametrize(("magic", "typed"), [("woml_cell", CellArgs), ("woml_line", LineArgs)])
def test_every_flag_the_parser_knows_reaches_the_typed_arguments(
    ip: InteractiveShell, magic: str, typed: Any
) -> None:
    parser = getattr(magics(ip), magic).parser
    ns = marked(parser)
    args = typed.of(ns)
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.journal = "x"
    found = leaves(args)
    for dest, mark in vars(ns).items():
        assert (mark[0] if isinstance(mark, list) else mark) in found, (
            f"{typed.__name__}.of does not read the parser's {dest}"
        )


def test_the_labs_flags_are_their_own_group_and_the_editor_still_sees_them(
    ip: InteractiveShell,
) -> None:
    parser = magics(ip).woml_cell.parser
    group = next(g for g in parser._action_groups if g.title == "retry lab (spec §11)")
    dests = {a.dest for a in group._group_actions}
    assert dests == {f.name for f in dataclasses.fields(LabArgs)}
    names = [f.name for f in flags_of(parser)]
    assert {"--clients", "--what-if", "--clock", "--engine"} <= set(names)
    help_text = parser.format_help()
    assert help_text.index("retry lab (spec §11):") < help_text.index("--clients N  ")


def test_the_labs_checks_run_once_per_cell(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[CellArgs] = []
    check = options.check_lab

    def counted(args: CellArgs) -> None:
        calls.append(args)
        check(args)

    monkeypatch.setattr(options, "check_lab", counted)
    result = ip.run_cell_magic("woml", "--clients 2 --seed 1", DOC)
    assert len(result.runs) == 2
    assert [args.lab for args in calls] == [LabArgs(clients=2, seed=1)]


@pytest.mark.parametrize("flag", ["--namespace ns", "--task-queue q", "--engine local"])
def test_an_engine_flag_does_not_apply_to_a_lab(ip: InteractiveShell, flag: str) -> None:
    # spec §11: the lab's clients run on the local engine of one lab, nowhere else.
    with pytest.raises(UsageError, match=f"^{flag.split(maxsplit=1)[0]} does not apply"):
        ip.run_cell_magic("woml", f"--clients 2 {flag}", DOC)


def test_every_subcommand_is_a_row_and_the_usage_lists_them(ip: InteractiveShell) -> None:
    assert list(SUBCOMMANDS) == ["runs", "show", "compare", "save", "cancel", "secret"]
    assert USAGE == (
        "runs [--journal PATH] | show RUN_ID [--journal PATH] | compare RUN_ID RUN_ID "
        "[RUN_ID …] [--labels A,B,…] [--journal PATH] | save RUN_ID FILE "
        "[--theme light|dark] [--scale N] [--journal PATH] | cancel RUN_ID | secret [NAME]"
    )
    positional = next(a for a in magics(ip).woml_line.parser._actions
                      if a.dest == "subcommand")
    assert positional.help == ", ".join(SUBCOMMANDS)
    with pytest.raises(UsageError, match=r"^%woml has no subcommand 'list'; use one of: "):
        ip.run_line_magic("woml", "list")


def test_a_row_added_to_the_table_is_a_subcommand(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[LineArgs] = []
    row = Subcommand(lambda _m, args: seen.append(args) or "pong", word="RUN_ID",
                     journal=False)
    monkeypatch.setitem(line.SUBCOMMANDS, "ping", row)
    assert ip.run_line_magic("woml", "ping r1") == "pong"
    assert [(a.subcommand, a.word) for a in seen] == [("ping", "r1")]
    with pytest.raises(UsageError, match=r"^%woml ping needs a run id: %woml ping RUN_ID$"):
        ip.run_line_magic("woml", "ping")
    with pytest.raises(UsageError, match=r"^%woml ping takes no --journal"):
        ip.run_line_magic("woml", "ping r1 --journal j.sqlite3")
    with pytest.raises(UsageError, match=r"^%woml ping takes no file"):
        ip.run_line_magic("woml", "ping r1 out.svg")
