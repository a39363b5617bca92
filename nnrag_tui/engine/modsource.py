"""The text and top-level statements of one corpus module, and the names each statement uses.

A statement is the unit the generator copies: a class, a function, an assignment, or a whole
guarded compound statement (``if``/``try``/``with``) together with everything inside it, so that
guards such as ``if 'X' in os.environ:`` or ``try: ... except ImportError:`` are kept.
Free names come from CPython's own ``symtable``, so scoping (LEGB, class bodies that do not
enclose their methods, comprehensions, walrus, global/nonlocal, ...) is Python's verdict.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from nnrag_tui.engine import scopes, treewalk
from nnrag_tui.engine.flow import reads_after_own_binding
from nnrag_tui.engine.lines import source_lines
from nnrag_tui.engine.modulefiles import literals
from nnrag_tui.engine.nodecache import per_node
from nnrag_tui.engine.parse import is_dotted_name, is_main_guard, shape_strings
from nnrag_tui.engine.reach import load_time_calls, load_time_nodes
from nnrag_tui.engine.patches import (
    attribute_store_roots,
    call_arguments,
    decorator_method_roots,
    in_place_roots,
    nested_method_call_roots,
    setattr_roots,
)

COMPREHENSIONS = frozenset({"listcomp", "setcomp", "dictcomp", "genexpr"})
TYPING_MODULES = frozenset({"typing", "typing_extensions"})


@dataclass(frozen=True)
class TypingNames:
    """The names a module binds to typing: the modules (``import typing as t``), whose
    ``cast`` and ``assert_type`` take types (``t.cast("Model", x)``, not triton's ``tl.cast``),
    and the members (``from typing import Union``), whose subscripts hold types
    (``Inputs = Union[List[str], "Dataset"]``, as pyflakes reads them). Without a module at
    hand: ``typing`` and ``typing_extensions``, and no member."""

    modules: frozenset[str] = TYPING_MODULES
    members: frozenset[str] = frozenset()

    @cached_property
    def subscripted(self) -> re.Pattern[str] | None:
        """Matches the text of a statement that may subscript a member (``Union[``,
        ``t.Optional[``); None where the module binds no name to typing."""
        names = [re.escape(m) for m in sorted(self.members)] + \
            [re.escape(m) + r"\s*\.\s*\w+" for m in sorted(self.modules)]
        return re.compile(r"\b(?:" + "|".join(names) + r")\s*\[") if names else None

    def is_member(self, node: ast.expr) -> bool:
        """Whether ``node`` names a member of typing (``Union``, ``t.Optional``)."""
        if isinstance(node, ast.Name):
            return node.id in self.members
        return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id in self.modules


NO_MODULE = TypingNames()


T = TypeVar("T")


@dataclass(frozen=True)
class TopStmt:
    index: int
    line: int  # first line, decorators included
    end_line: int
    kind: str  # class | function | assign | import | compound | other
    binds: frozenset[str]
    node: ast.stmt = field(compare=False, repr=False)


@dataclass
class StmtUses:
    """Module-level names a statement needs: ``load`` while the module executes, ``lazy`` only
    when a function in it runs; names inside string annotations are listed apart. ``own``: the
    names of ``load`` that a compound statement reads only after binding them itself (``except
    ImportError as e: warn(e)``), which need no other statement (engine.flow)."""

    load: set[str]
    lazy: set[str]
    assigned_global: set[str]
    string_annotation_names: set[str]
    own: frozenset[str] = frozenset()


class ModuleSource:
    def __init__(self, text: str, filename: str = "<module>") -> None:
        self.text = text
        self.filename = filename
        self.crlf = False  # whether upstream's file ended its lines with CRLF (see resolve)
        self.lines = source_lines(text, keepends=True)
        tree = ast.parse(text, filename=filename)
        self.stmts: list[TopStmt] = []
        self.binders: dict[str, list[int]] = {}
        self.future: list[str] = []
        for i, node in enumerate(tree.body):
            decos = getattr(node, "decorator_list", [])
            start = min([d.lineno for d in decos] + [node.lineno])
            kind = _kind(node)
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                self.future.extend(a.name for a in node.names)
            binds = frozenset(_bound_names(node))
            st = TopStmt(i, start, node.end_lineno or node.lineno, kind, binds, node)
            self.stmts.append(st)
            for n in binds:
                self.binders.setdefault(n, []).append(i)
        # module-level functions (statement index) -> the names they rebind through
        # ``global``; name -> the module-level statements that call one of them
        self.global_writers: dict[int, set[str]] = {}
        self.rebinding_calls: dict[str, set[int]] = {}
        if _GLOBAL_STATEMENT.search(text):
            self.global_writers, self.rebinding_calls = _global_rebinding_calls(tree)
            for n, calls in self.rebinding_calls.items():
                self.binders[n] = sorted({*self.binders.get(n, ()), *calls})
        self.typing_names = typing_names(tree) if "typing" in text else TypingNames(frozenset())
        self._uses: dict[int, StmtUses] = {}
        self._namespace: dict[int, bool] = {}
        self._access: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._locals: dict[int, frozenset[str]] = {}
        self._nested: dict[int, list] = {}
        self._literal_calls: dict[int, list[tuple[str, str]]] = {}
        self._constant_calls: dict[int, list[tuple[str, str]]] = {}
        self._dotted_reads: dict[int, DottedReads] = {}
        self._patch: dict[int, tuple] = {}
        self._chains: dict[tuple[int, str], frozenset[str]] = {}
        self._string_exprs: dict[int, list[ast.expr]] = {}
        self._load_chains: dict[tuple[int, str], frozenset[str]] = {}
        self._load_calls: dict[int, frozenset[str]] = {}
        self._subclasses: dict[int, dict[str, set[str]]] = {}
        self._facts: dict[tuple, Any] = {}

    def nested_imports(self, st: TopStmt) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
        """(import, directly in a class body) for every import a function or class body
        inside ``st`` holds (see ``_nested_imports``); cached, and only walked for statements
        whose text says ``import``."""
        hit = self._nested.get(st.index)
        if hit is None:
            hit = list(_nested_imports(st.node)) if "import" in self.stmt_text(st) else []
            self._nested[st.index] = hit
        return hit

    def identifiers(self, st: TopStmt) -> frozenset[str]:
        """Every word of the statement's text that could be a name (code, strings and comments
        alike): what a name the generated file adds must not be (engine.deferred); cached, as
        each closure that holds the statement asks."""
        key = ("identifiers", st.index)
        words = self._facts.get(key)
        if words is None:
            words = self._facts[key] = frozenset(_IDENTIFIER.findall(self.stmt_text(st)))
        return words

    def mentions_outside_imports(self, st: TopStmt, name: str) -> bool:
        """Whether ``name`` occurs as a word in ``st`` other than on the lines of the imports
        nested in it (code, strings and annotations alike: a cautious test of use)."""
        key = ("words outside imports", st.index)
        words = self._facts.get(key)
        if words is None:
            skip = {ln for imp, _, _ in self.nested_imports(st)
                    for ln in range(imp.lineno, (imp.end_lineno or imp.lineno) + 1)}
            words = self._facts[key] = frozenset(_WORD.findall("".join(
                self.lines[ln - 1] for ln in range(st.line, st.end_line + 1)
                if ln not in skip)))
        return name in words

    def patch_shape(self, st: TopStmt) -> tuple[frozenset[str] | None, tuple | None,
                                                 frozenset[str] | None]:
        """(roots of its attribute stores, (function, name arguments) of a bare call, roots of
        its item stores or method calls) of a statement that binds no name; for a definition,
        the roots of its decorator methods as the third; for a ``for``/``if``/``with``/``try``,
        the names it hands to ``setattr``/``delattr`` as the first and the roots of the method
        calls inside it as the third; for any other statement that binds
        names, the names it hands to ``setattr``/``delattr`` as the first (engine.patches);
        cached."""
        hit = self._patch.get(st.index)
        if hit is None:
            if st.kind in ("class", "function"):
                hit = (None, None, decorator_method_roots(st.node))
            else:
                text = self.stmt_text(st)
                named = setattr_roots(st.node) if st.kind != "import" and (
                    "setattr" in text or "delattr" in text) else None
                if st.kind == "compound":
                    # a loop of setattr calls binds its variable; one of registrations too
                    hit = (named, None, nested_method_call_roots(st.node))
                elif st.binds or st.kind not in ("assign", "other"):
                    hit = (named, None, None)
                else:
                    stores = attribute_store_roots(st.node)
                    roots = stores | named if stores and named else stores or named
                    hit = (roots, call_arguments(st.node), in_place_roots(st.node))
            self._patch[st.index] = hit
        return hit

    def chains(self, st: TopStmt, root: str) -> frozenset[str]:
        """``all_chains(st.node, root)``, cached: the resolver asks for every block that
        reaches the statement."""
        hit = self._chains.get((st.index, root))
        if hit is None:
            hit = self._chains[(st.index, root)] = frozenset(
                all_chains(st.node, root, self.string_exprs(st)))
        return hit

    def string_exprs(self, st: TopStmt) -> list[ast.expr]:
        """The statement's string annotations, parsed (``string_annotation_exprs``), cached:
        ``chains`` asks for each root."""
        hit = self._string_exprs.get(st.index)
        if hit is None:
            hit = self._string_exprs[st.index] = list(_parsed_strings(
                _annotations(st.node, self.stmt_text(st), self.typing_names)))
        return hit

    def load_chains(self, st: TopStmt, root: str) -> frozenset[str]:
        """The chains of ``chains(st, root)`` that the statement reads while its module
        executes (``load_time_chains``), cached."""
        hit = self._load_chains.get((st.index, root))
        if hit is None:
            hit = self._load_chains[(st.index, root)] = frozenset(
                load_time_chains(st.node, root, "annotations" in self.future))
        return hit

    def literals(self, st: TopStmt) -> frozenset[str]:
        """``modulefiles.literals`` of the statement (kept per node there)."""
        return literals(st.node)

    def literal_calls(self, st: TopStmt, decorators_only: bool = False
                      ) -> list[tuple[str, str]]:
        """(callee, string literal) of the calls in ``st`` whose first argument is a string
        literal (``literal_calls``); of its decorators only for a ``def``/``class`` with
        ``decorators_only``; cached, and only walked for statements with a quote."""
        key = -1 - st.index if decorators_only else st.index
        hit = self._literal_calls.get(key)
        if hit is None:
            hit = []
            if "'" in self.stmt_text(st) or '"' in self.stmt_text(st):
                nodes = getattr(st.node, "decorator_list", []) if decorators_only else [st.node]
                hit = [(callee, lit) for node in nodes for callee, lit in literal_calls(node)]
            self._literal_calls[key] = hit
        return hit

    def constant_calls(self, st: TopStmt, decorators_only: bool = False
                       ) -> list[tuple[str, str]]:
        """(callee, name) of the calls in ``st`` whose first argument is a name
        (``constant_calls``), as ``literal_calls``; cached."""
        key = -1 - st.index if decorators_only else st.index
        hit = self._constant_calls.get(key)
        if hit is None:
            nodes = getattr(st.node, "decorator_list", []) if decorators_only else [st.node]
            hit = self._constant_calls[key] = [
                (callee, name) for node in nodes for callee, name in constant_calls(node)]
        return hit

    def reads_bare(self, st: TopStmt, dotted: str, resolved: set[str]) -> bool:
        """``reads_bare`` of the statement, its walk cached: a module used as a value is asked
        about once per chain (pyro's and escnn's classes read dozens)."""
        walked = self._dotted_reads.get(st.index)
        if walked is None:
            walked = self._dotted_reads[st.index] = dotted_reads(st.node)
        return reads_bare(st.node, dotted, resolved, walked)

    def load_calls(self, st: TopStmt) -> frozenset[str]:
        """``reach.load_time_calls`` of the statement, worked out once: every block whose
        closure has the statement asks (timm's 779 blocks asked 35,000 times)."""
        hit = self._load_calls.get(st.index)
        if hit is None:
            hit = self._load_calls[st.index] = frozenset(load_time_calls(st.node))
        return hit

    def stmt_fact(self, st: TopStmt, fact: Callable[..., T], *args: Hashable) -> T:
        """``fact(st.node, *args)``, worked out once per statement: what every block whose
        closure holds the statement would work out again (gptqmodel's 243 blocks each hold
        most of its 140,000 lines). The result is shared: read it, never change it."""
        key = (st.index, fact, args)
        try:
            return self._facts[key]
        except KeyError:  # (not through ``memo``: this runs per statement per block)
            hit = self._facts[key] = fact(st.node, *args)
            return hit

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, worked out once per module source and ``key`` (as ``stmt_fact``'s)."""
        try:
            return self._facts[key]
        except KeyError:
            hit = self._facts[key] = compute()
            return hit

    def stmt_text(self, st: TopStmt) -> str:
        return "".join(self.lines[st.line - 1 : st.end_line])

    @cached_property
    def docstring_index(self) -> int | None:
        if self.stmts and isinstance(self.stmts[0].node, ast.Expr) and isinstance(
                getattr(self.stmts[0].node, "value", None), ast.Constant):
            return 0
        return None

    def access(self, st: TopStmt) -> tuple[frozenset[str], frozenset[str]]:
        """(names read as containers, names filled) by the statement; see container_access."""
        hit = self._access.get(st.index)
        if hit is None:
            hit = self._access[st.index] = container_access(st.node)
        return hit

    def local_names(self, st: TopStmt) -> frozenset[str]:
        """Names bound inside the statement's own scopes (function locals and parameters,
        class-body names): a use rewritten to one of them would be captured."""
        hit = self._locals.get(st.index)
        if hit is None:
            out: set[str] = set()
            stack = list(scopes.statement_table(self.stmt_text(st)).get_children())
            while stack:
                tab = stack.pop()
                stack.extend(tab.get_children())
                for sym in tab.get_symbols():
                    if tab.get_type() == "class":
                        if sym.is_assigned() or sym.is_imported():
                            out.add(sym.get_name())
                    elif scopes.is_local(tab, sym):
                        out.add(sym.get_name())
            hit = self._locals[st.index] = frozenset(out)
        return hit

    def reads_namespace(self, st: TopStmt) -> bool:
        """Whether the statement reads the module's namespace by name (``reads_globals``, where
        the module does not bind ``globals`` itself); cached."""
        hit = self._namespace.get(st.index)
        if hit is None:
            # the text first: the AST walk costs 0.7 s over all of timm's statements
            hit = self._namespace[st.index] = "globals" not in self.binders and \
                "globals" in self.stmt_text(st) and reads_globals(st.node)
        return hit

    def subclasses_listed(self, st: TopStmt) -> dict[str, set[str]]:
        """For each class of this module whose ``__subclasses__()`` the statement reads by its
        name, the classes this module derives from it, directly or not (einops' backends).
        Subclasses defined in other modules are not followed: upstream lists them only once
        something has imported their module; cached."""
        if "__subclasses__" not in self.text:
            return {}
        hit = self._subclasses.get(st.index)
        if hit is None:
            hit = self._subclasses[st.index] = self._subclasses_listed(st)
        return hit

    def _subclasses_listed(self, st: TopStmt) -> dict[str, set[str]]:
        if "__subclasses__" not in self.stmt_text(st):
            return {}
        read = {a.value.id for a in treewalk.walk(st.node)
                if isinstance(a, ast.Attribute) and a.attr == "__subclasses__"
                and isinstance(a.value, ast.Name)}
        classes = {n: i for n, ix in self.binders.items() for i in ix
                   if self.stmts[i].kind == "class"}
        out: dict[str, set[str]] = {}
        for base in sorted(read & set(classes)):
            found, todo = set(), [base]
            while todo:
                parent = todo.pop()
                for name, i in classes.items():
                    if name not in found and any(isinstance(b, ast.Name) and b.id == parent
                                                 for b in self.stmts[i].node.bases):
                        found.add(name)
                        todo.append(name)
            if found:
                out[base] = found
        return out

    def uses(self, st: TopStmt) -> StmtUses:
        hit = self._uses.get(st.index)
        if hit is None:
            hit = self._uses[st.index] = compute_uses(self.stmt_text(st), st.node,
                                                      "annotations" in self.future,
                                                      self.typing_names)
            if "__name__" in hit.load | hit.lazy:
                # ``@pyro.settings.register("module_local_params", __name__,
                # "_MODULE_LOCAL_PARAMS")``: a call given the module's name with names of its
                # definitions, which it may look up through the module at once (pyro's does,
                # to list every setting's value in its docstring)
                into = hit.load if "__name__" in hit.load else hit.lazy
                into |= named_with_module(st.node) & set(self.binders) - st.binds - hit.load
            listed = self.subclasses_listed(st)
            if listed:
                # ``AbstractBackend.__subclasses__()`` (einops' ``get_backend``) returns the
                # module's subclasses nothing names: the statement reads them all
                for base, subs in listed.items():
                    into = hit.lazy if base in hit.lazy else hit.load
                    into |= subs - st.binds - hit.load
            if "eval" not in self.binders and "eval(" in self.stmt_text(st) and \
                    evals_computed_name(st.node):
                # ``eval(name)`` of a name the module computes (tensordict's
                # ``{c.lower(): eval(c) for c in (*continuous.__all__, *discrete.__all__)}``,
                # the classes its ``__init__`` imports; LAION-CLAP's ``eval(audio_cfg.
                # model_name)``, its PANN classes): any name the module binds, ``from``
                # imports included; not a module a plain ``import`` binds (torchquantum
                # evaluates the numbers of a file, beside ``import torchquantum as tq``)
                lazy = "eval" in hit.lazy
                (hit.lazy if lazy else hit.load).update(self._looked_up(
                    st, lazy, lambda ix: not all(isinstance(self.stmts[i].node, ast.Import)
                                                 for i in ix)) - hit.load)
            if self.reads_namespace(st):
                # ``globals().get(identifier)`` (asteroid's ``norms.get("gLN")``) can return
                # any module-level definition: the statement reads them all (what the module
                # only imports is left to the names that read it). As the module runs, only
                # those bound above it: unsloth's ``exec(source, globals())`` at line 4956,
                # taken to read the whole module, made a cycle with a patch below that reads
                # what the ``exec`` binds, which went out above it
                lazy = "globals" in hit.lazy
                (hit.lazy if lazy else hit.load).update(self._looked_up(
                    st, lazy, lambda ix: any(self.stmts[i].kind != "import" for i in ix))
                    - hit.load)
        return hit

    def _looked_up(self, st: TopStmt, lazy: bool, keep) -> set[str]:
        """The names of this module a statement that looks them up by a name known only as it
        runs (``eval``, ``globals()``) can reach: those whose binders ``keep`` accepts, and
        as the module runs (not ``lazy``), only those bound above the statement."""
        return {n for n, ix in self.binders.items()
                if keep(ix) and (lazy or min(ix) < st.index)} - st.binds


def named_with_module(node: ast.stmt) -> set[str]:
    """The names that strings passed beside ``__name__`` to a call in the statement start
    with: ``"_GAIN"``, and ``Binomial`` of ``"Binomial.approx_sample_thresh"``."""
    out: set[str] = set()
    for call in treewalk.walk(node):
        if not isinstance(call, ast.Call):
            continue
        args = [*call.args, *(k.value for k in call.keywords)]
        if any(isinstance(a, ast.Name) and a.id == "__name__" for a in args):
            out |= {a.value.split(".")[0] for a in args if isinstance(a, ast.Constant)
                    and isinstance(a.value, str)
                    and is_dotted_name(a.value)}
    return out


def evals_computed_name(node: ast.stmt) -> bool:
    """Whether the statement calls ``eval`` on something other than a literal, with no
    namespace of its own: it evaluates in the module's namespace, by a name known only as
    it runs."""
    return any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
               and sub.func.id == "eval" and len(sub.args) == 1 and not sub.keywords
               and not isinstance(sub.args[0], ast.Constant) for sub in treewalk.walk(node))


_GLOBALS_WRITES = frozenset({"update", "setdefault", "pop", "clear", "__setitem__",
                             "__delitem__"})


def reads_globals(node: ast.stmt) -> bool:
    """Whether a statement reads its module's namespace by name through ``globals()``
    (``globals().get(name)``, ``globals()[name]``, ``globals().items()``, ``eval(s, globals())``),
    as opposed to only storing into it (``globals()[name] = fn``, ``globals().update(...)``)."""
    parents: dict[int, ast.AST] = {}
    calls: list[ast.Call] = []
    for sub in treewalk.walk(node):
        for child in treewalk.children(sub):
            parents[id(child)] = sub
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                sub.func.id == "globals" and not sub.args and not sub.keywords:
            calls.append(sub)
    for call in calls:
        parent = parents.get(id(call))
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)):
            continue
        if isinstance(parent, ast.Attribute) and parent.attr in _GLOBALS_WRITES:
            continue
        return True
    return False


def compute_uses(text: str, node: ast.stmt, lazy_annotations: bool = False,
                 typing: TypingNames = NO_MODULE) -> StmtUses:
    """What a statement reads while its module executes (``load``) and only later
    (``lazy``). Under ``from __future__ import annotations`` (``lazy_annotations``) an
    annotation is never evaluated: a name read only there is lazy. escnn's ``def irrep(self,
    *id) -> escnn.group.IrreducibleRepresentation`` made its classes load-time dependencies of
    each other, and the cycle this faked put ``class DoubleGroup(DirectProductGroup)`` above
    its base."""
    load, lazy, assigned_global = _load_and_lazy(text, node)
    annotations = _annotations(node, text, typing)
    if lazy_annotations and annotations:
        in_annotations = {n.id for a in annotations for n in treewalk.walk(a)
                          if isinstance(n, ast.Name)}
        if in_annotations & load:
            moved = (in_annotations & load) - _without_annotations(text, node)
            load -= moved
            lazy |= moved
    strings: set[str] = set()
    for expr in _parsed_strings(annotations):
        strings |= {n.id for n in treewalk.walk(expr) if isinstance(n, ast.Name)}
    own = reads_after_own_binding(node) & load if _kind(node) == "compound" else frozenset()
    return StmtUses(load, lazy - load, assigned_global, strings, own)


_NO_ANNOTATIONS = "from __future__ import annotations\n"


def _without_annotations(text: str, node: ast.stmt) -> set[str]:
    """The load-time reads of the statement ``text`` (parsed: ``node``) were none of its
    annotations evaluated. Told ``from __future__ import annotations``, symtable visits no
    annotation (Python 3.10 to 3.13 alike), and the class-body reads ``_load_and_lazy`` adds
    leave out those in annotations. (It unparsed a copy without them, 4.2 of tensordict's
    27.5 s profiled for its first block.)"""
    in_annotations = {id(n) for a in _classes_and_annotations(node)[1] for n in treewalk.walk(a)}
    return _load_and_lazy(_NO_ANNOTATIONS + text, node, skip=in_annotations)[0]


def _load_and_lazy(text: str, node: ast.stmt, skip: Collection[int] = ()
                   ) -> tuple[set[str], set[str], set[str]]:
    """The names the statement reads as its module runs, those it reads only later (in
    functions), and those it assigns as the module's; ``skip``: ids of name nodes the
    class-body reads (``class_early_reads``) leave out."""
    load: set[str] = set()
    lazy: set[str] = set()
    assigned_global: set[str] = set()
    # (scope, whether it runs only later), outermost first; a stack, not a nested function
    # calling itself, whose reference cycle would keep the symbol tables for a full
    # garbage collection
    todo = [(scopes.statement_table(text), False)]
    while todo:
        tab, is_lazy = todo.pop()
        is_module = tab.get_type() == "module"
        for sym in tab.get_symbols():
            name = sym.get_name()
            if is_module:
                if sym.is_referenced():
                    (lazy if is_lazy else load).add(name)
            elif scopes.is_global(tab, sym):
                if sym.is_referenced():
                    (lazy if is_lazy else load).add(name)
                if sym.is_assigned():
                    assigned_global.add(name)
        todo += [(child, is_lazy or (child.get_type() == "function"
                                     and child.get_name() not in COMPREHENSIONS))
                 for child in tab.get_children()]
    if "__class__" in load | lazy and not any(
            isinstance(n, ast.Name) and n.id == "__class__" for n in treewalk.walk(node)):
        # CPython's compiler reads ``__class__`` for every function that names ``super``;
        # outside a class nothing binds it, and ``super(type(m), m)`` never reads it (orb's
        # ``load_forcefield_state_dict``): no module-level name to look for
        load.discard("__class__")
        lazy.discard("__class__")
    for cls, in_function in _classes_and_annotations(node)[0]:
        for n in class_early_reads(cls):
            if n.id not in assigned_global and id(n) not in skip:
                (lazy if in_function else load).add(n.id)
    return load, lazy, assigned_global


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _classes_and_annotations(node: ast.stmt) -> tuple[tuple[tuple[ast.ClassDef, bool], ...],
                                                       tuple[ast.expr, ...]]:
    """One walk of the statement ``node``: every class statement in it, with whether a
    function encloses it, and every annotation (of arguments, returns and annotated
    assignments). Both are statements or parts of a ``def``, never inside an expression (a
    lambda's arguments take no annotation), so the walk follows statement blocks only. The
    strings of typing's calls, which pyflakes reads as annotations too, are in expressions:
    ``_annotations`` adds them."""
    inner, annotations = _inner_classes_and_annotations(node)
    return (((node, False),) if isinstance(node, ast.ClassDef) else ()) + inner, annotations


@per_node
def _inner_classes_and_annotations(node: ast.stmt) -> tuple[
        tuple[tuple[ast.ClassDef, bool], ...], tuple[ast.expr, ...]]:
    """``_classes_and_annotations`` but ``node`` itself, which the answer kept for it must not
    hold (engine.nodecache); a statement's uses, its uses without annotations and whether
    its annotations need quoting each ask."""
    classes: list[tuple[ast.ClassDef, bool]] = []
    annotations: list[ast.expr] = []
    stack: list[tuple[ast.AST, bool]] = [(node, False)]
    while stack:
        n, in_function = stack.pop()
        if isinstance(n, ast.ClassDef):
            if n is not node:
                classes.append((n, in_function))
        elif isinstance(n, ast.AnnAssign):
            annotations.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            annotations += [arg.annotation for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                                       a.vararg, a.kwarg)
                            if arg is not None and arg.annotation is not None]
            if n.returns is not None:
                annotations.append(n.returns)
            in_function = True
        for block in _BLOCKS:  # handlers: except clauses; cases: match arms
            stack.extend((child, in_function) for child in getattr(n, block, ()))
    return tuple(classes), tuple(annotations)


