"""The neutral spec of a block: what it is and how to call it, with no upstream code in it."""

from __future__ import annotations

import ast
from typing import Any

from nnrag_tui.engine.parse import call_runs


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> list[dict[str, Any]]:
    if fn is None:
        return []
    a = fn.args
    out: list[dict[str, Any]] = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        out.append(_param(arg, default, "positional" if arg in a.posonlyargs else "normal"))
    if a.vararg:
        out.append(_param(a.vararg, None, "var_positional"))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append(_param(arg, default, "keyword_only"))
    if a.kwarg:
        out.append(_param(a.kwarg, None, "var_keyword"))
    if out and out[0]["name"] in ("self", "cls"):
        out = out[1:]
    return out


def _param(arg: ast.arg, default: ast.expr | None, kind: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": arg.arg, "kind": kind}
    if arg.annotation is not None:
        d["annotation"] = ast.unparse(arg.annotation)
    if default is not None:
        d["default"] = ast.unparse(default)
    return d


def find_class(tree_or_node: ast.AST, qualname: str) -> ast.ClassDef | None:
    body = getattr(tree_or_node, "body", [])
    head, _, rest = qualname.partition(".")
    for st in body:
        if isinstance(st, ast.ClassDef) and st.name == head:
            return find_class(st, rest) if rest else st
    for st in body:  # classes under module-level if/try
        if isinstance(st, (ast.If, ast.Try)):
            for part in (st.body, getattr(st, "orelse", []), getattr(st, "finalbody", [])):
                hit = find_class(ast.Module(body=part, type_ignores=[]), qualname)
                if hit is not None:
                    return hit
    return None


def forward_method(cls: ast.ClassDef | None) -> ast.FunctionDef | None:
    """The class's own ``forward``; where it has none, its own ``__call__`` if that does the
    work itself (``parse.call_runs``: timm's JsdCrossEntropy), since calling it runs that."""
    fn = method(cls, "forward")
    if fn is None:
        call = method(cls, "__call__")
        if call is not None and call_runs(call):
            return call
    return fn


def method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
            return st  # type: ignore[return-value]
    return None


def build_spec(cls: ast.ClassDef | None, *, name: str, qualname: str, category: str,
               bases: list[str], dependencies: list[dict], externals: list[str],
               source: dict[str, Any]) -> dict[str, Any]:
    doc = ast.get_docstring(cls) if cls is not None else None
    summary = doc.strip().split("\n\n", 1)[0].replace("\n", " ")[:300] if doc else ""
    return {
        "name": name,
        "qualname": qualname,
        "category": category,
        "bases": bases,
        "summary": summary,
        "constructor": _signature(method(cls, "__init__")),
        "forward": _signature(forward_method(cls)),
        "dependencies": dependencies,
        "externals": externals,
        "source": source,
    }
