"""The editor's kernel side in IPython and ipykernel (spec §6.4): completion, help and
the diagnostics comm of ``%%woml`` cells, over the pure ``woml_magic.editing``.

Installed by ``load_ipython_extension``, removed by ``unload_ipython_extension``:

- **Completion**: a matcher (IPython's matcher API v2, ``context_matcher``) in
  ``shell.Completer.custom_matchers``. In a ``%%woml`` cell it returns the editing
  completions with ``suppress: True``, so Python's do not mix in; elsewhere it returns
  nothing and IPython completes as ever. Works for every front end that asks the kernel
  (``complete_request``) and in the IPython terminal.
- **Help**: ``inspect_request`` (Shift+Tab, ``?``) reaches ``kernel.do_inspect`` with the
  cell's text and cursor, which ``shell.object_inspect_mime`` never sees; the kernel's
  ``do_inspect`` is wrapped (on the instance) to answer ``%%woml`` cells with
  ``editing.help.help_at`` and to call the original, unchanged, for every other cell.
  ``do_complete`` is wrapped the same way, for ``%%woml`` cells only, to add each
  completion's detail as its ``signature`` and to answer nothing where the matcher has
  nothing (IPython would fall back to Jedi over the XML).
- **Diagnostics**: a Jupyter comm target ``woml.diagnostics`` on the kernel's
  ``comm_manager`` (nothing without a kernel, e.g. plain IPython). The protocol, for
  the front end that implements the other side:

  1. The front end opens a comm with ``target_name: "woml.diagnostics"`` (no data
     needed).
  2. Each message it sends on the comm has ``data``::

         {"id": <int>, "code": <the cell's whole text, %%woml line included>}

  3. The kernel answers on the same comm, one message per request, ``data``::

         {"id": <the same id>,
          "diagnostics": [{"line": <int>, "column": <int>,
                           "endLine": <int or null>, "endColumn": <int or null>,
                           "severity": "error" | "warning",
                           "message": <str>,
                           "source": "parser" | "lint"}, …]}

     Lines and columns are 1-based, in the cell as the editor shows it: the ``%%woml``
     line is line 1; columns count Unicode code points (as ``cursor_pos`` does; a
     JavaScript editor converts to UTF-16 where the line holds astral characters); the
     end is exclusive. ``diagnostics`` is ``[]`` for a clean cell and for a cell that is
     not a ``%%woml`` cell. A message the kernel cannot read (not an object, ``code``
     not a string) gets ``{"id": <its id or null>, "diagnostics": [], "error": <why>}``.
  4. Answers come in request order; a front end keeps only the answer to its latest
     id. The kernel answers when it is idle (comm messages queue behind a running
     cell); closing the comm, or unloading the extension, ends it.

  Only the parser and the key linter run (``editing.diagnostics.diagnostics``): no script is
  compiled or run and nothing touches the network.
"""

# IPython's completer and the kernel's comms are untyped (STYLE 8).
# mypy: disable-error-code="no-untyped-call,untyped-decorator"

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..editing.flags import Flag, flags_of
from ..editing.place import is_woml_cell

if TYPE_CHECKING:
    from ..editing.complete import Completions

TARGET = "woml.diagnostics"
#: Where ipykernel puts each completion's type and signature in a ``complete_reply``.
_TYPES = "_jupyter_types_experimental"
#: Run before IPython's own matchers, so that in a ``%%woml`` cell Jedi never runs.
_PRIORITY = 100


