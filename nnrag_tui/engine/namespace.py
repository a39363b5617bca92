"""Module-level statements that bind names no statement spells out.

pyro's ``pyro/distributions/torch.py`` makes ``TransformedDistribution``, ``LKJCholesky`` and
the other wrappers of ``torch.distributions`` in a loop, ``locals()[_name] = _PyroDist``;
schnetpack's ``units.py`` runs ``globals().update(setup_md_units(...))``. Other modules import
those names by name (``from pyro.distributions.torch import LKJCholesky``), so a name such a
module does not bind by name is most likely one of them. The index records the lines of these
statements (``ModuleFacts.namespace_writes``), the resolver inlines them for the names, and the
validator reads pyflakes' "undefined name" for such a name as pyflakes reads a name a star
import may bind.
"""

from __future__ import annotations

import ast

# calls that give the namespace of the module they run in, at module level
NAMESPACE_CALLS = frozenset({"globals", "locals", "vars"})
_WRITING_METHODS = frozenset({"update", "setdefault", "__setitem__"})


def writes_namespace(node: ast.stmt) -> bool:
    """Whether a module-level statement stores names into its module's namespace through
    ``globals()``, ``locals()`` or ``vars()`` (``locals()[name] = cls``,
    ``globals().update(table)``) or ``setattr(sys.modules[__name__], name, value)``. The bodies
    of functions and classes it defines do not count: they run later, or in another
    namespace."""
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and \
                _namespace_call(n.value):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _WRITING_METHODS and \
                    _namespace_call(f.value):
                return True
            if isinstance(f, ast.Name) and f.id == "setattr" and n.args and \
                    _this_module(n.args[0]):
                return True
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                      ast.Lambda)):
                stack.append(child)
    return False


def namespace_writes(body: list[ast.stmt]) -> tuple[int, ...]:
    """The lines of the module-level statements of ``body`` that store into the module's
    namespace (``writes_namespace``); definitions are not such statements."""
    return tuple(st.lineno for st in body if not isinstance(
        st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and writes_namespace(st))


def _namespace_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id in NAMESPACE_CALLS and not node.args and not node.keywords


def _this_module(node: ast.AST) -> bool:
    """``sys.modules[__name__]``."""
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and \
        node.slice.id == "__name__" and isinstance(node.value, ast.Attribute) and \
        node.value.attr == "modules" and isinstance(node.value.value, ast.Name) and \
        node.value.value.id == "sys"
