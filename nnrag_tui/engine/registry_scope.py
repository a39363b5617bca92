"""Registries that take their scope from the name of the module that creates them: mmengine's
``Registry`` (and mmcv 1.x's).

``MODELS = Registry('model', parent=MMENGINE_MODELS, locations=[...])`` in ``mmdet/registry.py``
passes no ``scope``, so ``Registry.infer_scope`` reads it off the calling frame's module:
``mmdet.registry`` gives ``'mmdet'``. Inlined into a generated file, that module is the file, and
every registry in it would take the file's name as its scope. A key that names a scope
(``type='mmdet.CrossEntropyLoss'``) is then not found, and two registries under one parent
(mmocr's and mmdet's ``MODELS``) clash when the file is imported (``AssertionError: scope ...
exists in model registry``). So the call gets upstream's scope written in (``scope='mmdet'``),
a rewrite the header lists.

A registry class is recognised by its shape: it has a method ``infer_scope``, and its
``__init__`` takes a ``scope`` parameter, which the call leaves out.

Such a registry also names the modules that register into it (``locations=['mmdet.models']``),
which engine.import_locations replaces, as the file inlines what the block needs of them. Left
empty, the list makes mmengine import ``mmdet.utils`` instead, from upstream's package, wherever
the scope is one of OpenMMLab's (and warn that mmdet is not installed where it is not). So for
these registries the list names only ``builtins`` (``locations=['builtins']``), which is always
loaded: importing it does nothing. (``__name__``, the file itself, would say more, but a file
run by ``runpy.run_path`` is no longer in ``sys.modules`` when its block is built.)
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.import_locations import call_of, callee, quoted
from nnrag_tui.engine.lines import source_lines

if TYPE_CHECKING:
    from nnrag_tui.engine.closure import NodeId
    from nnrag_tui.engine.resolve import _ClosureBuilder

_INFER = "infer_scope"


def scope_position(cls: ast.ClassDef) -> int | None:
    """Where a class that infers its scope takes ``scope`` in a call (its index among the
    positional arguments after ``self``; -1 where only a keyword can give it), or None where the
    class is not such a registry."""
    methods = {n.name: n for n in cls.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init = methods.get("__init__")
    if _INFER not in methods or init is None:
        return None
    positional = [*init.args.posonlyargs, *init.args.args][1:]
    for i, a in enumerate(positional):
        if a.arg == "scope":
            return i
    return -1 if any(a.arg == "scope" for a in init.args.kwonlyargs) else None


def leaves_scope_out(call: ast.Call, position: int) -> bool:
    """Whether a call to a registry class with ``scope`` at ``position`` gives no scope (and
    nothing that might: ``*args``, ``**kwargs``)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None or k.arg == "scope" for k in call.keywords):
        return False
    return position < 0 or len(call.args) <= position


def _inferring_calls(b: _ClosureBuilder):
    """The module-level statements of the closure that call a registry class which infers
    its scope, inlined or imported (a source marked external): (statement, call, the
    closure's reference to the class, whether the call leaves the scope out)."""
    for node in b.order:
        st = b.modules[node[0]].stmts[node[1]]
        if st.kind not in ("assign", "other") or node[0] in b.objects:
            continue
        name = callee(st.node)
        ref = b.refs.get((node, name)) if name else None
        key = b.corpus_def(ref)
        call = call_of(st.node)
        if key is None or call is None or key[1] not in b.index.entries or \
                not b.r.mentions(b.index.entries[key[1]], _INFER, quoted=False):
            continue
        ms = b.modules.get(key[1]) or b.r.module_source(b.index.entries[key[1]])
        for i in ms.binders.get(key[2], ()):
            cls = ms.stmts[i].node
            position = scope_position(cls) if isinstance(cls, ast.ClassDef) else None
            if position is not None:
                yield node, call, ref, leaves_scope_out(call, position)
                break


def scope_registries(b: _ClosureBuilder) -> dict[NodeId, str | None]:
    """The module-level statements of the closure that create a registry which infers its
    scope, each with the scope to write into the call: its module's top-level package, as
    upstream infers it, or None where the call gives one. Only where the file inlines the
    registry class (see ``shared_tree_clashes`` for an imported one)."""
    return {node: b.entries[node[0]].module.split(".")[0] if leaves else None
            for node, _, ref, leaves in _inferring_calls(b) if ref[0] == "def"}


def pinned(text: str, scope: str) -> tuple[str, list[str]]:
    """``text``, one module-level statement starting at column 0 that calls a registry class,
    with ``scope=...`` given as the call's last argument; and the line for the header."""
    tree = ast.parse(text)
    call = call_of(tree.body[0]) if tree.body else None
    if call is None:
        return text, []
    last = [*call.args, *call.keywords]
    anchor = max(last, key=lambda n: (n.end_lineno, n.end_col_offset)) if last else call.func
    lines = source_lines(text, keepends=True)
    row = (anchor.end_lineno or anchor.lineno) - 1
    data = lines[row].encode("utf-8")  # offsets are in bytes
    at = anchor.end_col_offset or 0
    strings = [a for a in treewalk.walk(call)
               if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    arg = f"scope={quoted(scope, lines, strings[0]) if strings else repr(scope)}"
    insert = f", {arg}"
    if not last:  # ``Registry()``: right after the opening parenthesis
        insert, at = arg, data.index(b"(", at) + 1
    lines[row] = (data[:at] + insert.encode("utf-8") + data[at:]).decode("utf-8")
    log = f"`{arg}` added (the scope upstream's registry takes from its module's name)"
    return "".join(lines), [log]


def shared_tree_clashes(b: _ClosureBuilder) -> list[str]:
    """Where the registry class is imported (mmengine marked external), the file's registries
    join the installed registry tree, under the scope mmengine infers from the file's own
    package: two of them under one parent take the same scope, and the second one's import
    fails (``AssertionError: scope ... exists in model registry``; mmyolo's ``MODELS`` and
    mmdet's). No scope is written for them: upstream's (``'mmdet'``) would clash with the
    installed package's own registries and with every other such file. The header says so,
    one line per parent."""
    by_parent: dict[tuple, list[NodeId]] = {}
    for node, call, ref, leaves in _inferring_calls(b):
        parent = next((k.value for k in call.keywords if k.arg == "parent"), None)
        shared = b.refs.get((node, parent.id)) if isinstance(parent, ast.Name) else None
        if ref[0] == "ext" and leaves and shared is not None and shared[0] == "ext":
            by_parent.setdefault(shared, []).append(node)
    notes = []
    for shared, nodes in sorted(by_parent.items()):
        if len(nodes) < 2:
            continue
        where = ", ".join(f"{b.entries[n[0]].module}:{b.modules[n[0]].stmts[n[1]].line}"
                          for n in nodes)
        notes.append(f"{where} create registries under the installed `{shared[1]}`, each "
                     "taking its scope from the module creating it: here all take this file's "
                     "package, and importing the file fails (`AssertionError: scope ... "
                     "exists`); the registry class is external in the configuration, leave "
                     "its package inlined for this block")
    return notes
