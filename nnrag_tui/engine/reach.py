"""What runs when a block is built and called: its construction reach, statement by statement.

The closure keeps definitions whole, so it holds everything any method of the block may need
(``from_pretrained``, training helpers). Some decisions only concern code that runs when the
block is built and called: a registry filled by a folder loop (engine.dynimport) needs every
module of the folder only if what *reads* it runs then (ml-cvnets' ``build_activation_layer``,
called in ``__init__``), not if a class method for loading checkpoints reads it (fairseq's
``MODEL_REGISTRY``). This module gives, for a statement, the names that run then: for a class
its bases and class-level statements, and the methods ``CONSTRUCTION`` names plus every method
they reach through ``self.x`` / ``cls.x``, and the methods of the names that those of any other
class reached call through ``self.x`` (a base's ``__init__`` calling a method its subclass
overrides); for any other statement all it reads. Decorators are left out: they ran when the
module loaded.
Local names count too, which only over-approximates: a name is followed only where it resolved
to a module-level definition.
"""

from __future__ import annotations

import ast

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.nodecache import per_node
from nnrag_tui.engine.parse import dotted

CONSTRUCTION = frozenset({"__init__", "__post_init__", "__new__", "__call__", "forward"})


@per_node
def _names(node: ast.AST) -> frozenset[str]:
    """The names ``node`` reads, and the dotted chains it reads through them
    (``registry.get``, a function reached through its module)."""
    out = set()
    for n in treewalk.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            chain = dotted(n)
            if chain is not None:
                out.add(chain)
    return frozenset(out)


@per_node
def _self_attrs(node: ast.AST) -> frozenset[str]:
    return frozenset(n.attr for n in treewalk.walk(node) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))


@per_node
def _undecorated(node: ast.AST) -> frozenset[str]:
    """The names of a ``def`` apart from its decorators, which ran when the module loaded: a
    registry they read (fairseq's ``@register_model("fconv")``) is read before the folder loop
    has imported the rest, and needs none of it."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _names(node)
    return _names(node.args).union(
        *(_names(part) for part in [*node.body, *([node.returns] if node.returns else [])]))


def what_runs(node: ast.stmt, called: frozenset[str] = frozenset()
              ) -> tuple[set[str] | frozenset[str], set[str]]:
    """The names a statement reads in what runs when the block is built and called (see the
    module docstring); and, for a class, the ``self.x`` / ``cls.x`` names read in its methods
    that run, as a subclass's methods of those names run too (mmengine's
    ``BaseBackbone.__init__`` calls ``self.build_stage_layer()``, which mmyolo's backbones
    define). ``called``: such names, which code elsewhere calls
    (engine.side_effects.construction_reach)."""
    if not isinstance(node, ast.ClassDef):
        return _undecorated(node), set()
    out: set[str] = set()
    for part in [*node.bases, *node.keywords]:
        out |= _names(part)
    methods: dict[str, list[ast.stmt]] = {}
    for st in node.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods.setdefault(st.name, []).append(st)
        else:
            out |= _names(st)
    todo = [m for m in methods if m in CONSTRUCTION or m in called]
    seen: set[str] = set()
    attrs: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fn in methods.get(name, ()):
            out |= _undecorated(fn)
            reads = _self_attrs(fn)
            attrs |= reads
            todo.extend(a for a in reads if a in methods and a not in seen)
    return out, attrs


# what runs while a ``class`` statement executes, beyond its body: its metaclass's methods that
# make the class, and the ``__init_subclass__`` of its bases
METACLASS_CREATION = ("__prepare__", "__new__", "__init__")
SUBCLASS_HOOK = ("__init_subclass__",)


def method_reads(cls: ast.ClassDef, methods: tuple[str, ...]) -> set[str]:
    """The names read in the bodies of ``cls``'s methods called one of ``methods``, and in the
    methods those reach through ``self.x`` / ``cls.x``."""
    out: set[str] = set()
    for fn in _methods_run(cls, methods):
        out |= _undecorated(fn)
    return out


def _methods_run(cls: ast.ClassDef, methods: tuple[str, ...]) -> list[ast.stmt]:
    """``cls``'s methods called one of ``methods`` and those they reach through ``self.x`` /
    ``cls.x``."""
    defs: dict[str, list[ast.stmt]] = {}
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(st.name, []).append(st)
    out: list[ast.stmt] = []
    todo, seen = [m for m in methods if m in defs], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fn in defs[name]:
            out.append(fn)
            todo.extend(a for a in _self_attrs(fn) if a in defs)
    return out


# what runs when a class is called: making and initialising its instance
INSTANCE_CREATION = ("__new__", "__init__", "__post_init__")


def _callee(call: ast.Call) -> str | None:
    """What a call calls, by name or through a module: ``f`` or ``mod.f``."""
    return dotted(call.func)


def load_time_calls(node: ast.stmt) -> set[str]:
    """What a module-level statement calls, by name or ``module.name`` chain
    (``MODELS = Registry("model")``, ``to_2tuple = _ntuple(2)``, ``@register_model("x")``,
    and ``@trace`` without parentheses), while its module executes: all of it but the bodies
    of the functions and lambdas it defines (``load_time_nodes``)."""
    out: set[str] = set()
    for n in load_time_nodes(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # a decorator without parentheses is called too, with what it decorates (nni's
            # ``@trace`` on a class calls ``trace``, whose body calls ``_trace_cls``)
            out.update(c for d in n.decorator_list if not isinstance(d, ast.Call)
                       and (c := dotted(d)) is not None)
        elif isinstance(n, ast.Call) and (callee := _callee(n)) is not None:
            out.add(callee)
    return out


def load_time_nodes(node: ast.stmt, annotations: bool = True):
    """The nodes of a module-level statement evaluated while its module executes: all of it
    but the bodies of the functions and lambdas it defines (their decorators and defaults
    are evaluated), and but its annotations where ``annotations`` is false (under ``from
    __future__ import annotations``). A ``def`` or lambda is yielded itself, not its
    children."""
    todo: list[ast.AST] = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            todo += [d for d in (*a.defaults, *a.kw_defaults) if d is not None]
            if isinstance(n, ast.Lambda):
                continue
            todo += n.decorator_list
            if annotations:
                todo += [arg.annotation for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                                    a.vararg, a.kwarg)
                         if arg is not None and arg.annotation is not None]
                if n.returns is not None:
                    todo.append(n.returns)
        elif isinstance(n, ast.AnnAssign) and not annotations:
            todo += [x for x in (n.target, n.value) if x is not None]
        else:
            todo.extend(treewalk.children(n))


def call_run(node: ast.stmt) -> tuple[frozenset[str], frozenset[str]]:
    """(names and ``module.name`` chains read, those called) in what runs when what ``node``
    defines is called: a function's body; for a class, its ``INSTANCE_CREATION`` methods and
    what they reach through ``self.x``, with its bases as called (their ``__init__`` runs
    too). Frozen: engine.emission keeps them per statement, for every block."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        bodies: list[ast.AST] = list(node.body)
        extra: set[str] = set()
    elif isinstance(node, ast.ClassDef):
        bodies = [st for fn in _methods_run(node, INSTANCE_CREATION)
                  for st in fn.body]  # type: ignore[attr-defined]
        extra = {b.id for b in node.bases if isinstance(b, ast.Name)}
    else:
        return frozenset(), frozenset()
    reads, calls = _run_of(bodies)
    return frozenset(reads), frozenset(calls | extra)