def annotated(node: ast.stmt) -> bool:
    """Whether the statement has an annotation anywhere in it (of an argument, a return or an
    annotated assignment): one that ``rewrite_statement(quote=True)`` could quote."""
    return bool(_classes_and_annotations(node)[1])


def _annotations(node: ast.stmt, text: str | None = None,
                 typing: TypingNames = NO_MODULE) -> list[ast.expr]:
    """The annotations of ``_classes_and_annotations``, the strings of typing's calls
    (``typing_strings``) and those of its subscripts outside annotations
    (``typing_subscript_strings``); ``text``, the statement's text where the caller has it,
    spares the walks where no such call is named, or no string is written."""
    annotations = list(_classes_and_annotations(node)[1])
    if text is None or _TYPING_CALL_NAMES.search(text):
        annotations += typing_strings(node, typing)
    if typing.subscripted is not None and (text is None or
                                           _quoted_subscript(text, typing.subscripted)):
        annotations += typing_subscript_strings(node, typing)
    return annotations


def typing_subscript_strings(node: ast.AST, typing: TypingNames) -> list[ast.Constant]:
    """The string forward references in subscripts of typing's members outside annotations:
    a type alias ``Inputs = Union[List[str], "HFDataset"]`` (GPTQModel's
    ``CalibrationInputType``) names a type that pyflakes, and ``typing.get_type_hints``, look
    up in the module. (Those in annotations are the annotations'.)"""
    found: dict[int, ast.Constant] = {}
    for sub in treewalk.nodes(node):
        if isinstance(sub, ast.Subscript) and typing.is_member(sub.value):
            found.update((id(c), c) for c in annotation_strings(sub))
    return list(found.values())


