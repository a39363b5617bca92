"""Modules a function imports by a name it computes: the file holds them as module objects.

spikingjelly's ``_register_dispatch(namespace, cpu, selection)`` (``_ops/dispatch.py``) defines
the torch operators of each neuron family (``sj_lif::forward``, ``sj_lif::backward``). It runs
``validation = importlib.import_module(f"{cpu.__package__}.{'autograd' if trainable else
'validation'}")`` and takes each operator's fake and gradient from that module
(``getattr(validation, fake_name)``, ``validation._register_ops(...)``). No file has modules by
upstream's names, so that call needs spikingjelly installed, and then mixes its functions with
the inlined ones.

Where a function of the closure calls ``importlib.import_module`` (``import_module``, imported
from importlib) with a name built from a module's own (``name_shape``: its ``__package__`` or
``__name__``, then parts spelled out: a literal, or the literals of a conditional) and reads the
module it gets, the modules that name may be are found: from the calling module's own name, or,
where the function is given the module (``cpu``), from each module the closure holds as a module
object, since upstream's callers pass it as a value. Each becomes a module object holding every
name its module binds (engine.moduleobject), as the caller may read any of them. The call
becomes one of a function of the file (``table_text``) that returns the module object held under
the name it is given, and otherwise calls ``importlib.import_module`` as upstream does. The
header lists the rewrite and the modules held; where more than ``MAX_HELD`` modules may be
meant, the call stays as written. A name computed otherwise (mmengine's
``import_module(f"{self.scope}.utils")``, from a registry's scope) is not guessed from.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING, NamedTuple

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.bindings import Target
from nnrag_tui.engine.closure import Dependency, NodeId
from nnrag_tui.engine.modulefiles import is_plain_relative
from nnrag_tui.engine.moduleobject import (
    ANCHOR_NAMES,
    IMPORT_TABLE_KIND,
    MODULE_OBJECT,
    OBJECT_SUFFIX,
    object_key,
)
from nnrag_tui.engine.nodecache import per_node
from nnrag_tui.engine.parse import dotted, string_pieces

if TYPE_CHECKING:
    from nnrag_tui.engine.modsource import ModuleSource
    from nnrag_tui.engine.resolve import _ClosureBuilder

IMPORTER = "_import_module"  # the name the table's function binds (a clash renames it)
# the table's module key is (source, TABLE_SUFFIX); like a module object's, it is no upstream
# module (moduleobject.is_object_key holds for it)
TABLE_SUFFIX = "#imports" + OBJECT_SUFFIX
MAX_HELD = 8  # modules one computed name may be, at most
_HELD = "__nnrag_held_{}__"  # the table's name for its i-th module object, renamed on output
_IMPORTLIB = Target("external", "importlib", how="import")


def table_key(source: str) -> tuple[str, str]:
    return (source, TABLE_SUFFIX)


def is_table_key(key: tuple[str, str]) -> bool:
    return key[1] == TABLE_SUFFIX


def held_name(i: int) -> str:
    return _HELD.format(i)


def _alternatives(node: ast.expr) -> list[str] | None:
    """The strings ``node`` may be where it spells them all out: a literal, or a conditional
    of such (``'autograd' if trainable else 'validation'``); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        a, b = _alternatives(node.body), _alternatives(node.orelse)
        return None if a is None or b is None else [*a, *(x for x in b if x not in a)]
    return None


_MODULE_NAMES = ("__package__", "__name__")


class NameShape(NamedTuple):
    """A module name built from a module's own: its ``attr`` (``__package__`` or
    ``__name__``), of a module the function is given (``cpu.__package__``) or, ``own``, of
    the calling module itself (``__package__``), then one of ``tails`` (``.autograd``)."""

    attr: str
    own: bool
    tails: tuple[str, ...]

    def base(self, module: str, is_package: bool) -> str:
        """What ``attr`` is for ``module``."""
        if self.attr == "__name__" or is_package:
            return module
        return module.rpartition(".")[0]


