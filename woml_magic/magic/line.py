"""The ``%woml`` line magic's subcommands (spec §6.2, §6.3, §10.1, §10.4): ``runs``,
``show``, ``compare``, ``save``, ``cancel`` and ``secret``, dispatched by one table
(``SUBCOMMANDS``).

Each row says what its subcommand takes — its word (a run id, a secret's name), a
file, a journal — and does; the table's rows are also the usage every refusal offers
and the help of the subcommand argument, so adding a subcommand is one row and one
function. The session state they use (journals, background runs, secrets, settings)
is the ``WomlMagics`` instance's (STYLE 7).
"""

# IPython's argument decorators are untyped (STYLE 8).
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import argparse
import dataclasses
import getpass
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument

from .. import api
from ..api import Run
from ..errors import WomlError, WomlExtraMissing, WomlImageError, excerpt, quote
from ..timeline.theme import PALETTES
from . import options
from .arguments import ENGINES_NOW, EngineArgs, declared
from .display import RunTable
from .support import as_usage_errors, stopped_at, wait_done

if TYPE_CHECKING:
    from .cell import WomlMagics


@dataclass(frozen=True)
class LineArgs:
    """A ``%woml`` line (spec §6.2): the subcommand, its word, file and options.

    ``file`` is the word after the first (``save``'s image, ``compare``'s second run)
    and ``more`` the words after it (``compare``'s further runs)."""

    subcommand: str | None
    word: str | None  # the run id; the secret's name, for ``secret``
    file: str | None
    theme: str | None
    scale: float | None
    journal: str | None
    where: EngineArgs
    labels: str | None = None
    more: tuple[str, ...] = ()

    @classmethod
    def of(cls, ns: argparse.Namespace) -> LineArgs:
        """The one place a ``%woml`` line's ``Namespace`` is read."""
        rest = list(ns.file)
        return cls(
            subcommand=ns.subcommand, word=ns.run_id, file=rest[0] if rest else None,
            theme=ns.theme, scale=ns.scale, journal=ns.journal,
            where=EngineArgs(engine=ns.engine, temporal=ns.temporal, namespace=ns.namespace),
            labels=ns.labels, more=tuple(rest[1:]),
        )


@dataclass(frozen=True)
class Subcommand:
    """One row of ``SUBCOMMANDS``: what the subcommand takes, and what it does."""

    run: Callable[[WomlMagics, LineArgs], Any]
    word: str | None = None  # its word's name in messages; None: it takes none
    word_needed: bool = True
    file: bool = False  # save: the image to write
    runs: bool = False  # compare: two run ids or more
    journal: bool = True  # cancel reads no journal: it cancels a background run
    options: str = ""  # the rest of its usage

    def usage(self, name: str) -> str:
        word = "" if self.word is None else f" {self.word}" if self.word_needed \
            else f" [{self.word}]"
        return f"{name}{word}{' FILE' if self.file else ''}{self.options}"


def _runs(magics: WomlMagics, args: LineArgs) -> RunTable:
    """``%woml runs``: the journal's runs, newest first (spec §6.2)."""
    journal = magics.journal(args.journal)
    with as_usage_errors(None):
        return RunTable(journal.path, journal.runs())


def _load(magics: WomlMagics, args: LineArgs) -> Run:
    """``%woml show RUN_ID``, and the run ``save`` draws: from the journal, or from its
    Temporal workflow's history (spec §6.2, §9)."""
    run_id = str(args.word)
    if (args.where.engine or magics.settings.engine) == "temporal" and args.journal is None:
        _, temporal = options.engine(args.where, magics.settings, "temporal")
        with as_usage_errors(None):
            return api.fetch_run(run_id, engine="temporal", temporal=temporal)
    journal = magics.journal(args.journal)
    if not journal.has_run(run_id):
        raise UsageError(
            f"%woml {args.subcommand} {excerpt(run_id, 0, 60)[0]}: no run {quote(run_id)} in "
            f"the journal {journal.path}; `%woml runs` lists the runs it holds"
        )
    with as_usage_errors(None):
        return journal.load(run_id)


def _compare(magics: WomlMagics, args: LineArgs) -> Any:
    """``%woml compare RUN_A RUN_B [...]``: the runs' lanes on one time axis, labelled by
    run (spec §10.4), each run loaded as ``show`` loads it."""
    ids = [str(args.word), *([args.file] if args.file is not None else []), *args.more]
    if len(ids) < 2:
        raise UsageError(
            f"%woml compare needs two run ids or more: %woml compare {ids[0]} RUN_ID "
            "(`%woml runs` lists the runs of the journal)"
        )
    from ..timeline.compare import compare  # the timeline loads on first use

    runs = [_load(magics, dataclasses.replace(args, word=run_id)) for run_id in ids]
    labels = None if args.labels is None else [w.strip() for w in args.labels.split(",")]
    try:
        return compare(*runs, labels=labels)
    except (TypeError, WomlError) as exc:
        raise UsageError(f"%woml compare: {str(exc).replace('compare() ', '', 1)}") from None


def _save(magics: WomlMagics, args: LineArgs) -> None:
    """``%woml save RUN_ID FILE``: the run's timeline as an image (spec §6.3), the same
    drawing as the notebook's; prints where it went."""
    if args.file is None:
        raise UsageError(
            f"%woml save {args.word} needs a file: %woml save {args.word} FILE.svg "
            "(or FILE.png)"
        )
    run = _load(magics, args)
    # Only the options given: Run.save's own defaults are the others' (one place).
    chosen: dict[str, Any] = {"theme": args.theme, "scale": args.scale}
    given = {name: value for name, value in chosen.items() if value is not None}
    try:
        path = run.save(args.file, **given)
    except (WomlImageError, WomlExtraMissing) as exc:
        raise UsageError(f"%woml save {args.word}: {exc}") from None
    print(f"saved the timeline of run {run.id} ({run.status}) to {path}")