# typing's calls whose arguments pyflakes reads as annotations (wherever the call is): the
# callee's last name -> (the positional arguments that are, as a slice; the keywords that are)
_TYPING_CALLS: dict[str, tuple[slice, tuple[str, ...]]] = {
    "TypeVar": (slice(1, None), ("bound", "default")),
    "ParamSpec": (slice(0), ("bound", "default")),
    "TypeVarTuple": (slice(0), ("bound", "default")),
    "NewType": (slice(1, None), ("tp",)),
    "assert_type": (slice(1, None), ()),
    "cast": (slice(1), ("typ",)),
}


def _quoted_subscript(text: str, subscripted: re.Pattern[str]) -> bool:
    """Whether a subscript of a typing member in ``text`` (``Union[int, "Model"]``) holds a
    quote between its brackets: a cheap test before the walk (a bracket inside a string may
    end the count early)."""
    for m in subscripted.finditer(text):
        depth = 1
        for c in _BRACKET_OR_QUOTE.finditer(text, m.end()):
            if c[0] == "[":
                depth += 1
            elif c[0] == "]":
                depth -= 1
                if not depth:
                    break
            else:
                return True
    return False


_BRACKET_OR_QUOTE = re.compile("[\\[\\]\"']")


_TYPING_CALL_NAMES = re.compile(
    r"\b(?:" + "|".join([*_TYPING_CALLS, "NamedTuple", "TypedDict"]) + r")\b")


