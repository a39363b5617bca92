"""Module-level statements that bind names no statement spells out.

pyro's ``pyro/distributions/torch.py`` makes ``TransformedDistribution``, ``LKJCholesky`` and
the other wrappers of ``torch.distributions`` in a loop, ``locals()[_name] = _PyroDist``;
schnetpack's ``units.py`` runs ``globals().update(setup_md_units(...))``. Other modules import
those names by name (``from pyro.distributions.torch import LKJCholesky``), so a name such a
module does not bind by name is most likely one of them. A module-level call of the module's
own function that stores into ``globals()`` is such a statement too: CrypTen's
``functions/regular.py`` runs ``for function_name in __all__: _add_regular_function(
function_name)``, whose body has ``globals()[function_name] = regular_func``, and so makes
``__getitem__``, ``flatten`` and the other names its ``__all__`` lists. The index records the
lines of these statements (``ModuleFacts.namespace_writes``), the resolver inlines them for
the names, and the validator reads pyflakes' "undefined name" for such a name as pyflakes reads
a name a star import may bind.
"""

from __future__ import annotations

import ast

from nnrag_tui.engine import treewalk

# calls that give the namespace of the module they run in, at module level
NAMESPACE_CALLS = frozenset({"globals", "locals", "vars"})
_WRITING_METHODS = frozenset({"update", "setdefault", "__setitem__"})


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def writes_namespace(node: ast.stmt, writers: frozenset[str] = frozenset()) -> bool:
    """Whether a module-level statement stores names into its module's namespace through
    ``globals()``, ``locals()`` or ``vars()`` (``locals()[name] = cls``,
    ``globals().update(table)``), ``setattr(sys.modules[__name__], name, value)`` or a call of
    one of ``writers``, the module's functions that store into ``globals()``. The bodies of
    functions and classes it defines do not count: they run later, or in another namespace."""
    return any(_stores(n, NAMESPACE_CALLS) or (
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in writers)
        for n in _walk(node, _SCOPES))


def namespace_writes(body: list[ast.stmt]) -> tuple[int, ...]:
    """The lines of the module-level statements of ``body`` that store into the module's
    namespace (``writes_namespace``); definitions are not such statements."""
    writers = frozenset(st.name for st in body if isinstance(st, _DEFS) and any(
        _stores(n, frozenset({"globals"})) for n in _walk(st, ())))
    return tuple(st.lineno for st in body if not isinstance(st, (*_DEFS, ast.ClassDef))
                 and writes_namespace(st, writers))


def _walk(node: ast.AST, skip: tuple[type, ...]):
    """The nodes of ``node``, not those inside the nested ``skip`` scopes."""
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(c for c in treewalk.children(n) if not isinstance(c, skip))


def _stores(n: ast.AST, calls: frozenset[str]) -> bool:
    """Whether ``n`` stores into the namespace one of ``calls`` gives (``globals()[k] = v``,
    ``globals().update(table)``), or into ``sys.modules[__name__]`` by ``setattr``."""
    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and \
            _namespace_call(n.value, calls):
        return True
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr in _WRITING_METHODS and \
                _namespace_call(f.value, calls):
            return True
        if isinstance(f, ast.Name) and f.id == "setattr" and n.args and _this_module(n.args[0]):
            return True
    return False


def _namespace_call(node: ast.AST, calls: frozenset[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in calls and not node.args and not node.keywords


def _this_module(node: ast.AST) -> bool:
    """``sys.modules[__name__]``."""
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and \
        node.slice.id == "__name__" and isinstance(node.value, ast.Attribute) and \
        node.value.attr == "modules" and isinstance(node.value.value, ast.Name) and \
        node.value.value.id == "sys"
