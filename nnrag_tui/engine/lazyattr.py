"""Names a module provides through its module-level ``__getattr__`` (PEP 562).

PennyLane's ``capture/__init__.py`` declares ``QpPrimitive: "Type[jax.extend.core.Primitive]"``
with no value, for linters, and hands the class out only when it is asked for::

    def __getattr__(key):
        if key == "QpPrimitive":
            from .custom_primitives import QpPrimitive

            return QpPrimitive

so that importing ``pennylane`` does not import jax. ``capture.QpPrimitive`` and ``from
pennylane.capture import QpPrimitive`` reach that import: the declaration binds nothing. Taken
for the binding, it left PennyLane's ``TorchLayer`` reading four names nothing in its file
binds, unreported. scvi-tools, SGLang, vLLM and TabICL write the same shape.

The index records each such branch as an import binding the name the branch answers
(``ModuleFacts.lazy_imports``): a branch ``if <parameter> == "X":`` (or ``elif``) whose body is
imports and a ``return`` of a name one of them binds, and nothing else, for a name the module
binds at its top level by no statement but value-less annotations. The lookup of the name in
that module follows it (engine.bindings). Where the reads are inside functions only
(``capture.QpPrimitive`` in a method), upstream imports the module as the function reads the
name: the reads are sites of engine.deferred, as imports inside functions are
(``read_sites``). A branch that computes its value (``return _get_abstract_operator()``), or
first runs other code (a check that optional packages are there), is recorded without a target
(``target == ""``), as is a name only declared so in a module whose ``__getattr__`` has
another shape (``if name in __all__: return _load(name)``): the name is unresolved, and
reported. A ``__getattr__`` driven by a table of names (boxmot's ``_EXPORTS``, PennyLane's
``qnn``), or a branch that returns ``getattr(module, "X")``, is run for each name by
engine.lazyeval, and what it returns recorded as the import it amounts to.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from nnrag_tui.engine import (
    parse,  # (a module: parse imports this one)
    treewalk,
)
from nnrag_tui.engine.facts import GETATTR, Guard, ImportRecord
from nnrag_tui.engine.lazyeval import Run, tables


def lazy_imports(body: list[ast.stmt], module: str, is_package: bool
                 ) -> tuple[ImportRecord, ...]:
    """The imports by which ``body``'s module-level ``__getattr__`` provides names the module
    ``module`` does not bind otherwise, one per name, each binding the name it provides
    (``bound``)."""
    func = None
    for st in body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__getattr__":
            func = st  # (the last one is the module's)
    if not isinstance(func, ast.FunctionDef) or not func.args.args:
        return ()
    param = func.args.args[0].arg
    bound = _bound_otherwise(body)
    guard = Guard(GETATTR, func.lineno, func.end_lineno or func.lineno)
    run = Run(func, param, module, is_package, tables(body))

    def absolute(level: int, name: str | None) -> str:
        return parse.resolve_relative(module, is_package, level, name)

    out: dict[str, ImportRecord] = {}
    for name, branch, imports, returned in _branches(func.body, param):
        if name in bound or name in out:
            continue  # (the first branch for a name is the one that answers)
        rec = _providing(imports, returned, name, absolute, guard) if imports else None
        out[name] = rec or run.record(name, guard) or ImportRecord(
            name, "", None, None, 0, "", branch.lineno, branch.end_lineno or branch.lineno,
            guard)
    for name in run.candidates():
        # a table's keys (boxmot's ``_EXPORTS = {"BotSort": ("boxmot.trackers.botsort",
        # "BotSort"), ...}`` and ``getattr(import_module(module_name), attr_name)``)
        if name not in bound and name not in out:
            rec = run.record(name, guard)
            if rec is not None:
                out[name] = rec
    for name in _declared(body):
        # declared for linters, made by a ``__getattr__`` of another shape (vLLM's
        # ``nixl_utils.py``: ``if name in __all__: return _load_nixl_attr(name)``)
        if name not in bound and name not in out:
            out[name] = ImportRecord(name, "", None, None, 0, "", func.lineno,
                                     func.end_lineno or func.lineno, guard)
    return tuple(out.values())


def _declared(body: list[ast.stmt]) -> list[str]:
    """The names of the module's top-level value-less annotations (``QpPrimitive: type``)."""
    return [st.target.id for st in body if isinstance(st, ast.AnnAssign) and
            st.value is None and isinstance(st.target, ast.Name)]


