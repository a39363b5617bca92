"""Modules that upstream imports only under a guard, and that need a package which may be
missing: their statements go inside that guard.

megatron's ``inference/contexts/dynamic_context.py`` has ``try: from .fused_kv_append_kernel
import triton_append_key_value_cache except ImportError: triton_append_key_value_cache = None``,
and ``fused_kv_append_kernel.py`` starts with ``import triton`` and decorates its kernel with
``@triton.jit``. Without triton, upstream's import of that module fails and the fallback holds.
A generated file with ``import triton`` among its imports at the top fails as a whole instead.

Such a module (every statement of the closure that reads its definitions is its own or the one
guarded import, whose ``try`` catches ImportError, and it imports a package that is neither the
standard library nor torch) is emitted where upstream imports it: its statements, and its
imports of such packages, go inside the ``try`` right above what the import became, indented
one level. That is what upstream's import does, step by step: without the package the import
raises ImportError before any of the module's definitions exist, and the fallback holds. Lines
inside a multi-line string keep their text (engine.rewrite.indented).

Where that ``try`` is in a function (hyper-connections' ``__init__`` has ``try: from
hyper_connections.triton_sinkhorn import triton_sinkhorn except ImportError: ...``), the
module's statements would be the function's locals there. They go, where the last of them
was, inside a ``try: ... except ImportError: pass`` of their own, and the import in the
function raises ImportError where they are undefined (engine.rewrite). Upstream ran the
module at the first call, this file when it is imported: the header's note on imports inside
functions says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nnrag_tui.engine.moduleobject import is_object_key
from nnrag_tui.engine.provenance import STDLIB
from nnrag_tui.engine.resolve import ALWAYS_EXTERNAL, Closure, NodeId

_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class NestedModule:
    site: NodeId  # the statement holding the guarded import
    line: int  # the import's first line in its module
    module: tuple[str, str]  # the module emitted there
    nodes: list[NodeId]  # its statements, in emission order
    externals: list[str]  # identities of the external imports that go there too
    # the import is inside a function: the module's statements go, where the last of them
    # was, inside a ``try`` of their own, and the import raises ImportError where they failed
    in_function: bool = False


def nested_modules(closure: Closure) -> dict[NodeId, list[NestedModule]]:
    """The modules to emit inside the guard of their one import, by the statement holding it."""
    sites: dict[tuple[str, str], set[tuple[NodeId, int]]] = {}
    for (user, line, _bound), key in closure.guarded_imports.items():
        if key and key[0] == "def" and key[1] != user[0] and not is_object_key(key[1]):
            sites.setdefault(key[1], set()).add((user, line))
    if not sites:
        return {}
    readers: dict[tuple[str, str], set[NodeId]] = {}
    for d in closure.deps:
        for n in d.nodes:
            if n[0] != d.user[0]:
                readers.setdefault(n[0], set()).add(d.user)
    ext_users: dict[str, set[NodeId]] = {}
    for (user, _name), key in [*closure.refs.items(), *closure.early_refs.items()]:
        if key[0] == "ext":
            ext_users.setdefault(key[1], set()).add(user)
    position = {n: i for i, n in enumerate(closure.nodes)}
    found: list[NestedModule] = []
    for module, where in sorted(sites.items()):
        if len(where) != 1 or module == (closure.block.source, closure.block.module):
            continue
        ((site, line),) = where
        scope = _caught(closure, site, line)
        if readers.get(module, set()) - {site} or scope is None:
            continue
        nodes = [n for n in closure.nodes if n[0] == module]
        if scope == "module" and any(position[n] > position[site] for n in nodes):
            continue  # (what they need then comes after the guard too)
        found.append(NestedModule(site, line, module, nodes, [], scope == "function"))
    # an import that may fail goes into each such module that makes it (two kernel modules
    # may both ``import triton``), and stays at the top where any other statement reads it
    modules = {m.module for m in found}
    out: dict[NodeId, list[NestedModule]] = {}
    for m in found:
        m.externals = sorted(
            identity for identity, users in ext_users.items()
            if identity in closure.externals and any(u[0] == m.module for u in users)
            and all(u[0] in modules for u in users)
            and _may_be_missing(closure.externals[identity].module))
        if m.externals:
            out.setdefault(m.site, []).append(m)
    return out


def _may_be_missing(module: str) -> bool:
    top = module.split(".")[0]
    return top not in STDLIB and top not in ALWAYS_EXTERNAL


def _caught(closure: Closure, site: NodeId, line: int) -> str | None:
    """Where the import on ``line`` of the statement ``site`` runs, if it is right in the body
    of a ``try`` that catches ImportError: "module" (alone on its lines, as the module runs;
    the module's statements can go right there) or "function" (in a function's body: there
    they would be its locals, and go to module level in a ``try`` of their own). None
    otherwise, as in a class body."""
    ms = closure.modules[site[0]]
    stack: list[tuple[ast.AST, str | None]] = [(ms.stmts[site[1]].node, "module")]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, ast.ClassDef):
            scope = None if scope == "module" else scope
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            scope = "function"
        stack.extend((child, scope) for child in ast.iter_child_nodes(node))
        if not isinstance(node, ast.Try):
            continue
        for st in node.body:
            if isinstance(st, (ast.Import, ast.ImportFrom)) and st.lineno == line:
                if not any(_catches(h.type) for h in node.handlers):
                    return None
                if scope == "module" and ms.lines[line - 1][:st.col_offset].strip():
                    return None
                return scope
    return None


def _catches(expr: ast.expr | None) -> bool:
    if expr is None:
        return True
    if isinstance(expr, ast.Tuple):
        return any(_catches(e) for e in expr.elts)
    name = expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", None)
    return name in _CATCHES_IMPORT_ERROR
