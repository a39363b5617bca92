"""Constructor arguments the corpus itself uses, for the validator's instantiate stage.

A block whose constructor needs a config (``ByobNet(cfg)``), a block class (``ResNet(block,
layers)``) or a list of stage definitions cannot be built from guesses on parameter names.
The corpus shows how it is built. Three shapes are collected, as source text:

1. calls of the class itself anywhere in its repository (``Bottleneck(64, 64, stride=2)``),
   the callee resolved through each calling module's own imports, so a same-named class
   elsewhere never counts;
2. in the block's own module, ``dict(...)`` calls and ``{...}`` literals whose keys are all
   constructor parameters (timm's ``model_args = dict(block=BasicBlock, layers=(2, 2, 2, 2))``);
3. for a parameter annotated with a corpus class (``cfg: ByoModelCfg``), calls of that class
   in the block's module (``ByoModelCfg(blocks=(...), stem_chs=64)``).

Only expressions that mean the same in the generated file are kept: every name they use is a
module-level name of the calling module (not a local of the function the call is in: timm's
``LevitBlock(..., drop_path=drop_path)`` passes a float parameter, not the ``drop_path``
function the file inlines), bound to the same definition as in the block's module, and bound by
the file (or a builtin). A name the calling function binds once, and never rebinds, is read as
what it holds when that function runs with its own defaults: a parameter's default (``qka_type:
str = "token"``; ``*args`` is ``()``, ``**kwargs`` ``{}``), or a local's one plain assignment
among its body's statements (``dims = (embed_dims // 4, ...)``). An argument still not usable is
left out; the positional ones after it are passed by keyword. The sandbox evaluates the sets
in the imported block module and tries them after the guessed arguments fail.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Container

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted

if TYPE_CHECKING:
    from nnrag_tui.engine.bindings import ModuleEntry
    from nnrag_tui.engine.facts import Block
    from nnrag_tui.engine.resolve import Resolver

MAX_SETS = 8
MAX_EXPR_CHARS = 600
_BUILTINS = frozenset(dir(builtins))
_IDENT = re.compile(r"[A-Za-z_]\w*")
_CALLEE = re.compile(r"([A-Za-z_]\w*)\s*\(")


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


# a name the calling function binds once -> (the expression it holds when the function runs
# with its defaults, the _Known of the scope that expression is read in)
_Known = dict[str, tuple[ast.expr, "_Known"]]
_MAX_DEPTH = 4  # names read through names read through ... at most this deep


@dataclass(frozen=True)
class _Site:
    """A call or mapping display, with the names local to the functions and classes around
    it (empty at module level) and what those that are bound once hold."""

    node: ast.expr
    local: frozenset[str]
    known: _Known


@dataclass
class _ModuleNodes:
    calls: dict[str, list[_Site]] = field(default_factory=dict)
    mappings: list[_Site] = field(default_factory=list)


@dataclass(frozen=True)
class ArgumentSet:
    """Arguments of one constructor call seen in the corpus, as source text."""

    where: str  # relpath:line
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict:
        return {"where": self.where, "args": list(self.args), "kwargs": dict(self.kwargs)}


class CallSites:
    """Finds argument sets for blocks of one resolver's index; module texts are read once."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._callees: dict[tuple[str, str], frozenset[str]] = {}  # names called, by text
        self._nodes: dict[tuple[str, str], _ModuleNodes] = {}
        self._same: dict[tuple, bool] = {}  # (calling module, block module, name)

    def for_block(self, block: Block, file_names: set[str] | frozenset[str],
                  params: list[dict]) -> list[ArgumentSet]:
        """Argument sets for ``block``'s constructor, best first, at most ``MAX_SETS``.
        ``file_names``: the names the generated file binds at module level; ``params``: the
        spec's constructor parameters (``name``, ``kind``, ``annotation``, ``default``)."""
        index = self.resolver.index
        home = index.entries.get((block.source, block.module))
        if home is None or "." in block.qualname:
            return []
        named = [p for p in params if p.get("kind") not in ("var_positional", "var_keyword")]
        names = [p["name"] for p in named]
        positional = [p["name"] for p in named if p.get("kind") in ("positional", "normal")]
        if not names:
            return []
        required = {p["name"] for p in named if "default" not in p}
        usable = frozenset(file_names) | _BUILTINS
        found: list[tuple[tuple, ArgumentSet]] = []
        seen: set[tuple] = set()

        def keep(rank: int, s: ArgumentSet | None) -> None:
            if s is None or not (s.args or s.kwargs):
                return
            key = (s.args, s.kwargs)
            if key in seen:
                return
            seen.add(key)
            covered = set(positional[: len(s.args)]) | {k for k, _ in s.kwargs}
            size = sum(map(len, s.args)) + sum(len(v) for _, v in s.kwargs)
            # most required parameters filled, nearest, then the shortest (the small
            # variants: resnet18 before resnext101)
            found.append(((-len(covered & required), rank, size), s))

        keyword_ok = {p["name"] for p in named if p.get("kind") != "positional"}
        for entry in self._modules(block.source, home):
            rank = 0 if entry is home else 1
            for site in self._calls(entry, block.qualname):
                if self._is_target(entry, site.node.func, home, block.qualname):
                    ok = self._names_usable(entry, home, usable, site.local)
                    keep(rank, self._from_call(entry, site, positional, names, keyword_ok, ok))
        for site in self._module_nodes(home).mappings:
            keep(2, self._from_mapping(home, site, set(names),
                                       self._names_usable(home, home, usable, site.local)))
        for p in params:
            for cfg_class in self._annotated_classes(home, p.get("annotation") or ""):
                for site in self._calls(home, cfg_class):
                    if self._is_target(home, site.node.func, home, cfg_class):
                        ok = self._names_usable(home, home, usable, site.local)
                        text = self._text(site.node, ok, site.known)
                        if text is not None:
                            keep(3, ArgumentSet(_where(home, site.node), (),
                                                ((p["name"], text),)))
        found.sort(key=lambda t: t[0])
        return [s for _, s in found[:MAX_SETS]]

    # -- finding calls ---------------------------------------------------------------------
    def _modules(self, source: str, home: ModuleEntry) -> list[ModuleEntry]:
        others = sorted((e for (src, _), e in self.resolver.index.entries.items()
                         if src == source and e is not home), key=lambda e: e.module)
        return [home, *others]

    def _calls(self, entry: ModuleEntry, name: str) -> list[_Site]:
        if name not in self._called_names(entry):
            return []
        return self._module_nodes(entry).calls.get(name, [])

    def _called_names(self, entry: ModuleEntry) -> frozenset[str]:
        """Every ``name(`` in the module's text: a cheap filter before parsing it."""
        hit = self._callees.get(entry.key)
        if hit is None:
            path = Path(self.resolver.roots[entry.source]) / entry.facts.relpath
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            hit = self._callees[entry.key] = frozenset(_CALLEE.findall(text))
        return hit

    def _module_nodes(self, entry: ModuleEntry) -> _ModuleNodes:
        """The module's calls by callee name and its mapping displays, from one walk."""
        hit = self._nodes.get(entry.key)
        if hit is None:
            hit = self._nodes[entry.key] = _ModuleNodes()
            try:
                ms = self.resolver.module_source(entry)
            except Exception:  # noqa: BLE001  (an unreadable or changed file has none)
                return hit
            for st in ms.stmts:
                self._collect(st.node, frozenset(), {}, hit)
        return hit

    @classmethod
    def _collect(cls, node: ast.AST, local: frozenset[str], known: _Known,
                 out: _ModuleNodes) -> None:
        """Calls and mapping displays under ``node``; ``local``: the names bound by the
        functions and classes enclosing it (a nested scope adds its own); ``known``: what
        those bound once hold (see _known_in)."""
        if isinstance(node, ast.Call):
            f = node.func
            callee = f.id if isinstance(f, ast.Name) else (
                f.attr if isinstance(f, ast.Attribute) else None)
            if callee is not None:
                out.calls.setdefault(callee, []).append(_Site(node, local, known))
            if callee == "dict" and not node.args and len(node.keywords) > 1:
                out.mappings.append(_Site(node, local, known))
        elif isinstance(node, ast.Dict) and len(node.keys) > 1:
            out.mappings.append(_Site(node, local, known))
        if isinstance(node, _SCOPES):
            body = node.body if isinstance(node.body, list) else [node.body]
            inside = {id(b) for b in body}
            bound, times = _bindings(node)
            inner = local | bound
            inner_known = _known_in(node, known, bound, times)
            for child in treewalk.children(node):  # decorators, defaults, bases: outside
                if id(child) in inside:
                    cls._collect(child, inner, inner_known, out)
                else:
                    cls._collect(child, local, known, out)
            return
        for child in treewalk.children(node):
            cls._collect(child, local, known, out)

    def _names_usable(self, entry: ModuleEntry, home: ModuleEntry, usable: frozenset[str],
                      local: frozenset[str]) -> Container[str]:
        """The names an expression in ``entry`` (inside a scope binding ``local``) may use:
        bound by the file, not local there, and the same definition in ``entry`` as in the
        block's module ``home``."""
        return _Usable(lambda name: name not in local and self._same_binding(entry, home, name),
                       usable)

    def _same_binding(self, entry: ModuleEntry, home: ModuleEntry, name: str) -> bool:
        key = (entry.key, home.key, name)
        hit = self._same.get(key)
        if hit is None:
            index = self.resolver.index
            a = index.lookup(home, name)
            if a.kind == "unresolved":
                hit = name in _BUILTINS
            elif entry is home:
                hit = True
            else:
                b = index.lookup(entry, name)
                hit = (a.kind, a.name, a.entry and a.entry.key, a.attr) == \
                    (b.kind, b.name, b.entry and b.entry.key, b.attr)
            self._same[key] = hit
        return hit

    def _is_target(self, entry: ModuleEntry, func: ast.expr, home: ModuleEntry,
                   name: str) -> bool:
        index = self.resolver.index
        path = dotted(func)
        if path is None:
            return False
        t = index.lookup(entry, path) if "." not in path else index.resolve_dotted(entry, path)
        return t.kind == "def" and t.entry is not None and t.entry.key == home.key \
            and t.name == name and not t.attr

    # -- turning calls into argument sets ---------------------------------------------------
    def _from_call(self, entry: ModuleEntry, site: _Site, positional: list[str],
                   names: list[str], keyword_ok: set[str],
                   usable: Container[str]) -> ArgumentSet | None:
        call = site.node
        args: list[str] = []
        kwargs = []
        gap = False  # a position left out: the later ones go by keyword
        for name, a in zip(positional, call.args):
            if isinstance(a, ast.Starred):
                break
            text = self._text(a, usable, site.known)
            if text is None:
                gap = True
            elif not gap:
                args.append(text)
            elif name in keyword_ok:
                kwargs.append((name, text))
        for kw in call.keywords:
            if kw.arg is None or kw.arg not in names:
                continue
            text = self._text(kw.value, usable, site.known)
            if text is not None:
                kwargs.append((kw.arg, text))
        return ArgumentSet(_where(entry, call), tuple(args), tuple(kwargs))

    def _from_mapping(self, entry: ModuleEntry, site: _Site, names: set[str],
                      usable: Container[str]) -> ArgumentSet | None:
        node = site.node
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "dict" and not node.args and node.keywords:
            if any(k.arg is None for k in node.keywords):
                return None
            pairs = [(k.arg, k.value) for k in node.keywords]  # type: ignore[misc]
        elif isinstance(node, ast.Dict) and node.keys and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            pairs = [(k.value, v) for k, v in zip(node.keys, node.values)]  # type: ignore
        if len(pairs) < 2 or not all(k in names for k, _ in pairs):
            return None
        kwargs = []
        for k, v in pairs:
            text = self._text(v, usable, site.known)
            if text is not None:
                kwargs.append((k, text))
        return ArgumentSet(_where(entry, node), (), tuple(kwargs))

    def _annotated_classes(self, home: ModuleEntry, annotation: str) -> list[str]:
        index = self.resolver.index
        out = []
        for ident in dict.fromkeys(_IDENT.findall(annotation)):
            t = index.lookup(home, ident)
            if t.kind == "def" and t.entry is not None and t.entry.key == home.key \
                    and ident in home.classes:
                out.append(ident)
        return out

    @staticmethod
    def _text(node: ast.expr, usable: Container[str], known: _Known | None = None) -> str | None:
        """The expression's source when every name it loads is usable in the generated file
        (no lambdas, comprehensions or walrus: their own names would need scoping), each
        ``known`` name first replaced by what it holds. A table looked up by a local key
        (``model_cfgs[variant]``) becomes the table's first value."""
        if known:
            node = _substituted(node, known)
            if node is None:
                return None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in usable and CallSites._text(node.slice, usable) is None:
            return f"next(iter({node.value.id}.values()))"
        for n in treewalk.walk(node):
            if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                              ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield,
                              ast.YieldFrom)):
                return None
            if isinstance(n, ast.Name) and n.id not in usable:
                return None
        text = ast.unparse(node)
        return text if len(text) <= MAX_EXPR_CHARS else None


