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

A registry can also be read only to refuse a second registration: score_sde_pytorch's
``register_model`` runs ``if local_name in _MODELS: raise ValueError(...)`` before
``_MODELS[local_name] = cls``, and nothing in the file of its ``NCSNv2`` looks a model up.
Where every use of the name stores into it or is such a test (``write_only_uses``), and the
function holding the test runs only while the modules load (``runs_at_load_only``: as a
decorator), the fillers change nothing the block does: upstream's modules load, so no
registration of theirs is refused, and none of a subset is. The fillers such a registry
brought were 445 to 476 of the 921 lines of each of score_sde_pytorch's four NCSN files.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.nodecache import per_node
from nnrag_tui.engine.parse import dotted

_FILLS = frozenset({"add", "append"})


def parents_of(node: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node below ``node`` -> the node holding it; not to be changed. Kept on the node
    (the map holds ``node`` itself, so a weak cache would keep it forever; as an attribute it
    goes with its tree): each statement reading a registry is asked once per registry and
    question, and again by each closure of its package (tensordict's ``TensorDictBase``,
    thousands of lines)."""
    parents = getattr(node, "_nnrag_parents", None)
    if parents is None:
        parents = {}
        for parent in treewalk.nodes(node):
            for child in treewalk.children(parent):
                parents[child] = parent
        node._nnrag_parents = parents  # type: ignore[attr-defined]
    return parents


def uses_of(node: ast.AST, name: str) -> list[ast.AST]:
    """The uses of ``name`` below ``node`` (``is_use``), in ``ast.walk``'s order."""
    return _spelled(node).get(name, [])


@per_node
def _spelled(node: ast.AST) -> dict[str, list[ast.AST]]:
    """The plain names and dotted chains below ``node``, a statement, -> the nodes spelling
    them (a name or chain itself would be among its own values: kept forever)."""
    index: dict[str, list[ast.AST]] = {}
    for n in treewalk.nodes(node):
        key = n.id if isinstance(n, ast.Name) else dotted(n) \
            if isinstance(n, ast.Attribute) else None
        if key is not None:
            index.setdefault(key, []).append(n)
    return index


def is_use(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is a use of ``name``: a plain name, or a dotted chain through a module
    (``register.layer_dict``)."""
    if "." not in name:
        return isinstance(node, ast.Name) and node.id == name
    return isinstance(node, ast.Attribute) and dotted(node) == name


def identity_uses_only(node: ast.AST, name: str) -> bool:
    """Whether every use of ``name`` in ``node`` is a membership test or the store of an object
    of the storing function's own (see the module's docstring)."""
    uses = uses_of(node, name)
    parents = parents_of(node) if uses else {}
    return all(_membership(use, parents) or _own_store(use, parents) for use in uses)


def write_only_uses(node: ast.AST, name: str) -> bool:
    """Whether every use of ``name`` in ``node`` stores into it (``NAME[k] = v``,
    ``NAME.add(v)``/``.append(v)`` as a statement) or tests membership only to raise
    (``if k in NAME: raise ...``, ``assert k not in NAME``)."""
    uses = uses_of(node, name)
    parents = parents_of(node) if uses else {}  # (a class of thousands of lines may not use it)
    return all(_store_into(use, parents)
               or (_membership(use, parents) and _refuses(parents[use], parents))
               for use in uses)


def fills_only(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> bool:
    """Whether the function ``fn`` uses its parameter ``param`` only to fill it (as
    ``write_only_uses`` sees it) or to hand it on to itself at the same place: graphgym's
    ``register_base(mapping, key, module)`` refuses a key already ``in mapping``, stores
    ``mapping[key] = module``, or returns a decorator calling ``register_base(mapping, key,
    module)``. A registry handed to such a function is filled, never read."""
    params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    at = params.index(param) if param in params else None
    parents = parents_of(fn)
    for use in treewalk.walk(fn):
        if not (isinstance(use, ast.Name) and use.id == param
                and isinstance(use.ctx, ast.Load)):
            continue
        call = parents.get(use)
        again = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
            call.func.id == fn.name and at is not None and at < len(call.args) and \
            call.args[at] is use
        if not (again or _store_into(use, parents)
                or (_membership(use, parents) and _refuses(parents[use], parents))):
            return False
    return True


def _store_into(use: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """``NAME[k] = v``, or ``NAME.add(v)``/``NAME.append(v)`` whose value nobody reads."""
    parent = parents.get(use)
    if isinstance(parent, ast.Subscript) and parent.value is use:
        return isinstance(parent.ctx, ast.Store) and isinstance(parents.get(parent), ast.Assign)
    call = parents.get(parent) if parent is not None else None
    return isinstance(parent, ast.Attribute) and parent.attr in _FILLS \
        and isinstance(call, ast.Call) and call.func is parent \
        and isinstance(parents.get(call), ast.Expr)


def _refuses(test: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether the membership test ``test`` decides only whether to raise: the test of an
    ``assert``, or (alone or among ``and``'s operands) of an ``if`` that only raises."""
    holder = parents.get(test)
    if isinstance(holder, ast.Assert):
        return holder.test is test
    if isinstance(holder, ast.BoolOp) and isinstance(holder.op, ast.And):
        test, holder = holder, parents.get(holder)
    return isinstance(holder, ast.If) and holder.test is test and not holder.orelse \
        and all(isinstance(st, ast.Raise) for st in holder.body)


def runs_at_load_only(node: ast.AST, is_use: Callable[[ast.AST], bool]) -> bool:
    """Whether every expression ``is_use`` picks in the module-level statement ``node`` runs
    while its module loads: none is inside a function's body or a ``lambda`` (a decorator, a
    default value, a class body's statement runs then; a method's body does not)."""
    stack: list[tuple[ast.AST, bool]] = [(node, False)]
    while stack:
        n, later = stack.pop()
        if is_use(n) and later:
            return False
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend((d, later) for d in n.decorator_list)
            stack.extend((d, later) for d in (*n.args.defaults, *n.args.kw_defaults) if d)
            stack.extend((b, True) for b in n.body)
        elif isinstance(n, ast.Lambda):
            stack.extend((d, later) for d in (*n.args.defaults, *n.args.kw_defaults) if d)
            stack.append((n.body, True))
        else:
            stack.extend((c, later) for c in treewalk.children(n))
    return True


def only_called(node: ast.AST, is_use: Callable[[ast.AST], bool]) -> bool:
    """Whether every expression ``is_use`` picks in ``node`` is called there or is a decorator:
    none is handed on (``reg = register_model``), where a call later could not be seen."""
    called = set()
    for n in treewalk.walk(node):
        if isinstance(n, ast.Call):
            called.add(id(n.func))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            called.update(id(d) for d in n.decorator_list)
    return all(id(n) in called for n in treewalk.walk(node) if is_use(n))


def _membership(use: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """``x in NAME`` / ``x not in NAME``."""
    parent = parents.get(use)
    if not isinstance(parent, ast.Compare) or use not in parent.comparators:
        return False
    op = parent.ops[parent.comparators.index(use)]
    return isinstance(op, (ast.In, ast.NotIn))


def _own_store(use: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
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
           for n in treewalk.walk(fn)):
        return False  # (``cls = cls.__name__`` first: a string, which a test by name finds)
    params = [*fn.args.posonlyargs, *fn.args.args]
    if params and params[0].arg == value:
        return True
    return any(isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
               and st.name == value for st in fn.body)
