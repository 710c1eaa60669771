"""The error tree (spec §7: every exception the package raises on purpose derives from
``WomlError``): each class defined in ``woml_magic/errors.py``, drawn there and in
docs/python-api.md exactly as the classes derive, and importable from ``woml_magic``.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic import errors
from woml_magic.errors import WomlError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "woml_magic"

#: Every WomlError class, by name.
TREE = {name: cls for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, WomlError)}


def parent(cls: type) -> str | None:
    """The WomlError class ``cls`` derives from (its other bases are Python's own)."""
    found = [b.__name__ for b in cls.__bases__ if issubclass(b, WomlError)]
    assert len(found) <= 1, f"{cls.__name__} derives from two WomlErrors: {found}"
    return found[0] if found else None


def drawn(text: str) -> dict[str, str | None]:
    """A tree drawn with ├── └── │ as {name: its parent's name}."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for row in text.splitlines():
        root = re.match(r"^( *)(WomlError)\b", row)
        branch = re.match(r"^( *)((?:│   |    )*)[├└]── (\w+)", row)
        if root and not branch:
            stack = ["WomlError"]
            parents["WomlError"] = None
        elif branch and stack:
            depth = len(branch.group(2)) // 4 + 1
            name = branch.group(3)
            stack = [*stack[:depth], name]
            parents[name] = stack[depth - 1]
    return parents


def test_every_woml_error_is_one_the_tree_expects() -> None:
    assert set(TREE) == {
        "WomlError", "WomlSyntaxError", "WomlRunError", "WomlLimitError", "WomlExtraMissing",
        "WomlJournalError", "WomlImageError", "LabModelError", "LabArgumentError",
        "WhatIfError", "TargetError", "DemoAPIError", "CassetteError",
    }
    assert parent(errors.WomlLimitError) == "WomlRunError"
    assert parent(errors.WhatIfError) == "LabModelError"  # one except for the lab's inputs
    for name in ("WomlImageError", "LabModelError", "TargetError", "DemoAPIError"):
        assert issubclass(TREE[name], ValueError), name


@pytest.mark.parametrize("where", ["woml_magic/errors.py", "docs/python-api.md"])
def test_the_drawn_tree_is_the_class_tree(where: str) -> None:
    text = (ROOT / where).read_text(encoding="utf-8")
    if where.endswith(".py"):
        text = ast.get_docstring(ast.parse(text)) or ""
    assert drawn(text) == {name: parent(cls) for name, cls in TREE.items()}


def test_the_tree_reader_reads_depth() -> None:
    text = "WomlError\n├── A\n│   ├── B\n│   │   └── C\n│   └── D\n└── E\n"
    assert drawn(text) == {"WomlError": None, "A": "WomlError", "B": "A", "C": "B",
                           "D": "A", "E": "WomlError"}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_woml_errors_are_defined_in_errors_py_only(path: Path) -> None:
    if path == PACKAGE / "errors.py":
        return
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in node.bases}
            assert not bases & set(TREE), (
                f"woml_magic/{path.relative_to(PACKAGE)}:{node.lineno} defines "
                f"{node.name}, a WomlError: define it in woml_magic/errors.py and draw it "
                "in the tree there and in docs/python-api.md"
            )


@pytest.mark.parametrize("name", sorted(TREE))
def test_every_error_is_importable_from_the_package(name: str) -> None:
    assert name in wm.__all__
    assert getattr(wm, name) is TREE[name]
