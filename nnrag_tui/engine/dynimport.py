"""Module-level imports by computed name: a package that imports its own modules in a loop.

Registry-driven code fills its registries by importing every module of a folder while the
package executes, under names it computes (ml-cvnets' ``cvnets/layers/activation/__init__.py``,
fairseq's ``models``, ``criterions`` and ``optim``)::

    for file in os.listdir(os.path.dirname(__file__)):
        if not file.startswith("_") and ...:
            importlib.import_module("cvnets.layers.activation." + file[:-3])

or through a helper: ``import_models(models_dir, "fairseq.models")``, whose body calls
``importlib.import_module(namespace + "." + model_name)``. Following names never reaches those
modules, yet upstream the registry the block reads (``ACT_FN_REGISTRY["relu"]``) holds what they
register. This module finds such statements from the AST alone and says which package's
modules they import; the resolver takes those modules as imported for the registry rule.

It also finds the module-level statements that bind a name to a module named by one string
(``literal_module_import``): physicsnemo's ``network_module =
importlib.import_module("physicsnemo.models.diffusion_unets")``, which its preconditioners read
by ``getattr(network_module, model_type)``. That name is the module, as ``import ... as`` binds
it (engine.bindings).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.facts import IMPORT_MODULE, Guard, ImportRecord

_IMPORTERS = frozenset({"import_module", "__import__"})


@dataclass(frozen=True)
class FolderImport:
    """A statement importing the modules of ``package`` by computed name; ``public_only``: it
    skips the modules whose names start with ``_`` (``not file.startswith("_")``)."""

    package: str
    public_only: bool


def _importer(call: ast.Call) -> bool:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name in _IMPORTERS and bool(call.args) and not isinstance(call.args[0], ast.Constant)


def computed_imports(node: ast.AST) -> list[ast.Call]:
    """The calls of ``importlib.import_module`` / ``__import__`` in ``node`` whose module name
    is computed (not one string)."""
    return [n for n in treewalk.walk(node) if isinstance(n, ast.Call) and _importer(n)]


def literal_module_import(st: ast.stmt, module: str, is_package: bool,
                          imports: list[ImportRecord]) -> ImportRecord | None:
    """The import ``st``, a module-level ``name = importlib.import_module("a.b")``, makes, as
    ``import a.b as name`` would record it, with guard kind ``IMPORT_MODULE``; None for any other
    statement. ``imports``: the module's imports above it, which say what names importlib's
    function (``importlib.import_module``, ``import_module``). A relative name counts with
    ``__package__`` or ``__name__`` as its anchor (``import_module(".nets", __package__)``)."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)):
        return None
    call = st.value
    if not _calls_import_module(call.func, imports) or len(call.args) > 2:
        return None
    args = {"name": call.args[0] if call.args else None,
            "package": call.args[1] if len(call.args) > 1 else None}
    for k in call.keywords:
        if k.arg not in args or args[k.arg] is not None:
            return None
        args[k.arg] = k.value
    name = _text(args["name"]) if args["name"] is not None else None
    if not name or name.strip(".") != name.lstrip(".") or ".." in name.lstrip("."):
        return None
    level = len(name) - len(name.lstrip("."))
    target = name
    if level:
        anchor = args["package"]
        if not isinstance(anchor, ast.Name) or anchor.id not in ("__name__", "__package__"):
            return None
        parts = (module if anchor.id == "__name__" else _own_package(module, is_package)
                 ).split(".")
        if level - 1 >= len(parts):
            return None
        target = ".".join([*parts[: len(parts) - (level - 1)], *filter(None, [name[level:]])])
    elif args["package"] is not None:
        return None
    bound = st.targets[0].id
    end = st.end_lineno or st.lineno
    return ImportRecord(bound, name.lstrip("."), None, bound, level, target, st.lineno, end,
                        Guard(IMPORT_MODULE, st.lineno, end))


def _calls_import_module(func: ast.expr, imports: list[ImportRecord]) -> bool:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.attr == "import_module":
        # ``import importlib`` or ``import importlib.util``, which binds ``importlib`` too
        return any(r.bound == func.value.id and r.name is None and (
            r.target == "importlib" or (r.asname is None and r.target.startswith("importlib.")))
            for r in imports)
    return isinstance(func, ast.Name) and any(
        r.bound == func.id and r.target == "importlib" and r.name == "import_module"
        for r in imports)


def _skips_private(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "startswith" and len(n.args) == 1
               and isinstance(n.args[0], ast.Constant) and n.args[0].value == "_"
               for n in treewalk.walk(node))


def _own_package(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _pieces(arg: ast.expr) -> list[ast.expr]:
    """The parts a module name is put together from, left to right: the operands of a chain of
    ``+`` or the parts of an f-string."""
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return _pieces(arg.left) + _pieces(arg.right)
    if isinstance(arg, ast.JoinedStr):
        return [v.value if isinstance(v, ast.FormattedValue) else v for v in arg.values]
    return [arg]


def _text(piece: ast.expr) -> str | None:
    return piece.value if isinstance(piece, ast.Constant) and isinstance(piece.value, str) \
        else None


def _prefix(arg: ast.expr, module: str, is_package: bool) -> str | None:
    """The package a computed module name starts with: ``"a.b." + x``, ``"a.b" + "." + x``
    and ``f"a.b.{x}"`` give ``a.b``; ``"." + x`` (relative to ``package=__name__``) and
    ``__name__ + "." + x`` the module's own package."""
    pieces = _pieces(arg)
    first = pieces[0]
    if isinstance(first, ast.Name) and first.id == "__name__":
        return module if is_package else None
    text = _text(first)
    if not text:
        return None
    if text.startswith("."):
        return _own_package(module, is_package) if text == "." else None
    if text.endswith("."):
        return text[:-1]
    if len(pieces) > 2 and _text(pieces[1]) == ".":
        return text
    return None


def folder_imports(node: ast.stmt, module: str, is_package: bool,
                   packages: frozenset[str]) -> list[FolderImport]:
    """The packages whose modules the module-level statement ``node`` of ``module`` imports by
    computed name itself; only packages in ``packages`` (the corpus's) count."""
    out = []
    for call in computed_imports(node):
        pkg = _prefix(call.args[0], module, is_package)
        if pkg and pkg in packages:
            out.append(FolderImport(pkg, _skips_private(node)))
    return out


def helper_calls(node: ast.stmt, packages: frozenset[str]) -> list[tuple[str, str]]:
    """(function name, package) for each call in ``node`` of a plain name given a corpus
    package's name as a string (``import_models(models_dir, "fairseq.models")``): a helper
    that may import that package's modules, as ``helper_skips_private`` tells."""
    out = []
    for n in treewalk.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            for a in [*n.args, *(k.value for k in n.keywords)]:
                if isinstance(a, ast.Constant) and a.value in packages:
                    out.append((n.func.id, a.value))
    return out


def helper_skips_private(func: ast.stmt) -> bool | None:
    """For a function that imports modules by computed name (the package is its caller's
    argument): whether it skips the modules whose names start with ``_``; None for any other
    statement."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or not computed_imports(func):
        return None
    return _skips_private(func)
