"""Operators a corpus registers with torch, and the statements that read them.

deepspeed's ``compile/passes/tp_compile.py`` reads ``torch.ops.autotp.copy_to_tp_region.default``
as it loads. Nothing in it names the function behind that operator: its ``from ..custom_ops
import tp_collectives  # noqa: F401`` imports the module for what it does as it runs, and
``tp_collectives.py`` registers the operator with ``@torch.library.custom_op(
"autotp::copy_to_tp_region", ...)``, its fake with ``@torch.library.register_fake(...)`` and its
gradient with ``torch.library.register_autograd(...)``. Without those statements the read raises
AttributeError ("'_OpNamespace' 'autotp' object has no attribute 'copy_to_tp_region'").

A statement that reads ``torch.ops.NS.OP`` needs every module-level statement of its repository that
registers ``NS::OP`` through ``torch.library`` (``registered_ops``): a decorator or a call whose
first argument (or ``name=``) is that string, or a schema starting with it
(``torch.library.define("quanto::unpack(Tensor t, int bits) -> Tensor")``). Operators are global in
torch, so the statements defining one may be anywhere in the reader's repository (only its own is
searched). What registers a fake, a gradient or a kernel comes from the modules that run upstream
where the reader does (those its module's import runs through imports under no ``if``, those the
closure spans, those defining the operator; for any of its readers, with the modules the closure
spans in the end, so whichever it reached first does not matter): torchrec's ``pallas/impl.py``
registers a TPU kernel, imports jax and is loaded only where that device is; bitsandbytes imports
its CUDA kernels only ``if torch.cuda.is_available():``, and the header says they stay behind. It
goes after the statements defining the operator, as torch requires. A statement counts with what it
runs: a module-level ``if``, ``try``, ``with`` or ``for`` registers what the statements in it do
(unsloth's ``if _TRACEABLE:`` around its ``triton_op`` kernels), and comes whole, its guard kept. A
statement that itself registers something for ``NS::OP`` needs them too: a block that calls
``halve``, the function ``@torch.library.custom_op("ns::halve", ...)`` made, needs what registers
its fake and gradient (``torch.library.register_autograd("ns::halve", ...)``,
``@halve.register_fake``), or ``backward`` and tracing raise where upstream's run; and an
implementation the closure holds (``@torch.library.impl("ns::op", "Meta")``) needs the ``define``
before it. An operator that no statement of the repository defines (torchvision's ``nms``, defined
by its compiled extension) brings nothing: registering its fake would fail without that extension.
The header says so, unless torch itself defines operators in its namespace (``torch_defines``:
``symm_mem::all_to_all_vdev``, which olmo-core's MoE layers read).

An extension that the repository compiles as it loads is a definition too. SRU's ``ops.py``
runs ``load(name="sru_cpu", sources=[cpu_source], is_python_module=False)`` (from
``torch.utils.cpp_extension``), and its ``@torch.jit.script`` functions read
``torch.ops.sru_cpu.cpu_forward``: scripting them raises where that statement has not run. Such
a statement, at module level or inside a module-level ``try`` or ``if``, defines every operator
of the namespace it names (``NS::*``); its C++ sources, named by literals beside ``__file__``, go
beside the generated file as any such file does (engine.modulefiles).

A name is often built from a module constant rather than spelled out: a kernel module has
``_NS = "tg"`` and ``@torch.library.custom_op(f"{_NS}::permute_countsort", ...)``, and its
autograd function reads ``torch.ops.tg.permute_countsort``. An f-string, a ``+`` of strings or
a name whose parts are string constants the module binds once at its top level
(``string_constants``) give the operator's name as a literal does.

Or the namespace is a library's: ``_lib = torch.library.Library("omnicoder_nnapi", "DEF")``,
then ``_lib.define("mla(Tensor q, ...) -> Tensor")``, ``_lib.impl("mla", _mla_cpu, "CPU")`` or
``@impl(_lib, "mla", "XLA")`` name the operator inside it (``module_registrations``). Such a
statement registers that operator; it is not a change of ``_lib`` that comes with every use of
it, so a library's other operators stay behind.

Or a helper of the repository defines operators in the namespace it is given
(``namespace_parameter``): ``def register_halving(namespace): library =
torch.library.Library(namespace, "FRAGMENT"); library.define("halve(Tensor x) -> Tensor")``,
then ``_library = register_halving("ns")``, a statement of a module importing it, defines every
operator of ``ns`` (``ns::*``), also where that call is an argument of another
(``_dispatches.append(_register_dispatch(...))``). A module-level ``for`` over a literal gives
its statements the strings each pass binds (``_run_statement_constants``): spikingjelly's
``_ops/tempotron`` builds ``_namespace = f"sj_tempotron_{_operation}"`` for each of three
operations, and its loop defines each namespace. spikingjelly's ``_register_dispatch`` is such
a helper, which also imports a module of its package by a name it computes: the file holds
the modules that name may be (engine.computed_imports). A helper whose whole module name is
computed is not taken, and the header names the call that defines its operators upstream
(``namespace_helper_calls``).

Or a module names ``torch.library``'s functions otherwise: flash-attn's
``_torch_custom_op_wrapper = torch.library.custom_op`` under a version check
(``registering_alias``), then ``@_torch_custom_op_wrapper("flash_attn::_flash_attn_forward",
...)``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import NamedTuple

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.computed_imports import resolvable
from nnrag_tui.engine.parse import dotted, string_pieces

# torch.library's functions that define an operator, and those that register something for
# one already defined (torch raises "operator ... does not exist" before its definition), with
# what each registers (a ``Library``'s methods and an operator's own methods of that name alike;
# the private ones are a ``Library``'s only)
_DEFINES = frozenset({"custom_op", "triton_op", "define"})
_KINDS = {
    "impl": "kernel", "register_kernel": "kernel", "_impl_with_aoti_compile": "kernel",
    "impl_abstract": "fake", "register_fake": "fake", "_register_fake": "fake",
    "register_autograd": "gradient", "register_autocast": "autocast rule",
    "register_vmap": "vmap rule", "register_torch_dispatch": "dispatch rule",
}
_REGISTERS = _DEFINES | {name for name in _KINDS if not name.startswith("_")}
# torch's own namespaces: nothing in a corpus registers their operators
_TORCH_NAMESPACES = frozenset({
    "aten", "prims", "prim", "higher_order", "quantized", "_quantized", "quantized_decomposed",
    "mkldnn", "onednn", "profiler", "inductor", "_inductor", "c10d_functional",
    "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "debugprims", "rngprims",
})
# namespaces torch defines operators in too, as it imports or in its own modules
# (``torch.distributed._symmetric_memory`` defines ``symm_mem::all_to_all_vdev``, FSDP2
# ``fsdp::all_gather_copy_in``), which a corpus may share (torchao's ``ao::`` operators): a
# read of one that no statement of the corpus defines is torch's (``torch_defines``)
_TORCH_SHARED_NAMESPACES = frozenset({
    "_native", "_test", "ao", "bucketing", "c10d", "debug_mode_ops", "device_mesh", "export",
    "fsdp", "inductor_prims", "mkl", "mkldnn_prepacked", "pippy", "quantization",
    "semi_structured", "sparse", "static_runtime", "streams", "symm_mem", "torch_attn",
})
_OP = re.compile(r"\s*([A-Za-z_]\w*)::([A-Za-z_]\w*)(?:\.\w+)?\s*(?:\(.*)?", re.DOTALL)
# what may register an operator, to skip reading a module that cannot: a call naming it by a
# literal, or one naming it by what it builds (``f"{_NS}::op"``, ``_NS + "::op"``, ``OP``) in a
# file with such a name in it
_CALLS = b"|".join(n.encode() for n in sorted(_REGISTERS))
MAY_REGISTER = re.compile(rb"""(?:%s)\(\s*(?:name\s*=\s*)?["'][A-Za-z_]\w*::"""
                          rb"|is_python_module\s*=\s*False" % _CALLS)
_MAY_BUILD = re.compile(rb"""(?:%s)\(\s*(?:name\s*=\s*)?(?:f["']\{|[A-Za-z_]\w*\s*[+,)])"""
                        % _CALLS)
_BUILT_NAME = re.compile(rb"""\}::[A-Za-z_]|["']::[A-Za-z_]|["'][A-Za-z_]\w*::[A-Za-z_]""")
# a name bound to one of them (``_torch_custom_op_wrapper = torch.library.custom_op``)
_ALIAS = re.compile(rb"^[ \t]*[A-Za-z_]\w*\s*=\s*(?:[A-Za-z_][\w.]*\.)?(?:%s)[ \t]*(?:#.*)?$"
                    % _CALLS, re.MULTILINE)
# the methods of what ``custom_op`` returns that register something for its operator
_METHODS = frozenset({
    "register_fake", "register_autograd", "register_kernel", "register_autocast",
    "register_vmap", "register_torch_dispatch",
})


# a ``torch.library.Library`` made, and the methods of one that define an operator or register
# something for it, by its name in the library's namespace
_LIBRARY = re.compile(rb"""\bLibrary\(\s*(?:ns\s*=\s*)?[A-Za-z_"']""")
_LIBRARY_METHODS = {"define": True, "impl": False, "_register_fake": False,
                    "_impl_with_aoti_compile": False}
# the operator a schema or an implementation names inside its library: ``scale(Tensor x) ->
# Tensor``, ``scale``, ``scale.out``
_LIBRARY_OP = re.compile(r"\s*([A-Za-z_]\w*)(?:\.\w+)?\s*(?:\(.*)?", re.DOTALL)


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    """What a call passes at ``position`` or as ``keyword=``: the first of them it has."""
    given = [*call.args[position:position + 1],
             *(k.value for k in call.keywords if k.arg == keyword)]
    return given[0] if given else None


def may_register(data: bytes) -> bool:
    """Whether a module's text may hold a statement registering a torch operator."""
    return bool(MAY_REGISTER.search(data)) or bool(_LIBRARY.search(data)) or (
        bool(_BUILT_NAME.search(data)) and (bool(_MAY_BUILD.search(data))
                                            or bool(_ALIAS.search(data))))


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


def torch_defines(op: str) -> bool:
    """Whether torch itself defines operators in ``op``'s namespace (``NS::OP``): where no
    statement of the corpus defines ``op``, torch does, not an extension of the corpus."""
    return op.partition("::")[0] in _TORCH_SHARED_NAMESPACES


def string_constants(body: list[ast.stmt]) -> dict[str, str]:
    """The names a module's top level binds to a string once, by ``NAME = "text"`` (or an
    f-string or ``+`` of such names and strings), and nowhere else at its top level."""
    out: dict[str, str] = {}
    dropped: set[str] = set()
    for st in body:
        value = st.value if isinstance(st, (ast.Assign, ast.AnnAssign)) else None
        target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
            st.target if isinstance(st, ast.AnnAssign) else None
        text = _text(value, out) if value is not None else None
        if isinstance(target, ast.Name) and text is not None and \
                target.id not in out and target.id not in dropped:
            out[target.id] = text
            continue
        for name in _top_level_binds(st):
            dropped.add(name)
            out.pop(name, None)
    return out


def _top_level_binds(node: ast.AST) -> set[str]:
    """The names a module-level statement binds in the module's namespace (not the locals of
    the functions and classes it defines)."""
    out: set[str] = set()
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(sub.name)
            continue
        if isinstance(sub, ast.Lambda):
            continue
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).partition(".")[0] for a in sub.names)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            out.add(sub.id)
        todo.extend(treewalk.children(sub))
    return out