class Editor:
    """Completion, help and diagnostics of ``%%woml`` cells for one shell (spec §6.4).

    Made and installed by ``install``; ``close`` removes everything it added.
    """

    def __init__(self, shell: Any, parser: Any, secret_names: Callable[[], list[str]]) -> None:
        self._shell = shell
        self._parser = parser
        self._secret_names = secret_names
        self._matcher = self._make_matcher()
        self._handlers: dict[str, Callable[..., Any]] = {}  # the kernel's, wrapped
        self._comms: list[Any] = []
        self._kernel: Any = None

    @classmethod
    def install(cls, shell: Any, parser: Any, secret_names: Callable[[], list[str]]) -> Editor:
        """Install on ``shell`` for the cell magic whose argparse parser is ``parser``."""
        editor = cls(shell, parser, secret_names)
        shell.Completer.custom_matchers.append(editor._matcher)
        kernel = getattr(shell, "kernel", None)
        if kernel is not None:
            editor._kernel = kernel
            for name, answer in (("do_complete", editor.complete_reply),
                                 ("do_inspect", editor.inspect_reply)):
                editor._handlers[name] = editor._wrap(getattr(kernel, name), answer)
                setattr(kernel, name, editor._handlers[name])
            kernel.comm_manager.register_target(TARGET, editor._open)
        return editor

    # The flags and the usage are read from the parser at each request (a few dozen
    # actions, microseconds): its choices are live (``--engine``: ``api.ENGINES``), so an
    # engine registered after the extension loaded completes too (STYLE 14).
    @property
    def flags(self) -> tuple[Flag, ...]:
        """The cell magic's flags, from its parser (``editing.flags``)."""
        return flags_of(self._parser)

    @property
    def usage(self) -> str:
        """The cell magic's help, as ``%%woml?`` shows it."""
        shown = copy.copy(self._parser)
        shown.prog = "%woml"  # IPython's help formatter writes a line magic's "%" before it
        return str(shown.format_help()).removeprefix("::\n\n")

    def close(self) -> None:
        """Remove the matcher, the kernel handlers' wrappers and the comm target; close
        the comms still open."""
        with contextlib.suppress(ValueError):
            self._shell.Completer.custom_matchers.remove(self._matcher)
        kernel, self._kernel = self._kernel, None
        if kernel is None:
            return
        for name, handler in self._handlers.items():
            if vars(kernel).get(name) is handler:
                delattr(kernel, name)  # the class's own method again
        self._handlers.clear()
        if kernel.comm_manager.targets.get(TARGET) == self._open:
            kernel.comm_manager.unregister_target(TARGET, self._open)
        for comm in self._comms:
            with contextlib.suppress(Exception):  # a comm whose front end has gone
                comm.close()
        self._comms.clear()

    # -- completion ---------------------------------------------------------------------

    def _make_matcher(self) -> Callable[[Any], dict[str, Any]]:
        from IPython.core.completer import SimpleCompletion, context_matcher

        @context_matcher(identifier="woml_magic.editing", priority=_PRIORITY)
        def woml_matcher(context: Any) -> dict[str, Any]:
            """Complete inside ``%%woml`` cells (spec §6.4); nothing elsewhere."""
            text: str = context.full_text
            if not is_woml_cell(text):
                return {"completions": []}
            from ..editing.complete import complete
            lines = text.split("\n")
            row = min(context.cursor_line, len(lines) - 1)
            cursor = sum(len(line) + 1 for line in lines[:row]) + context.cursor_position
            found = complete(text, cursor, flags=self.flags, secrets=self._secret_names())
            if found is None:
                return {"completions": []}
            return {
                "completions": [SimpleCompletion(c.text, type=c.kind) for c in found.items],
                "matched_fragment": text[found.start : found.end],
                "suppress": True,
                "ordered": True,
            }

        return woml_matcher  # type: ignore[no-any-return]

    def complete_reply(self, code: str, cursor_pos: int | None,
                       original: Callable[..., Any]) -> Any:
        """The ``complete_reply`` content for a ``%%woml`` cell (spec §6.4).

        The matcher answers through IPython (``original``, the kernel's own
        ``do_complete``); this only adds what the matcher API cannot carry: each
        completion's detail as its ``signature`` in ``_jupyter_types_experimental``, and
        an empty answer where the matcher has nothing — IPython would then fill the
        menu with Python's completions of XML (and spend ~0.2 s in Jedi on it).
        """
        from ..editing.complete import complete  # the script reader loads on first use

        cursor = len(code) if cursor_pos is None else cursor_pos
        found = complete(code, cursor, flags=self.flags, secrets=self._secret_names())
        if found is None:
            return original(code, cursor_pos)
        if not found.items:
            return _complete_content([], cursor, cursor)
        reply = original(code, cursor_pos)
        if inspect.isawaitable(reply):
            return _decorated_async(reply, found)
        return _decorated(reply, found)

    # -- the kernel's handlers ----------------------------------------------------------

    def _wrap(self, original: Callable[..., Any],
              answer: Callable[[str, int | None, Callable[..., Any]], Any]) -> Callable[..., Any]:
        """The kernel's ``original`` handler, with ``answer`` for ``%%woml`` cells."""

        def plain(code: str, cursor_pos: int | None) -> Any:
            return original(code, cursor_pos)

        if inspect.iscoroutinefunction(original):

            async def handler_async(code: str, cursor_pos: int | None, *args: Any,
                                    **kwargs: Any) -> Any:
                if is_woml_cell(code):
                    result = answer(code, cursor_pos, plain)
                    return await result if inspect.isawaitable(result) else result
                return await original(code, cursor_pos, *args, **kwargs)

            return handler_async

        def handler(code: str, cursor_pos: int | None, *args: Any, **kwargs: Any) -> Any:
            if is_woml_cell(code):
                return answer(code, cursor_pos, plain)
            return original(code, cursor_pos, *args, **kwargs)

        return handler

    # -- help ---------------------------------------------------------------------------

    def inspect_reply(self, code: str, cursor_pos: int | None,
                      _original: Callable[..., Any] | None = None) -> dict[str, Any]:
        """The ``inspect_reply`` content for a ``%%woml`` cell (spec §6.4): never
        IPython's, which would describe the Python object of the same name."""
        from ..editing.help import help_at

        cursor = len(code) if cursor_pos is None else cursor_pos
        text = help_at(code, cursor, usage=self.usage, flags=self.flags)
        data = {} if text is None else {"text/plain": text}
        return {"status": "ok", "found": text is not None, "data": data, "metadata": {}}

    # -- diagnostics --------------------------------------------------------------------

    def _open(self, comm: Any, _open_msg: Any) -> None:
        self._comms.append(comm)
        comm.on_msg(lambda msg: comm.send(self.answer(msg["content"]["data"])))

        def closed(_msg: Any) -> None:
            if comm in self._comms:
                self._comms.remove(comm)

        comm.on_close(closed)

    @staticmethod
    def answer(data: Any) -> dict[str, Any]:
        """The answer to one ``woml.diagnostics`` message (see the module docstring)."""
        if not isinstance(data, dict):
            return {"id": None, "diagnostics": [], "error": "a message is an object "
                    '{"id": <int>, "code": <the cell\'s text>}'}
        ident = data.get("id")
        code = data.get("code")
        if not isinstance(code, str):
            return {"id": ident, "diagnostics": [],
                    "error": f"code must be the cell's text, got {type(code).__name__}"}
        from ..editing.diagnostics import diagnostics  # the linter loads on first use

        return {"id": ident, "diagnostics": [d.to_json() for d in diagnostics(code)]}


def _complete_content(items: list[dict[str, Any]], start: int, end: int) -> dict[str, Any]:
    """A ``complete_reply`` as ipykernel builds it (``_experimental_do_complete``)."""
    return {"matches": [i["text"] for i in items], "cursor_start": start, "cursor_end": end,
            "metadata": {_TYPES: items}, "status": "ok"}


def _decorated(reply: Any, found: Completions) -> Any:
    """IPython's ``reply`` (from the matcher) with each completion's detail as its
    ``signature``, where the front end shows one."""
    if not isinstance(reply, dict):
        return reply
    details = {c.text: c.detail for c in found.items}
    for item in reply.get("metadata", {}).get(_TYPES, ()):
        if isinstance(item, dict) and not item.get("signature") and item.get("text") in details:
            item["signature"] = details[item["text"]]
    return reply


async def _decorated_async(reply: Any, found: Completions) -> Any:
    return _decorated(await reply, found)