def name_shape(node: ast.expr) -> NameShape | None:
    """How the computed module name ``node`` is built, where it is a module's ``__package__``
    or ``__name__`` followed by parts spelled out (a literal, or the literals of a
    conditional): spikingjelly's ``f"{cpu.__package__}.{'autograd' if trainable else
    'validation'}"``; None for any other name (``f"{scope}.utils"``, ``f".{name}"``)."""
    pieces = string_pieces(node)
    if not pieces or len(pieces) < 2:
        return None
    first = pieces[0]
    if isinstance(first, ast.Attribute) and first.attr in _MODULE_NAMES and \
            isinstance(first.value, ast.Name):
        attr, own = first.attr, False
    elif isinstance(first, ast.Name) and first.id in _MODULE_NAMES:
        attr, own = first.id, True
    else:
        return None
    tails = [""]
    for piece in pieces[1:]:
        alts = _alternatives(piece)
        if alts is None:
            return None
        tails = [t + x for t in tails for x in alts]
    if not all(t.startswith(".") and all(p.isidentifier() for p in t[1:].split("."))
               for t in tails):
        return None
    return NameShape(attr, own, tuple(tails))


def _importer_call(node: ast.AST) -> str | None:
    """How a call names ``importlib.import_module`` as written (``importlib.import_module``,
    ``import_module``), where its first argument is a name it computes; None otherwise."""
    if not isinstance(node, ast.Call) or not node.args or \
            isinstance(node.args[0], (ast.Constant, ast.Starred)):
        return None
    name = dotted(node.func)
    return name if name in ("importlib.import_module", "import_module") else None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _importer_calls(stmt: ast.AST) -> tuple[tuple[str, ast.Call, bool], ...]:
    """(how the call names the importer, the call, whether its module is read) for each call
    of ``importlib.import_module`` with a computed name inside a function or lambda of
    ``stmt``, in the order of the text; one walk, a nested function's calls once. A call
    that is a statement of its own imports for what the module does as it runs (mmengine's
    ``import_module(f"{scope}.registry")``), its module left unread: the registries'
    business (engine.registry)."""
    out = []
    alone: set[int] = set()
    todo: list[tuple[ast.AST, bool]] = [(stmt, False)]
    while todo:
        node, inside = todo.pop()
        if isinstance(node, ast.Expr):
            alone.add(id(node.value))
        elif inside:
            how = _importer_call(node)
            if how:
                out.append((how, node, id(node) not in alone))
        if isinstance(node, _SCOPES):  # (its decorators and defaults run outside it)
            body = {id(b) for b in (node.body if isinstance(node.body, list) else [node.body])}
            todo += [(c, inside or id(c) in body) for c in treewalk.children(node)]
        else:
            todo += [(c, inside) for c in treewalk.children(node)]
    out.sort(key=lambda c: (c[1].lineno, c[1].col_offset))
    return tuple(out)


@per_node
def computed_module_imports(stmt: ast.AST) -> tuple[tuple[str, NameShape, int], ...]:
    """(how the call names the importer, how the name is built, its line) for each call of
    ``importlib.import_module`` inside a function or lambda of ``stmt`` with a name built from
    a module's own (``name_shape``), whose module it reads (``_importer_calls``): the calls
    the table answers."""
    out = []
    for how, call, read in _importer_calls(stmt):
        shape = name_shape(call.args[0]) if read else None
        if shape is not None:
            out.append((how, shape, call.lineno))
    return tuple(dict.fromkeys(out))


def resolvable(func: ast.AST) -> bool:
    """Whether the table answers every call of ``importlib.import_module`` with a computed
    name in ``func`` (``computed_module_imports``), so that the modules they import can be
    held: one whose name is computed otherwise, or whose module is left unread, would need
    the package installed."""
    return all(read and name_shape(call.args[0]) is not None
               for _, call, read in _importer_calls(func))


