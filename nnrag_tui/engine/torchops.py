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
"""

from __future__ import annotations

import ast
import re

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
                          % b"|".join(n.encode() for n in sorted(_REGISTERS)))


def op_reads(node: ast.AST) -> frozenset[str]:
    """``NS::OP`` for each ``torch.ops.NS.OP`` chain read under ``node`` (torch's own
    namespaces left out)."""
    out: set[str] = set()
    for sub in ast.walk(node):
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
    return out