def typing_strings(node: ast.AST, typing: TypingNames = NO_MODULE) -> list[ast.Constant]:
    """The string forward references in the arguments of typing's calls anywhere in ``node``
    (``TypeVar("T", bound="Model")``, ``cast("Model", x)``), which pyflakes reads as
    annotations: botorch's module-level ``TFullyBayesianSingleTaskGP`` names a class its module
    defines further down, tianshou's class body ``TypeVar(..., bound="np.ndarray |
    ActBatchProtocol")`` a protocol nothing else names."""
    return [c for sub in treewalk.nodes(node) if isinstance(sub, ast.Call)
            for c in typing_call_strings(sub, typing)]


def typing_call_strings(call: ast.Call, typing: TypingNames = NO_MODULE
                        ) -> list[ast.Constant]:
    """The string forward references among the arguments of one call, if it is typing's
    (``cast`` and ``assert_type`` written bare or after a name bound to typing: other packages
    have their own); ``NamedTuple("P", [("a", "T")])`` and
    ``TypedDict("P", {"a": "T"})`` name types too."""
    dotted = _dotted(call.func) or ""
    owner, _, callee = dotted.rpartition(".")
    exprs: list[ast.expr] = []
    if callee in ("assert_type", "cast") and owner and owner not in typing.modules:
        # torchtitan's ``spmd.assert_type(loss, {"dp": spmd.P})`` is spmd_types', GPTQModel's
        # ``tl.cast(tl.load(..., eviction_policy="evict_last"), ...)`` triton's: no types
        pass
    elif callee in _TYPING_CALLS:
        positional, keywords = _TYPING_CALLS[callee]
        exprs = [*call.args[positional], *(k.value for k in call.keywords if k.arg in keywords)]
    elif callee == "NamedTuple" and len(call.args) > 1 \
            and isinstance(call.args[1], (ast.Tuple, ast.List)):
        exprs = [t for e in call.args[1].elts if isinstance(e, (ast.Tuple, ast.List))
                 for t in e.elts[1:]]
    elif callee == "TypedDict" and len(call.args) > 1 and isinstance(call.args[1], ast.Dict):
        exprs = list(call.args[1].values)
    return [c for e in exprs for c in annotation_strings(e)]


