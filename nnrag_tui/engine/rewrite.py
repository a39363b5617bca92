"""The minimal rewrites of an upstream statement; everything else (comments, decorators,
formatting) stays byte for byte.

Three kinds: renaming a module-level name (a clash between two definitions, or an alias whose
definition is inlined under its own name), turning ``mod.X`` into ``X`` when ``mod`` is a corpus
module whose ``X`` is inlined (into ``globals()["X"]`` where a function or class body stores
into it: there ``mod.X = v`` sets the module's global, and ``X = v`` would bind a local), and
replacing a guarded import of a corpus name, or one inside a function, with an assignment (or
nothing, when the inlined name is the bound one). A fourth is asked for where a file mixes
modules with and without ``from __future__ import annotations`` (``quote``): the annotations
of a statement from a module with it are written as the strings that import makes of them
upstream, since the file cannot have it (engine.resolve). Only names that resolve to the
module scope are touched, never a local, a parameter, an attribute or a keyword argument: each
``Name`` is judged by CPython's own ``symtable`` for the scope it sits in, and edits are
spliced at the exact positions ``ast`` reports. (libcst's scope analysis did the same at about
200 ms per class on this machine; this takes a few milliseconds, and the golden tests pin the
results.)
"""

from __future__ import annotations

import ast
import io
import re
import symtable
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from nnrag_tui.engine import scopes, treewalk
from nnrag_tui.engine.lines import source_lines
from nnrag_tui.engine.modsource import (
    NO_MODULE,
    TypingNames,
    annotation_strings,
    class_early_reads,
    typing_call_strings,
)
from nnrag_tui.engine.parse import resolve_relative

_RELATIVE = re.compile(r"from\s+\.")  # no leading \b: the regex then skips ahead to "from"
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
          ast.SetComp, ast.DictComp, ast.GeneratorExp)
_RENAMED_SPECIAL = {
    "__doc__": "`__doc__` -> upstream's module docstring",
    "__file__": "`__file__` -> upstream's path in the folder beside this file laid out as "
                "its source tree",
}
QUOTED = ("annotations written as the strings upstream's `from __future__ import annotations` "
          "makes of them")


@dataclass(frozen=True)
class ImportEdits:
    """What becomes of a statement's imports of corpus names. ``guarded`` maps (line inside
    the statement, bound name) of an import to the name it should be assigned from (``None``:
    drop it; the definition it imported is already inlined under the bound name; ``""``: drop
    it, nothing reads the name). ``unsure`` maps the imports of ``guarded`` whose definition
    its module may leave undefined to the ImportError upstream's import then raises: the
    rewrite raises it too, where a ``try`` may expect it, instead of a NameError. ``nested``
    maps the line of a guarded import to (the statements of the module it imports, at column
    0, and the header's line on them), which go right above what the import becomes
    (engine.nesting). ``runs`` maps the line of an import to the functions it calls first,
    which run the module-level code of the module it imports (engine.deferred): an import
    inside a function, or one in a module that itself runs in such a function."""

    guarded: dict[tuple[int, str], str | None] = field(default_factory=dict)
    unsure: dict[tuple[int, str], str] = field(default_factory=dict)
    nested: dict[int, tuple[str, str]] = field(default_factory=dict)
    runs: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def key(self) -> tuple:
        """A hashable form, for the cache."""
        return (tuple(sorted(self.guarded.items(), key=lambda kv: kv[0])),
                tuple(sorted(self.unsure.items())), tuple(sorted(self.nested.items())),
                tuple(sorted(self.runs.items())))


def _relative_import_text(text: str) -> bool:
    """Whether ``text`` has ``from .`` as a word, where a relative import could be."""
    return any(m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")
               for m in _RELATIVE.finditer(text))


