"""CPython's ``symtable`` answers, right also in a function or class named ``top``.

Before Python 3.13, ``SymbolTable.lookup`` takes every table *named* ``top`` for the module's
(its ``module_scope``), so a function or class of that name reports each name it binds as both
global and local. nni's ``ContextStack.top(cls, key)`` had its parameters ``cls`` and ``key``
taken for module-level names: reported as unresolved, and a rename of a module-level ``key``
would have reached the parameter. These helpers answer from the symbol's flags there instead.
"""

from __future__ import annotations

import symtable


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