def _parsed_strings(annotations: list[ast.expr]):
    """The parsed expressions of the string annotations (forward references) among these."""
    for ann in annotations:
        for c in annotation_strings(ann):
            try:
                yield ast.parse(c.value, mode="eval")
            except SyntaxError:
                continue


def class_early_reads(cls: ast.ClassDef) -> list[ast.Name]:
    """Reads in a class body of a name the class body binds, made before the class binds it
    (``ATTR = K`` then ``K = 100``): Python looks those up in the module's globals (skipping
    any enclosing function), so they are module-level uses that symtable reports as class
    locals. The first binding statement counts as "before" for the value of a plain
    assignment and for the decorators, defaults, annotations and bases of a
    ``def``/``class``; any other statement that binds conditionally (``if``, ``for``,
    ``try``) counts as bound."""
    first: dict[str, int] = {}
    for i, st in enumerate(cls.body):
        for name in _bound_names(st):
            first.setdefault(name, i)
    out: list[ast.Name] = []
    for i, st in enumerate(cls.body):
        simple = isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.FunctionDef,
                                 ast.AsyncFunctionDef, ast.ClassDef, ast.Expr, ast.Return))
        for n in _class_scope_loads(st):
            at = first.get(n.id)
            if at is not None and (i < at or (i == at and simple)):
                out.append(n)
    return out


def _class_scope_loads(node: ast.AST):
    """``Name`` loads a class-body statement evaluates in the class scope itself (not inside
    the bodies of its methods, lambdas, nested classes or comprehensions)."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load):
            yield node
        return
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        parts: list[ast.AST] = [*args.defaults, *[d for d in args.kw_defaults if d]]
        if not isinstance(node, ast.Lambda):
            # annotations too: ``def device(self) -> device`` reads the module's ``device``
            parts += node.decorator_list
            parts += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                             args.vararg, args.kwarg)
                      if a is not None and a.annotation is not None]
            if node.returns is not None:
                parts.append(node.returns)
    elif isinstance(node, ast.ClassDef):
        parts = [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        parts = [node.generators[0].iter]
    else:
        parts = list(treewalk.children(node))
    for p in parts:
        yield from _class_scope_loads(p)


def typing_names(tree: ast.Module) -> TypingNames:
    """The names a module binds to typing or typing_extensions, anywhere in it (its import
    statements, in the blocks of compound statements, functions and classes too)."""
    modules, members = set(), set()
    for n in _statements(tree.body):
        if isinstance(n, ast.Import):
            modules.update(a.asname or a.name for a in n.names if a.name in TYPING_MODULES)
        elif isinstance(n, ast.ImportFrom) and n.module in TYPING_MODULES and not n.level:
            members.update(a.asname or a.name for a in n.names if a.name != "*")
    return TypingNames(frozenset(modules), frozenset(members))


def _statements(stmts: list[ast.stmt]):
    """Every statement of ``stmts`` and of the blocks in them, without their expressions."""
    todo = list(stmts)
    while todo:
        st = todo.pop()
        yield st
        for block in _BLOCKS:
            for child in getattr(st, block, ()):
                todo.extend(child.body if isinstance(child, (ast.ExceptHandler,
                                                              ast.match_case)) else [child])


def string_annotation_exprs(node: ast.AST, typing: TypingNames = NO_MODULE):
    """The parsed expressions of the string annotations (forward references) in a statement
    of a module that binds ``typing``."""
    return _parsed_strings(_annotations(node, typing=typing))


def evaluates_annotations(node: ast.stmt) -> bool:
    """Whether the statement, or a function or class it defines once that runs, evaluates an
    annotation where its module has no ``from __future__ import annotations``: a parameter's
    or a return's, or a variable's in a module or class body (a local variable's never is)."""
    stack: list[tuple[ast.AST, bool]] = [(node, False)]
    while stack:
        n, in_function = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            if n.returns is not None or any(
                    x.annotation is not None for x in [*a.posonlyargs, *a.args, *a.kwonlyargs,
                                                       a.vararg, a.kwarg] if x is not None):
                return True
            in_function = True
        elif isinstance(n, ast.ClassDef):
            in_function = False
        elif isinstance(n, ast.AnnAssign) and not in_function:
            return True
        stack.extend((c, in_function) for c in treewalk.children(n))
    return False


def annotation_strings(ann: ast.expr):
    """String constants in an annotation that are forward references (not ``Literal`` values,
    nor the metadata of ``Annotated[str, Path(pattern=r"^[a-z]+$")]``, nor the shapes of
    jaxtyping's ``Float[Tensor, "batch dim"]``: toto's validation failed on the ``batch``
    pyflakes reads in ``"batch #variate time_steps"``)."""
    stack = [ann]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Subscript) and (_dotted(n.value) or "").endswith("Literal"):
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and n.slice.elts \
                and (_dotted(n.value) or "").rpartition(".")[2] == "Annotated":
            stack += [n.value, n.slice.elts[0]]  # (the type; what follows is metadata)
            continue
        shapes = shape_strings(n)
        if shapes:
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            stack += [n.value, *(e for e in elts if e not in shapes
                                 and not isinstance(e, ast.JoinedStr))]
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n
        stack.extend(treewalk.children(n))


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def all_chains(node: ast.stmt, root: str, strings: list[ast.expr] | None = None) -> set[str]:
    """Every dotted chain ``root.a.b...`` in the statement, each prefix included, so that the
    resolver can find the longest prefix that names a definition; ``strings``: its string
    annotations, parsed (``string_annotation_exprs`` where not given)."""
    out: set[str] = set()
    if strings is None:
        strings = list(string_annotation_exprs(node))
    for tree in (node, *strings):
        for sub in treewalk.nodes(tree):
            if isinstance(sub, ast.Attribute):
                d = _dotted(sub)
                if d and d.split(".", 1)[0] == root:
                    out.add(d)
    return out


