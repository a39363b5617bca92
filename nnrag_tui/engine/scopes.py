"""CPython's ``symtable`` answers, right also in a function or class named ``top``, and the
table of each scope a syntax tree opens.

Before Python 3.13, ``SymbolTable.lookup`` takes every table *named* ``top`` for the module's
(its ``module_scope``), so a function or class of that name reports each name it binds as both
global and local. nni's ``ContextStack.top(cls, key)`` had its parameters ``cls`` and ``key``
taken for module-level names: reported as unresolved, and a rename of a module-level ``key``
would have reached the parameter. These helpers answer from the symbol's flags there instead.
"""

from __future__ import annotations

import ast
import functools
import symtable

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted


@functools.lru_cache(maxsize=2048)
def statement_table(text: str) -> symtable.SymbolTable:
    """``symtable.symtable`` of a module-level statement's text, kept for the next question
    about the same text: a statement's uses, its local names and its rewrite each need it.
    SyntaxError where the text does not parse. The tables are only read."""
    return symtable.symtable(text, "<stmt>", "exec")


def _misread(table: symtable.SymbolTable) -> bool:
    return table.get_name() == "top" and table.get_type() != "module"


def _bound(sym: symtable.Symbol) -> bool:
    return sym.is_assigned() or sym.is_parameter() or sym.is_imported()


def is_global(table: symtable.SymbolTable, sym: symtable.Symbol) -> bool:
    """``sym.is_global()``: the name is the module's (declared ``global``, or read and not
    bound in any scope around it)."""
    if not _misread(table):
        return sym.is_global()
    return sym.is_declared_global() or not (_bound(sym) or sym.is_free() or sym.is_nonlocal())


def is_local(table: symtable.SymbolTable, sym: symtable.Symbol) -> bool:
    """``sym.is_local()``: the name is bound in this scope and not declared ``global``."""
    if not _misread(table):
        return sym.is_local()
    return _bound(sym) and not (sym.is_declared_global() or sym.is_free() or sym.is_nonlocal())


# the names symtable gives the scopes that have none in the source
TABLE_NAME = {ast.Lambda: "lambda", ast.ListComp: "listcomp", ast.SetComp: "setcomp",
              ast.DictComp: "dictcomp", ast.GeneratorExp: "genexpr"}


class ScopeTables:
    """The symbol table of each scope met while walking a tree parsed from the same text as
    the tables, in source order: by name and line, else the next unused one of the name (two
    lambdas on one line). ``offset``: how many lines the tree's numbers are below the text's
    (a statement's tree as parsed in its module, the tables of its text alone)."""

    def __init__(self, offset: int = 0) -> None:
        self.used: set[int] = set()
        self.offset = offset

    def child(self, table: symtable.SymbolTable, node: ast.AST) -> symtable.SymbolTable:
        name = getattr(node, "name", None) or TABLE_NAME[type(node)]
        fallback = None
        for child in table.get_children():
            if child.get_id() in self.used or child.get_name() != name:
                continue
            if child.get_lineno() + self.offset == node.lineno:
                self.used.add(child.get_id())
                return child
            fallback = fallback or child
        if fallback is None:
            raise ValueError(f"no symbol table for {name} at line {node.lineno}")
        self.used.add(fallback.get_id())
        return fallback


def reads_global(table: symtable.SymbolTable, name: str) -> bool:
    """Whether ``name`` in the scope ``table`` is the module's: not bound there nor in a
    function around it (a class body's name is its own only where the body binds it)."""
    if table.get_type() == "module":
        return True
    try:
        sym = table.lookup(name)
    except KeyError:
        return True
    if table.get_type() == "class":
        return not (sym.is_assigned() or sym.is_imported() or sym.is_parameter()
                    or sym.is_free())
    return is_global(table, sym)


def global_read_lines(text: str, name: str, parsed: ast.stmt | None = None,
                      line: int = 1) -> list[int]:
    """The lines of ``text`` (a module-level statement) that read the module-level ``name``,
    or the attribute chain ``name`` (``apkg.Made``) of one: a function's local, parameter or
    comprehension variable of that name is another variable. ValueError where the text does
    not parse. ``parsed``: the statement as parsed in its module, where ``text`` starts at
    line ``line``; it spares parsing the text again (tensordict's ``TensorDictBase``, ten
    thousand lines, once per name it leaves unresolved)."""
    try:
        tree = ast.parse(text) if parsed is None else ast.Module([parsed], [])
        top = statement_table(text)
    except SyntaxError as exc:
        raise ValueError(str(exc)) from None
    reads = _GlobalReads(name, 0 if parsed is None else line - 1)
    for st in tree.body:
        reads.visit(st, top)
    return reads.lines


def _outer_parts(args: ast.arguments) -> list[ast.expr]:
    """The parts of a function's or lambda's arguments evaluated where it is defined: the
    defaults and the annotations."""
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs,
             *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None),
            *(a.annotation for a in every if a.annotation is not None)]


class _GlobalReads:
    """``global_read_lines``' walk: each node with the symbol table of its scope. (A class,
    not a nested function calling itself: that is a reference cycle, which would keep the
    tables until a full garbage collection.)"""

    def __init__(self, name: str, offset: int) -> None:
        self.name = name
        self.root = name.partition(".")[0]
        self.offset = offset
        self.tables = ScopeTables(offset)
        self.lines: list[int] = []

    def visit(self, node: ast.AST, table: symtable.SymbolTable) -> None:
        visit, name, tables = self.visit, self.name, self.tables
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in [*node.decorator_list, *_outer_parts(node.args),
                         *([node.returns] if node.returns else [])]:
                visit(part, table)
            inner = tables.child(table, node)
            for st in node.body:
                visit(st, inner)
        elif isinstance(node, ast.ClassDef):
            for part in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
                visit(part, table)
            inner = tables.child(table, node)
            for st in node.body:
                visit(st, inner)
        elif isinstance(node, ast.Lambda):
            for part in _outer_parts(node.args):
                visit(part, table)
            visit(node.body, tables.child(table, node))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            visit(node.generators[0].iter, table)
            inner = tables.child(table, node)
            for i, g in enumerate(node.generators):
                for part in [g.target, *([g.iter] if i else []), *g.ifs]:
                    visit(part, inner)
            for part in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
                visit(part, inner)
        elif isinstance(node, ast.Name):
            if node.id == name and not isinstance(node.ctx, ast.Store) \
                    and reads_global(table, name):
                self.lines.append(node.lineno - self.offset)
        elif isinstance(node, ast.Attribute) and "." in name and dotted(node) == name:
            if reads_global(table, self.root):
                self.lines.append(node.lineno - self.offset)
        else:
            for child in treewalk.children(node):
                visit(child, table)