def _text(node: ast.expr, consts: Mapping[str, str]) -> str | None:
    """The string ``node`` evaluates to when it is made of string constants and ``consts``:
    a literal, a name, an f-string without conversions or a ``+`` of such; else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, consts), _text(node.right, consts)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                if v.conversion != -1 or v.format_spec is not None:
                    return None
                v = v.value
            piece = _text(v, consts)
            if piece is None:
                return None
            parts.append(piece)
        return "".join(parts)
    return None


def registered_ops(node: ast.stmt, consts: Mapping[str, str] | None = None,
                   aliases: Mapping[str, str] | None = None,
                   helpers: Mapping[str, NamespaceHelper] | None = None) -> dict[str, bool]:
    """``NS::OP`` for each operator a module-level statement defines or registers something
    for through ``torch.library``, and whether it defines it; ``consts``: the module's
    ``string_constants``, for names built from them; ``aliases``: its names for
    ``torch.library``'s functions (``registering_alias``); ``helpers``: its names for the
    repository's functions that define operators in the namespace they are given
    (``namespace_parameter``), whose call defines every operator of that namespace."""
    calls = [c for c in _run_calls(node) if isinstance(c, ast.Call)]
    out: dict[str, bool] = {}
    if helpers:
        for call in _helper_calls(node):
            helper = helpers.get(dotted(call.func) or "")
            ns = _namespace_given(call, helper, consts or {}) if helper is not None else None
            if ns is not None:
                out[f"{ns}::*"] = True
    for call in calls:
        name = dotted(call.func)
        if (helpers or {}).get(name or "") is not None:
            continue
        last = name.rsplit(".", 1)[-1] if name else ""
        last = (aliases or {}).get(name or "", last)
        if last not in _REGISTERS:
            continue
        for arg in [*call.args[:1], *(k.value for k in call.keywords if k.arg == "name")]:
            text = _text(arg, consts or {})
            if text is not None:
                m = _OP.fullmatch(text)
                if m:
                    op = f"{m.group(1)}::{m.group(2)}"
                    out[op] = out.get(op, False) or last in _DEFINES
    for ns in built_namespaces(node):
        out[f"{ns}::*"] = True
    return out


def module_registrations(body: list[ast.stmt],
                         helpers: Mapping[str, NamespaceHelper] | None = None
                         ) -> list[dict[str, bool]]:
    """``registered_ops`` of each top-level statement of a module, its names built from the
    module's ``string_constants``, and with what registers something through a method of an
    operator the module defines: ``@twice.register_fake`` on a function, or
    ``twice.register_autograd(backward, setup_context=setup)``, where ``twice`` is the
    function ``@torch.library.custom_op("ns::twice", ...)`` made. A name the module binds to
    one of ``torch.library``'s functions registers as that function does
    (``registering_alias``). ``helpers``: as ``registered_ops``'s."""
    consts = string_constants(body)
    defined: dict[str, str] = {}
    libraries: dict[str, str] = {}  # name -> the namespace of the Library it is bound to
    aliases: dict[str, str] = {}  # name -> the torch.library function it is bound to
    out: list[dict[str, bool]] = []
    for top in body:
        ops: dict[str, bool] = {}
        if not isinstance(top, _RUNS_BODIES):
            for name in _top_level_binds(top):
                aliases.pop(name, None)
        for st, seen in _run_statement_constants(top, consts):
            alias = registering_alias(st)
            if alias is not None:
                aliases[alias[0]] = alias[1]
            own = registered_ops(st, seen, aliases, helpers)
            for name in _method_owners(st):
                if name in defined:
                    own.setdefault(defined[name], False)
            for op, defines in _library_ops(st, libraries, seen).items():
                own[op] = own.get(op, False) or defines
            made = [op for op, defines in own.items() if defines and not op.endswith("::*")]
            namespace = _library_made(st, seen)
            for name in _top_level_binds(st):
                defined.pop(name, None)
                libraries.pop(name, None)
                if len(made) == 1 and isinstance(st, (ast.FunctionDef, ast.Assign)):
                    defined[name] = made[0]
                if namespace is not None:
                    libraries[name] = namespace
            for op, defines in own.items():
                ops[op] = ops.get(op, False) or defines
        out.append(ops)
    return out