class _Usable:
    """A set of usable names, decided name by name on first use (``in`` only)."""

    def __init__(self, decide, names: frozenset[str]) -> None:
        self._decide = decide
        self._names = names
        self._known: dict[str, bool] = {}

    def __contains__(self, name: object) -> bool:
        hit = self._known.get(name)  # type: ignore[arg-type]
        if hit is None:
            hit = self._known[name] = name in self._names and self._decide(name)  # type: ignore
        return hit


def _bindings(scope: ast.AST) -> tuple[frozenset[str], dict[str, int]]:
    """(the names a function, lambda or class body binds locally: parameters, assignments,
    loop and ``with`` targets, imports, nested definitions, minus its ``global``
    declarations; how many times its body binds each). Nested scopes' own bindings are
    included, which only makes the checks stricter; a name declared ``global`` or
    ``nonlocal`` counts as bound more than once."""
    params = _parameters(scope)
    times: dict[str, int] = {}
    declared_global: set[str] = set()
    body = scope.body if isinstance(scope.body, list) else [scope.body]  # type: ignore
    for st in body:
        for n in treewalk.walk(st):
            if isinstance(n, (ast.Global, ast.Nonlocal)):
                if isinstance(n, ast.Global):
                    declared_global.update(n.names)
                for name in n.names:
                    times[name] = times.get(name, 0) + 2
            for name in _names_bound_by(n):
                times[name] = times.get(name, 0) + 1
    return frozenset((params | times.keys()) - declared_global), times


