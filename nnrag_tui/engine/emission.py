"""The order a closure's statements go into the file.

Definition before use, by the edges the resolver found: an edge whose target is needed while
the module executes (``load``) must be kept; one only a function body reads may be given up to
break a cycle. Within that, upstream's order: modules in the order the closure reached them,
statements by line. A patch goes right after what it changes (engine.patches), registrations
from modules imported by computed name in the order the loop imports them, a ``class``
statement waits for what its metaclass and its bases' ``__init_subclass__`` read as it is made,
and a statement that calls a corpus function or class as it runs waits for what that call reads.
"""

from __future__ import annotations

import ast
import heapq
from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING

from nnrag_tui.engine.closure import BindKey, NodeId
from nnrag_tui.engine.imported_along import RunOrder
from nnrag_tui.engine.reach import (
    METACLASS_CREATION,
    SUBCLASS_HOOK,
    call_run,
    method_calls,
    method_reads,
)

if TYPE_CHECKING:
    from nnrag_tui.engine.resolve import _ClosureBuilder


def emission_order(builder: _ClosureBuilder) -> list[NodeId]:
    rank = {n: i for i, n in enumerate(builder.order)}
    mod_rank: dict[tuple[str, str], int] = {}
    for n in reversed(builder.order):
        mod_rank[n[0]] = len(mod_rank)

    def key(n: NodeId) -> tuple[int, int]:
        return (mod_rank[n[0]], builder.modules[n[0]].stmts[n[1]].line)

    upstream = _UpstreamOrder(builder)
    all_deps: dict[NodeId, set[NodeId]] = {n: set() for n in builder.order}
    load_deps: dict[NodeId, set[NodeId]] = {n: set() for n in builder.order}
    for d in builder.deps:
        for target in d.nodes:
            if target == d.user:
                continue
            all_deps[d.user].add(target)
            if d.load:
                load_deps[d.user].add(target)
    # a patch goes before the uses that upstream runs after it: later statements of its
    # module, and other modules (which import it whole) than the patched one's
    for (user, name), target in builder.refs.items():
        for p in builder.effects.patches.get(target, ()):
            if user == p or (user[0] == p[0] and user[1] < p[1]) or (
                    user[0] == target[1] and user[0] != p[0]):
                continue
            if user[0] != p[0] and (user in builder.effects.patches[target] or
                                    _decorates_with(builder, user, target)):
                # two modules' patches of one definition (fairchem's ``@registry.
                # register_model(...)`` on a model and on its subclass elsewhere) run in
                # the order upstream imports their modules; neither needs the other to
                # load, and taking both ways as a need made a cycle, broken in an order
                # that put the subclass above its base
                if upstream.runs_first(user, p) is not True:
                    all_deps[user].add(p)
                continue
            all_deps[user].add(p)
            if name in builder.modules[user[0]].uses(
                    builder.modules[user[0]].stmts[user[1]]).load:
                load_deps[user].add(p)
    # registrations from modules imported by computed name go in the order the loop
    # imports them: by module name (os.listdir has no order of its own)
    by_importer: dict[str, list[NodeId]] = {}
    for k, filled in builder.effects.by_name_fillers.items():
        by_importer.setdefault(builder.effects.by_name[k], []).extend(filled)
    for group in by_importer.values():
        group.sort(key=lambda n: (builder.entries[n[0]].module, n[1]))
        for a, b in pairwise(group):
            all_deps[b].add(a)
    # two modules' registrations into one registry go in the order upstream runs them (one
    # under a key another registered already replaces it): each waits for the last
    # registration upstream ran before its own module's run of them
    for filling in builder.effects.fillers.values():
        known = sorted((pos, n) for n in filling if (pos := upstream.position(n)) is not None)
        before: NodeId | None = None
        for i, (_, n) in enumerate(known):
            if i and known[i - 1][1][0] != n[0]:
                before = known[i - 1][1]
            if before is not None:
                all_deps[n].add(before)
    # statements of one module that bind the same name keep their upstream order
    by_binding: dict[tuple, list[NodeId]] = {}
    for n in builder.order:
        for name in builder.modules[n[0]].stmts[n[1]].binds:
            by_binding.setdefault((n[0], name), []).append(n)
    for group in by_binding.values():
        group.sort(key=lambda n: n[1])
        for a, b in pairwise(group):
            all_deps[b].add(a)
            load_deps[b].add(a)
    targets = _targets(builder)
    calls = _CallReads(builder, targets)
    for user, needs in [*_class_creation_deps(builder, targets, calls).items(),
                        *_call_time_deps(builder, targets, calls).items()]:
        all_deps[user] |= needs
        load_deps[user] |= needs
    patching = {p for ps in builder.effects.patches.values() for p in ps}

    def first(n: NodeId) -> tuple[bool, tuple[int, int], int]:
        # a patch goes as soon as it can: right after what it changes, as upstream has it
        return (n not in patching, key(n), rank[n])

    emitted: list[NodeId] = []
    remaining = set(builder.order)
    noted: set[NodeId] = set()
    # the statements whose needs (all of them / those at load) have all gone out, by
    # ``first``; kept as each goes out (a closure of vllm's holds 6,658 statements, where
    # looking them all over for each pick took 16 s)
    every = _Ready(all_deps, first)
    at_load = _Ready(load_deps, first)
    while remaining:
        pick = every.best(remaining)
        if pick is None:
            pick = at_load.best(remaining)
        if pick is None:
            # a cycle: only its own statements may go next, in upstream order; anything
            # that merely needs the cycle waits for it
            ready = _first_cycle(remaining, load_deps)
            if not noted & set(ready):
                noted |= set(ready)
                where = ", ".join(f"{builder.entries[n[0]].facts.relpath}:"
                                  f"{builder.modules[n[0]].stmts[n[1]].line}"
                                  for n in sorted(ready, key=key))
                builder.notes.append(
                    f"circular load-time dependency among {where}; upstream order kept")
            pick = min(ready, key=key)
        emitted.append(pick)
        remaining.discard(pick)
        every.gone(pick)
        at_load.gone(pick)
    return emitted


