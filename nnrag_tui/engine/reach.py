"""What runs when a block is built and called: its construction reach, statement by statement.

The closure keeps definitions whole, so it holds everything any method of the block may need
(``from_pretrained``, training helpers). Some decisions only concern code that runs when the
block is built and called: a registry filled by a folder loop (engine.dynimport) needs every
module of the folder only if what *reads* it runs then (ml-cvnets' ``build_activation_layer``,
called in ``__init__``), not if a class method for loading checkpoints reads it (fairseq's
``MODEL_REGISTRY``). This module gives, for a statement, the names that run then: for a class
its bases and class-level statements, and the methods ``CONSTRUCTION`` names plus every method
they reach through ``self.x`` / ``cls.x``; for any other statement all it reads. Decorators
are left out: they ran when the module loaded.
Local names count too, which only over-approximates: a name is followed only where it resolved
to a module-level definition.
"""

from __future__ import annotations

import ast

CONSTRUCTION = frozenset({"__init__", "__post_init__", "__new__", "__call__", "forward"})


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _self_attrs(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")}


def _undecorated(node: ast.stmt) -> set[str]:
    """The names of a ``def`` apart from its decorators, which ran when the module loaded: a
    registry they read (fairseq's ``@register_model("fconv")``) is read before the folder loop
    has imported the rest, and needs none of it."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _names(node)
    out = _names(node.args)
    for part in [*node.body, *([node.returns] if node.returns else [])]:
        out |= _names(part)
    return out


def run_names(node: ast.stmt) -> set[str]:
    """The names a statement reads in what runs when the block is built and called (see the
    module docstring)."""
    if not isinstance(node, ast.ClassDef):
        return _undecorated(node)
    out: set[str] = set()
    for part in [*node.bases, *node.keywords]:
        out |= _names(part)
    methods: dict[str, list[ast.stmt]] = {}
    for st in node.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods.setdefault(st.name, []).append(st)
        else:
            out |= _names(st)
    todo = [m for m in methods if m in CONSTRUCTION]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fn in methods.get(name, ()):
            out |= _undecorated(fn)
            todo.extend(a for a in _self_attrs(fn) if a in methods and a not in seen)
    return out


# what runs while a ``class`` statement executes, beyond its body: its metaclass's methods that
# make the class, and the ``__init_subclass__`` of its bases
METACLASS_CREATION = ("__prepare__", "__new__", "__init__")
SUBCLASS_HOOK = ("__init_subclass__",)


def method_reads(cls: ast.ClassDef, methods: tuple[str, ...]) -> set[str]:
    """The names read in the bodies of ``cls``'s methods called one of ``methods``, and in the
    methods those reach through ``self.x`` / ``cls.x``."""
    defs: dict[str, list[ast.stmt]] = {}
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(st.name, []).append(st)
    out: set[str] = set()
    todo, seen = [m for m in methods if m in defs], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fn in defs[name]:
            out |= _undecorated(fn)
            todo.extend(a for a in _self_attrs(fn) if a in defs)
    return out