def _parameters(scope: ast.AST) -> set[str]:
    """The parameters of a function or lambda; none for a class body."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set()
    a = scope.args
    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            if p is not None}


def _names_bound_by(n: ast.AST) -> list[str]:
    if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
        return [n.id]
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [n.name]
    if isinstance(n, ast.arg):
        return [n.arg]
    if isinstance(n, (ast.Import, ast.ImportFrom)):
        return [(al.asname or al.name).split(".")[0] for al in n.names]
    if isinstance(n, ast.ExceptHandler) and n.name:
        return [n.name]
    return []


def _known_in(scope: ast.AST, outer: _Known, bound: frozenset[str],
              times: dict[str, int]) -> _Known:
    """What the names a function binds once hold when it runs with its own defaults: each
    parameter with a default it never rebinds (``*args`` ``()``, ``**kwargs`` ``{}``), and
    each local assigned once, by a plain ``name = value`` among the body's own statements;
    the enclosing scopes' names it does not bind as they were. A default is read in the
    enclosing scope, a local's value in the function's own. ``bound``, ``times``: the
    scope's _bindings."""
    known = {k: v for k, v in outer.items() if k not in bound}
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return known
    a = scope.args
    positional = [*a.posonlyargs, *a.args]
    with_defaults = [*zip(positional[len(positional) - len(a.defaults):], a.defaults),
                     *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)]
    for p, default in with_defaults:
        if p.arg not in times:
            known[p.arg] = (default, outer)
    if a.vararg is not None and a.vararg.arg not in times:
        known[a.vararg.arg] = (ast.Tuple(elts=[], ctx=ast.Load()), {})
    if a.kwarg is not None and a.kwarg.arg not in times:
        known[a.kwarg.arg] = (ast.Dict(keys=[], values=[]), {})
    params = _parameters(scope)
    for st in scope.body if isinstance(scope.body, list) else ():
        target = value = None
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            target, value = st.targets[0], st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            target, value = st.target, st.value
        if isinstance(target, ast.Name) and target.id in bound and target.id not in params \
                and times.get(target.id) == 1:
            known[target.id] = (value, known)  # (read in the function's own scope)
    return known


