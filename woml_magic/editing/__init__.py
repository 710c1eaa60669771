"""The editor's kernel side, below the magic (spec §6.4): what to complete at a cursor in
a ``%%woml`` cell, what help to show there, and the diagnostics of a cell as it is typed.

- ``place``: where a cursor stands in a cell being typed (the ``%%woml`` line, a tag,
  a script);
- ``script``: what it is on inside a ``<script>`` (members, request keys, strings);
- ``entries``: the reference entries (description, default, example) of every name;
- ``flags``: the magic's flags, read from its own parser;
- ``complete``: the completions at a cursor;
- ``help``: the help text at a cursor;
- ``diagnostics``: the parser's error and the key linter's warnings, positioned.

Pure functions of the cell's text: no IPython, no kernel, no script is run (the
adapter is ``magic/editor.py``). Import them from their modules —
``editing.complete.complete``, ``editing.help.help_at``,
``editing.diagnostics.diagnostics`` — so that asking one question loads only what it
needs (the linter loads with the first diagnostics, the script reader with the first
completion).
"""