def method_calls(cls: ast.ClassDef, methods: tuple[str, ...]) -> set[str]:
    """What the bodies of ``cls``'s methods called one of ``methods`` call (``call_run``'s
    calls), with the methods those reach through ``self.x`` / ``cls.x``."""
    return _run_of([st for fn in _methods_run(cls, methods)
                    for st in fn.body])[1]  # type: ignore[attr-defined]


def _run_of(bodies: list[ast.AST]) -> tuple[set[str], set[str]]:
    """(names and chains read, those called) where ``bodies`` run."""
    reads: set[str] = set()
    calls: set[str] = set()
    returned: set[int] = set()  # the names of ``return NAME`` statements, by node id
    nested: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    todo: list[ast.AST] = list(bodies)
    while True:
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # a function defined inside: what its definition evaluates runs now, its
                # body only where it is called (below)
                a = n.args
                todo += [*n.decorator_list, *a.defaults,
                         *(d for d in a.kw_defaults if d is not None)]
                nested.append(n)
                continue
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Name):
                returned.add(id(n.value))
            if isinstance(n, ast.Name):
                if id(n) not in returned:
                    reads.add(n.id)
            elif isinstance(n, ast.Attribute) and (chain := dotted(n)) is not None:
                reads.add(chain)  # ``schema_utils.TypeSelection``; its prefixes come too
            elif isinstance(n, ast.Call) and (callee := _callee(n)) is not None:
                calls.add(callee)
            todo.extend(treewalk.children(n))
        # a nested function runs where the body calls it or hands it on (``map(fn, xs)``),
        # not where it only returns it: tensordict's ``@_write_back_inplace`` returns its
        # ``wrapper``, whose body reads what the whole package defines, and taking that as
        # read while the class body ran made the base class and its subclasses a cycle
        ready = [f for f in nested if f.name in reads | calls]
        if not ready:
            break
        nested = [f for f in nested if f not in ready]
        for f in ready:
            todo += f.body
    return reads, calls