class _Unreadable(Exception):
    pass


def _substituted(node: ast.expr, known: _Known, depth: int = 0) -> ast.expr | None:
    """A copy of ``node`` with each name in ``known`` replaced by what it holds (read in
    its own scope, at most _MAX_DEPTH deep); None when that goes deeper; ``node`` itself
    when it names nothing ``known`` holds (the callers only read it)."""
    if not any(isinstance(n, ast.Name) and n.id in known for n in treewalk.walk(node)):
        return node

    class Replace(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            hit = known.get(n.id) if isinstance(n.ctx, ast.Load) else None
            if hit is None:
                return n
            if depth >= _MAX_DEPTH:
                raise _Unreadable(n.id)
            value = _substituted(hit[0], hit[1], depth + 1)
            if value is None:
                raise _Unreadable(n.id)
            return value

    try:
        return Replace().visit(copy.deepcopy(node))
    except _Unreadable:
        return None


def file_names(code: str, definitions) -> set[str]:
    """The names a generated file binds at module level: its definitions' (``Definition.names``)
    and its imports' (one statement per line at the top, possibly parenthesized)."""
    names = {n for d in definitions for n in d.names}
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("import ", "from ")):
            stmt = [line]
            while "(" in line and ")" not in line and i + 1 < len(lines):
                i += 1
                line = lines[i]
                stmt.append(line)
            try:
                tree = ast.parse("\n".join(stmt))
            except SyntaxError:
                tree = None
            for node in (tree.body if tree else []):
                for alias in getattr(node, "names", []):
                    if alias.name != "*":
                        names.add(alias.asname or alias.name.split(".")[0])
        i += 1
    return names


def _where(entry: ModuleEntry, node: ast.AST) -> str:
    return f"{entry.facts.relpath}:{getattr(node, 'lineno', 0)}"
