"""Registries a closure reads only by identity: whether a statement that fills one can be left
out.

StyleGAN's ``torch_utils/persistence.py`` keeps ``_decorators = set()``: its decorator
``persistent_class`` runs ``_decorators.add(Decorator)`` with the class it makes for the
decorated one, and ``is_persistent`` asks ``obj in _decorators``. Taking every decorated class
of the closure's modules along as a registry filler (engine.side_effects) brought all of
``networks_stylegan2.py`` into the file of its ``MappingNetwork`` (2,109 lines). But such a set
answers a membership test only for an object somebody holds, and the object a left-out
``@persistent_class class Generator`` would add is one nothing in the file can hold: the set
behaves the same without it. A registry is read so when every use of its name in the
closure's statements is the right side of ``in``/``not in``, or ``NAME.add(X)``/
``NAME.append(X)`` inside a function whose first parameter is ``X`` (the decorated object,
where the function is used as a bare decorator) or which defines ``X`` by a ``class``/``def``
of its own. A key looked up by string (``"resnet" in _MODELS``), an iteration or ``len`` of the
set needs every filler, and keeps them.
"""

from __future__ import annotations

import ast

_FILLS = frozenset({"add", "append"})


def identity_uses_only(node: ast.AST, name: str) -> bool:
    """Whether every use of ``name`` in ``node`` is a membership test or the store of an object
    of the storing function's own (see the module's docstring)."""
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(node):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    for use in ast.walk(node):
        if isinstance(use, ast.Name) and use.id == name and \
                not _membership(use, parents) and not _own_store(use, parents):
            return False
    return True


def _membership(use: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    """``x in NAME`` / ``x not in NAME``."""
    parent = parents.get(use)
    if not isinstance(parent, ast.Compare) or use not in parent.comparators:
        return False
    op = parent.ops[parent.comparators.index(use)]
    return isinstance(op, (ast.In, ast.NotIn))


def _own_store(use: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    """``NAME.add(X)`` / ``NAME.append(X)`` in a function whose first parameter is ``X`` or
    which binds ``X`` by a ``class``/``def`` statement of its body."""
    attr = parents.get(use)
    call = parents.get(attr) if attr is not None else None
    if not (isinstance(attr, ast.Attribute) and attr.attr in _FILLS
            and isinstance(call, ast.Call) and call.func is attr and len(call.args) == 1
            and not call.keywords and isinstance(call.args[0], ast.Name)):
        return False
    value = call.args[0].id
    fn = parents.get(call)
    while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        fn = parents.get(fn)
    if fn is None:
        return False
    if any(isinstance(n, ast.Name) and n.id == value and not isinstance(n.ctx, ast.Load)
           for n in ast.walk(fn)):
        return False  # (``cls = cls.__name__`` first: a string, which a test by name finds)
    params = [*fn.args.posonlyargs, *fn.args.args]
    if params and params[0].arg == value:
        return True
    return any(isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
               and st.name == value for st in fn.body)
