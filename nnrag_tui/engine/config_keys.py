"""Registrations looked up by a config's ``type`` key: the OpenMMLab shape.

``ConvModule(..., act_cfg=dict(type='Swish'))`` builds what ``@MODELS.register_module() class
Swish`` registered under its class name, in ``mmcv/cnn/bricks/swish.py``. No name leads there:
upstream has it because importing the block's module runs ``mmcv/cnn/bricks/__init__.py``,
which imports that file. This module reads, from the AST alone, the keys such configs name and
the registrations a statement makes through a method of a registry object; side_effects pairs
them up.
"""

from __future__ import annotations

import ast
import builtins

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted, is_dotted_name


def _is_type(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == "type"


def type_keys(node: ast.AST) -> set[str]:
    """The strings given as ``type`` in a dict in ``node``: ``dict(type="Swish", ...)``,
    ``{"type": "Swish", ...}``, ``cfg.update(type=...)``, ``cfg.setdefault("type", ...)``
    (mmpretrain's ``data_preprocessor.setdefault('type', 'SelfSupDataPreprocessor')``) and
    ``cfg["type"] = ...``. Where a ``type`` is computed (mmpose's ViPNAS_MobileNetV3 has
    ``act=['HSwish', 'ReLU', ...]`` and ``dict(type=self.act[i])``), every string of ``node``
    that could name a registration may be one: a dotted name, ``'mmdet.CrossEntropyLoss'``
    included."""
    out: set[str] = set()
    computed = False
    for sub in treewalk.walk(node):
        values: list[ast.expr] = []
        if isinstance(sub, ast.Call) and (
                isinstance(sub.func, ast.Name) and sub.func.id == "dict"
                or isinstance(sub.func, ast.Attribute) and sub.func.attr == "update"):
            values = [k.value for k in sub.keywords if k.arg == "type"]
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "setdefault" and len(sub.args) == 2 and _is_type(sub.args[0]):
            values = [sub.args[1]]
        elif isinstance(sub, ast.Assign):
            values = [sub.value for t in sub.targets
                      if isinstance(t, ast.Subscript) and _is_type(t.slice)]
        elif isinstance(sub, ast.Dict):
            values = [v for k, v in zip(sub.keys, sub.values) if _is_type(k)]
        for v in values:
            if isinstance(v, ast.Constant):
                if isinstance(v.value, str):
                    out.add(v.value)
            elif not (isinstance(v, ast.Name) and hasattr(builtins, v.id)):  # ``type=int``
                computed = True
    if computed:
        out |= {c.value for c in treewalk.walk(node) if isinstance(c, ast.Constant)
                and isinstance(c.value, str) and is_dotted_name(c.value)}
    return out


def split_scope(key: str) -> tuple[str | None, str]:
    """A key's scope and the key its registry holds, as mmengine's ``split_scope_key`` reads
    them: ``'mmdet.CrossEntropyLoss'`` is ``CrossEntropyLoss`` in the registry whose scope is
    ``mmdet``; a key without a dot names no scope."""
    scope, dot, real = key.partition(".")
    return (scope, real) if dot else (None, key)


def _literal(expr: ast.expr | None) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) \
        else None


def _registering(call: ast.expr) -> tuple[str, ast.Call | None] | None:
    """(registry root name, the call) for ``R.register...(...)`` or a bare ``R.register...``:
    a method whose name says it registers, of a name (not of ``self``)."""
    fn = call.func if isinstance(call, ast.Call) else call
    if not (isinstance(fn, ast.Attribute) and fn.attr.startswith("register")):
        return None
    root = dotted(fn.value)
    if root is None or "." in root or root in ("self", "cls"):
        return None
    return root, call if isinstance(call, ast.Call) else None


def _named(call: ast.Call | None) -> str | None:
    """The key a registration call names: ``name="HSwish"`` or a first string argument."""
    if call is None:
        return None
    for k in call.keywords:
        if k.arg == "name":
            return _literal(k.value)
    return _literal(call.args[0]) if call.args else None


def registers_own_name(node: ast.stmt) -> bool:
    """Whether a decorated ``class``/``def`` registers itself under its own name as its module
    runs: ``@MODELS.register_module()``, called with no name. The registry then holds it
    under whatever name the file gives it (mmengine's ``register_module`` reads
    ``module.__name__``). A bare ``@fn.register`` is how ``functools.singledispatch``
    registers, by the annotation's type (pennylane's ``@bind_new_parameters.register def _``),
    so it is not counted."""
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for dec in node.decorator_list:
        found = _registering(dec)
        if found is not None and found[1] is not None and not found[1].args \
                and all(k.arg != "name" for k in found[1].keywords):
            return True
    return False


def registrations(node: ast.stmt) -> list[tuple[str, str]]:
    """(registry root name, key) of what a module-level statement registers through a
    registry object's method, as the module runs: a decorated ``class``/``def`` under the
    name the decorator gives, else its own (``@MODELS.register_module()``); a call under the
    name it gives, else that of the object it hands over (``MODELS.register_module(
    module=nn.Hardswish, name='HSwish')``, ``MODELS.register_module(module=HSwish)``), also
    inside an ``if``/``for``/``try`` (mmcv's ``hswish.py`` picks by torch version). An object
    handed over as the variable of a ``for`` over a literal list gives each element's name
    (mmcv's ``for module in [nn.ReLU, ..., nn.ReLU6, ...]: MODELS.register_module(
    module=module)``)."""
    out: list[tuple[str, str]] = []
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        for dec in node.decorator_list:
            found = _registering(dec)
            if found is not None:
                out.append((found[0], _named(found[1]) or node.name))
        return out
    # a loop variable -> the names of the literal list it runs over
    loops = {n.target.id: [c.rpartition(".")[2] for c in chains]
             for n in treewalk.walk(node)
             if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
             and isinstance(n.iter, (ast.List, ast.Tuple))
             and None not in (chains := [dotted(e) for e in n.iter.elts])}
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(sub, ast.Call) and (found := _registering(sub)) is not None:
            key = _named(sub)
            keys = [key] if key is not None else []
            if key is None:
                given = [k.value for k in sub.keywords if k.arg == "module"] or sub.args[:1]
                chain = dotted(given[0]) if given else None
                keys = loops[chain] if chain in loops else \
                    [chain.rpartition(".")[2]] if chain else []
            out += [(found[0], k) for k in keys]
        todo.extend(treewalk.children(sub))
    return out
