"""Build the teaching notebooks from their sources (docs are executed: STYLE 12).

    python notebooks/build.py        # rewrites notebooks/NN-*.ipynb, without outputs

Each notebook has one source beside it, ``NN-name.py`` in jupytext's percent format:
``# %%`` starts a code cell, ``# %% [markdown]`` a markdown cell written as ``# ``
comments. The header sets ``comment_magics: false``, so magics stand in the source
exactly as in the notebook (``%%woml …``, ``%load_ext …``), not commented out as
``# %%woml``, which editors would take for a cell marker. Edit the source, run this
script, commit both; tests/test_notebooks.py fails while a committed notebook is not
what its source builds, and executes every notebook in a real kernel.
"""

# nbformat and jupytext ship no type information (STYLE 8).
# mypy: disable-error-code="no-untyped-call,no-any-return"

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
from nbformat.notebooknode import NotebookNode

HERE = Path(__file__).resolve().parent

#: What the notebooks' Python code is, for viewers that highlight without a kernel
#: (jupytext keeps ``language_info`` out of a source's header).
LANGUAGE_INFO = {"name": "python"}

#: ``# %%woml`` or ``# %load_ext``: a magic commented out, as jupytext writes by default.
COMMENTED_MAGIC = re.compile(r"^#\s*%{1,2}[A-Za-z].*", re.MULTILINE)


def sources() -> list[Path]:
    """The notebooks' sources, ``NN-name.py``, in order."""
    return sorted(HERE.glob("[0-9][0-9]-*.py"))


def notebook(source: Path) -> NotebookNode:
    """The notebook ``source`` describes: its cells, no outputs, stable cell ids."""
    nb = jupytext.read(source, fmt="py:percent")
    for cell in nb.cells:
        if cell.cell_type == "code" and (m := COMMENTED_MAGIC.search(cell.source)):
            raise ValueError(
                f"{source.name}: {m.group()!r} is a commented-out magic; the sources keep "
                "magics as they run (comment_magics: false), so write it without the '# '"
            )
    # Only the kernel travels from the header; the jupytext options describe the source.
    nb.metadata = {"kernelspec": nb.metadata["kernelspec"], "language_info": LANGUAGE_INFO}
    # Stable cell ids, so rebuilding an unchanged notebook changes nothing.
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.name[:2]}-{i:02d}"
    nbformat.validate(nb)
    return nb


def main() -> None:
    for source in sources():
        nb = notebook(source)
        target = source.with_suffix(".ipynb")
        nbformat.write(nb, target)
        print(f"wrote {target.name}: {len(nb.cells)} cells")


if __name__ == "__main__":
    main()
