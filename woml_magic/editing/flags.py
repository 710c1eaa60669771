"""The ``%%woml`` line's flags as the editor needs them (spec §6.1, §6.4).

The flags are declared once, on the magic (``magic/cell.py``'s ``@argument``s); the
magic's adapter hands its argparse parser to ``flags_of``, which reads each option's
name, help, choices and whether it takes a value or repeats. Nothing here knows a flag
by name.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    """One option of the cell magic's line."""

    name: str  # as written: --clock
    help: str
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    takes_value: bool = False
    repeatable: bool = False

    @property
    def usage(self) -> str:
        """``--clock real|simulated``, ``--payload EXPR``, ``--simulate``."""
        if self.choices:
            return f"{self.name} {'|'.join(self.choices)}"
        if self.takes_value:
            return f"{self.name} {self.metavar or 'VALUE'}"
        return self.name


def flags_of(parser: argparse.ArgumentParser) -> tuple[Flag, ...]:
    """The long options of ``parser``, in declaration order."""
    found: list[Flag] = []
    # argparse has no public list of its actions; `_actions` is the one it keeps.
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        for name in action.option_strings:
            if not name.startswith("--"):
                continue
            found.append(Flag(
                name=name,
                help=" ".join(str(action.help or "").replace("%%", "%").split()),
                choices=tuple(str(c) for c in action.choices or ()),
                metavar=action.metavar if isinstance(action.metavar, str) else None,
                takes_value=action.nargs != 0,
                repeatable=isinstance(action, argparse._AppendAction),
            ))
    return tuple(found)
