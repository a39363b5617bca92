"""One file in, plain data out: the facts the index keeps about a Python module.

Runs in worker processes, so it takes paths and returns picklable ``ModuleFacts``. Parsing uses
the stdlib ``ast`` (about ten times faster than libcst here; rewrite.py splices by position).
A file that cannot be read or parsed yields facts with ``error`` set; nothing here raises.
"""

from __future__ import annotations

import ast
import hashlib
import keyword
import os
import re
import stat
import sys
import warnings

from nnrag_tui.engine import (
    dynimport,
    lazyattr,  # (a module: it reads ``dotted`` from this one)
    treewalk,
)
from nnrag_tui.engine.facts import NO_GUARD, Guard, ImportRecord, ModuleFacts, Symbol
from nnrag_tui.engine.lines import source_lines
from nnrag_tui.engine.namespace import namespace_writes
from nnrag_tui.engine.syspath import sys_path_folders

MAX_CALLS = 256
# Not preceded by ``def `` / ``class ``: a definition is not a call.
_CALL_RE = re.compile(
    r"(?<![\w.])(?<!def )(?<!class )([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\s*\("
)
_KEYWORDS = frozenset(keyword.kwlist) | {"print"}


def module_name(relpath: str) -> tuple[str, bool]:
    """``timm/layers/mlp.py`` -> (``timm.layers.mlp``, False); ``pkg/__init__.py`` -> (``pkg``,
    True)."""
    parts = relpath[:-3].split("/") if relpath.endswith(".py") else relpath.split("/")
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module of ``from {'.' * level}{name} import ...`` written in ``module``;
    ``""`` when the dots climb above the top package."""
    if level == 0:
        return name or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level - 1 > len(parts) or (level - 1 == len(parts) and not name and not parts):
        return ""
    base = parts[: len(parts) - (level - 1)]
    if not base and not name:
        return ""
    return ".".join([*base, name] if name else base)


def read_facts(root: str, relpath: str, max_bytes: int, expected_sha1: str | None = None):
    """Reads and parses one file. Returns ``(ModuleFacts, mtime_ns)`` or, when its SHA-1 equals
    ``expected_sha1``, ``(None, mtime_ns)`` so that unchanged bytes are never parsed again."""
    module, is_pkg = module_name(relpath)
    path = os.path.join(root, relpath)
    st = None
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return (_failed(relpath, module, is_pkg, "", st.st_size, "not a regular file"),
                    st.st_mtime_ns)
        if st.st_size > max_bytes:
            return _failed(relpath, module, is_pkg, "", st.st_size,
                           f"too large ({st.st_size / 1e6:.1f} MB > limit {max_bytes / 1e6:.1f} MB)"
                           ), st.st_mtime_ns
        # O_NONBLOCK: a file swapped for a FIFO after the stat must not hang the run
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        why = "broken symbolic link" if os.path.islink(path) else "vanished while indexing"
        return _failed(relpath, module, is_pkg, "", 0, why), 0
    except OSError as exc:
        # the stat's mtime when there was one: an unreadable file is not retried every run
        return (_failed(relpath, module, is_pkg, "", st.st_size if st is not None else 0,
                        f"unreadable: {exc.strerror or exc}"),
                st.st_mtime_ns if st is not None else 0)
    sha1 = hashlib.sha1(data).hexdigest()
    if expected_sha1 is not None and sha1 == expected_sha1:
        return None, st.st_mtime_ns
    return parse_bytes(data, relpath, sha1=sha1), st.st_mtime_ns


def parse_bytes(data: bytes, relpath: str, sha1: str | None = None) -> ModuleFacts:
    module, is_pkg = module_name(relpath)
    sha1 = sha1 or hashlib.sha1(data).hexdigest()
    if b"\0" in data:
        return _failed(relpath, module, is_pkg, sha1, len(data), "binary file (contains NUL bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(data, filename=relpath)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if "utf-8" in msg.lower() or "codec" in msg.lower() or "encoding" in msg.lower():
            reason = f"undecodable: {msg}"
        else:
            reason = f"syntax error at line {exc.lineno}: {msg}" + _newer_syntax(data, exc.lineno)
        return _failed(relpath, module, is_pkg, sha1, len(data), reason)
    except (RecursionError, MemoryError):
        return _failed(relpath, module, is_pkg, sha1, len(data), "too deeply nested to parse")
    except (ValueError, UnicodeError) as exc:
        return _failed(relpath, module, is_pkg, sha1, len(data), f"undecodable: {exc}")
    try:
        gatherer = _Gatherer(module, is_pkg, source_lines(data.decode("utf-8", "replace")))
        gatherer.body(tree.body, NO_GUARD, None)
    except (RecursionError, MemoryError):
        return _failed(relpath, module, is_pkg, sha1, len(data), "too deeply nested to analyse")
    return ModuleFacts(
        relpath=relpath,
        module=module,
        is_package=is_pkg,
        sha1=sha1,
        size=len(data),
        symbols=tuple(gatherer.symbols),
        imports=tuple(gatherer.imports),
        all_names=gatherer.exported(),
        lines=data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1),
        namespace_writes=namespace_writes(tree.body),
        # (not what only a script run does: ``if __name__ == "__main__":``)
        path_inserts=sys_path_folders([st for st in tree.body if not is_main_guard(st)],
                                      relpath) if b"sys.path" in data else (),
        lazy_imports=lazyattr.lazy_imports(
            tree.body, module, is_pkg)
        if b"__getattr__" in data else (),
        module_imports=tuple(gatherer.module_imports),
    )


# Syntax newer than this interpreter's: (the statement's start, what it is, the Python it needs)
_NEWER_SYNTAX = (
    (re.compile(r"\s*(?:async\s+)?(?:class|def)\s+\w+\s*\["), "type parameters", (3, 12)),
    (re.compile(r"\s*type\s+\w+\s*(?:\[[^=]*\])?\s*="), "a `type` statement", (3, 12)),
)


def _newer_syntax(data: bytes, lineno: int | None) -> str:
    """Why a line that fails to parse may be fine upstream: lerobot's ``class
    DataProcessorPipeline[TInput, TOutput]`` needs Python 3.12, and ``ast`` parses with the
    grammar of the Python nnrag runs on."""
    if not lineno:
        return ""
    lines = data.splitlines()
    line = lines[lineno - 1].decode("utf-8", "replace") if lineno <= len(lines) else ""
    for pattern, what, needs in _NEWER_SYNTAX:
        if sys.version_info < needs and pattern.match(line):
            return (f" ({what}: Python {needs[0]}.{needs[1]} syntax, and nnrag runs on Python "
                    f"{sys.version_info[0]}.{sys.version_info[1]} here)")
    return ""


def _failed(relpath: str, module: str, is_pkg: bool, sha1: str, size: int, reason: str):
    return ModuleFacts(relpath, module, is_pkg, sha1, size, error=reason)


def failed_facts(relpath: str, reason: str, size: int = 0) -> ModuleFacts:
    """The facts of an entry that cannot be read at all (``sources.iter_files`` says why).
    ``size`` is the listed size: with the mtime it lets the next run skip the entry."""
    module, is_pkg = module_name(relpath)
    return _failed(relpath, module, is_pkg, "", size, reason)


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def string_pieces(node: ast.expr) -> list[ast.expr] | None:
    """The pieces a string is built of by f-strings and chains of ``+``, left to right
    (``f"{P}::{op}"`` and ``P + "::" + op`` alike: ``P``, ``"::"``, ``op``); None where a
    piece is formatted (``{x!r}``, ``{n:>3}``)."""
    pieces: list[ast.expr] = []
    todo = [node]
    while todo:
        part = todo.pop()
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Add):
            todo += [part.right, part.left]
        elif isinstance(part, ast.JoinedStr):
            todo += reversed(part.values)
        elif isinstance(part, ast.FormattedValue):
            if part.conversion != -1 or part.format_spec is not None:
                return None
            todo.append(part.value)
        else:
            pieces.append(part)
    return pieces


# jaxtyping's array types: the strings in ``Float[Tensor, "batch #variate seq"]`` are shapes,
# not forward references, though pyflakes reads ``batch`` in that one as a name
JAXTYPING_TYPES = frozenset({
    "Shaped", "Bool", "Key", "Num", "Inexact", "Float", "Complex", "Integer", "UInt", "Int",
    "Real", "BFloat16", "Float8e4m3b11fnuz", "Float8e4m3fn", "Float8e4m3fnuz", "Float8e5m2",
    "Float8e5m2fnuz", "Float16", "Float32", "Float64", "Complex64", "Complex128", "UInt2",
    "UInt4", "UInt8", "UInt16", "UInt32", "UInt64", "Int2", "Int4", "Int8", "Int16", "Int32",
    "Int64"})


def shape_strings(node: ast.AST) -> list[ast.Constant]:
    """The shape strings of a jaxtyping annotation ``Float[Tensor, "batch dim"]`` (the string
    constants in the brackets of a subscripted ``JAXTYPING_TYPES`` name, as imported or as an
    attribute of a module), and the literal parts of an f-string shape (alphafold3-pytorch's
    ``Int[f"n {ADDITIONAL_MOLECULE_FEATS}"]``, whose placeholders are reads as any other);
    empty for any other node."""
    if not isinstance(node, ast.Subscript) or \
            (dotted(node.value) or "").rsplit(".", 1)[-1] not in JAXTYPING_TYPES:
        return []
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [c for e in elts for c in ([e] if isinstance(e, ast.Constant) else
                                      e.values if isinstance(e, ast.JoinedStr) else [])
            if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def is_dotted_name(text: str) -> bool:
    """Whether ``text`` reads as a dotted name: ``mmdet.models``, ``CrossEntropyLoss``."""
    return all(part.isidentifier() for part in text.split("."))


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return "<expr>"


def is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``TYPE_CHECKING``: what it guards never runs."""
    return dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING", "t.TYPE_CHECKING")