class _Ready:
    """The statements none of whose ``deps`` is still to go out, best (by ``order``) first:
    a count of the needs still to go per statement, lowered as each goes out."""

    def __init__(self, deps: dict[NodeId, set[NodeId]],
                 order: Callable[[NodeId], tuple]) -> None:
        self.order = order
        self.waiting = {n: len(d) for n, d in deps.items()}
        self.users: dict[NodeId, list[NodeId]] = {}
        for n, d in deps.items():
            for m in d:
                self.users.setdefault(m, []).append(n)
        self.heap = [(order(n), n) for n, k in self.waiting.items() if not k]
        heapq.heapify(self.heap)

    def best(self, remaining: set[NodeId]) -> NodeId | None:
        while self.heap and self.heap[0][1] not in remaining:
            heapq.heappop(self.heap)  # gone out already (picked by the other count)
        return self.heap[0][1] if self.heap else None

    def gone(self, n: NodeId) -> None:
        for user in self.users.get(n, ()):
            self.waiting[user] -= 1
            if not self.waiting[user]:
                heapq.heappush(self.heap, (self.order(user), user))


class _UpstreamOrder:
    """Which of two statements upstream's import of the block's module runs first
    (engine.imported_along.RunOrder, worked out the first time it is asked)."""

    def __init__(self, builder: _ClosureBuilder) -> None:
        self.builder = builder
        self._order: RunOrder | None = None

    def position(self, node: NodeId) -> tuple[int, int] | None:
        """A sort key for when ``node`` runs; None where that import does not run it."""
        if self._order is None:
            self._order = self.builder.r.run_order(self.builder.entry)
        return self._order.position(node[0], self.builder.modules[node[0]].stmts[node[1]].line)

    def runs_first(self, a: NodeId, b: NodeId) -> bool | None:
        """Whether ``a`` runs before ``b``; None where that import runs either not at all."""
        pa, pb = self.position(a), self.position(b)
        return None if pa is None or pb is None else pa < pb


def _targets(builder: _ClosureBuilder) -> dict[tuple[NodeId, str], tuple[NodeId, ...]]:
    """The statements each (statement, name it reads) resolved to."""
    targets: dict[tuple[NodeId, str], tuple[NodeId, ...]] = {}
    for d in builder.deps:
        if d.nodes:
            targets[(d.user, d.name)] = targets.get((d.user, d.name), ()) + d.nodes
    return targets


