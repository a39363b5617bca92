"""Module-level statements that change an object defined above them ("patches").

Upstream modules adjust what they just defined while they execute:

- ``GlobalParams.__new__.__defaults__ = (None,) * len(GlobalParams._fields)`` makes every field
  of EfficientNet-PyTorch's namedtuple optional;
- ``InceptionOutputs.__annotations__ = {...}`` (torchvision) gives TorchScript its types;
- ``cfg = CN()`` followed by ``set_cfg(cfg)`` fills torch_geometric.graphgym's configuration,
  which every graphgym layer reads (``cfg.gnn.layers_post_mp``).

- ``c_table = np.empty((8, 8))``, ``c_table.fill(99)``, ``c_table[:4, :4] = ...`` (BasicSR's
  DiffJPEG) fill an array before ``c_table = nn.Parameter(torch.from_numpy(c_table))``.

Such a statement binds no name, so following names never reaches it; without it the object
behaves differently (a TypeError for a missing field, an AttributeError for ``cfg.gnn``,
uninitialised weights). This module recognises the shapes from the AST alone: attribute stores
rooted at a name, ``setattr``/``delattr`` on a name (in a loop too: torchrl's ``LSTMBase`` gets
its methods from ``nn.LSTM`` so), a call that hands a name to a function which stores into
that parameter, and item stores and method calls on a name (``in_place_roots``). On a
module-level container (``REG[key] = fn``, ``REG.update(...)``) the last two are
registrations, which the registry rule decides instead.

A definition can change an object too, through its decorator: MONAI's ``@Conv.factory_function(
"conv") def conv_factory(...)`` registers ``conv_factory`` in the ``Conv = LayerFactory(...)``
that ``Conv[Conv.CONV, 2]`` looks up, and ``@fn.register(int)`` adds a case to a
``functools.singledispatch`` function (``decorator_method_roots``). Such a definition binds a
name nothing reads, yet without it ``Conv.CONV`` is an AttributeError.
"""

from __future__ import annotations

import ast

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted


def _root(target: ast.expr) -> str | None:
    """``X`` for ``X.a``, ``X.a.b`` and ``X.a[k].b``: the name whose object is changed."""
    node = target
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _store_roots(node: ast.stmt, kind: type, annotated: bool) -> frozenset[str] | None:
    """The root names of an assignment whose every target is a ``kind`` (an attribute or an
    item) rooted at a name; None for any other statement."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AugAssign) or (
            annotated and isinstance(node, ast.AnnAssign) and node.value is not None):
        targets = [node.target]
    else:
        return None
    roots = {_root(t) if isinstance(t, kind) else None for t in targets}
    return None if None in roots else frozenset(roots)  # type: ignore[arg-type]


def attribute_store_roots(node: ast.stmt) -> frozenset[str] | None:
    """For an assignment whose every target is an attribute (``X.a = v``, ``X.a.b += v``), the
    root names; None for any other statement (one that binds a name, stores an item, ...)."""
    return _store_roots(node, ast.Attribute, annotated=True)


def in_place_roots(node: ast.stmt) -> frozenset[str] | None:
    """For an assignment whose every target is an item of something rooted at a name
    (``X[k] = v``, ``X.a[i:j] += v``), or a bare call of a method on one (``X.fill(99)``,
    ``X.a.update(d)``): the root names; None for any other statement."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
            and isinstance(node.value.func, ast.Attribute):
        r = _root(node.value.func)
        return frozenset({r}) if r is not None else None
    return _store_roots(node, ast.Subscript, annotated=False)


def nested_method_call_roots(node: ast.stmt) -> frozenset[str] | None:
    """The roots of the bare method calls inside a ``for``, ``if``, ``with`` or ``try`` (not
    inside a function or class it defines): mmcv's ``for module in [nn.ReLU, ...]:
    MODELS.register_module(module=module)`` registers in ``MODELS`` as it runs. None for one
    that imports modules by computed name: a loop over a folder's modules, as deepspeed's
    ``op_builder`` has, is engine.dynimport's, and copied it would import the files beside the
    generated one."""
    roots: set[str] = set()
    stack: list[ast.stmt] = [node]
    while stack:
        st = stack.pop()
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        body = [s for f in ("body", "orelse", "finalbody") for s in getattr(st, f, ())]
        body += [s for h in getattr(st, "handlers", ()) for s in h.body]
        if body:
            stack.extend(body)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                and isinstance(st.value.func, ast.Attribute):
            root = _root(st.value.func)
            if root is not None:
                roots.add(root)
    if roots and any(isinstance(c, ast.Call) and (dotted(c.func) or "").rpartition(".")[2] in (
            "import_module", "__import__") for c in treewalk.walk(node)):
        return None
    return frozenset(roots) or None