def is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round): its body runs only when the module is
    run as a script, never as it is imported (denoising-diffusion-pytorch defines a
    ``Classifier`` there; deepspeed's ``zero_to_fp32.py`` sets its ``debug`` from argparse)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


class _Gatherer:
    """Walks module-level statements (into if/try/with) and records definitions and imports."""

    def __init__(self, module: str, is_pkg: bool, lines: list[str]) -> None:
        self.lines = lines
        self.module = module
        self.is_pkg = is_pkg
        self.symbols: list[Symbol] = []
        self.imports: list[ImportRecord] = []
        self.module_imports: list[ImportRecord] = []  # (engine.dynimport.literal_module_import)
        self.binds_importlib = False  # an import of importlib or of its members above
        self.all_names: list[str] | None = None
        # an ``__all__`` computed as the module runs (torchquantum's standard gates:
        # ``[a().__class__.__name__ for a in all_variables]``, then a literal ``extend``)
        self.all_unknown = False

    def exported(self) -> tuple[str, ...] | None:
        """The names ``__all__`` holds, None where the module has none or computes it: a
        star import then binds its public names (``BindingIndex.exports``), which holds what
        the computed list does. Taking the literal ``extend`` alone left torchquantum's
        ``from .standard_gates import *`` with 7 of its 60 gates."""
        if self.all_names is None or self.all_unknown:
            return None
        return tuple(self.all_names)

    def body(self, stmts: list[ast.stmt], guard: Guard, parent: str | None) -> None:
        for st in stmts:
            self.stmt(st, guard, parent)

    def stmt(self, st: ast.stmt, guard: Guard, parent: str | None) -> None:
        if isinstance(st, ast.ClassDef):
            self.klass(st, guard, parent)
        elif parent is not None:
            return
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.symbols.append(self._sym(st, "function", st.name, guard, None,
                                          builds=size_variant_builds(st)))
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            self.import_(st, guard)
        elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.assign(st, guard)
        elif isinstance(st, ast.Expr):
            self.all_extend(st)
        elif isinstance(st, ast.If):
            kind = "type_checking" if is_type_checking(st.test) else "if"
            if not guard.kind:
                g = Guard(kind, st.lineno, st.end_lineno or st.lineno, _unparse(st.test))
                other = g if kind != "type_checking" else Guard("if", g.line, g.end_line, g.test)
            elif kind == "type_checking":
                # what it guards never runs, also under a ``try`` (nni's sampling.py imports
                # its RL module for annotations only, inside ``try: import tianshou``); the
                # span stays the outer statement's
                g, other = Guard(kind, guard.line, guard.end_line, guard.test), guard
            else:
                g = other = guard
            if not is_main_guard(st):  # what only a script run binds is no definition
                self.body(st.body, g, None)
            self.body(st.orelse, other, None)
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            handled = ", ".join(_unparse(h.type) for h in st.handlers if h.type is not None)
            g = guard if guard.kind else Guard("try", st.lineno, st.end_lineno or st.lineno,
                                               handled)
            self.body(st.body, g, None)
            eg = guard if guard.kind else Guard("except", g.line, g.end_line, handled)
            for h in st.handlers:
                self.body(h.body, eg, None)
            self.body(st.orelse, g, None)
            self.body(st.finalbody, g, None)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            g = guard if guard.kind else Guard("with", st.lineno, st.end_lineno or st.lineno,
                                               _unparse(st.items[0].context_expr))
            self.body(st.body, g, None)

    def _sym(self, node, kind: str, name: str, guard: Guard, parent: str | None, **kw) -> Symbol:
        decos = getattr(node, "decorator_list", [])
        start = min([d.lineno for d in decos] + [node.lineno])
        return Symbol(
            name=name,
            qualname=f"{parent}.{name}" if parent else name,
            kind=kind,
            line=start,
            end_line=node.end_lineno or node.lineno,
            col=node.col_offset,
            end_col=node.end_col_offset or 0,
            def_line=node.lineno,
            decorators=tuple(_unparse(d) for d in decos),
            doc=_doc(node) if kind != "assign" else "",
            guard=guard,
            parent=parent,
            **kw,
        )

    def klass(self, node: ast.ClassDef, guard: Guard, parent: str | None) -> None:
        methods: list[str] = []
        abstract: list[str] = []
        forward_raises = own_call_runs = False
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(st.name)
                if any(dotted(d) in ("abstractmethod", "abc.abstractmethod")
                       for d in st.decorator_list):
                    abstract.append(st.name)
                if st.name == "forward":
                    forward_raises = _only_raises_not_implemented(st)
                elif st.name == "__call__":
                    own_call_runs = call_runs(st) and st.name not in abstract
            elif isinstance(st, ast.ClassDef):
                methods.append(st.name)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        methods.append(t.id)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                methods.append(st.target.id)
        calls: dict[str, None] = {}
        # A regex over the class text finds callees ten times faster than walking the tree;
        # categories only need the names.
        first = node.lineno - 1
        lines = self.lines[first : node.end_lineno or node.lineno]
        for doc in _docstring_spans(node):  # examples in docstrings are not calls
            for i in range(doc[0] - 1 - first, doc[1] - first):
                if 0 <= i < len(lines):
                    lines[i] = ""
        text = "\n".join(lines)
        for m in _CALL_RE.finditer(text):
            name = m.group(1)
            if not name.startswith("self.") and name not in _KEYWORDS and len(calls) < MAX_CALLS:
                calls[name] = None
        sym = self._sym(
            node,
            "class",
            node.name,
            guard,
            parent,
            bases=tuple(_unparse(b) for b in node.bases),
            keywords=tuple(f"{k.arg}={_unparse(k.value)}" if k.arg else f"**{_unparse(k.value)}"
                           for k in node.keywords),
            methods=tuple(methods),
            abstract_methods=tuple(abstract),
            forward_raises=forward_raises,
            calls=tuple(calls),
            call_runs=own_call_runs,
        )
        self.symbols.append(sym)
        for st in node.body:
            if isinstance(st, ast.ClassDef):
                self.klass(st, guard, sym.qualname)

    def import_(self, st: ast.Import | ast.ImportFrom, guard: Guard) -> None:
        end = st.end_lineno or st.lineno
        if isinstance(st, ast.Import):
            for a in st.names:
                self.binds_importlib |= a.name.split(".")[0] == "importlib"
                bound = a.asname or a.name.split(".")[0]
                self.imports.append(ImportRecord(bound, a.name, None, a.asname, 0, a.name,
                                                 st.lineno, end, guard))
            return
        target = resolve_relative(self.module, self.is_pkg, st.level, st.module)
        self.binds_importlib |= target == "importlib"
        for a in st.names:
            bound = "*" if a.name == "*" else (a.asname or a.name)
            self.imports.append(ImportRecord(bound, st.module or "", a.name, a.asname, st.level,
                                             target, st.lineno, end, guard))

    def assign(self, st: ast.Assign | ast.AnnAssign | ast.AugAssign, guard: Guard) -> None:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        names: list[str] = []
        for t in targets:
            for n in treewalk.walk(t):
                # ``os.environ["X"] = ...`` and ``_REG[key] = ...`` bind neither os nor key
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    names.append(n.id)
        # ``MyModule = torch.jit.ScriptModule`` (rwkv, brevitas.jit): classes derive from it
        alias = dotted(st.value) if isinstance(st, ast.Assign) and len(targets) == 1 \
            and isinstance(targets[0], ast.Name) else None
        if self.binds_importlib and not guard.kind and isinstance(st.value, ast.Call):
            rec = dynimport.literal_module_import(st, self.module, self.is_pkg, self.imports)
            if rec is not None:
                self.module_imports.append(rec)
        for name in dict.fromkeys(names):
            if name == "__all__":
                self._all(st)
            self.symbols.append(self._sym(st, "assign", name, guard, None, alias=alias or ""))

    def _all(self, st: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        value = st.value
        names = _str_seq(value) if value is not None else None
        if isinstance(st, ast.AugAssign):
            if names is None:
                self.all_unknown = True
            else:
                self.all_names = (self.all_names or []) + names
        elif names is None:
            self.all_unknown = value is not None
        else:
            self.all_names, self.all_unknown = names, False

    def all_extend(self, st: ast.Expr) -> None:
        call = st.value
        if (isinstance(call, ast.Call) and dotted(call.func) in ("__all__.extend", "__all__.append")
                and call.args):
            arg = call.args[0]
            names = [arg.value] if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) \
                else _str_seq(arg)
            if names is None:
                self.all_unknown = True
            else:
                self.all_names = (self.all_names or []) + names


def _str_seq(node: ast.expr) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _docstring_spans(cls: ast.ClassDef):
    """(first, last) lines of the docstrings of a class and of its methods."""
    for holder in [cls, *[s for s in cls.body
                          if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]]:
        body = holder.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            yield body[0].lineno, body[0].end_lineno or body[0].lineno


def _doc(node: ast.AST) -> str:
    try:
        doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
    except TypeError:
        return ""
    if not doc:
        return ""
    return doc.strip().split("\n", 1)[0][:200]


def size_variant_builds(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """The names ``fn`` calls as a model-size variant of a network does: a function whose every
    parameter has a default (``def SiT_XL_2(**kwargs)``, ``def mar_base(**kwargs)``) calling a
    name with at least two keyword arguments of literal numbers (``depth=28,
    hidden_size=1152``). A helper that takes a layer's inputs (``def conv_bn(inp, oup,
    stride)``) builds none."""
    a = fn.args
    if len(a.defaults) < len(a.posonlyargs) + len(a.args) or None in a.kw_defaults:
        return ()
    out: dict[str, None] = {}
    for node in treewalk.walk(fn):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            sizes = sum(1 for k in node.keywords if k.arg and _literal_number(k.value))
            if name and sizes >= 2:
                out[name] = None
    return tuple(out)


def _literal_number(node: ast.expr) -> bool:
    """``28``, ``0.1``, ``-1``, ``[2, 2, 6, 2]``, ``(1, 2, 4)``: not a bool, not a name."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_literal_number(e) for e in node.elts)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def call_runs(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a class's ``__call__`` does the work itself: it neither reads ``forward`` or
    ``__call__`` (``return super().__call__(*args, **kwargs)``, kept for type hints, hands over
    to ``nn.Module``'s, which runs ``forward``) nor only raises (torch's ``ParameterList``:
    "should not be called")."""
    body = _body_below_docstring(fn)
    if len(body) == 1 and isinstance(body[0], ast.Raise):
        return False
    return not any(isinstance(n, ast.Attribute) and n.attr in ("forward", "__call__")
                   for n in treewalk.walk(fn))


def _body_below_docstring(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def _only_raises_not_implemented(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = _body_below_docstring(fn)
    if len(body) != 1:
        return False
    st = body[0]
    if isinstance(st, ast.Raise) and st.exc is not None:
        exc = st.exc.func if isinstance(st.exc, ast.Call) else st.exc
        return dotted(exc) == "NotImplementedError"
    return False
