"""Folders a module puts on ``sys.path`` as it runs, where its source's absolute imports then
also start.

torchxrayvision's ``baseline_models/jfhealthcare/__init__.py`` runs ``thisfolder =
os.path.dirname(__file__)`` and ``sys.path.insert(0, thisfolder)`` before ``from .model import
classifier``, and the modules of that ``model`` package import each other as ``from
model.utils import get_norm``. ``model`` is no top-level module of the corpus, so the index
took it for a package the user lacks: 17 files kept ``from model.utils import ...`` and raised
ModuleNotFoundError where upstream's modules import.

``sys_path_folders`` finds, among a module's top-level statements (and those in the branches of
a top-level ``if``/``try``), the calls ``sys.path.insert(i, X)`` and ``sys.path.append(X)``
whose ``X`` it can work out without running anything: ``__file__`` through
``os.path.dirname``/``abspath``/``realpath``/``normpath``/``join`` with literal parts,
``pathlib.Path(__file__)``'s ``.parent``/``.parents[k]``/``/ "part"``/``.resolve()``/``str()``, and names
bound above to such a value. It gives each folder as a path relative to the source's root, the
way ``ModuleFacts.relpath`` is; a folder outside the source is left out. A literal relative
path (KAIR's ``sys.path.insert(0, 'models')``) points into the working folder, wherever the
script runs: it is kept marked (``CWD``), as a folder scripts run at the root would add.
engine.bindings looks an absolute module up under such a folder where the source has no
module of that name itself.
"""

from __future__ import annotations

import ast
import posixpath

_PATH_FUNCS = {"abspath", "realpath", "normpath"}
# marks a folder given as a relative path of its own (KAIR's ``sys.path.insert(0, 'models')``),
# which depends on the working folder: ``cwd:models``, if the scripts run at the source's root
CWD = "cwd:"


def sys_path_folders(body: list[ast.stmt], relpath: str) -> tuple[str, ...]:
    """The folders, relative to the source's root, that the module's top-level statements add
    to ``sys.path`` (see the module's docstring)."""
    here = posixpath.dirname(relpath)
    names: dict[str, str] = {}
    found: list[str] = []
    for st in _top_level(body):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], ast.Name):
            value = _folder(st.value, here, names)
            if value is not None:
                names[st.targets[0].id] = value
            else:
                names.pop(st.targets[0].id, None)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            arg = _path_arg(st.value)
            folder = _folder(arg, here, names) if arg is not None else None
            if folder is not None and folder not in found:
                found.append(folder)
    return tuple(f for f in found if f.removeprefix(CWD) != ".."
                 and not f.removeprefix(CWD).startswith("../"))


def _top_level(body: list[ast.stmt]):
    for st in body:
        yield st
        if isinstance(st, ast.If):
            yield from _top_level(st.body)
            yield from _top_level(st.orelse)
        elif isinstance(st, ast.Try):
            yield from _top_level(st.body)
            for h in st.handlers:
                yield from _top_level(h.body)
            yield from _top_level(st.orelse)


def _path_arg(call: ast.Call) -> ast.expr | None:
    """``X`` of ``sys.path.insert(i, X)`` / ``sys.path.append(X)``."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute)
            and f.value.attr == "path" and isinstance(f.value.value, ast.Name)
            and f.value.value.id == "sys") or call.keywords:
        return None
    if f.attr == "insert" and len(call.args) == 2:
        return call.args[1]
    if f.attr == "append" and len(call.args) == 1:
        return call.args[0]
    return None


def _folder(node: ast.expr, here: str, names: dict[str, str]) -> str | None:
    """The path ``node`` stands for, relative to the source's root, with ``__file__`` the
    module's own file; None where it cannot be worked out."""
    path = _path(node, here, names)
    if path is None or path.endswith("/__file__") or path == "__file__":
        return None
    return posixpath.normpath(path) if path else "."


def _path(node: ast.expr, here: str, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return posixpath.join(here, "__file__") if here else "__file__"
        return names.get(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        # a path of its own: where it points depends on the working folder (CWD)
        if not node.value or posixpath.isabs(node.value):
            return None
        return CWD + posixpath.normpath(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = node.args
        if name == "dirname" and len(args) == 1:
            inner = _path(args[0], here, names)
            return None if inner is None else _up(inner)
        if name in _PATH_FUNCS and len(args) == 1:
            return _path(args[0], here, names)
        if name == "join" and args:
            first = _path(args[0], here, names)
            rest = [a.value for a in args[1:] if isinstance(a, ast.Constant)
                    and isinstance(a.value, str)]
            if first is None or len(rest) != len(args) - 1:
                return None
            return posixpath.normpath(posixpath.join(first, *rest)) if rest else first
        if name in ("Path", "PurePath", "str", "fspath") and len(args) == 1:
            return _path(args[0], here, names)
        if name in ("resolve", "absolute") and isinstance(func, ast.Attribute) and not args:
            return _path(func.value, here, names)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
            isinstance(node.right, ast.Constant) and isinstance(node.right.value, str):
        inner = _path(node.left, here, names)  # ``Path(__file__).parent / "lib"``
        return None if inner is None else posixpath.normpath(
            posixpath.join(inner, node.right.value))
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _path(node.value, here, names)
        return None if inner is None else _up(inner)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "parents" and isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, int):
        inner = _path(node.value.value, here, names)
        for _ in range(node.slice.value + 1):
            if inner is None:
                return None
            inner = _up(inner)
        return inner
    return None


def _up(path: str) -> str:
    """The folder holding ``path`` (relative to the source's root, ``..`` above it)."""
    path = posixpath.normpath(path) if path else "."
    if path == ".":
        return ".."
    if path == ".." or path.startswith("../"):
        return posixpath.join(path, "..")
    return posixpath.dirname(path)
