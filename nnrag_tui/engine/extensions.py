"""Compiled extension modules of a source: modules with no Python source to copy.

A package's compiled extension is a file of the built package (compressai's wheel holds
``compressai/_CXX.cpython-311-x86_64-linux-gnu.so``) or, in a source tree, only a name its
``setup.py`` gives the extension that building the package makes (pytorch3d's checkout has
``csrc/`` and ``CppExtension("pytorch3d._C", ...)``, and its modules run ``from pytorch3d
import _C``). Either way the file keeps upstream's import of it: there is nothing to inline.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def compiled_on_disk(roots: Iterable[str], module: str) -> bool:
    """Whether a source's tree has ``module`` only as a compiled extension (or a stub of
    one, ``.pyi``): no Python source to copy, whichever platform it was built for."""
    parent, _, last = module.replace(".", "/").rpartition("/")
    for root in roots:
        folder = f"{root}/{parent}" if parent else root
        if not root or not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            stem, _, suffix = name.rpartition(".")
            if (suffix in ("so", "pyd") and stem.split(".")[0] == last) or name == f"{last}.pyi":
                return True
    return False


def declared_extensions(roots: Iterable[str]) -> frozenset[str]:
    """The dotted module names the ``setup.py`` at a source's root spells out as string
    literals (``CppExtension("pytorch3d._C", ...)``, ``name="mmcv._ext"``)."""
    out: set[str] = set()
    for root in roots:
        path = os.path.join(root, "setup.py") if root else ""
        if not path or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        out.update(n.value for n in treewalk.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and _DOTTED.fullmatch(n.value))
    return frozenset(out)


class Extensions:
    """``extensions(module)``: whether ``module`` is a compiled extension of the sources
    rooted at ``roots`` (on disk, or declared by a ``setup.py``)."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = [r for r in roots if r]
        self._declared: frozenset[str] | None = None
        self._seen: dict[str, bool] = {}

    def __call__(self, module: str) -> bool:
        hit = self._seen.get(module)
        if hit is None:
            if self._declared is None:
                self._declared = declared_extensions(self.roots)
            hit = module in self._declared or compiled_on_disk(self.roots, module)
            self._seen[module] = hit
        return hit


# torch's builders of an extension from its sources (``torch.utils.cpp_extension``)
_BUILDERS = frozenset({"load", "load_inline"})


def builds_at_import(code: str) -> int | None:
    """The line of the first call that builds a C++ extension as the file ``code`` imports:
    ``torch.utils.cpp_extension.load(...)`` or ``load_inline(...)`` (also as imported by
    name, or under an alias) in a statement run at import, in its ``if``, ``try``, ``with``
    or class body too, but not in a function. easyocr's deformable convolutions compile
    ``deform_conv_cpu.cpp`` that way as they load, which takes a minute or more here, so
    importing their file does too. None where there is none."""
    if "cpp_extension" not in code:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()  # local names of the builders (``from ... import load``)
    modules: set[str] = {"torch.utils.cpp_extension"}  # names of the module itself
    for node in treewalk.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            names.update(a.asname or a.name for a in node.names if a.name in _BUILDERS)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.utils":
            modules.update(a.asname or a.name for a in node.names if a.name == "cpp_extension")
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names
                           if a.name == "torch.utils.cpp_extension" and a.asname)
    found: list[int] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id in names) or (
                    isinstance(func, ast.Attribute) and func.attr in _BUILDERS
                    and dotted(func.value) in modules):
                found.append(node.lineno)
        todo.extend(ast.iter_child_nodes(node))
    return min(found, default=None)