def _branches(stmts: list[ast.stmt], param: str):
    """(name, branch, imports, returned name) of each ``if param == "name":`` of the
    function's top level and its ``elif`` chain; imports and returned name only where its body
    is imports and a return of a plain name, else empty and None."""
    for st in stmts:
        while isinstance(st, ast.If):
            name = _compared(st.test, param)
            if name is not None:
                body = [s for s in st.body if not _is_docstring(s)]
                if len(body) >= 2 and isinstance(body[-1], ast.Return) and \
                        isinstance(body[-1].value, ast.Name) and all(
                            isinstance(s, (ast.Import, ast.ImportFrom)) for s in body[:-1]):
                    yield name, st, body[:-1], body[-1].value.id
                else:
                    yield name, st, [], None
            st = st.orelse[0] if len(st.orelse) == 1 else None


def _compared(test: ast.expr, param: str) -> str | None:
    """``"X"`` of ``param == "X"`` or ``"X" == param``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], ast.Eq)):
        return None
    a, b = test.left, test.comparators[0]
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ast.Name) and x.id == param and isinstance(y, ast.Constant) and \
                isinstance(y.value, str) and y.value.isidentifier():
            return y.value
    return None


def _is_docstring(st: ast.stmt) -> bool:
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)


def _providing(imports: list[ast.stmt], returned: str, name: str,
               absolute: Callable[[int, str | None], str], guard: Guard
               ) -> ImportRecord | None:
    """The record of the import that binds ``returned``, bound to ``name``."""
    found = None
    for imp in imports:
        for a in imp.names:
            if isinstance(imp, ast.Import):
                if (a.asname or a.name.split(".")[0]) == returned:
                    found = ImportRecord(name, a.name, None, a.asname, 0, a.name, imp.lineno,
                                         imp.end_lineno or imp.lineno, guard)
            elif a.name != "*" and (a.asname or a.name) == returned:
                target = absolute(imp.level, imp.module)
                found = ImportRecord(name, imp.module or "", a.name, a.asname, imp.level,
                                     target, imp.lineno, imp.end_lineno or imp.lineno, guard)
    if found is not None and found.name is None and found.asname is None and \
            "." in found.target:
        return None  # (``import a.b`` binds ``a``: the package, not the module asked for)
    return found


def _bound_otherwise(body: list[ast.stmt]) -> set[str]:
    """The names the module's top level binds by anything but a value-less annotation
    (``X: type``), in compound statements too; the bodies of functions, classes and lambdas
    bind their own names."""
    names: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda) or (isinstance(node, ast.AnnAssign) and
                                            node.value is None):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        todo.extend(treewalk.children(node))
    return names


def read_sites(stmt: ast.stmt, chain: str, lines: list[str]) -> list[int] | None:
    """The first lines of the statements inside functions of the module-level statement
    ``stmt`` that read ``chain`` (``capture.QpPrimitive``): what upstream's ``__getattr__``
    runs as each reads it may run right before each, at the start of its line. None where a
    read is elsewhere: at the statement's own level, which runs as the module loads, in a
    lambda (an expression, with no statement of its own), or in a statement that does not
    start its line (``if x: return capture.X``) and has no enclosing one in a function that
    does."""
    found: set[int] = set()
    return sorted(found) if _read_sites(stmt, chain, lines, [], False, found) else None


def _read_sites(node: ast.AST, chain: str, lines: list[str], stack: list[ast.stmt],
                in_function: bool, found: set[int]) -> bool:
    """``read_sites`` below ``node``, inside the statements ``stack``, into ``found``;
    False where a read is elsewhere. (Module-level: a nested function calling itself is a
    reference cycle, freed only by a full garbage collection.)"""
    if isinstance(node, ast.Lambda):
        return not _reads(node, chain)
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
            parse.dotted(node) == chain:
        line = _site(stack, lines) if in_function else None
        if line is None:
            return False
        found.add(line)
        return True
    if isinstance(node, ast.stmt):
        stack = [*stack, node]
    for field, value in ast.iter_fields(node):
        body = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and field == "body"
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST) and not _read_sites(
                    child, chain, lines, [] if body else stack, in_function or body, found):
                return False
    return True


def _site(stack: list[ast.stmt], lines: list[str]) -> int | None:
    """The first line of the innermost statement of ``stack`` (inside one function) that
    starts its line and is no ``elif``; None where there is none."""
    for i in range(len(stack) - 1, -1, -1):
        st = stack[i]
        first = min([st.lineno, *(d.lineno for d in getattr(st, "decorator_list", ()))])
        text = lines[first - 1] if first <= len(lines) else ""
        col = st.col_offset if first == st.lineno else \
            min(d.col_offset for d in st.decorator_list if d.lineno == first) - 1
        if text[:col].strip() or text[col:].lstrip().startswith("elif"):
            continue
        return first
    return None


def _reads(node: ast.AST, chain: str) -> bool:
    return any(isinstance(n, ast.Attribute) and parse.dotted(n) == chain
               for n in treewalk.walk(node))