def rewrite_statement(
    text: str,
    renames: dict[str, str],
    chains: dict[str, str],
    imports: ImportEdits | None = None,
    early: dict[str, str] | None = None,
    home: tuple[str, bool] | None = None,
    quote: bool = False,
    typing: TypingNames = NO_MODULE,
) -> tuple[str, list[str]]:
    """Returns the rewritten text and one line per rewrite made. ``imports`` says what becomes
    of its imports of corpus names (``ImportEdits``). ``early`` renames the reads that run
    before the statement binds that same name (the bases in ``class Output(Output):``, a
    default, a right-hand side), which ``renames`` would otherwise give the statement's own
    name. ``home`` is the statement's module and whether it is a package: a relative import
    kept in the statement (inside a function, or a kept ``try``) becomes absolute, since the
    file has no package. ``quote``: every annotation the statement evaluates (``QUOTED``)
    becomes the string ``from __future__ import annotations`` makes of it upstream.
    ``typing``: the names the statement's module binds to typing
    (``ModuleSource.typing_names``), whose calls and subscripts take types."""
    imports = imports or ImportEdits()
    early = early or {}
    if home is not None and not _relative_import_text(text):
        home = None
    if not renames and not chains and not imports.guarded and not imports.runs and \
            not early and home is None and not quote:
        return text, []
    out, log = _cached(text, tuple(sorted(renames.items())), tuple(sorted(chains.items())),
                       imports.key(), tuple(sorted(early.items())), home, quote, typing)
    return out, list(dict.fromkeys(log))  # one line per distinct rewrite


@lru_cache(maxsize=4096)
def _cached(text: str, renames: tuple, chains: tuple, imports: tuple,
            early: tuple, home: tuple[str, bool] | None, quote: bool,
            typing: TypingNames) -> tuple[str, tuple]:
    guarded, unsure, nested, runs = imports
    out, log = _rewrite(text, dict(renames), dict(chains),
                        ImportEdits(dict(guarded), dict(unsure), dict(nested), dict(runs)),
                        dict(early), home, quote, typing)
    return out, tuple(log)


class _Edits:
    def __init__(self, text: str) -> None:
        self.lines = [ln.encode("utf-8") for ln in source_lines(text, keepends=True)]
        self.edits: list[tuple[int, int, int, int, str]] = []
        self.log: list[str] = []

    def add(self, node: ast.AST, new: str, what: str) -> None:
        self.edits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno,
                           node.end_col_offset or 0, new))
        self.log.append(what)

    def add_span(self, span: tuple[int, int, int, int], new: str, what: str) -> None:
        self.edits.append((*span, new))
        self.log.append(what)

    def taken_since(self, mark: int) -> list[tuple[int, int, int, int, str]]:
        """The edits added since ``mark`` (``len(edits)`` then), no longer to be made here;
        their lines stay in the log."""
        taken = self.edits[mark:]
        del self.edits[mark:]
        return taken

    def segment(self, span: tuple[int, int, int, int],
                inner: list[tuple[int, int, int, int, str]]) -> str:
        """The text at ``span`` with the edits ``inner`` (all inside it) made."""
        l1, c1, l2, c2 = span
        part = self.lines[l1 - 1 : l2]
        part = [part[0][c1:c2]] if l1 == l2 else [part[0][c1:], *part[1:-1], part[-1][:c2]]
        sub = _Edits("")
        sub.lines = part
        sub.edits = [(a - l1 + 1, b - c1 if a == l1 else b, c - l1 + 1, d - c1 if c == l1 else d,
                      new) for a, b, c, d, new in inner]
        return sub.apply()

    def apply(self) -> str:
        chosen: list[tuple[int, int, int, int, str]] = []
        for e in sorted(set(self.edits), key=lambda e: (e[0], e[1], -e[2], -e[3])):
            if chosen and (e[0], e[1]) < (chosen[-1][2], chosen[-1][3]):
                continue  # inside an edit already made (a chain containing a renamed name)
            chosen.append(e)
        lines = self.lines
        for l1, c1, l2, c2, new in reversed(chosen):
            head = lines[l1 - 1][:c1]
            tail = lines[l2 - 1][c2:]
            lines[l1 - 1 : l2] = [head + new.encode("utf-8") + tail]
        return b"".join(lines).decode("utf-8")