class NamespaceHelper(NamedTuple):
    """Where a function takes the namespace it defines operators in, and whether a file can
    run it (``namespace_parameter``)."""

    position: int
    param: str
    runnable: bool


def namespace_parameter(node: ast.stmt) -> NamespaceHelper | None:
    """Where a module-level function takes the namespace it defines operators in (the
    position and name of that parameter), and whether a file can run it: spikingjelly's
    ``_register_dispatch(namespace, cpu, selection)`` makes ``torch.library.Library(namespace,
    "FRAGMENT")`` and calls ``torch.library.triton_op(f"{namespace}::{direction}", ...)``, for
    ``_dispatch = _register_dispatch("sj_lif", _cpu, _selection)``, and nothing names
    ``sj_lif::forward``. It defines one where it calls ``define``, ``custom_op`` or
    ``triton_op`` with a name starting with that parameter and ``::``, or ``define`` on a
    ``Library`` it makes of it. None for any other function. A file can run one that imports a
    module by a name it computes where the name's last part is spelled out: spikingjelly's
    imports ``f"{cpu.__package__}.autograd"``, and the file holds the modules that may be
    (engine.computed_imports). Not one whose whole module name is computed: its call would fail
    in the file all the same; it is not taken, and the header names its call
    (``namespace_helper_calls``)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    made: dict[str, str] = {}  # local name -> the parameter its Library is made of
    found: set[str] = set()
    for sub in treewalk.walk(node):
        bound = _library_binding(sub) if isinstance(sub, ast.stmt) else None
        if bound is not None and isinstance(bound[1], ast.Name) and bound[1].id in params:
            made[bound[0]] = bound[1].id
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Attribute) and func.attr == "define" and \
                isinstance(func.value, ast.Name) and func.value.id in made:
            found.add(made[func.value.id])
        elif (dotted(func) or "").rsplit(".", 1)[-1] in _DEFINES:
            first = _argument(sub, 0, "name")
            param = _leading_name(first) if first is not None else None
            if param in params:
                found.add(param)
    for param in params:
        if param in found:
            return NamespaceHelper(params.index(param), param, resolvable(node))
    return None


def _namespace_given(call: ast.Call, helper: NamespaceHelper, consts: Mapping[str, str]
                     ) -> str | None:
    """The namespace a call of such a helper passes, where it is a string the statement
    spells out or builds from the module's constants."""
    if any(isinstance(a, ast.Starred) for a in call.args[:helper.position + 1]):
        return None
    given = _argument(call, helper.position, helper.param)
    ns = _text(given, consts) if given is not None else None
    return ns if ns is not None and ns.isidentifier() else None