def load_time_chains(node: ast.stmt, root: str, lazy_annotations: bool = False) -> set[str]:
    """The chains of ``all_chains`` read while the module executes (``reach.load_time_nodes``):
    not in the body of a function or lambda, nor in an annotation under ``from __future__
    import annotations``. torchquantum's ``class QuantumModule`` reads ``tq.QuantumDevice``
    in an argument's annotation as it is made, and ``tq.op_name_dict`` only in a method:
    taking every chain of ``tq`` as needed at load made the module's classes and its table
    of gates a cycle, broken in an order that put 60 gate classes above their base."""
    return {d for n in load_time_nodes(node, not lazy_annotations)
            if isinstance(n, ast.Attribute) and (d := _dotted(n))
            and d.split(".", 1)[0] == root}


def literal_calls(node: ast.AST):
    """(callee as written, its first argument) of every call in ``node`` whose callee is a
    name or an attribute chain and whose first argument is a string literal:
    ``pyro.settings.get("validate_poutine")`` (engine.imported_along)."""
    for sub in treewalk.nodes(node):
        if isinstance(sub, ast.Call) and sub.args and isinstance(sub.args[0], ast.Constant) \
                and isinstance(sub.args[0].value, str):
            callee = _dotted(sub.func)
            if callee is not None:
                yield callee, sub.args[0].value


def constant_calls(node: ast.AST):
    """(callee as written, the name) of every call in ``node`` whose first argument, or only
    keyword argument, is a name: ludwig's ``@register_preprocessor(BAG)`` and
    ``PreprocessingDataclassField(feature_type=BAG)``, where ``BAG = "bag"`` is a constant of
    ``ludwig.constants`` (engine.imported_along)."""
    for sub in treewalk.nodes(node):
        if not isinstance(sub, ast.Call):
            continue
        first = sub.args[0] if sub.args else (
            sub.keywords[0].value if len(sub.keywords) == 1 and sub.keywords[0].arg else None)
        if isinstance(first, ast.Name):
            callee = _dotted(sub.func)
            if callee is not None:
                yield callee, first.id


DottedReads = tuple[dict[str, list[int]], dict[int, list[str]]]


def dotted_reads(node: ast.stmt) -> DottedReads:
    """One walk of a statement for ``reads_bare``: (dotted text -> the ids of the names and
    attribute chains read with that text, node id -> the dotted texts of the attribute chains
    that hold the node: ``a.b.c`` holds ``a.b.c``, ``a.b`` and ``a``). A chain in a ``case``
    value pattern holds nothing: it must stay qualified (``case mod.HEAD:``, where a bare
    ``HEAD`` would capture), so its module is read as a value there."""
    reads: dict[str, list[int]] = {}
    holders: dict[int, list[str]] = {}
    patterns: set[int] = set()  # nodes inside value patterns (walked before their nodes)
    for sub in treewalk.nodes(node):
        if isinstance(sub, ast.MatchValue):
            patterns.update(id(n) for n in treewalk.walk(sub.value))
            continue
        if not isinstance(sub, (ast.Name, ast.Attribute)):
            continue
        d = _dotted(sub)
        if d is None:
            continue
        if isinstance(sub.ctx, ast.Load):
            reads.setdefault(d, []).append(id(sub))
        if isinstance(sub, ast.Attribute) and id(sub) not in patterns:
            inner: ast.expr = sub
            while isinstance(inner, ast.Attribute):
                holders.setdefault(id(inner), []).append(d)
                inner = inner.value
            holders.setdefault(id(inner), []).append(d)
    return reads, holders


def reads_bare(node: ast.stmt, dotted: str, resolved: set[str],
               walked: DottedReads | None = None) -> bool:
    """Whether the statement reads ``dotted`` (a name, or a chain such as ``litgpt.lora``)
    other than inside a chain that is or extends one in ``resolved`` (``getattr(vit, name)``
    beside ``vit.Backbone``): there the module itself is the value. ``walked``: the
    statement's ``dotted_reads``, when the caller keeps them."""
    reads, holders = walked if walked is not None else dotted_reads(node)
    ids = reads.get(dotted)
    if not ids:
        return False

    def covering(d: str) -> bool:
        return any(d == c or d.startswith(c + ".") for c in resolved)

    return any(not any(covering(h) for h in holders.get(i, ())) for i in ids)


REGISTRY_WRITES = frozenset({"add", "append", "extend", "insert", "update", "setdefault",
                             "__setitem__", "register"})
_CONTAINER_CALLS = frozenset({"dict", "set", "list", "OrderedDict", "defaultdict", "Counter"})


def is_container_binding(node: ast.stmt) -> bool:
    """``NAME = {}`` / ``set()`` / ``[]`` / ``OrderedDict()`` ...: a module-level container that
    decorators or other statements may fill (a registry)."""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp,
                          ast.ListComp)):
        return True
    if isinstance(value, ast.Call):
        name = _dotted(value.func) or ""
        return name.rsplit(".", 1)[-1] in _CONTAINER_CALLS
    return False


def holds_container(node: ast.stmt) -> bool:
    """A module-level container (``is_container_binding``), or a class that keeps one as a class
    attribute (``class Registry: _backends = {}``), which ``@Registry.register(...)`` fills."""
    if isinstance(node, ast.ClassDef):
        return any(is_container_binding(st) for st in node.body)
    return is_container_binding(node)