def _rewrite(text: str, renames: dict[str, str], chains: dict[str, str],
             imports: ImportEdits, early: dict[str, str],
             home: tuple[str, bool] | None, quote: bool = False,
             typing: TypingNames = NO_MODULE) -> tuple[str, list[str]]:
    tree = ast.parse(text)
    table = scopes.statement_table(text)
    ed = _Edits(text)
    walker = _Walker(ed, renames, chains, imports, early, home, quote, typing)
    if imports.guarded:
        walker.alone = _alone_in_block(tree, walker.leaves_nothing)
    walker.run(tree, table)
    if imports.runs:
        _run_before_reads(ed, {line: called for line, called in imports.runs.items()
                               if line not in walker.ran})
    return ed.apply(), ed.log


def _run_before_reads(ed: _Edits, runs: dict[int, tuple[str, ...]]) -> None:
    """The functions of ``runs`` at a line where no import made them: a statement there
    reads a name through a module ``__getattr__`` that imports its module as it is read
    (engine.lazyattr), and each call goes right above it, at its indentation."""
    for line, called in sorted(runs.items()):
        if not 0 < line <= len(ed.lines):
            continue
        text = ed.lines[line - 1]
        indent = text[: len(text) - len(text.lstrip(b" \t"))]
        pad = indent.decode("utf-8")
        names = ", ".join(f"`{run}()`" for run in called)
        ed.add_span((line, 0, line, len(indent)),
                    "".join(f"{pad}{run}()\n" for run in called) + pad,
                    f"calls {names} first, which runs the module-level code of the module "
                    "upstream's module `__getattr__` imports as the line reads a name from it")


_HOLDS_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _alone_in_block(tree: ast.AST, leaves_nothing) -> set[int]:
    """Ids of the statements that must become ``pass`` when nothing is left of them: the only
    statement of its block, or the first of a block whose every statement is an import that
    ``leaves_nothing(stmt, module_level)`` (peft's ``if TYPE_CHECKING:`` holding only corpus
    imports, all inlined): a block cannot be empty."""
    out: set[int] = set()
    # (node, whether its blocks are module-level code); a stack, not a nested function
    # calling itself, whose reference cycle would hold ``leaves_nothing`` (the walker, with
    # the statement it walks) until a full garbage collection
    todo: list[tuple[ast.AST, bool]] = [(tree, True)]
    while todo:
        node, module_level = todo.pop()
        inner = module_level and not isinstance(node, SCOPES)
        for f in ("body", "orelse", "finalbody"):
            body = getattr(node, f, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            if len(body) == 1 or all(leaves_nothing(s, inner) for s in body):
                out.add(id(body[0]))
        # blocks are in statements, handlers and cases only, never in an expression
        todo += [(child, inner) for child in treewalk.children(node)
                 if isinstance(child, _HOLDS_BLOCKS)]
    return out


def _unparsed(text: str, starred: bool) -> str:
    """An annotation's text as ``from __future__ import annotations`` stores it: CPython
    unparses the expression, as ``ast.unparse`` does. It may span lines and hold comments;
    ``*Ts`` (``*args: *Ts``) parses only in its place."""
    if starred:
        ann = ast.parse(f"def _(*a: {text}\n): pass").body[0].args.vararg.annotation
    else:
        ann = ast.parse(f"(\n{text}\n)", mode="eval").body
    return ast.unparse(ann)


def _bound(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """The name an import binds for one of its aliases (``import a.b`` binds ``a``)."""
    return alias.asname or (alias.name if isinstance(node, ast.ImportFrom)
                            else alias.name.split(".")[0])


def _dotted(node: ast.AST) -> tuple[str, ast.Name] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts)), node
    return None