def _call_time_deps(builder: _ClosureBuilder, targets: dict[tuple[NodeId, str], tuple[
        NodeId, ...]], needs_of: _CallReads) -> dict[NodeId, set[NodeId]]:
    """What a statement needs because of what it calls while its module executes: the
    names the called function's body reads, or a called class's ``__init__`` (and
    ``__new__``, ``__post_init__``), and so on through what those call. mmengine's
    ``MODEL_WRAPPERS = Registry('model_wrapper')`` runs ``Registry.__init__``, which
    imports ``build_from_cfg`` inside itself; upstream's ``root.py`` imported that module
    first, and a file with ``build_from_cfg`` below the registries raised NameError. A need
    its own module binds below the statement upstream cannot be one: that read does not
    run then. What fills a registry the call reads is needed too (ludwig's class bodies call
    ``EncoderDataclassField(...)``, which looks up the encoders registered for a feature
    type), except by a statement filling that registry itself: ludwig's
    ``@register_encoder_config("wave", DATE)`` reads the registry it adds to, and taking the
    other registrations as its needs made every two of them a cycle; their order is
    upstream's (``emission_order``)."""
    fills: dict[NodeId, set[BindKey]] = {}
    for registry, filling in builder.effects.fillers.items():
        for f in filling:
            fills.setdefault(f, set()).add(registry)
    extra: dict[NodeId, set[NodeId]] = {}
    for n in builder.order:
        if n[0] in builder.objects:
            continue
        needs: set[NodeId] = set()
        own = set(fills.get(n, ()))
        ms = builder.modules[n[0]]
        for name in ms.load_calls(ms.stmts[n[1]]):
            for m in targets.get((n, name), ()):
                needs |= needs_of(m)
            # what the call itself registers into: classy_vision's ``@register_model(
            # "anynet") class AnyNet`` came into the closure as a base, not as a filler of
            # the registry, and took the RegNets registered into it as its needs, which put
            # ``class RegNet(AnyNet)`` above its base
            key = builder.refs.get((n, name))
            if key is not None and key[0] == "def":
                own.update(builder.effects.writes_of(key))
        needs = {t for t in needs if t != n and (t[0] != n[0] or t[1] < n[1])
                 and not own & fills.get(t, set())}
        if needs:
            extra[n] = needs
    return extra


class _CallReads:
    """What calling a statement's function or class reads, through everything it calls in
    turn (``reach.call_run``), worked out once per statement."""

    def __init__(self, builder: _ClosureBuilder,
                 targets: dict[tuple[NodeId, str], tuple[NodeId, ...]]) -> None:
        self.builder = builder
        self.targets = targets
        self.runs: dict[NodeId, tuple[frozenset[str], frozenset[str]]] = {}
        self.reached: dict[NodeId, frozenset[NodeId]] = {}

    def __call__(self, callee: NodeId) -> frozenset[NodeId]:
        if callee not in self.reached:
            out: set[NodeId] = set()
            todo, seen = [callee], {callee}
            while todo:
                m = todo.pop()
                if m not in self.runs:
                    ms = self.builder.modules[m[0]]
                    self.runs[m] = ms.stmt_fact(ms.stmts[m[1]], call_run)
                reads, calls = self.runs[m]
                for r in reads:
                    out.update(self.targets.get((m, r), ()))
                for c in calls:
                    for t in self.targets.get((m, c), ()):
                        if t not in seen:
                            seen.add(t)
                            todo.append(t)
            self.reached[callee] = frozenset(out)
        return self.reached[callee]


class _ClassMakers:
    """What runs when a ``class`` statement of a closure makes its class: its metaclass's
    creation methods, and the ``__init_subclass__`` of its corpus bases, through theirs in
    turn. (Methods, not functions nested in ``_class_creation_deps`` that call each other:
    those would hold the builder in a reference cycle once the closure is built.)"""

    def __init__(self, builder: _ClosureBuilder,
                 targets: dict[tuple[NodeId, str], tuple[NodeId, ...]]) -> None:
        self.b = builder
        self.targets = targets

    def classdef(self, n: NodeId) -> ast.ClassDef | None:
        node = self.b.modules[n[0]].stmts[n[1]].node
        return node if isinstance(node, ast.ClassDef) else None

    def named(self, user: NodeId, expr: ast.expr) -> tuple[NodeId, ...]:
        return self.targets.get((user, expr.id), ()) if isinstance(expr, ast.Name) else ()

    def of_class(self, node: ast.ClassDef, n: NodeId, seen: set[NodeId]
                 ) -> list[tuple[NodeId, tuple[str, ...]]]:
        """What runs when the ``class`` statement ``node`` (in the statement ``n``) makes its
        class: its metaclass's creation methods and what its bases' makers run."""
        out: list[tuple[NodeId, tuple[str, ...]]] = []
        for k in node.keywords:
            if k.arg == "metaclass":
                out += [(m, METACLASS_CREATION) for m in self.named(n, k.value)
                        if self.classdef(m) is not None]
        for base in node.bases:
            for b in self.named(n, base):
                out += self.of_binding(b, seen)
        return out

    def of_binding(self, n: NodeId, seen: set[NodeId]
                   ) -> list[tuple[NodeId, tuple[str, ...]]]:
        """(class statement, its methods that run) for what runs when the class ``n``
        binds, or one derived from it, is made."""
        if n in seen:
            return []
        seen.add(n)
        node = self.b.modules[n[0]].stmts[n[1]].node
        out: list[tuple[NodeId, tuple[str, ...]]] = []
        if isinstance(node, ast.ClassDef):
            out.append((n, SUBCLASS_HOOK))
            out += self.of_class(node, n, seen)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            # ``X = Meta("X", bases, ns)``: a class that ``Meta`` made
            out += [(m, METACLASS_CREATION) for m in self.named(n, node.value.func)
                    if self.classdef(m) is not None]
        return out