@functools.lru_cache(maxsize=4096)
def filling_methods(cls: ast.ClassDef) -> frozenset[str]:
    """The methods of a class that store into it (``cls.table[k] = v``, ``self.table.update(
    ...)``, ``Cls.table.setdefault(...)``), in their own body or a function nested there (the
    decorator a ``register`` classmethod returns)."""
    out = set()
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                container_access(st)[1] & {"cls", "self", cls.name}:
            out.add(st.name)
    return frozenset(out)


def registered_values(node: ast.stmt) -> frozenset[str]:
    """Names a registering statement only *stores*, as opposed to the key it registers under:
    the keyword arguments of a decorator call (``@R.register(NATIVE, constraints=[_check])``),
    the right side of ``R[key] = fn`` and the arguments after a string key in a call statement
    (``register("swiglu", _swiglu, fused_fn=_swiglu_fused)``), also each under an ``if``
    (graphgym's ``if cfg is not None: register_act('relu', relu)``, whose test is no value). A
    name that is also part of the key is not one."""
    def names(exprs) -> set[str]:
        return {n.id for e in exprs for n in treewalk.walk(e) if isinstance(n, ast.Name)}

    if isinstance(node, ast.If):
        inner = set().union(*(registered_values(s) for s in [*node.body, *node.orelse]))
        return frozenset(inner - names([node.test]))

    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        calls = [d for d in node.decorator_list if isinstance(d, ast.Call)]
        stored = names(k.value for c in calls for k in c.keywords)
        keyed = names(e for d in node.decorator_list if not isinstance(d, ast.Call) for e in [d])
        keyed |= names(e for c in calls for e in (c.func, *c.args))
        return frozenset(stored - keyed)
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Subscript) for t in node.targets):
        return frozenset(names([node.value]) - names(node.targets))
    call = node.value if isinstance(node, ast.Expr) else None
    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant) \
            and isinstance(call.args[0].value, str):
        # deepspeed's ``register_expert_activation("swiglu", _swiglu, fused_fn=...)``: under
        # a string key, what follows it is stored
        stored = names([*call.args[1:], *(k.value for k in call.keywords)])
        return frozenset(stored - names([call.func]))
    return frozenset()


def container_access(node: ast.stmt) -> tuple[frozenset[str], frozenset[str]]:
    """The names a statement reads as containers and the names it fills (``name[k] = v``,
    ``del name[k]``, ``name.add(...)``, ``name.update(...)``, ``name |= ...``, and the same
    through attributes: ``name.table[k] = v``, ``name.table.update(...)``), in one pass. A use
    through attributes also counts for each dotted chain it goes through (``register.
    layer_dict[key]`` reads ``register`` and ``register.layer_dict``): a registry of another
    module read through that module. Syntactic, not scope-aware: a heuristic for registries,
    said so where it is used."""
    parents: dict[ast.AST, ast.AST] = {}
    names: list[ast.Name] = []
    for sub in treewalk.nodes(node):
        for child in treewalk.children(sub):
            parents[child] = sub
        if isinstance(sub, ast.Name):
            names.append(sub)
    reads: set[str] = set()
    writes: set[str] = set()
    for sub in names:
        parent = parents.get(sub)
        if isinstance(sub.ctx, ast.Store):
            if isinstance(parent, ast.AugAssign):
                writes.add(sub.id)
            continue
        if isinstance(sub.ctx, ast.Del):
            continue
        holder: ast.expr = sub  # the attribute chain ``name.a.b`` that starts at ``name``
        chain = [sub.id]
        while isinstance(parent, ast.Attribute) and parent.value is holder and \
                parent.attr not in REGISTRY_WRITES:
            holder, parent = parent, parents.get(parent)
            chain.append(f"{chain[-1]}.{holder.attr}")  # type: ignore[attr-defined]
        item_store = isinstance(parent, ast.Subscript) and parent.value is holder and \
            isinstance(parent.ctx, (ast.Store, ast.Del))
        mutator = isinstance(parent, ast.Attribute) and parent.value is holder and \
            parent.attr in REGISTRY_WRITES and isinstance(parents.get(parent), ast.Call) and \
            parents[parent].func is parent  # type: ignore[attr-defined]
        (writes if item_store or mutator else reads).update(chain)
    return frozenset(reads), frozenset(writes)


def _nested_imports(stmt: ast.stmt):
    """(import statement, directly in a class body, the function or class whose own scope
    holds it) for every import below ``stmt`` that a function or class body holds;
    module-level ones (also inside a kept ``try``/``if``) are the module's own imports and
    handled elsewhere."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        yield from _imports_below(stmt, "function", stmt)
    elif isinstance(stmt, ast.ClassDef):
        yield from _imports_below(stmt, "class", stmt)
    else:
        yield from _imports_below(stmt, None, None)


def _imports_below(node: ast.AST, scope: str | None, holder: ast.AST | None):
    """``_nested_imports`` below ``node``, whose innermost scope is ``scope`` (``"class"``,
    ``"function"`` or None for the module), held by ``holder``."""
    for child in treewalk.children(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            if scope is not None:
                yield child, scope == "class", holder
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports_below(child, "function", child)
        elif isinstance(child, ast.ClassDef):
            yield from _imports_below(child, "class" if scope != "function" else "function",
                                      child)
        else:
            yield from _imports_below(child, scope, holder)


def _kind(node: ast.stmt) -> str:
    if isinstance(node, ast.ClassDef):
        return "class"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "function"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return "assign"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    if is_main_guard(node) and not node.orelse:  # type: ignore[attr-defined]
        return "script"  # runs only as a script: binds nothing, changes nothing on import
    if isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.While)) or \
            type(node).__name__ == "TryStar":
        return "compound"
    return "other"


def demangled(name: str, node: ast.stmt) -> tuple[str, str] | None:
    """(the name as written, its class) for a private name that Python mangled inside a class
    of ``node``: ``__MSG`` in a method of ``T5Model`` is looked up as ``_T5Model__MSG``, which is
    the name symtable reports."""
    if not name.startswith("_") or "__" not in name[1:]:
        return None
    for sub in treewalk.walk(node):
        if isinstance(sub, ast.ClassDef) and sub.name.strip("_"):
            prefix = "_" + sub.name.lstrip("_")
            if name.startswith(prefix + "__") and len(name) > len(prefix) + 2:
                return name[len(prefix):], sub.name
    return None


def first_read_line(node: ast.stmt, name: str) -> int | None:
    """The first line of ``node`` that reads ``name`` (a dotted ``apkg.Made`` as that chain,
    else by its first part), for a report of where an unresolved name occurs; None where it is
    read only inside a string annotation."""
    chains = [sub.lineno for sub in treewalk.nodes(node)
              if isinstance(sub, ast.Attribute) and _dotted(sub) == name] if "." in name else []
    if chains:
        return min(chains)
    root = name.partition(".")[0]
    names = [sub.lineno for sub in treewalk.nodes(node)
             if isinstance(sub, ast.Name) and sub.id == root]
    return min(names) if names else None


def bound_only_by_imports(node: ast.stmt, name: str) -> bool:
    """Whether every binding of ``name`` in a module-level statement is an import (``try: ...
    except ImportError: import os``), as opposed to an assignment, a def or a loop target."""
    return all(by_import for n, by_import in _bindings(node) if n == name)


# a word, as ``\b...\b`` delimits one: ``name`` occurs as a word where it is one of these
_WORD = re.compile(r"\w+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def rebound_beside(scope: ast.AST, imp: ast.Import | ast.ImportFrom, name: str) -> bool:
    """Whether the function or class body ``scope``, which holds the import ``imp`` (see
    ``ModuleSource.nested_imports``), binds ``name`` otherwise too: by an assignment, a
    parameter, a def, ``except ... as``, a ``global``, or an import of something else. ``if
    fast: from .fast import impl`` beside ``else: impl = slow``: the import, dropped because
    its definition is inlined as ``impl``, would leave the local ``impl`` unbound where
    upstream's import bound it."""
    own = _import_binding(imp, name)
    return any(sub is None or (sub is not imp and bound != own)
               for sub, bound in _scope_bindings(scope).get(name, ()))