class _Walker:
    """Walks the tree with the symtable scope of every node at hand."""

    def __init__(self, ed: _Edits, renames: dict[str, str], chains: dict[str, str],
                 imports: ImportEdits, early: dict[str, str],
                 home: tuple[str, bool] | None, quote: bool = False,
                 typing: TypingNames = NO_MODULE) -> None:
        self.ed = ed
        self.home = home
        self.renames = renames
        self.early_renames = early
        self.top: ast.stmt | None = None  # the module-level statement being walked
        self.before_binding = False  # inside a part of it that runs before it binds
        self.chains = chains
        self.guarded = imports.guarded
        self.unsure = imports.unsure
        self.nested = imports.nested
        self.runs = imports.runs
        self.ran: set[int] = set()  # the lines of the imports that made their calls of ``runs``
        self.tables = scopes.ScopeTables()
        self.alone: set[int] = set()  # ids of statements alone in their block
        self.early: set[int] = set()  # ids of class-body reads that are module-level uses
        self.in_value_pattern = False  # inside a ``case`` value pattern (kept qualified)
        self.quote = quote  # write evaluated annotations as strings (``rewrite_statement``)
        self.typing = typing
        self.in_annotation = False  # inside an annotation, whose strings it visits itself

    def run(self, tree: ast.Module, table: symtable.SymbolTable) -> None:
        for st in tree.body:
            self.top = st
            self.visit(st, table)

    @contextmanager
    def evaluated_first(self, node: ast.AST):
        """The parts of the module-level statement ``node`` that run before it binds its name:
        decorators, bases, defaults, annotations, a right-hand side."""
        outer = self.before_binding
        self.before_binding = node is self.top and bool(self.early_renames)
        try:
            yield
        finally:
            self.before_binding = outer

    # -- visiting --------------------------------------------------------------------------
    def visit(self, node: ast.AST, table: symtable.SymbolTable) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            with self.evaluated_first(node):
                for d in node.decorator_list:
                    self.visit(d, table)
                self.visit_arguments_outer(node.args, table)
                if node.returns is not None:
                    self.visit_annotation(node.returns, table)
            self.rename_def(node, table, "def")
            inner = self.tables.child(table, node)
            for st in node.body:
                self.visit(st, inner)
            return
        if isinstance(node, ast.ClassDef):
            with self.evaluated_first(node):
                for d in node.decorator_list:
                    self.visit(d, table)
                for b in node.bases:
                    self.visit(b, table)
                for k in node.keywords:
                    self.visit(k.value, table)
            self.rename_def(node, table, "class")
            self.early.update(id(n) for n in class_early_reads(node))
            inner = self.tables.child(table, node)
            for st in node.body:
                self.visit(st, inner)
            return
        if isinstance(node, ast.Lambda):
            self.visit_arguments_outer(node.args, table)
            self.visit(node.body, self.tables.child(table, node))
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            gens = node.generators
            self.visit(gens[0].iter, table)
            inner = self.tables.child(table, node)
            for i, g in enumerate(gens):
                self.visit(g.target, inner)
                if i:
                    self.visit(g.iter, inner)
                for cond in g.ifs:
                    self.visit(cond, inner)
            if isinstance(node, ast.DictComp):
                self.visit(node.key, inner)
                self.visit(node.value, inner)
            else:
                self.visit(node.elt, inner)
            return
        if isinstance(node, ast.MatchValue):
            # ``case mod.HEAD:`` stays qualified (a bare name would capture): the resolver
            # reads ``mod`` as a value there, and its name may still be renamed
            outer, self.in_value_pattern = self.in_value_pattern, True
            try:
                self.visit(node.value, table)
            finally:
                self.in_value_pattern = outer
            return
        if isinstance(node, ast.Attribute) and self.chains and not self.in_value_pattern:
            d = _dotted(node)
            if d is not None:
                dotted, root = d
                new = self.chains.get(dotted)
                if new is not None and scopes.reads_global(table, root.id):
                    if isinstance(node.ctx, (ast.Store, ast.Del)) \
                            and table.get_type() != "module":
                        # ``mod.X = v`` in a function or class body sets the module's global;
                        # a plain ``X = v`` there would bind a local (or a class attribute)
                        new = f"globals()[{new!r}]"
                        self.ed.add(node, new, f"`{dotted}` -> `{new}` (inlined; set from "
                                               f"a {table.get_type()} body)")
                        return
                    self.ed.add(node, new, f"`{dotted}` -> `{new}` ("
                                + ("the file's stand-in, which returns the modules it holds"
                                   if dotted == "importlib.import_module" else "inlined")
                                + ")")
                    return
        if isinstance(node, ast.Name):
            new = (self.early_renames if self.before_binding and node.id in self.early_renames
                   else self.renames).get(node.id)
            if new is not None and new != node.id and (
                    id(node) in self.early or scopes.reads_global(table, node.id)):
                self.ed.add(node, new, _RENAMED_SPECIAL.get(node.id)
                            or f"renamed `{node.id}` -> `{new}`")
            return
        if isinstance(node, ast.ExceptHandler) and node.name and table.get_type() == "module":
            # ``except ImportError as e:`` at module level binds the global ``e``, which a
            # clash may rename: its reads are renamed, so the name after ``as`` is too
            new = self.renames.get(node.name)
            span = self.handler_name_span(node) if new and new != node.name else None
            if span is not None:
                self.ed.add_span(span, new, f"renamed `{node.name}` -> `{new}`")
        if isinstance(node, ast.Global):
            for i, n in enumerate(node.names):
                if n in self.renames:
                    self.ed.log.append(f"renamed global `{n}` -> `{self.renames[n]}`")
            if any(n in self.renames for n in node.names):
                names = ", ".join(self.renames.get(n, n) for n in node.names)
                self.ed.add(node, f"global {names}", "")
                self.ed.log.pop()
            return
        if isinstance(node, ast.AnnAssign):
            self.visit(node.target, table)
            with self.evaluated_first(node):
                # a local variable's annotation is never evaluated, with or without the import
                self.visit_annotation(node.annotation, table,
                                      evaluated=table.get_type() != "function")
                if node.value is not None:
                    self.visit(node.value, table)
            return
        if isinstance(node, ast.Assign) and node is self.top:
            for t in node.targets:
                self.visit(t, table)
            with self.evaluated_first(node):
                self.visit(node.value, table)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)) and (
                self.guarded or self.renames or self.home):
            self.visit_import(node, table.get_type() == "module")
            return
        if isinstance(node, ast.Subscript) and not self.in_annotation and \
                self.typing.is_member(node.value):
            # ``Inputs = Union[List[str], "Dataset"]``: its strings are annotations
            with self.annotation():
                for child in treewalk.children(node):
                    self.visit(child, table)
            self.visit_typing_strings(annotation_strings(node), table)
            return
        for child in treewalk.children(node):
            self.visit(child, table)
        if isinstance(node, ast.Call):
            self.visit_typing_strings(typing_call_strings(node, self.typing), table)

    @contextmanager
    def annotation(self):
        outer, self.in_annotation = self.in_annotation, True
        try:
            yield
        finally:
            self.in_annotation = outer

    def handler_name_span(self, node: ast.ExceptHandler) -> tuple[int, int, int, int] | None:
        """Where the name after ``as`` of an ``except`` clause is (ast gives no position)."""
        line, col = (node.type.end_lineno, node.type.end_col_offset) if node.type is not None \
            else (node.lineno, node.col_offset)
        if line is None or col is None:
            return None
        m = re.compile(rb"\s+as\s+(" + re.escape(node.name.encode()) + rb")\b").match(
            self.ed.lines[line - 1], col)
        return (line, m.start(1), line, m.end(1)) if m else None

    def visit_arguments_outer(self, args: ast.arguments, table) -> None:
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default, table)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                  *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]:
            if a.annotation is not None:
                self.visit_annotation(a.annotation, table)

    def visit_annotation(self, node: ast.expr, table, evaluated: bool = True) -> None:
        """An annotation, string forward references (``x: "Mlp"``) included; with ``quote``,
        one that Python evaluates becomes the string ``from __future__ import annotations``
        makes of it (CPython unparses the expression, as ``ast.unparse`` does), the renames
        inside it made."""
        mark = len(self.ed.edits)
        with self.annotation():
            self.visit(node, table)
        for c in annotation_strings(node):
            self.visit_string_annotation(c, table)
        if not (self.quote and evaluated):
            return
        span = (node.lineno, node.col_offset, node.end_lineno or node.lineno,
                node.end_col_offset or 0)
        inner = self.ed.taken_since(mark)
        try:
            quoted = repr(_unparsed(self.ed.segment(span, inner),
                                    starred=isinstance(node, ast.Starred)))
        except SyntaxError:  # not expected: the annotation stays as written, renames made
            self.ed.edits.extend(inner)
            return
        self.ed.add(node, quoted, QUOTED)

    def visit_typing_strings(self, strings: list[ast.Constant], table) -> None:
        """``TypeVar("T", bound="Model")``, ``cast("Model", x)``, ``Union[int, "Model"]``:
        typing's strings are annotations, which pyflakes reads once the module has run: never
        an early rename."""
        outer, self.before_binding = self.before_binding, False
        try:
            for c in strings:
                self.visit_string_annotation(c, table)
        finally:
            self.before_binding = outer

    def visit_string_annotation(self, c: ast.Constant, table) -> None:
        """Renames inside a one-line string annotation written without escapes or prefixes:
        its text starts one quote character after the constant's own position."""
        line = self.ed.lines[c.lineno - 1]
        seg = line[c.col_offset:c.end_col_offset or 0] if c.end_lineno == c.lineno else b""
        if len(seg) < 2 or seg[:1] not in (b'"', b"'") or seg[:3] in (b'"' * 3, b"'" * 3) \
                or seg[1:-1].decode("utf-8", "replace") != c.value:
            return
        try:
            expr = ast.parse(c.value, mode="eval")
        except SyntaxError:
            return
        base = c.col_offset + 1

        def shifted(n: ast.AST) -> tuple[int, int, int, int]:
            return (c.lineno, base + n.col_offset, c.lineno, base + (n.end_col_offset or 0))

        for sub in treewalk.walk(expr):
            if isinstance(sub, ast.Attribute) and self.chains:
                d = _dotted(sub)
                if d is not None and d[0] in self.chains and scopes.reads_global(table, d[1].id):
                    new = self.chains[d[0]]
                    self.ed.add_span(shifted(sub), new, f"`{d[0]}` -> `{new}` (inlined)")
            elif isinstance(sub, ast.Name):
                new = (self.early_renames if self.before_binding and sub.id in self.early_renames
                       else self.renames).get(sub.id)
                if new is not None and new != sub.id and scopes.reads_global(table, sub.id):
                    self.ed.add_span(shifted(sub), new, f"renamed `{sub.id}` -> `{new}`")

    def rename_def(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, table,
                   kind: str) -> None:
        new = self.renames.get(node.name)
        if new is None or new == node.name or not scopes.reads_global(table, node.name):
            return
        line = self.ed.lines[node.lineno - 1]
        m = re.compile(rb"(?:class|def)\s+(" + re.escape(node.name.encode()) + rb")\b").search(
            line, node.col_offset)
        if m is None:
            return
        # the class's ``__name__`` is its new name too, though a module tree then prints it:
        # code finds a class again by ``getattr(import_module(c.__module__), c.__name__)``
        # (physicsnemo's checkpoints store both), which upstream's name would lead to the
        # other definition of that name in the file
        self.ed.add_span((node.lineno, m.start(1), node.lineno, m.end(1)), new,
                         f"renamed {'class' if kind == 'class' else 'function'} "
                         f"`{node.name}` -> `{new}`")

    def leaves_nothing(self, node: ast.stmt, module_level: bool) -> bool:
        """Whether ``visit_import`` removes this statement entirely: an import each of whose
        names is dropped (inlined under the name it binds, or unused)."""
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            return False
        for alias in node.names:
            bound = _bound(node, alias)
            for key in [(node.lineno, bound), *self._star_names(node, alias)]:
                if key not in self.guarded or key in self.unsure or \
                        node.lineno in self.nested or node.lineno in self.runs:
                    return False
                source = self.guarded[key]
                name = key[1] if key[1] != "*" else bound
                target = self.renames.get(name, name) if module_level else name
                if source not in ("", None, target):
                    return False
        return True

    def _star_names(self, node: ast.Import | ast.ImportFrom,
                    alias: ast.alias) -> list[tuple[int, str]]:
        """The guarded imports standing for the names a corpus star import binds, where
        ``alias`` is one (engine.resolve, ``visit_guarded_stars``)."""
        if alias.name != "*" or (node.lineno, "*") not in self.guarded:
            return []
        return sorted(k for k in self.guarded if k[0] == node.lineno and k[1] != "*")

    def visit_import(self, node: ast.Import | ast.ImportFrom, module_level: bool) -> None:
        """A corpus import whose definition is inlined: dropped, or ``bound = name`` where the
        inlined name differs. At module level (inside a kept ``try``/``if``) the bound name
        itself may be renamed; inside a function it is a local and keeps its name. An external
        import there whose name is renamed (two modules' ``if npu: import torch_npu``) binds
        the new name: ``import torch_npu as torch_npu_activations``."""
        keep: list[ast.alias] = []
        where = "" if module_level else " inside a function"
        what = "guarded import" if module_level else "import"
        assigns: list[str] = []
        checks: list[tuple[str, str, str]] = []  # (bound, inlined name, ImportError message)
        changed = False
        for alias in node.names:
            bound = _bound(node, alias)
            key = (node.lineno, bound)
            if isinstance(node, ast.ImportFrom) and alias.name == "*" and key in self.guarded:
                # a corpus star import: each name it binds that something reads is inlined
                changed = True
                star = f"`from {'.' * node.level}{node.module or ''} import *`"
                names, made = [], []
                for k in self._star_names(node, alias):
                    source, target = self.guarded[k], self.renames.get(k[1], k[1])
                    if k in self.unsure:
                        checks.append((k[1], source or target, self.unsure[k]))
                    if source and source != target:
                        made.append(f"{target} = {source}")
                    elif source:
                        names.append(f"`{k[1]}`")
                assigns.extend(made)
                self.ed.log.append(
                    f"{what} {star} -> `{'; '.join(made)}` (inlined"
                    + (f"; {', '.join(names)} too)" if names else ")") if made else
                    f"{what} {star} dropped ({', '.join(names)} inlined)" if names else
                    f"{what} {star} dropped (nothing reads its names)")
                continue
            if key not in self.guarded:
                new = self.renames.get(bound, bound) if module_level else bound
                if new == bound:
                    keep.append(alias)
                    continue
                changed = True
                if isinstance(node, ast.Import) and not alias.asname and "." in alias.name:
                    keep.append(alias)  # ``import a.b`` binds ``a``: the new name is ``a``
                    assigns.append(f"{new} = {bound}")
                else:
                    keep.append(ast.alias(name=alias.name, asname=new))
                self.ed.log.append(f"{what} of `{bound}` binds `{new}` (renamed)")
                continue
            changed = True
            source = self.guarded[key]
            target = self.renames.get(bound, bound) if module_level else bound
            if key in self.unsure:
                checks.append((bound, source or target, self.unsure[key]))
            if source == "":
                self.ed.log.append(f"{what} of `{bound}`{where} dropped (unused)")
            elif source is not None and source != target:
                assigns.append(f"{target} = {source}")
                self.ed.log.append(f"{what} of `{bound}`{where} -> `{target} = {source}` "
                                   "(inlined)")
            else:
                self.ed.log.append(f"{what} of `{bound}`{where} dropped (inlined)")
        relative = isinstance(node, ast.ImportFrom) and node.level > 0
        module = f"{'.' * node.level}{node.module or ''}" if isinstance(node, ast.ImportFrom) \
            else ""
        if keep and relative and self.home:
            absolute = resolve_relative(*self.home, node.level, node.module)  # type: ignore
            if absolute:
                changed = True
                self.ed.log.append(f"relative import `from {module}` -> `from {absolute}` "
                                   "(the file has no package)")
                module = absolute
        if not changed:
            return
        parts = []
        line = self.ed.lines[node.lineno - 1]
        indent = line[:node.col_offset]
        raising: list[str] = []
        if node.lineno in self.nested and not indent.strip():
            code, note = self.nested[node.lineno]
            raising.append(indented(code.rstrip("\n") + "\n\n",
                                    indent.decode("utf-8"))[len(indent):].rstrip(" \t"))
            self.ed.log.append(note)
        calls = [f"{run}()" for run in self.runs.get(node.lineno, ())]
        self.ran.add(node.lineno)
        if calls:
            # upstream's import runs its module's code first (engine.deferred)
            if not indent.strip():  # (else they go on its line, below)
                raising.extend(calls)
            self.ed.log.extend(f"{what}{where} calls `{c}` first, which runs the module-level "
                               "code of its module, as upstream's import does" for c in calls)
        if checks and not indent.strip():
            # upstream's import raises ImportError where its module left the name undefined
            # (megatron's ``try: from ..transformer_engine import fused_apply_rotary_pos_emb
            # except ImportError: ... = None``); a read of the inlined name would raise
            # NameError, which the ``try`` does not catch
            pad = "\n" + indent.decode("utf-8")
            for bound, name, message in checks:
                raising.append(f"if {name!r} not in globals():{pad}    "
                               f"raise ImportError({message!r})")
                self.ed.log.append(f"{what} of `{bound}`{where} raises ImportError where "
                                   f"`{name}` is undefined, as upstream's does")
        if keep:
            names = ", ".join(f"{a.name} as {a.asname}" if a.asname else a.name for a in keep)
            if isinstance(node, ast.ImportFrom):
                parts.append(f"from {module} import {names}")
            else:
                parts.append(f"import {names}")
        parts.extend(assigns)
        if calls and indent.strip():  # ``if fast: from .ops import f`` on one line
            parts[:0] = calls
        last = self.ed.lines[(node.end_lineno or node.lineno) - 1]
        tail = last[node.end_col_offset or 0:].strip()
        if raising:
            pad = "\n" + indent.decode("utf-8")
            if not parts:
                raising[-1] = raising[-1].rstrip("\n")  # nothing follows: no blank lines
            self.ed.add(node, pad.join([*raising, *(["; ".join(parts)] if parts else [])]), "")
        elif not parts and id(node) not in self.alone and not indent.strip() \
                and (not tail or tail.startswith(b"#")):
            # nothing left of it, and its block has other statements: drop the whole line
            end = node.end_lineno or node.lineno
            if end < len(self.ed.lines):
                self.ed.add_span((node.lineno, 0, end + 1, 0), "", "")
            else:
                self.ed.add_span((node.lineno, 0, end, len(last)), "", "")
        else:
            self.ed.add(node, "; ".join(parts) or "pass", "")
        self.ed.log.pop()


def indented(code: str, pad: str) -> str:
    """``code`` (statements at column 0) one level in, by ``pad``: every line but the blank
    ones and those that continue a multi-line string, whose text is the string's."""
    inside: set[int] = set()
    strings = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type in strings and tok.end[0] > tok.start[0]:
            inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return "".join(line if i in inside or not line.strip() else pad + line
                   for i, line in enumerate(source_lines(code, keepends=True), 1))
