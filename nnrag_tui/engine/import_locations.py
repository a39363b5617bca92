"""Corpus modules that a definition imports by name later, handed to it as data when the module
runs: mmengine's registries.

``MODELS = Registry('model', parent=MMENGINE_MODELS, locations=['mmdet.models'])`` (mmdet's
``registry.py``) keeps the module names, and the first time the registry is asked for a class
its ``import_from_location`` runs ``import_module('mmdet.models')``, so that importing that
package registers its classes. In the generated file, what the block needs of those
registrations is inlined already (engine.side_effects), and ``mmdet.models`` is upstream's
package: importing it needs mmdet installed, which a standalone file must not, and where it
is installed it loads upstream's whole package beside the file. So the list becomes empty
(``locations=[]``), a rewrite the header lists; a registry that would then import another of
upstream's modules instead names only ``builtins`` (engine.registry_scope).

Which lists these are is read from the AST (a list or tuple of strings, each a dotted name, as
an argument of a module-level call); the resolver keeps only those whose every name is a
module of the corpus, handed to a corpus definition whose module imports by computed name.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nnrag_tui.engine.lines import source_lines
from nnrag_tui.engine.parse import is_dotted_name

if TYPE_CHECKING:
    from nnrag_tui.engine.closure import NodeId
    from nnrag_tui.engine.resolve import _ClosureBuilder

Names = tuple[str, ...]


def call_of(node: ast.stmt) -> ast.Call | None:
    """The call a module-level statement makes: ``X = f(...)``, ``X: T = f(...)``, ``f(...)``."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) else None
    return value if isinstance(value, ast.Call) else None


def module_name_lists(node: ast.stmt) -> list[tuple[ast.expr, Names]]:
    """(the list, its strings) of each argument of a module-level call (``X = f(...)`` or
    ``f(...)``) that is a non-empty list or tuple of strings shaped like module names."""
    call = call_of(node)
    if call is None:
        return []
    out: list[tuple[ast.expr, Names]] = []
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str)
                and is_dotted_name(e.value) for e in arg.elts):
            out.append((arg, tuple(e.value for e in arg.elts)))  # type: ignore[union-attr]
    return out


def callee(node: ast.stmt) -> str | None:
    """The name a module-level call calls, where it is a plain name (``Registry``)."""
    call = call_of(node)
    return call.func.id if call is not None and isinstance(call.func, ast.Name) else None


def quoted(value: str, lines: list[str], like: ast.expr) -> str:
    """``value`` as a string literal in the quotes of the literal ``like`` (in ``lines``)."""
    quote = lines[like.lineno - 1].encode("utf-8")[like.col_offset:like.col_offset + 1]
    return f'"{value}"' if quote == b'"' else repr(value)


def emptied(text: str, lists: set[Names], inert: bool = False) -> tuple[str, list[str]]:
    """``text``, one module-level statement starting at column 0, with each argument list
    naming exactly one of ``lists`` made empty, or, ``inert``, naming only ``builtins`` (a
    registry that would import something else when given none, engine.registry_scope); and
    one line per rewrite, for the header."""
    tree = ast.parse(text)
    if not tree.body:
        return text, []
    lines = source_lines(text, keepends=True)
    edits: list[tuple[ast.expr, str]] = []
    for arg, names in module_name_lists(tree.body[0]):
        if names in lists:
            new = quoted("builtins", lines, arg.elts[0]) if inert else ""
            edits.append((arg, f"[{new}]" if isinstance(arg, ast.List) else
                           f"({new},)" if new else "()"))
    log: list[str] = []
    why = "modules imported by name when first used; what the block needs of them is inlined"
    if inert:
        why += ("; `builtins`, always loaded, keeps the registry from importing upstream's "
                "modules in their place")
    for arg, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        l1, l2 = arg.lineno - 1, (arg.end_lineno or arg.lineno) - 1
        span = "".join(lines[l1:l2 + 1]).encode("utf-8")  # offsets are in bytes
        tail = lines[l2].encode("utf-8")[arg.end_col_offset or 0:]
        old = span[arg.col_offset:len(span) - len(tail)]
        lines[l1:l2 + 1] = [(span[:arg.col_offset] + new.encode("utf-8") + tail).decode("utf-8")]
        log.append(f"`{' '.join(old.decode('utf-8').split())}` -> `{new}` ({why})")
    return "".join(lines), list(reversed(log))


def handed_lists(b: _ClosureBuilder) -> dict[NodeId, set[Names]]:
    """The statements of the closure that hand a corpus definition whose module imports by
    computed name (``import_module``, ``__import__``) a list of names of corpus modules: each
    such list, by statement."""
    out: dict[NodeId, set[Names]] = {}
    for node in b.order:
        st = b.modules[node[0]].stmts[node[1]]
        if st.kind not in ("assign", "other") or node[0] in b.objects:
            continue
        lists = module_name_lists(st.node)
        name = callee(st.node) if lists else None
        # the definition called, inlined or imported from a package marked external
        key = b.corpus_def(b.refs.get((node, name))) if name else None
        if key is None or key[1] not in b.index.entries:
            continue
        owner = b.index.entries[key[1]]
        if not (b.r.mentions(owner, "import_module", quoted=False)
                or b.r.mentions(owner, "__import__", quoted=False)):
            continue
        source = b.entries[node[0]].source
        for _, names in lists:
            if all(not b.r.is_external(n) and b.index.find_module(n, source) for n in names):
                out.setdefault(node, set()).add(names)
    return out


def location_notes(b: _ClosureBuilder, lists: dict[NodeId, set[Names]],
                   inert: set[NodeId] | frozenset = frozenset()) -> list[str]:
    """What the header says of each statement whose lists are emptied (or, ``inert``, name
    only ``builtins``)."""
    out = []
    for node, names in lists.items():
        what = ", ".join(repr(n) for group in sorted(names) for n in group)
        here = ("names only builtins here, as the file inlines" if node in inert else
                "is empty here, as the file inlines")
        out.append(f"{b.entries[node[0]].module}:{b.modules[node[0]].stmts[node[1]].line} names "
                   f"modules ({what}) that upstream imports by name when first used; the list "
                   f"{here} what the block needs of them")
    return out
