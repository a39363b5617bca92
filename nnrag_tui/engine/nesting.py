"""Modules that upstream imports only under a guard, and that need a package which may be
missing: their statements go inside that guard.

megatron's ``inference/contexts/dynamic_context.py`` has ``try: from .fused_kv_append_kernel
import triton_append_key_value_cache except ImportError: triton_append_key_value_cache = None``,
and ``fused_kv_append_kernel.py`` starts with ``import triton`` and decorates its kernel with
``@triton.jit``. Without triton, upstream's import of that module fails and the fallback holds.
A generated file with ``import triton`` among its imports at the top fails as a whole instead.

Such a module (every statement of the closure that reads its definitions is its own or the one
guarded import, whose ``try`` catches ImportError, and it imports a package that is neither the
standard library nor torch) is emitted where upstream imports it: its statements, and its
imports of such packages, go inside the ``try`` right above what the import became, indented
one level. That is what upstream's import does, step by step: without the package the import
raises ImportError before any of the module's definitions exist, and the fallback holds. Lines
inside a multi-line string keep their text (engine.rewrite.indented). A module counts as
importing such a package also where it imports it in a ``try`` of its own whose every branch
imports one (CroCo's ``try: import curope as _kernels except ModuleNotFoundError: from . import
curope as _kernels``, its compiled kernels either way): that ``try`` fails as a whole.

The same holds for an import right in the body of a module-level ``if`` (NeMo's
``ngram_lm_batched.py``: ``if TRITON_AVAILABLE: import triton; from .ngram_lm_triton import
ngram_advance_triton_kernel``, and ``ngram_lm_triton.py`` starts with ``import triton``):
upstream runs the module only where the condition holds, so its statements go inside that
``if``, and without triton the file imports as upstream's module does. ``if TYPE_CHECKING:``
is no such guard: what it imports never runs.

A module upstream imports only inside functions, that is, when they are first called
(deepspeed's ``LinearOp.__init__`` has ``from deepspeed.ops.transformer.inference.triton.ops
import linear_func``, in several functions of several modules, and the kernel modules behind
it import each other and ``triton``), would have its statements be those functions' locals
there. Such modules form a group (``LazyGroup``: those that import a package which may be
missing, and those among the lazily imported ones that import them at module level). Each
module of a group runs in a function of its own (engine.deferred), which each import of it
inside a function calls first, and which the group's modules that import it as they run
call where they import it: as upstream's imports run them, at the first call, and fail
without the package as upstream's do. Each import in a function raises ImportError where
they left the name undefined (engine.rewrite), as upstream's import does. Where their
modules cannot each be a function (``LIMIT: int`` cannot name a global), the group goes
where the last of their statements was, inside a ``try: ... except ImportError: pass`` of
its own, and runs as the file is imported; the header says so. An import of one of them
right in the body of a module-level ``try`` that catches ImportError, elsewhere, does not
make it run as the file loads (``_caught_imports``): its function is called there, and
raises there without the package, as upstream's import does.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.closure import ALWAYS_EXTERNAL, Closure, NodeId
from nnrag_tui.engine.moduleobject import OBJECT_SUFFIX, is_object_key
from nnrag_tui.engine.parse import is_type_checking
from nnrag_tui.engine.provenance import STDLIB

_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class NestedModule:
    site: NodeId  # the statement holding the guarded import
    line: int  # the import's first line in its module
    module: tuple[str, str]  # the module emitted there
    nodes: list[NodeId]  # its statements, in emission order
    externals: list[str]  # identities of the external imports that go there too
    guard: str = "try"  # the statement it goes into: ``try`` or ``if``
    branch: tuple[int, int] = (0, 0)  # that statement's line, and 0 for its body, 1 for else
    # the module object standing in for it where upstream imports the module itself
    # (engine.moduleobject), which goes there too
    object: tuple[str, str] | None = None
    # the modules only it (or another module nested at the same guard) imports, which its
    # import runs first: matgl's ``try: from matgl.layers._embedding_warp import ...`` runs
    # ``matgl.ops`` and ``matgl.kernels``, and those ``import warp``
    helpers: list[tuple[str, str]] = field(default_factory=list)
    # the modules its own ``try`` statements import where every branch imports one that may
    # be missing (``_failing_fallback``): its import fails without them, external or not
    fallbacks: list[str] = field(default_factory=list)

    @property
    def modules(self) -> set[tuple[str, str]]:
        own = {self.module} if self.object is None else {self.module, self.object}
        return own | set(self.helpers)


@dataclass
class LazyGroup:
    """Modules upstream imports only inside functions, emitted in a ``try`` of their own."""

    modules: list[tuple[str, str]]
    nodes: list[NodeId]  # their statements, in emission order; the last one's place is theirs
    externals: list[str]  # identities of the external imports that go there too
    # (statement, line, bound name) of each import in a function of one of their definitions
    sites: list[tuple[NodeId, int, str]]


def nesting(closure: Closure, ext_users: dict[str, set[NodeId]],
            typing: frozenset[NodeId] = frozenset()
            ) -> tuple[dict[NodeId, list[NestedModule]], list[LazyGroup]]:
    """The modules to emit inside the guard of their one import, by the statement holding it,
    and the groups of modules to emit in a ``try`` of their own (see the module's docstring).
    An import that may fail goes into each of them that makes it (two kernel modules may both
    ``import triton``), and stays at the top where any other statement reads it. The statements
    ``typing`` (engine.typing_only), which never run, are none of theirs; an import they read
    too goes into their ``if TYPE_CHECKING:`` as well (``typing_reads``).
    ``ext_users``: ``external_users(closure)``."""
    guarded = _guarded_modules(closure, typing)
    groups = _lazy_groups(closure, {k for m in guarded for k in m.modules},
                          {i: users - typing for i, users in ext_users.items()}, typing)
    inside = {k for m in guarded for k in m.modules} | {m for g in groups for m in g.modules}
    # (what the ``typing`` statements read too goes inside their ``if TYPE_CHECKING:`` as
    # well: OLMo-core's Triton kernels, imported in a ``try``, beside modules only ``if
    # TYPE_CHECKING:`` imports lead to that ``import triton`` too)
    movable = {i: {u[0] for u in users - typing} for i, users in ext_users.items()
               if i in closure.externals and _may_be_missing(closure.externals[i].module)
               and users - typing and all(u[0] in inside for u in users - typing)}
    nests: dict[NodeId, list[NestedModule]] = {}
    for m in guarded:
        m.externals = sorted(i for i, users in movable.items() if m.modules & users)
        m.fallbacks = sorted({name for n in m.nodes for name in _failing_fallback(closure, n)})
        if m.externals or m.fallbacks:
            nests.setdefault(m.site, []).append(m)
    kept = []
    for g in groups:
        g.externals = sorted(i for i, users in movable.items() if users & set(g.modules))
        if g.externals:
            kept.append(g)
    return nests, kept


def _guarded_modules(closure: Closure, typing: frozenset[NodeId]) -> list[NestedModule]:
    """The modules upstream imports once, right in a ``try`` that catches ImportError as the
    module runs, that no other statement reads: to emit inside that ``try``. Where the import
    binds the module itself (OLMo-core's ``try: from olmo_core.kernels import moe as kernels``),
    the module object standing in for it goes there too, and nothing else may read it."""
    sites: dict[tuple[str, str], set[tuple[NodeId, int]]] = {}
    for (user, line, _bound), key in closure.guarded_imports.items():
        if key and key[0] == "def" and key[1] != user[0]:
            sites.setdefault(key[1], set()).add((user, line))
    if not sites:
        return []
    readers: dict[tuple[str, str], set[NodeId]] = {}
    for d in closure.deps:
        if d.user in typing:
            continue
        for n in d.nodes:
            if n[0] != d.user[0]:
                readers.setdefault(n[0], set()).add(d.user)
    position = {n: i for i, n in enumerate(closure.nodes)}
    nodes_of: dict[tuple[str, str], list[NodeId]] = {}  # each module's, as they go out
    for n in closure.nodes:
        if n not in typing:
            nodes_of.setdefault(n[0], []).append(n)
    found: dict[tuple[str, str], NestedModule] = {}
    for key, where in sorted(sites.items()):
        obj = key if is_object_key(key) else None
        module = key if obj is None else (key[0], key[1].removesuffix(OBJECT_SUFFIX))
        if len(where) != 1 or module == (closure.block.source, closure.block.module) or \
                obj is not None and (module in sites or module not in closure.modules):
            continue
        ((site, line),) = where
        guard = _guard(closure, site, line)
        nodes = sorted([*nodes_of.get(module, ()), *nodes_of.get(obj, ())],
                       key=position.__getitem__) if obj else nodes_of.get(module, [])[:]
        if guard is None or not nodes or any(position[n] > position[site] for n in nodes):
            continue  # (what they need then comes after the guard too)
        found[module] = NestedModule(site, line, module, nodes, [], *guard, object=obj)
    # read by nothing else than its import, or by modules imported further down the same
    # branch of the same statement (NeMo's ``try: from .graph_transducer import GraphRnntLoss;
    # from .w_transducer import GraphWTransducerLoss``, whose module imports the first), or by
    # the modules only those import (``_helpers``)
    changed = True
    while changed:
        changed = False
        owner = _helpers(closure, found, readers, position, nodes_of)
        for module, m in sorted(found.items()):
            for r in {r for k in m.modules for r in readers.get(k, ())} - {m.site}:
                if r[0] == m.object:
                    continue  # (the module object holds what the module binds)
                later = found.get(r[0]) or owner.get(r[0])
                if later is None or (later.site, later.branch) != (m.site, m.branch) or \
                        later.line <= m.line:
                    del found[module]
                    changed = True
                    break
    # one import may lead to two nested modules (matgl's ``from matgl.ops import
    # fn_tensor_norm3, graph_transform``): they go there together
    at: dict[tuple[NodeId, int], NestedModule] = {}
    for module, m in sorted(found.items()):
        first = at.setdefault((m.site, m.line), m)
        if first is not m:
            first.helpers += sorted(m.modules)
            first.nodes += m.nodes
    for helper, m in owner.items():
        at[(m.site, m.line)].helpers.append(helper)
        at[(m.site, m.line)].nodes += nodes_of[helper]
    for m in at.values():
        m.nodes.sort(key=position.__getitem__)
    return list(at.values())


def _helpers(closure: Closure, found: dict[tuple[str, str], NestedModule],
             readers: dict[tuple[str, str], set[NodeId]], position: dict[NodeId, int],
             nodes_of: dict[tuple[str, str], list[NodeId]]
             ) -> dict[tuple[str, str], NestedModule]:
    """The modules no statement reads but those of modules nested at one guard (``found``)
    and of such modules in turn (matgl's kernels read each other), each with the nested
    module whose import runs it first: the one imported on the guard's earliest line that
    leads to it. Their statements come before the guard's, as the nested modules' do."""
    target = (closure.block.source, closure.block.module)
    nested = {k: m for m in found.values() for k in m.modules}
    # a module imported inside a function runs when that is called, not with the guard's
    # import (a lazy group's, if any: ``_lazy_groups``)
    lazily = {n[0] for d in closure.deps if d.how == "local-import" for n in d.nodes}
    left = set(nodes_of) - set(nested) - {target} - lazily
    left = {k for k in left if not is_object_key(k)}
    outside = {k: {r[0] for r in readers.get(k, ())} - {k} for k in left}
    changed = True
    while changed:  # those read by a statement of any other module are none
        changed = False
        for k in sorted(left):
            if not outside[k] or outside[k] - left - set(nested):
                left.discard(k)
                changed = True
    owner: dict[tuple[str, str], NestedModule] = {}
    changed = True
    while changed:  # the earliest import leading to each
        changed = False
        for k in sorted(left):
            by = [m for r in outside[k] if (m := nested.get(r) or owner.get(r)) is not None]
            first = min(by, key=lambda m: m.line, default=None)
            if first is not None and owner.get(k) is not first and (
                    k not in owner or first.line < owner[k].line):
                owner[k] = first
                changed = True
    # read from one guard's branch only, and emitted above it; what only such a module reads
    # stays out with it
    changed = True
    while changed:
        changed = False
        for k, m in sorted(owner.items()):
            readers_at = [nested.get(r) or owner.get(r) for r in outside[k]]
            if any(o is None or (o.site, o.branch) != (m.site, m.branch) for o in readers_at) \
                    or any(position[n] > position[m.site] for n in nodes_of[k]):
                del owner[k]
                changed = True
    return owner


def _lazy_groups(closure: Closure, guarded: set[tuple[str, str]],
                 ext_users: dict[str, set[NodeId]], typing: frozenset[NodeId]
                 ) -> list[LazyGroup]:
    """The groups of modules upstream imports only inside functions, that import a package
    which may be missing, or import at load time such a module; without their externals yet.
    ``guarded`` modules go inside the statement holding their import, not into a group."""
    target = (closure.block.source, closure.block.module)
    emitted: dict[tuple[str, str], list[NodeId]] = {}
    for n in closure.nodes:
        if n not in typing:
            emitted.setdefault(n[0], []).append(n)
    eager: dict[tuple[str, str], set[tuple[str, str]]] = {}  # module -> modules reading it
    caught = _caught_imports(closure)
    for d in closure.deps:
        if d.user in typing or d.typing_only:
            continue  # (an ``if TYPE_CHECKING:`` import never runs: nni's sampling.py)
        lazy = d.how == "local-import" and not d.load or \
            d.how == "guarded" and (d.user, d.name) in caught
        for n in d.nodes:
            if n[0] != d.user[0] and not lazy:
                eager.setdefault(n[0], set()).add(d.user[0])
    # the modules only ever imported lazily, or by such modules: the largest such set; not
    # those upstream's import of the block's module runs anyway, through a package's
    # ``__init__`` (solo's ``utils/backbones.py``, which needs timm: upstream's import does)
    lazily = {m for m in emitted if m != target and m not in guarded and not is_object_key(m)
              and m not in closure.run_at_import}
    changed = True
    while changed:
        changed = False
        for m in sorted(lazily):
            if eager.get(m, set()) - lazily - {m}:
                lazily.discard(m)
                changed = True
    # what fails without a package: the modules that import one, and those importing them
    failing = {u[0] for i, users in ext_users.items()
               if i in closure.externals and _may_be_missing(closure.externals[i].module)
               for u in users if u[0] in lazily}
    while True:
        more = {r for m in failing for r in eager.get(m, ()) if r in lazily} - failing
        if not more:
            break
        failing |= more
    groups: list[LazyGroup] = []
    for part in _connected(failing, eager):
        sites = sorted((user, line, bound)
                       for (user, line, bound), key in closure.guarded_imports.items()
                       if key and key[0] == "def" and key[1] in part and user[0] not in part)
        nodes = [n for n in closure.nodes if n[0] in part and n not in typing]
        groups.append(LazyGroup(sorted(part), nodes, [], sites))
    return groups


def _caught_imports(closure: Closure) -> set[tuple[NodeId, str]]:
    """(statement, bound name) of the guarded imports of corpus definitions each of whose
    imports of that name is right in the body of a ``try`` that catches ImportError
    (``_guard``): PennyLane's ``allocation.py`` has ``try: import jax; from pennylane.capture
    import QpPrimitive`` / ``except ImportError: ...``, and ``capture``'s ``__getattr__``
    imports ``custom_primitives`` (engine.lazyattr), which methods elsewhere read lazily too.
    Such an import fails as upstream's does where its module's function runs there and
    raises (engine.deferred): it does not make the module's code run as the file loads."""
    lines: dict[tuple[NodeId, str], list[int]] = {}
    for (user, line, bound), key in closure.guarded_imports.items():
        if key and key[0] == "def" and key[1] != user[0]:
            lines.setdefault((user, bound), []).append(line)
    return {k for k, found in lines.items()
            if all((_guard(closure, k[0], line) or ("",))[0] == "try" for line in found)}


def _connected(modules: set[tuple[str, str]], eager: dict[tuple[str, str], set[tuple[str, str]]]
               ) -> list[set[tuple[str, str]]]:
    """``modules`` split where no import at load time joins them."""
    parts: list[set[tuple[str, str]]] = []
    left = set(modules)
    while left:
        start = min(left)
        part, todo = {start}, [start]
        while todo:
            m = todo.pop()
            near = {r for r in eager.get(m, ()) if r in left} | {
                o for o in left if m in eager.get(o, ())}
            for o in near - part:
                part.add(o)
                todo.append(o)
        left -= part
        parts.append(part)
    return parts


def external_users(closure: Closure) -> dict[str, set[NodeId]]:
    """External import identity -> the statements that read what it binds."""
    users: dict[str, set[NodeId]] = {}
    for (user, _name), key in [*closure.refs.items(), *closure.early_refs.items()]:
        if key[0] == "ext":
            users.setdefault(key[1], set()).add(user)
    for user, chains in closure.chains.items():
        for key in chains.values():
            if key[0] == "ext":
                users.setdefault(key[1], set()).add(user)
    return users


def _may_be_missing(module: str) -> bool:
    top = module.split(".")[0]
    return top not in STDLIB and top not in ALWAYS_EXTERNAL


def _guard(closure: Closure, site: NodeId, line: int
           ) -> tuple[str, tuple[int, int]] | None:
    """``"try"`` where the import on ``line`` of the statement ``site`` is right in the body of
    a ``try`` that catches ImportError, ``"if"`` where it is right in a branch of an ``if``
    (not ``if TYPE_CHECKING:``), each run as the module runs and the import alone on its lines:
    the imported module's statements can go right there. With the branch (the guard's line, 0
    for its body, 1 for its ``else``). Else None. Not in a function or a class body."""
    ms = closure.modules[site[0]]
    stack: list[ast.AST] = [ms.stmts[site[1]].node]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        stack.extend(treewalk.children(node))
        if isinstance(node, ast.Try):
            kind, bodies = "try", [node.body]
        elif isinstance(node, ast.If) and not is_type_checking(node.test):
            kind, bodies = "if", [node.body, node.orelse]
        else:
            continue
        for i, body in enumerate(bodies):
            for st in body:
                if not (isinstance(st, (ast.Import, ast.ImportFrom)) and st.lineno == line):
                    continue
                alone = not ms.lines[line - 1][:st.col_offset].strip()
                if not alone or kind == "try" and not any(_catches(h.type)
                                                          for h in node.handlers):
                    return None
                return kind, (node.lineno, i)
    return None


def _failing_fallback(closure: Closure, node: NodeId) -> list[str]:
    """The modules the statement ``node`` imports, where it is a ``try`` whose body and every
    handler that catches ImportError import a package that may be missing, kept as an import
    (else none): the statement then raises ImportError where they are missing. CroCo's
    ``models/curope/curope2d.py`` has ``try: import curope as _kernels`` (its compiled
    kernels, installed) ``except ModuleNotFoundError: from . import curope as _kernels``
    (built in place), and its ``pos_embed.py`` imports it in a ``try`` whose ``except
    ImportError:`` defines a slower ``RoPE2D``: without the kernels, that fallback holds
    upstream."""
    st = closure.modules[node[0]].stmts[node[1]].node
    if not isinstance(st, ast.Try):
        return []
    imports = closure.entries[node[0]].imports.values()

    def failing(body: list[ast.stmt]) -> list[str]:
        lines = {s.lineno for s in body if isinstance(s, (ast.Import, ast.ImportFrom))}
        # (one the file keeps: an inlined one is a definition of the corpus)
        return [rec.target or rec.module for recs in imports for rec in recs
                if rec.line in lines and closure.guarded_imports.get(
                    (node, rec.line, rec.bound)) is None
                and _may_be_missing(rec.target or rec.module)]

    handlers = [h for h in st.handlers if _catches(h.type)]
    found = [failing(b) for b in (st.body, *(h.body for h in handlers))]
    return [m for names in found for m in names] if handlers and all(found) else []


def _catches(expr: ast.expr | None) -> bool:
    if expr is None:
        return True
    if isinstance(expr, ast.Tuple):
        return any(_catches(e) for e in expr.elts)
    name = expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", None)
    return name in _CATCHES_IMPORT_ERROR


def typing_reads(nests: dict[NodeId, list[NestedModule]], groups: list[LazyGroup],
                 ext_users: dict[str, set[NodeId]], typing: frozenset[NodeId]) -> list[str]:
    """The imports that go inside the nested modules or groups and that the ``typing``
    statements read too: the ``if TYPE_CHECKING:`` holding those makes them as well."""
    moved = {i for found in nests.values() for m in found for i in m.externals} | {
        i for g in groups for i in g.externals}
    return sorted(i for i in moved if ext_users.get(i, set()) & typing)
