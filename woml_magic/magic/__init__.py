"""The IPython extension: the ``%%woml`` and ``%woml`` magics (spec §6).

- ``cell``: ``WomlMagics``, the magics themselves, a thin adapter over ``woml_magic.api``;
- ``arguments``: the ``%%woml`` flags, declared once and read into a frozen ``CellArgs``;
- ``line``: the ``%woml`` subcommands, dispatched by one table;
- ``options``: the flags checked and combined with the settings into what a run needs;
- ``display``: what they display (live views, the static timeline, the runs table);
- ``settings``: the ``Woml`` configurable (``%config Woml``);
- ``editor``: completion, help and the diagnostics comm of ``%%woml`` cells (spec §6.4).

The magic imports only the public API (``api``, ``parse``, ``errors``) and its own
modules; nothing below it imports IPython or widgets.
"""

# IPython's event and formatter registries are untyped (STYLE 8).
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import contextlib
from typing import Any

from ..api import Run, default_pool
from .cell import WomlMagics
from .editor import Editor

__all__ = ["WomlMagics", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext woml_magic``: register the magics, ``Woml`` settings, Run display, and
    the editor's completion, help and diagnostics (spec §6.4)."""
    magics = WomlMagics(shell)
    shell.register_magics(magics)
    magics.editor = Editor.install(shell, magics.woml_cell.parser, magics.secret_names)
    shell.configurables.append(magics.settings)
    shell.display_formatter.ipython_display_formatter.for_type(Run, magics.display_run)
    shell.events.register("post_run_cell", magics.settle_views)
    # Spec §4.5: "a warm worker process (started on first use, reused across attempts
    # and runs)". Loading the extension is the user's first use of woml (``import
    # woml_magic`` is not: it stays cheap and starts nothing), so the worker starts
    # now, in the background, and the first cell finds it warm. It is the process's
    # pool's, killed at exit like any idle worker; a kernel that never runs a cell
    # loses nothing but its start, and a worker that cannot start is reported by the
    # first cell that needs one, as before.
    default_pool().warm_up()


def unload_ipython_extension(shell: Any) -> None:
    """Close what the extension owns and remove its magics (``%unload_ext woml_magic``)."""
    manager = shell.magics_manager
    magics = manager.registry.pop(WomlMagics.__name__, None)
    if not isinstance(magics, WomlMagics):
        return
    magics.close()
    with contextlib.suppress(ValueError):  # not registered: loaded by an older version
        shell.events.unregister("post_run_cell", magics.settle_views)
    for kind in ("line", "cell"):
        manager.magics[kind].pop("woml", None)
    if magics.settings in shell.configurables:
        shell.configurables.remove(magics.settings)
    shell.display_formatter.ipython_display_formatter.pop(Run, None)