def _own_nodes(st: ast.stmt):
    """The nodes of ``st`` outside the statements it holds (an ``if``'s test, not its body)."""
    todo = [c for c in ast.iter_child_nodes(st) if not isinstance(c, ast.stmt)]
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt)]


@per_node
def parameter_dunders(stmt: ast.AST) -> tuple[tuple[str, int, frozenset[str]], ...]:
    """(``__package__`` or ``__file__``, line, the string literals of the statement reading
    it) for each read of a module's ``__package__`` or ``__file__`` from a parameter of a
    function in ``stmt``: spikingjelly's ``_register_dispatch(namespace, cpu, selection)``
    reads ``cpu.__package__`` and ``Path(cpu.__file__).with_name("reference.py")``, ``cpu``
    being a module its callers pass."""
    out = []
    for scope in treewalk.walk(stmt):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = scope.args
        params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        for st in treewalk.walk(scope):
            if not isinstance(st, ast.stmt) or st is scope:
                continue
            own = list(_own_nodes(st))
            reads = [(n.attr, n.lineno) for n in own if isinstance(n, ast.Attribute)
                     and n.attr in ("__package__", "__file__")
                     and isinstance(n.value, ast.Name) and n.value.id in params]
            if reads:
                lits = frozenset(n.value for n in own if isinstance(n, ast.Constant)
                                 and isinstance(n.value, str))
                out += [(attr, line, lits) for attr, line in reads]
    return tuple(dict.fromkeys(out))


_EQUALITY = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)


@per_node
def module_name_compares(stmt: ast.AST) -> tuple[tuple[str, int], ...]:
    """(``NAME``, line) for each comparison in ``stmt`` of something's ``__module__`` with
    ``NAME.__name__``: spikingjelly's ``_surrogate_spec`` tests ``type(function).__module__
    != surrogate_module.__name__``, ``surrogate_module`` the module it imports inside the
    function, to tell that module's classes from others."""
    out = []
    for node in treewalk.walk(stmt):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, _EQUALITY):
                continue
            for one, other in ((a, b), (b, a)):
                if isinstance(one, ast.Attribute) and one.attr == "__module__" and \
                        isinstance(other, ast.Attribute) and other.attr == "__name__" and \
                        isinstance(other.value, ast.Name):
                    out.append((other.value.id, node.lineno))
    return tuple(dict.fromkeys(out))


def table_text(held: list[str]) -> str:
    """The function standing in for ``importlib.import_module``: ``held`` are upstream's
    names of the modules it holds, the i-th as ``held_name(i)``."""
    rows = "".join(f'        "{m}": {held_name(i)},\n' for i, m in enumerate(held))
    return (f"def {IMPORTER}(name, package=None):\n"
            '    """`importlib.import_module`, but a module this file holds as a module object\n'
            '    (by upstream\'s name) is that object."""\n'
            "    held = {\n" + rows + "    }.get(name)\n"
            "    return held if held is not None else importlib.import_module(name, package)\n")


def table_source(held: list[str]) -> ModuleSource:
    """The table's function as a module of its own, one top-level statement."""
    from nnrag_tui.engine.modsource import ModuleSource, TopStmt

    ms = ModuleSource(table_text(held), "<import table>")
    st = ms.stmts[0]
    ms.stmts = [TopStmt(0, st.line, st.end_line, IMPORT_TABLE_KIND, frozenset({IMPORTER}),
                        st.node)]
    ms.binders = {IMPORTER: [0]}
    return ms


