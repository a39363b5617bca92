"""Operators a corpus registers with torch, and the statements that read them.

deepspeed's ``compile/passes/tp_compile.py`` reads ``torch.ops.autotp.copy_to_tp_region.default``
as it loads. Nothing in it names the function behind that operator: its ``from ..custom_ops
import tp_collectives  # noqa: F401`` imports the module for what it does as it runs, and
``tp_collectives.py`` registers the operator with ``@torch.library.custom_op(
"autotp::copy_to_tp_region", ...)``, its fake with ``@torch.library.register_fake(...)`` and its
gradient with ``torch.library.register_autograd(...)``. Without those statements the read raises
AttributeError ("'_OpNamespace' 'autotp' object has no attribute 'copy_to_tp_region'").

A statement that reads ``torch.ops.NS.OP`` needs every module-level statement of its repository
that registers ``NS::OP`` through ``torch.library`` (``registered_ops``): a decorator or a call
whose first argument (or ``name=``) is that string, or a schema starting with it
(``torch.library.define("quanto::unpack(Tensor t, int bits) -> Tensor")``). Operators are
global in torch, so where in the repository they are registered does not matter; which
repository does, and only the reader's own is searched. What registers a fake, a gradient or
a kernel goes after the statements defining the operator, as torch requires. An operator that
no statement of the repository defines (torchvision's ``nms``, defined by its compiled
extension) brings nothing: registering its fake would fail without that extension.

An extension that the repository compiles as it loads is a definition too. SRU's ``ops.py``
runs ``load(name="sru_cpu", sources=[cpu_source], is_python_module=False)`` (from
``torch.utils.cpp_extension``), and its ``@torch.jit.script`` functions read
``torch.ops.sru_cpu.cpu_forward``: scripting them raises where that statement has not run. Such
a statement, at module level or inside a module-level ``try`` or ``if``, defines every operator
of the namespace it names (``NS::*``); its C++ sources, named by literals beside ``__file__``, go
beside the generated file as any such file does (engine.modulefiles).
"""

from __future__ import annotations

import ast
import re

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.parse import dotted

# torch.library's functions that define an operator, and those that register something for
# one already defined (torch raises "operator ... does not exist" before its definition)
_DEFINES = frozenset({"custom_op", "triton_op", "define"})
_REGISTERS = _DEFINES | {
    "impl", "impl_abstract", "register_fake", "register_autograd", "register_kernel",
    "register_autocast", "register_vmap", "register_torch_dispatch",
}
# torch's own namespaces: nothing in a corpus registers their operators
_TORCH_NAMESPACES = frozenset({
    "aten", "prims", "prim", "higher_order", "quantized", "_quantized", "quantized_decomposed",
    "mkldnn", "onednn", "profiler", "inductor", "_inductor", "c10d_functional",
    "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "debugprims", "rngprims",
})
_OP = re.compile(r"\s*([A-Za-z_]\w*)::([A-Za-z_]\w*)(?:\.\w+)?\s*(?:\(.*)?", re.DOTALL)
# what may register an operator, to skip reading a module that cannot
MAY_REGISTER = re.compile(rb"""(?:%s)\(\s*(?:name\s*=\s*)?["'][A-Za-z_]\w*::"""
                          rb"|is_python_module\s*=\s*False"
                          % b"|".join(n.encode() for n in sorted(_REGISTERS)))
# torch.utils.cpp_extension's functions that compile and load an extension
_BUILDS = frozenset({"load", "load_inline"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def op_reads(node: ast.AST) -> frozenset[str]:
    """``NS::OP`` for each ``torch.ops.NS.OP`` chain read under ``node`` (torch's own
    namespaces left out)."""
    out: set[str] = set()
    for sub in treewalk.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute):
            chain = dotted(sub)
            if chain is None or not chain.startswith("torch.ops."):
                continue
            parts = chain.split(".")
            if len(parts) >= 4 and parts[2] not in _TORCH_NAMESPACES:
                out.add(f"{parts[2]}::{parts[3]}")
    return frozenset(out)


def registered_ops(node: ast.stmt) -> dict[str, bool]:
    """``NS::OP`` for each operator a module-level statement defines or registers something
    for through ``torch.library``, and whether it defines it."""
    calls = [d for d in getattr(node, "decorator_list", ()) if isinstance(d, ast.Call)]
    value = getattr(node, "value", None)
    if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call):
        calls.append(value)
    out: dict[str, bool] = {}
    for call in calls:
        name = dotted(call.func)
        last = name.rsplit(".", 1)[-1] if name else ""
        if last not in _REGISTERS:
            continue
        first = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "name")]
        for arg in first:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                m = _OP.fullmatch(arg.value)
                if m:
                    op = f"{m.group(1)}::{m.group(2)}"
                    out[op] = out.get(op, False) or last in _DEFINES
    for ns in built_namespaces(node):
        out[f"{ns}::*"] = True
    return out


def built_namespaces(node: ast.stmt) -> list[str]:
    """The namespaces whose operators a module-level statement defines by compiling and
    loading an extension as it runs: ``load(name="NS", ..., is_python_module=False)`` or
    ``load_inline`` alike, also inside the statement's ``try``, ``if`` or ``with`` (not in a
    function or class it defines). With ``is_python_module=False`` the library is loaded
    only for the operators it registers, under the namespace the extension is named for."""
    if isinstance(node, _SCOPES):
        return []
    out: list[str] = []
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, _SCOPES):
            continue
        todo.extend(treewalk.children(sub))
        if not isinstance(sub, ast.Call):
            continue
        name = dotted(sub.func)
        if not name or name.rsplit(".", 1)[-1] not in _BUILDS or not any(
                k.arg == "is_python_module" and isinstance(k.value, ast.Constant)
                and k.value.value is False for k in sub.keywords):
            continue
        for arg in [*sub.args[:1], *(k.value for k in sub.keywords if k.arg == "name")]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                    arg.value.isidentifier() and arg.value not in out:
                out.append(arg.value)
    return out