def _class_creation_deps(builder: _ClosureBuilder, targets: dict[tuple[NodeId, str], tuple[
        NodeId, ...]], needs_of: _CallReads) -> dict[NodeId, set[NodeId]]:
    """What a ``class`` statement needs while it executes beyond its own text: the names
    its metaclass's ``__new__``/``__init__``/``__prepare__`` read and those the
    ``__init_subclass__`` of its corpus bases read. brevitas' ``ExtendedInjector =
    _ExtendedInjectorType("Injector", ...)`` is a class its metaclass made, and that
    metaclass's ``__new__`` reads ``BaseInjector``, bound below it upstream: every class
    derived from it runs that read as it is made."""
    makers = _ClassMakers(builder, targets)
    extra: dict[NodeId, set[NodeId]] = {}
    reads: dict[tuple[NodeId, tuple[str, ...]], set[NodeId]] = {}
    for n in builder.order:
        if n[0] in builder.objects:
            continue
        # the classes it makes as it runs: itself, or those in its ``if``/``try`` (nni's
        # ``if Version(torch.__version__) >= ...: class UnarySinc(ParametrizedModule)``);
        # a class's own ``__init_subclass__`` does not run for itself
        seen = {n}
        found = [m for cls in _classes_made(builder.modules[n[0]].stmts[n[1]].node)
                 for m in makers.of_class(cls, n, seen)]
        for maker, methods in found:
            if (maker, methods) not in reads:  # a base shared by many classes: once
                cls = makers.classdef(maker)
                assert cls is not None  # the makers are class statements only
                # what the methods read, and what the functions they call read in turn
                # (tensordict's ``_TensorClassMeta.__new__`` calls ``_patch_tc(cls)``,
                # which reads ``TensorDictBase``)
                got = {t for name in method_reads(cls, methods)
                       for t in targets.get((maker, name), ())}
                for name in method_calls(cls, methods):
                    for t in targets.get((maker, name), ()):
                        got |= needs_of(t)
                reads[(maker, methods)] = got
            # (a need its own module binds below it upstream cannot be one: upstream made
            # the class before that binding ran; tensordict's metaclass reads the classes
            # the module defines below ``class TensorClass``, in what ``__new__`` calls)
            extra.setdefault(n, set()).update(
                t for t in reads[(maker, methods)]
                if t != n and (t[0] != n[0] or t[1] < n[1]))
    return extra


def _classes_made(node: ast.stmt) -> list[ast.ClassDef]:
    """The ``class`` statements that run when ``node`` runs at module level: itself and the
    classes in its body, or those in the blocks of its ``if``/``try``/``with``/loop (not in
    a function's body)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    out: list[ast.ClassDef] = [node] if isinstance(node, ast.ClassDef) else []
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, None) or ():
            if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                for st in child.body:
                    out += _classes_made(st)
            elif isinstance(child, ast.stmt):
                out += _classes_made(child)
    return out


def _decorates_with(builder: _ClosureBuilder, node: NodeId, target: BindKey) -> bool:
    """Whether ``node`` is a ``def``/``class`` decorated with a method of ``target``
    (``@registry.register_model("backbone")``), which changes ``target`` as it runs: a
    patch of it (engine.patches), whether or not the closure needed it as one."""
    ms = builder.modules[node[0]]
    st = ms.stmts[node[1]]
    if st.kind not in ("class", "function"):
        return False
    return any(builder.r.binding_key(builder.entries[node[0]], ms, name) == target
               for name in ms.patch_shape(st)[2] or ())


def _first_cycle(nodes: set[NodeId], deps: dict[NodeId, set[NodeId]]) -> list[NodeId]:
    """The statements of a strongly connected component of ``deps`` (restricted to ``nodes``)
    that needs nothing outside itself: the cycle that has to be broken first. Tarjan's
    algorithm, iterative (a closure can hold thousands of statements)."""
    index: dict[NodeId, int] = {}
    low: dict[NodeId, int] = {}
    stack: list[NodeId] = []
    on_stack: set[NodeId] = set()
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(deps[root] & nodes)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(deps[w] & nodes))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                # Tarjan completes a component only after every component it reaches, so
                # the first one completed depends on no other
                return comp
    return sorted(nodes)
