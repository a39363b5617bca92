"""Registries that creating a class fills: a base's ``__init_subclass__`` or a metaclass's
``__new__``/``__init__`` storing each new class somewhere (``Registry.REGISTRY[cls.__name__] =
cls``, ``cls.registry[name] = cls``, ``REG.update({name: new})``, ``FormatRegistry.register(
cls.name, cls)``).

A ``class Double(Base)`` statement then fills those registries as its module runs, with no
decorator and no call of its own: the registry rule (engine.side_effects) asks this module
which registries a class statement fills so. A store through the class being made, or the
metaclass (``cls.registry[...]``, ``mcs._reg[...]``, ``new.table[...]`` with ``new =
super().__new__(...)``), may fill any class along the new class's bases or its metaclass's;
the rule keeps only those the closure reads as registries. A store into another parameter
(deepspeed's ``attrs[MAPPING_KEY] = {}``, the namespace being made) fills none. Syntactic, as
the rest of the registry rule: a heuristic, said so in each dependency.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.bindings import ModuleEntry
from nnrag_tui.engine.closure import BindKey
from nnrag_tui.engine.modsource import ModuleSource, TopStmt, container_access
from nnrag_tui.engine.parse import dotted

if TYPE_CHECKING:
    from nnrag_tui.engine.side_effects import SideEffects

# methods a metaclass runs as it creates a class
_CREATION = ("__new__", "__init__")

# (the registries a hook fills by name, and the attributes it stores into through the
# class being made or the metaclass: ``registry`` for ``cls.registry[name] = cls``)
Fills = tuple[tuple[BindKey, ...], frozenset[str]]


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """A function's parameters and the names it binds itself."""
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
    stored = {n.id for n in treewalk.walk(fn) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    return frozenset(p.arg for p in params) | stored


def _class_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The names a hook holds the class being made (or its metaclass) by: its first
    parameter, and a local bound to a ``__new__`` call (``new = super().__new__(mcs, ...)``)."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    out = {params[0].arg} if params else set()
    for st in treewalk.walk(fn):
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and \
                isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "__new__":
            out.update(t.id for t in st.targets if isinstance(t, ast.Name))
    return frozenset(out)


class SubclassHooks:
    """What creating a class fills, for one closure's registry rule; the answers per class
    and per statement are kept on the resolver, as they do not depend on the closure."""

    def __init__(self, effects: SideEffects) -> None:
        self.fx = effects
        self.r = effects.r
        self.index = effects.index

    def fills(self, entry: ModuleEntry, ms: ModuleSource, st: TopStmt) -> tuple[BindKey, ...]:
        """The definitions that the ``class`` statement ``st`` may fill as it runs, through
        the ``__init_subclass__`` of a corpus base or a corpus metaclass: the containers its
        hooks store into by name, and where one stores through the class being made, the
        corpus classes along its bases and metaclasses."""
        if st.kind != "class":
            return ()
        at = ("statement", entry.key, st.index)
        hit = self.r.subclass_fills.get(at)
        if hit is not None:
            return hit[0]
        node: ast.ClassDef = st.node  # type: ignore[assignment]
        bases, metas = self._parents(entry, ms, node)
        out: list[BindKey] = []
        by_self = False
        for key in bases:
            keys, attrs = self._subclass_fills(key)
            out += keys
            by_self |= bool(attrs)
        for key in metas:
            keys, attrs = self._creation_fills(key)
            out += keys
            by_self |= bool(attrs)
        if by_self:
            for key in (*bases, *metas):
                out += self._ancestry(key)
        hit = tuple(dict.fromkeys(out))
        self.r.subclass_fills[at] = (hit, frozenset())
        return hit

    def stored_attributes(self, key: BindKey) -> frozenset[str]:
        """The attributes that subclassing the corpus class ``key`` stores into through the
        class being made (a metaclass's ``cls.registry[name] = cls``): ``key.registry`` is
        then a registry, though its body may bind no container."""
        return self._subclass_fills(key)[1]

    def reading_methods(self, key: BindKey, attrs: frozenset[str]) -> frozenset[str]:
        """The methods of the corpus class ``key`` and its corpus bases that read one of
        ``attrs`` through their first parameter (``def get(cls, name): return cls.registry[
        name]``): ``Head.get(...)`` looks the registry up."""
        out: set[str] = set()
        for k in self._ancestry(key):
            for _, _, node in self._classes(k):
                for fn in node.body:
                    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    params = [*fn.args.posonlyargs, *fn.args.args]
                    if params and any(isinstance(n, ast.Attribute) and n.attr in attrs
                                      and isinstance(n.value, ast.Name)
                                      and n.value.id == params[0].arg for n in treewalk.walk(fn)):
                        out.add(fn.name)
        return frozenset(out)

    def hooked_classes(self, key: BindKey, entry: ModuleEntry) -> list[str]:
        """The classes of ``entry``'s module whose subclasses fill the registry ``key``."""
        if self.r.is_external(entry.module):
            return []
        ms = self.r.module_source(entry)
        out = []
        for st in ms.stmts:
            if st.kind != "class":
                continue
            cls = ("def", entry.key, st.node.name)  # type: ignore[attr-defined]
            keys, attrs = self._subclass_fills(cls)
            if key in keys or attrs and key in self._ancestry(cls):
                out.append(cls[2])
        return out

    def _classes(self, key: BindKey) -> list[tuple[ModuleEntry, ModuleSource, ast.ClassDef]]:
        """The corpus ``class`` statements binding ``key``."""
        entry = self.index.entries.get(key[1])
        if entry is None or self.r.is_external(entry.module):
            return []
        ms = self.r.module_source(entry)
        return [(entry, ms, ms.stmts[i].node) for i in ms.binders.get(key[2], [])  # type: ignore
                if ms.stmts[i].kind == "class"]

    def _parents(self, entry: ModuleEntry, ms: ModuleSource, node: ast.ClassDef
                 ) -> tuple[list[BindKey], list[BindKey]]:
        """The corpus classes a class statement names as its bases and as its metaclass."""
        def key_of(expr: ast.expr) -> BindKey | None:
            if isinstance(expr, ast.Name):
                return self.r.binding_key(entry, ms, expr.id)
            chain = dotted(expr) if isinstance(expr, ast.Attribute) else None
            return self.r.dotted_key(entry, chain) if chain is not None else None

        bases = [k for k in map(key_of, node.bases) if k is not None]
        metas = [k for k in (key_of(kw.value) for kw in node.keywords if kw.arg == "metaclass")
                 if k is not None]
        return bases, metas

    def _subclass_fills(self, key: BindKey) -> Fills:
        """What creating a subclass of the corpus class ``key`` fills: the ``__init_subclass__``
        of it and its corpus bases, and the creation methods of their metaclasses."""
        hit = self.r.subclass_fills.get(key)
        if hit is not None:
            return hit
        self.r.subclass_fills[key] = ((), frozenset())  # (a cycle of bases adds nothing)
        out: list[BindKey] = []
        stored: set[str] = set()
        for entry, ms, node in self._classes(key):
            bases, metas = self._parents(entry, ms, node)
            parts = [self._method_fills(entry, ms, fn) for fn in node.body
                     if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and fn.name == "__init_subclass__"]
            parts += [self._subclass_fills(k) for k in bases]
            parts += [self._creation_fills(k) for k in metas]
            for keys, attrs in parts:
                out += keys
                stored |= attrs
        self.r.subclass_fills[key] = hit = (tuple(dict.fromkeys(out)), frozenset(stored))
        return hit

    def _creation_fills(self, key: BindKey) -> Fills:
        """What the corpus metaclass ``key`` fills as it creates a class: its ``__new__`` and
        ``__init__`` and those of its corpus bases."""
        cache = ("metaclass", key)
        hit = self.r.subclass_fills.get(cache)
        if hit is not None:
            return hit
        self.r.subclass_fills[cache] = ((), frozenset())
        out: list[BindKey] = []
        stored: set[str] = set()
        for entry, ms, node in self._classes(key):
            parts = [self._method_fills(entry, ms, fn) for fn in node.body
                     if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and fn.name in _CREATION]
            parts += [self._creation_fills(k) for k in self._parents(entry, ms, node)[0]]
            for keys, attrs in parts:
                out += keys
                stored |= attrs
        self.r.subclass_fills[cache] = hit = (tuple(dict.fromkeys(out)), frozenset(stored))
        return hit

    def _ancestry(self, key: BindKey) -> list[BindKey]:
        """``key`` and the corpus classes it derives from, nearest first."""
        out, todo = [], [key]
        while todo:
            k = todo.pop(0)
            if k in out:
                continue
            out.append(k)
            for entry, ms, node in self._classes(k):
                todo += self._parents(entry, ms, node)[0]
        return out

    def _method_fills(self, entry: ModuleEntry, ms: ModuleSource,
                      fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Fills:
        """The module-level containers a hook method stores into by name, directly or through
        a class's filling method or a corpus function it calls (by name, or through its module:
        ``registry.add(cls)``), and the attributes it stores into through the class being made
        or the metaclass (``cls.registry[name] = cls``)."""
        own = _locals(fn)
        made = _class_names(fn)
        body = ast.Module(body=list(fn.body), type_ignores=[])
        names = set(container_access(fn)[1]) | self.fx.filling_calls(entry, ms, body)
        names |= self.fx.handed_to_fillers(entry, ms, fn)
        out: list[BindKey] = []
        attrs: set[str] = set()
        for name in sorted(names):
            head, _, rest = name.partition(".")
            if head in made and rest:
                attrs.add(rest.split(".")[0])
            if head in own:
                continue
            key = self.r.binding_key(entry, ms, head)
            if key is not None:
                out.append(key)
        for call in treewalk.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            key = self.r.binding_key(entry, ms, call.func.id) if isinstance(
                call.func, ast.Name) and call.func.id not in own else self._through_module(
                entry, call.func, own)
            if key is not None:
                out += self.fx.writes_of(key)
        return tuple(dict.fromkeys(out)), frozenset(attrs)

    def _through_module(self, entry: ModuleEntry, func: ast.expr, own: frozenset[str]
                        ) -> BindKey | None:
        """The corpus function a call reaches through an imported module (``registry.add(
        cls)`` below ``from . import registry``)."""
        chain = dotted(func) if isinstance(func, ast.Attribute) else None
        head = chain.split(".")[0] if chain else None
        if head is None or head in own or head not in entry.imports or \
                self.index.lookup(entry, head).kind != "module":
            return None
        return self.r.dotted_key(entry, chain)