def setattr_roots(node: ast.stmt) -> frozenset[str] | None:
    """The names that a statement hands to ``setattr``/``delattr`` as it executes (not in a
    function or lambda it defines), whatever else it does: torchrl's ``for attr in
    nn.LSTM.__dict__: setattr(LSTMBase, attr, getattr(nn.LSTM, attr))`` gives ``LSTMBase``
    the methods of ``nn.LSTM``, its ``forward`` among them. None if it hands none."""
    roots: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id in ("setattr", "delattr") and n.args \
                and isinstance(n.args[0], ast.Name):
            roots.add(n.args[0].id)
        stack.extend(c for c in treewalk.children(n) if not isinstance(
            c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)))
    return frozenset(roots) or None


def _decorator_methods(node: ast.stmt) -> list[ast.expr]:
    """The decorators of a definition that are a method of something rooted at a name, called
    or not: ``@Conv.factory_function("conv")``, ``@fn.register``."""
    out: list[ast.expr] = []
    for d in getattr(node, "decorator_list", ()):
        func = d.func if isinstance(d, ast.Call) else d
        if isinstance(func, ast.Attribute) and _root(func) is not None:
            out.append(d)
    return out


def decorator_method_roots(node: ast.stmt) -> frozenset[str] | None:
    """For a class or function whose decorators include a method of something rooted at a name
    (``@Conv.factory_function("conv")``): those root names; None for any other statement."""
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    roots = {_root(d.func if isinstance(d, ast.Call) else d) for d in _decorator_methods(node)}
    return frozenset(r for r in roots if r is not None) or None


def reads_beyond_decorator_methods(node: ast.stmt, name: str) -> bool:
    """Whether a statement reads ``name`` other than as the root of a decorator method
    (``decorator_method_roots``): ``Conv[Conv.CONV, 2]`` in a body reads the factory,
    ``@MODELS.register_module()`` on the block's own class only adds to it."""
    skip = {id(sub) for d in _decorator_methods(node)
            for sub in treewalk.walk(d.func if isinstance(d, ast.Call) else d)}
    return any(isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load)
               and id(sub) not in skip for sub in treewalk.walk(node))


def call_arguments(node: ast.stmt) -> tuple[str, dict[int | str, str]] | None:
    """For a bare call statement ``f(a, b=c)`` of a plain function name: ``f`` and the
    arguments that are plain names, by position or keyword."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)):
        return None
    call = node.value
    args: dict[int | str, str] = {}
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            break
        if isinstance(a, ast.Name):
            args[i] = a.id
    for k in call.keywords:
        if k.arg is not None and isinstance(k.value, ast.Name):
            args[k.arg] = k.value.id
    return (call.func.id, args) if args else None


def _module_of(expr: ast.expr, names: set[str]) -> str | None:
    """``C`` for ``sys.modules[C.__module__]`` where ``C`` is one of ``names``."""
    if isinstance(expr, ast.Subscript) and dotted(expr.value) == "sys.modules" and \
            isinstance(expr.slice, ast.Attribute) and expr.slice.attr == "__module__" and \
            isinstance(expr.slice.value, ast.Name) and expr.slice.value.id in names:
        return expr.slice.value.id
    return None


def mutated_parameters(fn: ast.stmt) -> frozenset[int | str]:
    """The parameters (by position and by name) whose object a function changes in place: an
    attribute or item stored or deleted on it, at any depth (``cfg.gnn = CN()``,
    ``cfg.model.type = 'gnn'``, ``setattr(cfg, k, v)``), or on the module that defines it
    (``setattr(sys.modules[C.__module__], name, dc)``). Rebinding the parameter itself changes
    nothing outside."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    names = set(positional) | {p.arg for p in a.kwonlyargs}
    # a local bound to the module that defines a parameter, ``module =
    # sys.modules[C.__module__]``: pytorch3d's ``enable_get_default_args(C)`` stores a
    # dataclass of ``C``'s defaults there, which ``get_default_args(C)`` reads back
    stands_for = {n.targets[0].id: p for n in treewalk.nodes(fn)
                  if isinstance(n, ast.Assign) and len(n.targets) == 1
                  and isinstance(n.targets[0], ast.Name)
                  and (p := _module_of(n.value, names)) is not None}

    def changed_root(t: ast.expr) -> str | None:
        r = _module_of(t, names) or _root(t)
        return stands_for.get(r, r) if r is not None else None

    changed: set[str] = set()
    for n in treewalk.nodes(fn):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.Delete):
            targets = n.targets
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("setattr", "delattr") and n.args:
            r = changed_root(n.args[0])
            if r in names:
                changed.add(r)
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                r = changed_root(t.value)
                if r in names:
                    changed.add(r)
    out: set[int | str] = set(changed)
    out.update(i for i, p in enumerate(positional) if p in changed)
    return frozenset(out)