def namespace_helper_calls(body: list[ast.stmt], helpers: Mapping[str, NamespaceHelper]
                           ) -> list[tuple[int, str, str]]:
    """(index of the top-level statement, namespace, the name called) for each call of a
    helper of ``helpers`` (the module's names for them) that a module's top level makes as it
    runs, with a namespace it spells out: where the file cannot run the helper, where its
    operators are defined upstream."""
    if not helpers:
        return []
    consts = string_constants(body)
    out = []
    for i, top in enumerate(body):
        for st, seen in _run_statement_constants(top, consts):
            for call in _helper_calls(st):
                name = dotted(call.func)
                if name in helpers:
                    ns = _namespace_given(call, helpers[name], seen)
                    if ns is not None and (i, ns, name) not in out:
                        out.append((i, ns, name))
    return out


def _leading_name(node: ast.expr) -> str | None:
    """``P`` where a string is built as ``f"{P}::..."`` or ``P + "::..."``."""
    pieces = string_pieces(node)
    if pieces is not None and len(pieces) >= 2 and isinstance(pieces[0], ast.Name) and \
            isinstance(pieces[1], ast.Constant) and str(pieces[1].value).startswith("::"):
        return pieces[0].id
    return None


def registering_alias(node: ast.stmt) -> tuple[str, str] | None:
    """The name a statement binds to one of ``torch.library``'s registering functions, and
    that function's name: flash-attn's ``_torch_custom_op_wrapper = torch.library.custom_op``,
    under ``if torch.__version__ >= "2.4.0":`` with a no-op in its ``else`` (the branch a
    torch with ``custom_op`` takes, so the other binding does not undo it)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or \
            not isinstance(node.targets[0], ast.Name):
        return None
    name = dotted(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
    last = name.rsplit(".", 1)[-1] if name else ""
    return (node.targets[0].id, last) if last in _REGISTERS else None


# the statements whose bodies run as the module loads, in the order written
_RUNS_BODIES = (ast.If, ast.Try, ast.TryStar, ast.With, ast.For)


def _run_statements(node: ast.stmt) -> list[ast.stmt]:
    """A top-level statement, or the statements inside its module-level ``if``, ``try``,
    ``with`` or ``for``, in the order written: unsloth's ``if _TRACEABLE:`` holds the
    ``@torch.library.triton_op("unsloth::rope_embedding", ...)`` function and its
    ``register_autograd``, bitsandbytes' ``if not isinstance(lib,
    ErrorHandlerMockBNBNativeLibrary):`` its CPU kernels. Not the bodies of functions and
    classes, which run when called."""
    if not isinstance(node, _RUNS_BODIES):
        return [node]
    out: list[ast.stmt] = []
    if isinstance(node, ast.For):
        blocks = [node.body, node.orelse]
    elif isinstance(node, (ast.Try, ast.TryStar)):
        blocks = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    else:
        blocks = [node.body, getattr(node, "orelse", [])]
    for block in blocks:
        for st in block:
            out.extend(_run_statements(st))
    return out


def _library_binding(node: ast.stmt) -> tuple[str, ast.expr] | None:
    """The name a statement binds to a ``torch.library.Library`` it makes, and the namespace
    it gives it, as written: ``_lib = Library("omnicoder_nnapi", "DEF")``, torchrec's ``lib:
    torch.library.Library = torch.library.Library("torchrec", "FRAGMENT")``, spikingjelly's
    ``library = torch.library.Library(namespace, "FRAGMENT")`` in a helper."""
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
        node.target if isinstance(node, ast.AnnAssign) else None
    value = getattr(node, "value", None)
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Call) or \
            (dotted(value.func) or "").rsplit(".", 1)[-1] != "Library":
        return None
    namespace = _argument(value, 0, "ns")
    return None if namespace is None else (target.id, namespace)


def _library_made(node: ast.stmt, consts: Mapping[str, str]) -> str | None:
    """The namespace of the ``torch.library.Library`` a statement binds one name to, where it
    is a string (``_library_binding``)."""
    bound = _library_binding(node)
    text = _text(bound[1], consts) if bound is not None else None
    return text if text is not None and text.isidentifier() else None


def _library_ops(node: ast.stmt, libraries: Mapping[str, str], consts: Mapping[str, str]
                 ) -> dict[str, bool]:
    """``NS::OP`` for each operator a statement defines or registers something for through a
    ``Library`` of its module (``libraries``): ``_lib.define("scale(Tensor x) -> Tensor")``,
    ``_lib.impl("scale", fn, "CPU")``, ``@impl(_lib, "shift", "CPU")``, and whether it
    defines it."""
    if not libraries:
        return {}
    calls = [c for c in _run_calls(node) if isinstance(c, ast.Call)]
    out: dict[str, bool] = {}
    for call in calls:
        func, args = call.func, call.args
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in libraries and func.attr in _LIBRARY_METHODS:
            namespace, named, defines = libraries[func.value.id], args[:1], \
                _LIBRARY_METHODS[func.attr]
        elif args and isinstance(args[0], ast.Name) and args[0].id in libraries and \
                (dotted(func) or "").rsplit(".", 1)[-1] in _REGISTERS:
            namespace, named, defines = libraries[args[0].id], args[1:2], False
        else:
            continue
        text = _text(named[0], consts) if named else None
        m = _OP.fullmatch(text) if text is not None else None
        if m:
            op = f"{m.group(1)}::{m.group(2)}"
        else:
            m = _LIBRARY_OP.fullmatch(text) if text is not None else None
            if not m:
                continue
            op = f"{namespace}::{m.group(1)}"
        out[op] = out.get(op, False) or defines
    return out


def _helper_calls(node: ast.stmt) -> list[ast.Call]:
    """The calls a top-level statement makes as it runs (``_run_calls``) and the calls in
    their arguments, which run first: spikingjelly's ``_dispatches.append(
    _register_dispatch(_namespace, _cpu, _selection))`` calls the helper that defines the
    operators. Not what a lambda among them holds, which runs when called."""
    out: list[ast.Call] = []
    todo = [c for c in _run_calls(node) if isinstance(c, ast.Call)]
    while todo:
        call = todo.pop(0)
        out.append(call)
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            stack: list[ast.AST] = [arg]
            while stack:
                sub = stack.pop()
                if isinstance(sub, ast.Call):
                    todo.append(sub)
                elif not isinstance(sub, ast.Lambda):
                    stack.extend(treewalk.children(sub))
    return out


def _loop_passes(node: ast.For, consts: Mapping[str, str]) -> list[dict[str, str]] | None:
    """The string constants each pass of a module-level ``for`` over a literal starts with:
    the module's, and the strings its target takes. spikingjelly's ``for _operation,
    _environment in (("roots", "SJ_..."), ("states", ...), ...)`` gives ``_operation`` "roots",
    then "states". None for a loop over anything else. A part of the target bound to what is
    no string is no constant in that pass."""
    if not isinstance(node.iter, (ast.Tuple, ast.List)) or not node.iter.elts:
        return None
    target = node.target
    names = [target] if isinstance(target, ast.Name) else list(target.elts) \
        if isinstance(target, (ast.Tuple, ast.List)) else []
    if not names or not all(isinstance(n, ast.Name) for n in names):
        return None
    passes = []
    for item in node.iter.elts:
        values = [item] if isinstance(target, ast.Name) else list(item.elts) \
            if isinstance(item, (ast.Tuple, ast.List)) else None
        if values is None or len(values) != len(names) or \
                any(isinstance(v, ast.Starred) for v in values):
            return None
        seen = dict(consts)
        for name, value in zip(names, values):
            text = _text(value, {})
            if text is None:
                seen.pop(name.id, None)  # type: ignore[attr-defined]
            else:
                seen[name.id] = text  # type: ignore[attr-defined]
        passes.append(seen)
    return passes


def _run_statement_constants(top: ast.stmt, consts: Mapping[str, str]
                             ) -> list[tuple[ast.stmt, Mapping[str, str]]]:
    """``_run_statements`` of a top-level statement, each with the string constants it sees:
    the module's (``consts``); in a module-level ``for`` over a literal, once per pass, with
    the strings the pass binds and those its statements bind to strings built from them
    before it (spikingjelly's ``_namespace = f"sj_tempotron_{_operation}"``, then
    ``_register_dispatch(_namespace, ...)``)."""
    passes = _loop_passes(top, consts) if isinstance(top, ast.For) else None
    if passes is None:
        return [(st, consts) for st in _run_statements(top)]
    out: list[tuple[ast.stmt, Mapping[str, str]]] = []
    for seen in passes:
        for st in top.body:  # type: ignore[attr-defined]
            binds = _top_level_binds(st)
            if isinstance(st, _RUNS_BODIES):  # (what it binds may be bound before it runs)
                seen = {k: v for k, v in seen.items() if k not in binds}
            out += [(sub, seen) for sub in _run_statements(st)]
            text = _text(st.value, seen) if isinstance(st, ast.Assign) and \
                len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) else None
            # (a new dict: the one ``out`` holds for this statement stays as it saw it)
            seen = {k: v for k, v in seen.items() if k not in binds}
            if text is not None:
                seen[st.targets[0].id] = text  # type: ignore[attr-defined]
    orelse: list[ast.stmt] = top.orelse  # type: ignore[attr-defined]
    out += [(sub, consts) for st in orelse for sub in _run_statements(st)]
    return out


def _run_calls(node: ast.stmt) -> list[ast.expr]:
    """What a top-level statement itself calls as it runs, as written: its decorators (bare
    ones too) and the value of an expression statement or assignment, and the call that makes
    what such a call calls (bitsandbytes' ``register_kernel("bitsandbytes::gemm_4bit",
    "default")(_gemm_4bit_default_impl)``, ``torch.library.impl(_lib, "op", "Meta")(fn)``)."""
    out: list[ast.expr] = list(getattr(node, "decorator_list", ()))
    value = getattr(node, "value", None)
    if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) and value is not None:
        out.append(value)
    out += [c.func for c in out if isinstance(c, ast.Call) and isinstance(c.func, ast.Call)]
    return out


def registration_kinds(node: ast.stmt) -> set[str]:
    """What a module-level statement registers for operators (``kernel``, ``fake``,
    ``gradient``, ...), by the registering function's name as written, also inside its
    module-level ``if``, ``try``, ``with`` or ``for``: bitsandbytes' ``@register_kernel(
    "bitsandbytes::gemm_4bit", "cuda")`` a kernel, ``@halve.register_fake`` a fake. Through a
    name of the module's own for such a function (``registering_alias``): ``registration``."""
    out: set[str] = set()
    for st in _run_statements(node):
        for call in _run_calls(st):
            name = dotted(call.func if isinstance(call, ast.Call) else call) or ""
            kind = _KINDS.get(name.rsplit(".", 1)[-1])
            if kind is not None:
                out.add(kind)
    return out or {"registration"}


def _method_owners(node: ast.stmt) -> list[str]:
    """``NAME`` for each ``NAME.register_…`` a statement calls as it runs: a decorator, or the
    call a statement is (or assigns)."""
    out: list[str] = []
    for call in _run_calls(node):
        func = call.func if isinstance(call, ast.Call) else call
        if isinstance(func, ast.Attribute) and func.attr in _METHODS and \
                isinstance(func.value, ast.Name):
            out.append(func.value.id)
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
