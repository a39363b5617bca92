"""What a module ``__getattr__`` (PEP 562) returns for one name, worked out without running it.

engine.lazyattr reads the branch shape ``if key == "X": from .m import X; return X`` directly.
Many packages drive theirs from a table instead. boxmot::

    _EXPORTS = {"BotSort": ("boxmot.trackers.botsort.botsort", "BotSort"), ...}

    def __getattr__(name):
        try:
            module_name, attribute = _EXPORTS[name]
        except KeyError as exc:
            raise AttributeError(...) from exc
        value = getattr(import_module(module_name), attribute)
        globals()[name] = value
        return value

and PennyLane's ``qnn``: ``if name in class_map: mod = importlib.import_module("." +
class_map[name], __name__); return getattr(mod, name)``. ``Run`` runs such a function for one
name on values it can know: strings, the module's constant tables of strings, modules
(``import_module``, an import statement) and their attributes (``getattr``, ``mod.X``). What
the function returns for the name is an import: ``getattr(import_module("a.b"), "C")`` is
``from a.b import C``. Anything else it meets (a call of another function, a loop, a name it
cannot know) ends the run with no answer, as does a ``raise``: the name is not provided so.
Storing into ``globals()`` is a cache of the answer and changes nothing here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.facts import Guard, ImportRecord


@dataclass(frozen=True)
class _Module:
    name: str


@dataclass(frozen=True)
class _Attribute:
    module: str
    name: str


class _Unknown(Exception):
    """The run met what it cannot know."""


class _Raised(Exception):
    """The function raises for the name (an ``AttributeError``, a missing key)."""


_NOTHING = object()  # Python's None, as a value of the run


def tables(body: list[ast.stmt]) -> dict[str, object]:
    """The module's constant tables: a name bound once at its top level to a literal dict
    whose keys are strings and whose values are strings or tuples of strings, or to a literal
    list, tuple or set of strings, and not changed by another top-level statement
    (``_EXPORTS.update(...)``, ``_EXPORTS[k] = ...``)."""
    found: dict[str, object] = {}
    seen: dict[str, int] = {}
    for st in body:
        target = value = None
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            target, value = st.targets[0], st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            target, value = st.target, st.value
        if isinstance(target, ast.Name):
            seen[target.id] = seen.get(target.id, 0) + 1
            table = _literal(value)
            if table is not None:
                found[target.id] = table
    changed = {n for n, count in seen.items() if count > 1} | _changed(body)
    return {n: t for n, t in found.items() if n not in changed}


def _changed(body: list[ast.stmt]) -> set[str]:
    """Names the module's top level stores into or changes with a method (not inside
    functions, which the run does not follow: a ``__getattr__`` that fills its own table as
    a cache answers as the table says)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.value.id)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.attr in _CHANGING:
            names.add(n.func.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        todo.extend(treewalk.children(n))
    return names


# the methods by which a dict, list or set changes
_CHANGING = frozenset({"update", "setdefault", "pop", "popitem", "clear", "append", "extend",
                       "insert", "remove", "add", "discard", "__setitem__", "__delitem__"})


def _literal(node: ast.expr | None) -> object | None:
    """A dict of strings to strings or tuples of strings, or a tuple or frozenset of strings,
    from a literal; None for anything else."""
    if isinstance(node, ast.Dict):
        out: dict[str, object] = {}
        for k, v in zip(node.keys, node.values):
            key = _string(k)
            value = _string(v)
            if value is None and isinstance(v, ast.Tuple):
                parts = [_string(e) for e in v.elts]
                value = tuple(parts) if all(p is not None for p in parts) else None
            if key is None or value is None:
                return None
            out[key] = value
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = [_string(e) for e in node.elts]
        if all(p is not None for p in parts):
            return tuple(parts) if not isinstance(node, ast.Set) else frozenset(parts)
    return None


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


class Run:
    """Runs a ``__getattr__`` (``func``, whose parameter is ``param``) of module ``module``
    for one name at a time."""

    def __init__(self, func: ast.FunctionDef, param: str, module: str, is_package: bool,
                 tables: dict[str, object]) -> None:
        self.func = func
        self.param = param
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.tables = tables
        self.env: dict[str, object] = {}

    def candidates(self) -> list[str]:
        """The names the function may answer for from its tables: the keys of the tables it
        reads, and the strings of the literal collections it tests its parameter's membership
        in, in the order they appear."""
        out: dict[str, None] = {}
        for n in treewalk.walk(self.func):
            if isinstance(n, ast.Name) and n.id in self.tables:
                out.update(dict.fromkeys(self.tables[n.id]))
            elif isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and \
                    n.left.id == self.param and len(n.ops) == 1 and \
                    isinstance(n.ops[0], (ast.In, ast.NotIn)):
                table = _literal(n.comparators[0])
                if isinstance(table, (tuple, frozenset)):
                    out.update(dict.fromkeys(sorted(table) if isinstance(table, frozenset)
                                             else table))
        return [n for n in out if n.isidentifier()]

    def record(self, name: str, guard: Guard) -> ImportRecord | None:
        """The import the function's answer for ``name`` amounts to, bound to ``name``; None
        where it raises or the run cannot know."""
        self.env = {self.param: name}
        try:
            value = self.block(self.func.body)
        except (_Unknown, _Raised, RecursionError):
            return None
        line, end = self.func.lineno, self.func.end_lineno or self.func.lineno
        if isinstance(value, _Attribute) and value.module:
            return ImportRecord(name, value.module, value.name,
                                None if value.name == name else name, 0, value.module, line,
                                end, guard)
        if isinstance(value, _Module) and value.name:
            return ImportRecord(name, value.name, None, name, 0, value.name, line, end, guard)
        return None

    def block(self, stmts: list[ast.stmt]) -> object:
        """The value a ``return`` in ``stmts`` gives; ``_NOTHING`` where none runs."""
        for st in stmts:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                continue  # (a docstring)
            if isinstance(st, ast.Return):
                return self.value(st.value) if st.value is not None else _NOTHING
            if isinstance(st, ast.Raise):
                raise _Raised
            if isinstance(st, ast.If):
                found = self.block(st.body if self.truth(self.value(st.test)) else st.orelse)
            elif isinstance(st, ast.Try) and not st.finalbody and not _imports(st.body):
                # a handler runs only where the body raises; an import in the body may
                # raise where the run cannot tell (a fallback for a missing package)
                found = self.block(st.body)
                if found is _NOTHING:
                    found = self.block(st.orelse)
            else:
                self.statement(st)
                continue
            if found is not _NOTHING:
                return found
        return _NOTHING

    def statement(self, st: ast.stmt) -> None:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if all(_caches(t) for t in targets):
                return  # ``globals()[name] = value``
            value = self.value(st.value)
            for t in targets:
                self.assign(t, value)
        elif isinstance(st, ast.Import):
            for a in st.names:
                if a.asname:
                    self.env[a.asname] = _Module(a.name)
                else:
                    self.env[a.name.split(".")[0]] = _Module(a.name.split(".")[0])
        elif isinstance(st, ast.ImportFrom) and all(a.name != "*" for a in st.names):
            from nnrag_tui.engine.parse import resolve_relative

            base = resolve_relative(self.module, self.package == self.module, st.level,
                                    st.module)
            for a in st.names:
                self.env[a.asname or a.name] = _Attribute(base, a.name)
        else:
            raise _Unknown

    def assign(self, target: ast.expr, value: object) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and \
                len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise _Unknown

    def value(self, node: ast.expr) -> object:
        if isinstance(node, ast.Constant):
            return _NOTHING if node.value is None else node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id == "__name__":
                return self.module
            if node.id == "__package__":
                return self.package
            if node.id in self.tables:
                return self.tables[node.id]
            raise _Unknown
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                part = self.value(v.value) if isinstance(v, ast.FormattedValue) and \
                    v.conversion == -1 and v.format_spec is None else self.value(v)
                if not isinstance(part, str):
                    raise _Unknown
                parts.append(part)
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
        elif isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.value(e) for e in node.elts)
        elif isinstance(node, ast.Set):
            items = [self.value(e) for e in node.elts]
            if all(isinstance(i, str) for i in items):
                return frozenset(items)
        elif isinstance(node, ast.Subscript):
            table, key = self.value(node.value), self.value(node.slice)
            if isinstance(table, dict) and isinstance(key, str):
                if key not in table:
                    raise _Raised  # (KeyError)
                return table[key]
        elif isinstance(node, ast.Attribute):
            owner = self.value(node.value)
            if isinstance(owner, _Module):
                return _Attribute(owner.name, node.attr)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self.compare(node.ops[0], self.value(node.left),
                                self.value(node.comparators[0]))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.truth(self.value(node.operand))
        elif isinstance(node, ast.BoolOp):
            values = [self.truth(self.value(v)) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        elif isinstance(node, ast.Call):
            return self.call(node)
        raise _Unknown

    def call(self, node: ast.Call) -> object:
        func = node.func
        if node.keywords and not (_callee(func) in _IMPORT_MODULE and
                                  all(k.arg == "package" for k in node.keywords)):
            raise _Unknown
        args = [self.value(a) for a in node.args]
        args += [self.value(k.value) for k in node.keywords]
        callee = _callee(func)
        if callee == "getattr" and "getattr" not in self.env and len(args) == 2:
            owner, attr = args
            if isinstance(owner, _Module) and isinstance(attr, str):
                return _Attribute(owner.name, attr)
        elif callee in _IMPORT_MODULE and 1 <= len(args) <= 2 and isinstance(args[0], str):
            return _Module(_imported(args[0], args[1] if len(args) == 2 else None))
        elif isinstance(func, ast.Attribute) and func.attr == "get" and 1 <= len(args) <= 2:
            table = self.value(func.value)
            if isinstance(table, dict) and isinstance(args[0], str):
                return table.get(args[0], args[1] if len(args) == 2 else _NOTHING)
        raise _Unknown

    def compare(self, op: ast.cmpop, left: object, right: object) -> bool:
        if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(left, str) and \
                isinstance(right, str):
            return (left == right) == isinstance(op, ast.Eq)
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, str) and \
                isinstance(right, (dict, tuple, frozenset)):
            return (left in right) == isinstance(op, ast.In)
        if isinstance(op, (ast.Is, ast.IsNot)) and right is _NOTHING:
            return (left is _NOTHING) == isinstance(op, ast.Is)
        raise _Unknown

    def truth(self, value: object) -> bool:
        if isinstance(value, (bool, str, tuple, dict, frozenset)):
            return bool(value)
        if value is _NOTHING:
            return False
        raise _Unknown


# ``import_module(name)`` and ``importlib.import_module(name, package)``
_IMPORT_MODULE = frozenset({"import_module", "importlib.import_module"})


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def _imported(name: str, package: object) -> str:
    """The module ``importlib.import_module(name, package)`` imports."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    if not isinstance(package, str) or not package:
        raise _Unknown  # (upstream raises: a relative name needs its package)
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        raise _Unknown  # (upstream raises: beyond the top-level package)
    base = bits[0]
    rest = name[level:]
    return f"{base}.{rest}" if rest else base


def _imports(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) or (
        isinstance(n, ast.Call) and _callee(n.func) in _IMPORT_MODULE)
        for st in stmts for n in treewalk.walk(st))


def _caches(target: ast.expr) -> bool:
    """``globals()[name]``: the run stores its answer in the module's namespace."""
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call) and \
        _callee(target.value.func) == "globals" and not target.value.args