@per_node
def _scope_bindings(scope: ast.AST) -> dict[str, list[tuple[ast.AST | None, tuple | None]]]:
    """Each name the body ``scope`` binds in its own scope -> (the import, what it binds) for
    each import binding it, (None, None) for each other binding (``_bound_here``)."""
    out: dict[str, list[tuple[ast.AST | None, tuple | None]]] = {}
    skip: set[int] = set()
    for sub in _own_scope(scope):
        if id(sub) in skip:
            continue
        if isinstance(sub, ast.comprehension):  # its targets are the comprehension's own
            skip.update(id(n) for n in treewalk.walk(sub.target))
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for a in sub.names:
                name = a.asname or (a.name.split(".")[0] if isinstance(sub, ast.Import)
                                    else a.name)
                out.setdefault(name, []).append((sub, _import_binding(sub, name)))
        else:
            for name in _bound_here(sub):
                out.setdefault(name, []).append((None, None))
    return out


def _bound_here(node: ast.AST) -> list[str]:
    """The names ``node`` itself binds in the scope it is in (not by an import): an
    assignment or ``del`` target, a parameter, a def or class, ``except ... as``, ``global``,
    a match capture."""
    if isinstance(node, ast.Name):
        return [node.id] if isinstance(node.ctx, (ast.Store, ast.Del)) else []
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest is not None else []
    if isinstance(node, (ast.arg, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                         ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [n for n in (getattr(node, "arg", None), getattr(node, "name", None))
                if n is not None]
    return []


def _import_binding(imp: ast.Import | ast.ImportFrom, name: str) -> tuple | None:
    """What the import binds to ``name``: (level, module, imported name), or None."""
    for a in imp.names:
        if isinstance(imp, ast.Import):
            if (a.asname or a.name.split(".")[0]) == name:
                return (0, a.name if a.asname else a.name.split(".")[0], None)
        elif (a.asname or a.name) == name:
            return (imp.level, imp.module, a.name)
    return None


# what may be a ``global`` statement: at the start of a line or after ``:`` or ``;``
# (a pre-filter: not ``global_pool``, nor most of a docstring's "global average pooling")
_GLOBAL_STATEMENT = re.compile(r"(?:^|[:;])[ \t]*global[ \t]+[A-Za-z_]", re.MULTILINE)


def _global_rebinding_calls(tree: ast.Module) -> tuple[dict[int, set[str]],
                                                        dict[str, set[int]]]:
    """(module-level function -> the names of the module it rebinds through ``global``,
    name -> the module-level statements that call such a function while the module executes).
    megatron's ``jit.py`` binds ``jit_fuser = torch.jit.script``, and its ``enable_jit_fuser()``
    below, through ``global jit_fuser``, makes it ``torch.compile``: what the module's users
    decorate with. Such a call binds those names as much as an assignment does."""
    writers: dict[int, set[str]] = {}
    by_name: dict[str, set[str]] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            declared: set[str] = set()
            written: set[str] = set()
            for sub in _own_scope(node):
                if isinstance(sub, ast.Global):
                    declared.update(sub.names)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    written.add(sub.id)
            stored = written & declared
            if stored:
                writers[i] = by_name[node.name] = stored
    calls: dict[str, set[int]] = {}
    if not writers:
        return writers, calls
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
                isinstance(node, ast.If) and "__name__" in {
                    n.id for n in treewalk.walk(node.test) if isinstance(n, ast.Name)}):
            continue  # (a definition's decorators could call one too; none seen)
        for sub in _own_scope(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                for n in by_name.get(sub.func.id, ()):
                    calls.setdefault(n, set()).add(i)
    return writers, calls


def _own_scope(node: ast.AST):
    """The nodes under ``node`` that run in its own scope: not inside a nested function,
    lambda or class body (their decorators, defaults and bases are left out too)."""
    stack = list(treewalk.children(node))
    while stack:
        sub = stack.pop()
        yield sub
        if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                ast.ClassDef)):
            stack.extend(treewalk.children(sub))


def _bound_names(node: ast.stmt) -> list[str]:
    """Names a module-level statement binds in the module namespace (not inside defs)."""
    return list(dict.fromkeys(n for n, _ in _bindings(node)))


def _bindings(node: ast.stmt) -> list[tuple[str, bool]]:
    """(name, bound by an import) for every module-namespace binding of a statement."""
    out: list[tuple[str, bool]] = []
    _statement_bindings(node, out)
    return out


def _target_bindings(t: ast.AST, out: list[tuple[str, bool]]) -> None:
    for n in treewalk.walk(t):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.append((n.id, False))


def _statement_bindings(st: ast.stmt, out: list[tuple[str, bool]]) -> None:
    """``_bindings`` of ``st``, appended to ``out``. (Module-level, not nested in
    ``_bindings``: a nested function that calls itself is a reference cycle, freed only by
    a full garbage collection; every closure asks for thousands of statements.)"""
    if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        out.append((st.name, False))
    elif isinstance(st, ast.Import):
        out.extend((a.asname or a.name.split(".")[0], True) for a in st.names)
    elif isinstance(st, ast.ImportFrom):
        out.extend((a.asname or a.name, True) for a in st.names if a.name != "*")
    elif isinstance(st, ast.Assign):
        for t in st.targets:
            _target_bindings(t, out)
    elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        _target_bindings(st.target, out)
    elif isinstance(st, (ast.For, ast.AsyncFor)):
        _target_bindings(st.target, out)
        for s in st.body + st.orelse:
            _statement_bindings(s, out)
    elif isinstance(st, (ast.With, ast.AsyncWith)):
        for item in st.items:
            if item.optional_vars is not None:
                _target_bindings(item.optional_vars, out)
        for s in st.body:
            _statement_bindings(s, out)
    elif isinstance(st, (ast.If, ast.While)):
        for s in st.orelse if is_main_guard(st) else st.body + st.orelse:
            _statement_bindings(s, out)
    elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
        for s in st.body + st.orelse + st.finalbody:  # type: ignore[attr-defined]
            _statement_bindings(s, out)
        for h in st.handlers:  # type: ignore[attr-defined]
            if h.name:
                out.append((h.name, False))
            for s in h.body:
                _statement_bindings(s, out)
    elif isinstance(st, ast.Expr):
        # the walrus binds in the module scope
        for n in treewalk.walk(st):
            if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                out.append((n.target.id, False))