def _cancel(magics: WomlMagics, args: LineArgs) -> None:
    """``%woml cancel RUN_ID``: cancel a background run of this session (spec §6.1)."""
    run_id = str(args.word)
    handle = magics.handles.get(run_id)
    if handle is None:
        known = ", ".join(sorted(magics.handles)) or "none"
        raise UsageError(
            f"%woml cancel {run_id}: no background run {run_id!r} in this session "
            f"(background runs: {known})"
        )
    if handle.done():
        raise UsageError(
            f"%woml cancel {run_id}: run {run_id!r} has already finished "
            f"({stopped_at(handle)}); there is nothing to cancel"
        )
    handle.cancel()
    wait_done(handle)
    print(f"run {run_id} cancelled: {stopped_at(handle)}")


def _secret(magics: WomlMagics, args: LineArgs) -> None:
    """``%woml secret NAME``: ask for a value with a password prompt and keep it in this
    kernel's memory only (spec §10.1); without a name, list the names set."""
    name = args.word
    if name is None:
        names = magics.secret_names()
        print("secrets set: " + (", ".join(names) if names else "none") +
              " (set one with %woml secret NAME)")
        return
    if not name.isidentifier():
        raise UsageError(
            f"%woml secret {name}: a secret's name is letters, digits and _ "
            "(not starting with a digit), e.g. STRIPE_KEY"
        )
    value = getpass.getpass(f"value of secret {name} (hidden): ")
    if not value:
        raise UsageError(f"%woml secret {name}: nothing was entered; {name} is unchanged")
    magics.secrets[name] = value
    print(f"secret {name} set for this session, in kernel memory only; a script reads "
          f'it as services.secret("{name}")')


#: The subcommands, in the order their usage lists them (spec §6.2).
SUBCOMMANDS: dict[str, Subcommand] = {
    "runs": Subcommand(_runs, options=" [--journal PATH]"),
    "show": Subcommand(_load, word="RUN_ID", options=" [--journal PATH]"),
    "compare": Subcommand(_compare, word="RUN_ID", runs=True,
                          options=" RUN_ID [RUN_ID …] [--labels A,B,…] [--journal PATH]"),
    "save": Subcommand(_save, word="RUN_ID", file=True,
                       options=f" [--theme {'|'.join(PALETTES)}] [--scale N] [--journal PATH]"),
    "cancel": Subcommand(_cancel, word="RUN_ID", journal=False),
    "secret": Subcommand(_secret, word="NAME", word_needed=False, journal=False),
}
USAGE = " | ".join(sub.usage(name) for name, sub in SUBCOMMANDS.items())


def dispatch(magics: WomlMagics, args: LineArgs) -> Any:
    """Check the line against its subcommand's row, then run it (spec §6.2)."""
    name = args.subcommand
    sub = SUBCOMMANDS.get(name) if name is not None else None
    if sub is None:
        what = "needs a subcommand" if name is None else f"has no subcommand {quote(name)}"
        raise UsageError(f"%woml {what}; use one of: {USAGE}")
    if args.more and not sub.runs:
        raise UsageError(
            f"%woml {name} takes {'one file' if sub.file else 'no file'}; got also "
            f"{quote(' '.join(args.more))}"
        )
    if args.labels is not None and not sub.runs:
        raise UsageError(f"%woml {name} takes no --labels; only %woml compare does")
    if args.file is not None and not sub.file and not sub.runs:
        raise UsageError(
            f"%woml {name} takes no file (got {quote(args.file)}); only %woml save "
            "RUN_ID FILE does"
        )
    if args.word is not None and sub.word is None:
        raise UsageError(f"%woml {name} takes no run id (got {quote(args.word)})")
    if args.word is None and sub.word is not None and sub.word_needed:
        raise UsageError(
            f"%woml {name} needs a {'run id' if sub.word == 'RUN_ID' else sub.word}: "
            f"%woml {name} {sub.word}"
        )
    if args.journal is not None and not sub.journal:
        raise UsageError(f"%woml {name} takes no --journal; it reads no journal")
    return sub.run(magics, args)


line_arguments = declared([
    argument("subcommand", nargs="?", default=None, help=", ".join(SUBCOMMANDS)),
    argument("run_id", nargs="?", default=None,
             help="the run, for show, compare, save and cancel; the secret's name, for secret"),
    argument("file", nargs="*", default=[], metavar="FILE",
             help="save: the image to write, FILE.svg or FILE.png (spec §6.3); compare: "
             "the other runs' ids (spec §10.4)"),
    argument("--labels", metavar="A,B", default=None,
             help="compare: the runs' labels, comma separated, one per run; default each "
             "run's workflow and run id."),
    argument("--theme", choices=tuple(PALETTES), default=None,
             help="save: the image's colours, JupyterLab's light or dark; default light."),
    argument("--scale", metavar="N", type=float, default=None,
             help="save: a PNG's pixels per drawing px; default 2 (crisp on slides)."),
    argument("--journal", metavar="PATH", default=None,
             help="The journal to read; default Woml.journal."),
    argument("--engine", choices=ENGINES_NOW, default=None,
             help="show, save: read the run from this engine (temporal: the workflow's "
             "history)."),
    argument("--temporal", metavar="HOST:PORT", default=None, help="show, save: the cluster."),
    argument("--namespace", metavar="NS", default=None, help="show, save: the namespace."),
])