class HeldModules:
    """The rule over one closure: the modules its functions import by computed names, held
    as module objects, and the table that hands them out (one per closure)."""

    def __init__(self, builder: _ClosureBuilder) -> None:
        self.b = builder
        self._scanned = 0  # how much of the builder's ``order`` add read
        # (statement, how it names the importer, how the name is built, line)
        self._calls: list[tuple[NodeId, str, NameShape, int]] = []
        self._bound: set[tuple[NodeId, str]] = set()  # callers pointed at the table
        self.held: list[str] = []  # the modules the table holds, by upstream's names
        self._loose: set[tuple[str, int]] = set()  # (module, line): too many to hold
        self._note = -1  # the table's note's index in the builder's notes

    def add(self) -> bool:
        """The module objects the computed imports of the statements taken so far may return,
        and the table; whether anything was added. The names are built from a module's
        own: of the calling module, or of a module the function is given, which upstream's
        callers pass as a value, so a module object of the closure."""
        size = len(self.b.order)
        for node in self.b.order[self._scanned:size]:
            if node[0][1].endswith(OBJECT_SUFFIX):
                continue
            ms = self.b.modules[node[0]]
            st = ms.stmts[node[1]]
            if st.kind in ("function", "class", "compound") and \
                    "import_module" in ms.stmt_text(st):
                for how, shape, line in computed_module_imports(st.node):
                    self._calls.append((node, how, shape, line))
        self._scanned = size
        added = False
        for node, how, shape, line in self._calls:
            entry = self.b.entries[node[0]]
            if shape.own:
                bases = {(entry.source, shape.base(entry.module, entry.facts.is_package))}
            else:
                bases = {(k[0], shape.base(self.b.entries[k].module,
                                           self.b.entries[k].facts.is_package))
                         for k in self.b.objects}
            found = sorted({(src, base + tail) for src, base in bases for tail in shape.tails
                            if (src, base + tail) in self.b.index.entries})
            where = (entry.module, line)
            if len(found) > MAX_HELD:
                if where not in self._loose:
                    self._loose.add(where)
                    self.b.notes.append(
                        f"{entry.module}:{line} imports a module by a name it computes, which "
                        f"{len(found)} modules may be: too many to hold here, so the call "
                        "stays as written, and needs the package installed")
                continue
            for src, module in found:
                if module not in self.held:
                    self._hold(src, module, f"{entry.module}:{line}")
                    added = True
            if found and (node, how) not in self._bound:
                self._bound.add((node, how))
                self._point_at_table(node, how)
                added = True
        return added

    def add_module_dunders(self) -> None:
        """Where a function of the closure reads ``__package__`` or ``__file__`` of a module
        it is given (``parameter_dunders``), each module object has them as upstream's
        module does: its package, and a ``__file__`` in a folder beside the file named by its
        module, where the files beside upstream's module that the reading statement names
        go (``Path(cpu.__file__).with_name("reference.py")``: ``reference.py``). A plain
        module object has neither: ``cpu.__package__`` was None, and the name
        ``_register_dispatch`` builds from it imported a module "None". Where one compares a
        class's ``__module__`` with a module object's ``__name__`` (``module_name_compares``),
        that is the file's ``__name__``, as that module's classes are defined here."""
        if not self.b.objects:
            return
        self._name_objects_as_file()
        reads: list[tuple[str, str, frozenset[str]]] = []  # (dunder, module:line, literals)
        for node in self.b.order:
            if node[0][1].endswith(OBJECT_SUFFIX):
                continue
            ms = self.b.modules[node[0]]
            st = ms.stmts[node[1]]
            if st.kind not in ("function", "class", "compound"):
                continue
            text = ms.stmt_text(st)
            if "__package__" not in text and "__file__" not in text:
                continue
            module = self.b.entries[node[0]].module
            reads += [(attr, f"{module}:{line}", lits)
                      for attr, line, lits in parameter_dunders(st.node)]
        if not reads:
            return
        package = any(attr == "__package__" for attr, _, _ in reads)
        files = [(where, lits) for attr, where, lits in reads if attr == "__file__"]
        for key in sorted(self.b.objects):
            obj, entry = self.b.objects[key], self.b.entries[key]
            if package:
                obj.package = entry.module if entry.facts.is_package else \
                    entry.module.rpartition(".")[0]
                self.b.modules[key] = obj.source()
            if not files or obj.anchor is not None or any(n in ANCHOR_NAMES
                                                          for n, _ in obj.members):
                continue  # (a member named ``os`` would be read instead of os)
            root = self.b.r.roots.get(entry.source)
            folder = os.path.join(root, os.path.dirname(entry.facts.relpath)) if root else ""
            named = sorted({w for _, lits in files for w in lits
                            if folder and is_plain_relative(w)
                            and os.path.isfile(os.path.join(folder, w))})
            self.b.anchor_object(key, files[0][0], named, "reads `__file__` of a module it "
                                 "is given, and files beside it")

    def _name_objects_as_file(self) -> None:
        """Each module object whose ``__name__`` a statement of the closure compares with a
        class's ``__module__`` gets the file's ``__name__``: the classes of upstream's module
        are the file's here, so their ``__module__`` is the file's name. With upstream's
        name, spikingjelly's ``_surrogate_spec`` took no surrogate for its own, and its
        neurons took the slower path, whose gradients differ in the last bits."""
        for node in self.b.order:
            if node[0][1].endswith(OBJECT_SUFFIX):
                continue
            ms = self.b.modules[node[0]]
            st = ms.stmts[node[1]]
            if st.kind not in ("function", "class", "compound") or \
                    "__module__" not in ms.stmt_text(st):
                continue
            for name, line in module_name_compares(st.node):
                key = self.b.module_object_of(node, name)
                obj = self.b.objects.get(key) if key is not None else None
                if obj is not None and not obj.named_as_file:
                    obj.named_as_file = f"{self.b.entries[node[0]].module}:{line}"
                    self.b.modules[key] = obj.source()

    def _hold(self, source: str, module: str, user: str) -> None:
        """``module`` (of ``source``) as a module object, and the table holding it too."""
        mentry = self.b.index.entries[(source, module)]
        name = "_".join(module.split(".")[-2:])
        new = object_key(mentry.key) not in self.b.objects
        obj = self.b.module_object(mentry, name, user)
        if new:  # (its note is written once the file names it: resolve)
            self.b.objects[obj[0]].use = "may import by a name it computes"
        self.held.append(module)
        key = self.table_key()
        first = key not in self.b.modules
        self.b.modules[key] = table_source(self.held)
        table = (key, 0)
        if first:
            self.b.entries[key] = self.b.entries[obj[0]]
            self.b._add(table)
            imp = self.b.external_import(mentry, "importlib", _IMPORTLIB)
            self.b.refs[(table, "importlib")] = ("ext", imp.identity)
            self.b.deps.append(Dependency(table, "importlib", "external", imp.text(),
                                          "import", 1.0, False))
            self._note = len(self.b.notes)
            self.b.notes.append("")
        i = len(self.held) - 1
        self.b.refs[(table, held_name(i))] = ("def", object_key(mentry.key), MODULE_OBJECT)
        # (read only when the function runs: no order)
        self.b.deps.append(Dependency(table, self.b.objects[obj[0]].name, "definition",
                                      module, "module-object", 1.0, False, (obj,)))
        self.b.notes[self._note] = (
            f"`{IMPORTER}` stands in for `importlib.import_module` where {user} imports a "
            f"module by a name it computes: for a name it may be ({', '.join(self.held)}), "
            "it returns the module object standing in for that module here; any other name "
            "is imported as upstream does")

    def table_key(self) -> tuple[str, str]:
        return table_key(self.b.block.source)

    def _point_at_table(self, node: NodeId, how: str) -> None:
        """The caller's ``importlib.import_module`` becomes the table's function."""
        key = ("def", self.table_key(), IMPORTER)
        if "." in how:
            self.b.chains.setdefault(node, {})[how] = key
        else:
            self.b.refs[(node, how)] = key
        self.b.deps.append(Dependency(node, how, "definition", f"importlib.{IMPORTER}",
                                      "computed-import", 1.0, False, ((key[1], 0),)))
