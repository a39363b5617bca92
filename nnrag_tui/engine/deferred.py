"""Module-level code of a module upstream imports only inside functions: run where upstream
runs it, at the first such import, not when the file is imported.

ultralytics' ``nn/text_model.py`` has ``try: import clip except ImportError:
checks.check_requirements("git+https://github.com/ultralytics/CLIP.git"); import clip``, and
``nn/tasks.py`` imports that module only inside the functions that build a text model. Upstream,
importing ``tasks`` runs none of it. A file with that ``try`` at its top level attempts a pip
install as it is imported, and without clip fails to import where upstream's module does not.
cogdl's ``operators/spmm.py`` compiles a C++ extension (``load(name="spmm_cpu", ...)``) at the
first call of the function that imports it; at the top level, the file compiles it as it loads.
A module that upstream's import of the block's module runs anyway, through a package
``__init__`` that imports it under no ``try`` or ``if`` (solo's ``utils/backbones.py``), is
none of these: its code runs as the file is imported, as upstream's does
(``Closure.run_at_import``).

Such a module's code (its statements in the closure other than definitions, imports and
assignments that call nothing of the corpus and read no torch operator: the ``try``, ``if``,
``for``, ``with`` and expression statements the header's note on it lists, BigVGAN's
``anti_alias_activation_cuda = load.load()``, which builds a CUDA extension and fails without
one, and spikingjelly's ``_forward = torch.ops.sj_lif.forward.default``, which raises
AttributeError where what defines the operator upstream, a statement of the module before
it, has not run) goes, in upstream's order, into a function of its own that declares every
name that code binds ``global`` (a class or function defined there keeps its plain
``__qualname__``), runs it once and records that it did: ``_run_text_model()``. Each import
inside a function that imports that module calls it first, as upstream's import runs the
module. It is defined before
the module's first statement and before the first function with such an import, so that it is
there whenever one is called; the module's other statements stay where they were.

Where the module's other statements need the code as they run (whisper's ``triton_ops.py``
decorates its kernels with ``@triton.jit`` after ``try: import triton except ImportError:
raise RuntimeError(...)``), or run among it on what it touches too (``STEPS["save"] =
len(STEPS)`` after a loop filling ``STEPS``), the whole module goes into that function, in
upstream's order. Not at all, and the note keeps saying the code runs as the file loads:
  - a function cannot hold it (``import *``; ``x: int`` with no value cannot name a global.
    ``x: int = 0`` becomes ``x = 0`` there, a rewrite the header lists: a module's
    ``__annotations__``, which that fills, is no name of the file);
  - the module, or an import that runs it, is already inside another statement
    (engine.nesting's guards, engine.typing_only's ``if TYPE_CHECKING:``), or an import
    that reaches it runs at load time (in a class body).

The modules of engine.nesting's lazy groups (imported only inside functions, or by such
modules as they run, and needing a package that may be missing: deepspeed's triton kernels,
peft's ``lora/bnb.py``) each run whole in such a function. One that another of them imports
as it runs is called by that one's function where upstream's import is, so each module runs
when upstream's does and raises what upstream's import raises. Where one may be imported
again while it runs (allennlp's ``models/archival.py`` imports ``models/model.py`` as it
runs, and ``Model.load`` imports ``archival`` back, a function that may be called then), the
function marks its module as run before running it, as upstream puts a module in
``sys.modules`` first, so the import back gets it as far as it ran, and unmarks it where it
fails. Where one of a group's modules cannot be such a function, the group stays in its
``try`` (engine.nesting). A module of a group that another module imports as it loads, right
in a ``try`` that catches ImportError (PennyLane's ``allocation.py``: ``try: import jax; from
pennylane.capture import QpPrimitive``), is called there too: without the package it raises
there, and the fallback holds, as upstream's does.

A read through a module ``__getattr__`` that imports its module then (``capture.QpPrimitive``
in a method: engine.lazyattr) is a site as an import inside a function is: the call goes
right above the statement that reads it.
"""

from __future__ import annotations

import ast
import re
import symtable
import textwrap
from dataclasses import dataclass, field

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.closure import Closure, NodeId
from nnrag_tui.engine.lines import source_lines
from nnrag_tui.engine.modsource import ModuleSource
from nnrag_tui.engine.nesting import LazyGroup
from nnrag_tui.engine.parse import is_type_checking
from nnrag_tui.engine.rewrite import indented


@dataclass
class DeferredRun:
    module: tuple[str, str]
    nodes: list[NodeId]  # its code, in upstream's order
    sites: list[tuple[NodeId, int]]  # (statement, line) of each import in a function of it
    runner: str  # the function that runs it
    flag: str  # the global saying it ran
    names: list[str]  # the names it binds, as the file has them
    anchor: NodeId  # the statement it goes right above
    # the index in ``closure.notes`` of the header's note on the module (None: a new note)
    note: int | None
    relpath: str  # the module's path
    whole: bool = False  # all its statements, not only its code
    # (line, runner) of each module of its lazy group it imports at its top level, whose
    # runner it calls where it imports that module
    calls: list[tuple[int, str]] = field(default_factory=list)
    externals: list[str] = field(default_factory=list)  # imports that go at its start
    reentrant: bool = False  # a module it imports imports it back, as it runs
    importers: list[str] = field(default_factory=list)  # the runners that call it as they run
    starts: dict[NodeId, int] = field(default_factory=dict)  # its statements' first lines
    # its statements whose annotations of the names they assign go (``unannotated``)
    unannotated: set[NodeId] = field(default_factory=set)
    # the sites of ``sites`` that are no import inside a function: a module-level import in a
    # ``try`` that catches ImportError (engine.nesting's ``_caught_imports``)
    caught: list[tuple[NodeId, int]] = field(default_factory=list)

    def note_text(self, closure: Closure) -> str:
        """The header's note on the module, replacing the one that says its code runs as
        the file is imported."""
        ms = closure.modules[self.module]
        lines = ", ".join(f"{ms.stmts[n[1]].line}-{ms.stmts[n[1]].end_line}" for n in self.nodes)
        if self.importers:  # (a module of a lazy group, engine.nesting)
            how = (f"only {self._inside()} and by modules imported there, as they run" if
                   self.sites else "only by modules imported inside functions, as they run")
            return (f"{self.relpath} is imported upstream {how}, so it runs at the first "
                    f"such import; here its lines {lines} run in `{self.runner}()`, which "
                    f"{self._callers(closure)}")
        return (f"{self.relpath} is imported only {self._inside()} upstream "
                f"({self.where(closure)}), so its module-level code runs at "
                f"the first such import; here its lines {lines} run in `{self.runner}()`, "
                "which each of those imports calls first")

    def _callers(self, closure: Closure) -> str:
        """Who calls the function, for a module of a lazy group."""
        names = [f"`{r}()`" for r in self.importers]
        said = (f"{names[0]} calls" if len(names) == 1 else
                f"{', '.join(names[:-1])} and {names[-1]} call")
        said += " where upstream's import of it is"
        if self.sites:
            said = (f"the imports of it {self._inside()} call first "
                    f"({self.where(closure)}), and {said}")
        return said

    def _inside(self) -> str:
        """Where upstream imports it: in functions, or at the top level of a module in a
        ``try`` that catches ImportError (``caught``), or both."""
        caught = "in a `try` that catches ImportError"
        if not self.caught:
            return "inside functions"
        return caught if set(self.sites) <= set(self.caught) else \
            f"inside functions and {caught}"

    def where(self, closure: Closure) -> str:
        sites = sorted({(closure.entries[n[0]].facts.relpath, line) for n, line in self.sites})
        more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
        return f"{sites[0][0]}:{sites[0][1]}{more}"

    def statement_note(self, closure: Closure, node: NodeId | None = None) -> str:
        """The header's line on each of its statements (on ``node``)."""
        if self.importers:
            said = (f"indented, inside `{self.runner}()`, which {self._callers(closure)}, as "
                    "upstream runs it then")
        else:
            said = (f"indented, inside `{self.runner}()`, which the imports of its module "
                    f"{self._inside()} call first ({self.where(closure)}), as upstream runs "
                    "it then")
        if node in self.unannotated:
            said += ("; the annotations of the names it assigns dropped (`X: T = v` -> "
                     "`X = v`), as a function cannot annotate a name it declares global")
        return said

    def code(self, texts: dict[NodeId, str], separator, head: str = "") -> str:
        """The function, its flag and the code at column 0, from the statements' texts;
        ``head``: the imports that go at its start."""
        body = [head.rstrip() + "\n\n"] if head.strip() else []
        calls = sorted(self.calls)
        for prev, node in zip([None, *self.nodes], self.nodes):
            due = [runner for line, runner in calls if line < self.starts[node]]
            calls = [(line, runner) for line, runner in calls if line >= self.starts[node]]
            if prev is not None:
                body.append(separator(prev, node) if not due else "\n")
            if due:
                body.append("".join(f"{runner}()\n" for runner in due) + "\n")
            text = unannotated(texts[node]) if node in self.unannotated else texts[node]
            body.append(text.rstrip() + "\n")
        if calls:
            body.append("".join(f"{runner}()\n" for _, runner in calls))
        declared = "\n".join(textwrap.wrap(", ".join([self.flag, *self.names]), 90,
                                           initial_indent="global ",
                                           subsequent_indent="global ",
                                           break_on_hyphens=False))
        declared = re.sub(r",\n", "\n", declared)
        said = (f"{self.relpath}'s module-level code, run once: upstream runs it at the first "
                "import of that module.")
        if self.reentrant:
            said += (" Marked as run before it runs, so that an import of it that its own run "
                     "reaches gets it as far as it ran, as from upstream's import; unmarked "
                     "where it fails, to run again at the next import, as upstream's does.")
        doc = "\n    ".join(textwrap.wrap(  # (continuation lines: indented keeps them)
            said, 88, break_on_hyphens=False, break_long_words=False))
        code = "".join(body) + ("\n" if self.whole and not self.reentrant else "")
        if self.reentrant:
            inner = (f'"""{doc}"""\n{declared}\nif {self.flag}:\n    return\n'
                     f"{self.flag} = True\ntry:\n" + indented(code, "    ")
                     + f"except BaseException:\n    {self.flag} = False\n    raise\n")
        else:
            inner = (f'"""{doc}"""\n{declared}\nif {self.flag}:\n    return\n'
                     + code + f"{self.flag} = True\n")
        return (f"{self.flag} = False\n\n\ndef {self.runner}():\n" + indented(inner, "    "))


def deferred_runs(closure: Closure, inside: set[NodeId], groups: list[LazyGroup] = (),
                  ext_users: dict[str, set[NodeId]] | None = None,
                  never: frozenset[NodeId] = frozenset()
                  ) -> tuple[list[DeferredRun], list[LazyGroup]]:
    """The modules whose code runs at the first import of them inside a function (see the
    module's docstring), and the lazy groups of engine.nesting that keep their ``try``
    (those whose modules cannot each run in a function). ``inside``: the statements already
    emitted inside another (the guards and groups of engine.nesting, engine.typing_only's
    group). ``ext_users``: engine.nesting's ``external_users(closure)``. ``never``: the
    statements that never run (engine.typing_only's), whose imports of a group's modules
    need not call their functions."""
    if not closure.deferred_code and not groups:
        return [], []
    position = {n: i for i, n in enumerate(closure.nodes)}
    taken: set[str] = set()  # (read only once a module's code does go into a function)
    runs: list[DeferredRun] = []
    for module, (note, code) in sorted(closure.deferred_code.items()):
        run = _deferred_run(closure, module, note, [n for n in code if n in position],
                            inside, position, taken)
        if run is not None:
            taken |= {run.runner, run.flag}
            runs.append(run)
    # a group whose modules are imported in functions of another group's modules goes once
    # those have their functions
    pending = list(groups)
    progress = True
    while pending and progress:
        progress = False
        for g in list(pending):
            if not taken:
                taken |= _names_in_use(closure)
            placed = {n: run.anchor for run in runs for n in run.nodes}
            others = {n for o in pending if o is not g for n in o.nodes}
            made = _group_runs(closure, g, (inside - set(g.nodes) - set(placed)) | others,
                               position, taken, ext_users or {}, placed, never)
            if made is not None:
                taken |= {name for run in made for name in (run.runner, run.flag)}
                runs.extend(reversed(made))  # (each goes above those before it at its anchor)
                pending.remove(g)
                progress = True
    return runs, [g for g in groups if g in pending]


def _group_runs(closure: Closure, g: LazyGroup, inside: set[NodeId],
                position: dict[NodeId, int], taken: set[str],
                ext_users: dict[str, set[NodeId]], placed: dict[NodeId, NodeId],
                never: frozenset[NodeId] = frozenset()) -> list[DeferredRun] | None:
    """A function for each module of a lazy group (engine.nesting: modules imported only
    inside functions, or by such modules as they run, that need a package which may be
    missing), holding the whole module in upstream's order: each import of it inside a
    function calls it first, and a module of the group that imports another as it runs calls
    that one's function where upstream imports it. Upstream's import fails or succeeds then,
    module by module, as upstream's does, and nothing runs as the file is imported. None
    where one of them cannot be (a function cannot hold it, an import of it is in another
    module's statement emitted elsewhere, or where it is imported cannot be told).
    ``placed``: the statements already going into another module's function, by the
    statement that function goes above. The imports in statements that ``never`` run (what
    only ``if TYPE_CHECKING:`` imports lead to) call nothing."""
    modules = set(g.modules)
    mine = {m: sorted((n for n in g.nodes if n[0] == m), key=lambda n: n[1])
            for m in g.modules}
    if not all(mine.values()):
        return None
    names: dict[tuple[str, str], tuple[str, str]] = {}
    reserved = set(taken)
    for m in sorted(modules, key=lambda m: position[mine[m][0]]):
        names[m] = _names(m[1], reserved)
        reserved |= set(names[m])
    # the imports of its modules inside statements: each calls the module's function first
    # (statement, line, module imported, whether in a function of the statement)
    edits: list[tuple[NodeId, int, tuple[str, str], bool]] = []
    for (user, line, _bound), key in closure.guarded_imports.items():
        if key and key[0] == "def" and key[1] in modules and key[1] != user[0] \
                and user not in never and not _under(closure, user, line, _type_checking_parts):
            if user in inside:
                return None  # (a statement emitted inside another, elsewhere)
            edits.append((user, line, key[1], _under(closure, user, line, _function_parts)))
    for (user, line), key in closure.lazy_reads.items():
        # a read through a module ``__getattr__``, inside a function (engine.lazyattr)
        if key[1] in modules and key[1] != user[0] and user in position and user not in never:
            if user in inside:
                return None
            edits.append((user, line, key[1], True))
    edited = {(user[0], line) for user, line, _, _ in edits}
    # the imports at their top level of one another, which are no statement of the file
    calls: dict[tuple[str, str], dict[tuple[str, str], int]] = {m: {} for m in modules}
    for d in closure.deps:
        if d.user[0] not in modules or d.how == "local-import" or d.typing_only:
            continue
        for other in {n[0] for n in d.nodes if n[0] in modules and n[0] != d.user[0]}:
            line = _import_line(closure, d.user[0], d.name, other, edited)
            if line is None:
                return None
            if line >= 0:
                at = calls[d.user[0]]
                at[other] = min(line, at.get(other, line))
    # above the first statement with an import of them, or the function that statement runs
    # in (``placed``: another module's code, which goes into its function at its anchor)
    outer = [placed.get(user, user) for user, _, _, _ in edits if user[0] not in modules]
    if not outer:
        return None
    anchor = min(outer, key=position.__getitem__)
    # a cycle through the imports in each, at its top level or in its functions (which may
    # be called as it runs): those are marked as run as they start, and unmarked in ``try``
    runs_into = {m: set(calls[m]) | {o for user, _, o, _ in edits if user[0] == m}
                 for m in modules}
    reentrant = {m for m in modules if _reaches(runs_into, m, m)}
    made = []
    for m in sorted(modules, key=lambda m: position[mine[m][0]]):
        externals = sorted(i for i in g.externals
                           if m in {u[0] for u in ext_users.get(i, ())})
        found = _bound_names(closure, mine[m])
        if found is None:
            return None
        bound, plain = found
        bound |= {closure.externals[i].bound for i in externals}
        runner, flag = names[m]
        # (a module outside the group imports it at its top level only in a ``try`` that
        # catches ImportError: engine.nesting's ``_caught_imports``)
        sites = sorted({(user, line) for user, line, o, in_function in edits
                        if o == m and (in_function or user[0] not in modules)})
        importers = sorted({names[o][0] for o in modules if m in calls[o]} |
                           {names[user[0]][0] for user, _, o, in_function in edits
                            if o == m and user[0] in modules and not in_function})
        note = closure.deferred_code.get(m, (None, ()))[0]
        made.append(DeferredRun(
            m, mine[m], sites, runner, flag, sorted(bound), anchor, note,
            closure.entries[m].facts.relpath,
            True, sorted((line, names[o][0]) for o, line in calls[m].items()),
            externals, m in reentrant, importers,
            {n: closure.stmt(n).line for n in mine[m]}, plain,
            sorted({(user, line) for user, line, o, in_function in edits
                    if o == m and not in_function and user[0] not in modules})))
    return made


def _import_line(closure: Closure, module: tuple[str, str], name: str,
                 other: tuple[str, str], edited: set[tuple[tuple[str, str], int]]
                 ) -> int | None:
    """The first line of ``module``'s top level that imports ``name`` (through which it
    reads ``other``'s definition), where upstream runs ``other``; -1 where that import is
    in a statement whose import edits call it already, 0 where no import binds the name
    (what reads it then runs ``other`` first), None where the import is in a statement the
    closure does not have (its ``try`` may catch what ``other`` raises)."""
    entry = closure.entries[module]
    records = [r for r in entry.imports.get(name.split(".")[0], ())
               if r.guard.kind != "type_checking"]
    if not records:
        records = [r for r in entry.stars if r.target == other[1]]
    if not records:
        return 0
    plain = [r.line for r in records if not r.guard.kind]
    if plain:
        return min(plain)
    if any((module, r.line) in edited for r in records):
        return -1
    return None


def _function_parts(node: ast.AST) -> list[ast.AST]:
    """A function's (or lambda's) whole text."""
    return [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else []


def _type_checking_parts(node: ast.AST) -> list[ast.AST]:
    """The body of an ``if TYPE_CHECKING:``, which never runs (its ``else`` does)."""
    return list(node.body) if isinstance(node, ast.If) and is_type_checking(node.test) else []


def _under(closure: Closure, node: NodeId, line: int, kind) -> bool:
    """Whether ``line`` of the statement ``node`` is inside one of the parts ``kind`` gives
    of a node of it."""
    ms = closure.modules[node[0]]
    return any(a <= line <= b for a, b in ms.stmt_fact(ms.stmts[node[1]], _part_spans, kind))


def _part_spans(node: ast.stmt, kind) -> tuple[tuple[int, int], ...]:
    """The lines of the parts ``kind`` gives of the nodes of a statement."""
    return tuple((part.lineno, part.end_lineno or part.lineno)
                 for sub in treewalk.walk(node) for part in kind(sub))


def _reaches(edges: dict, start, goal) -> bool:
    seen, todo = set(), list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return False


def _deferred_run(closure: Closure, module: tuple[str, str], note: int, code: list[NodeId],
                  inside: set[NodeId], position: dict[NodeId, int], taken: set[str]
                  ) -> DeferredRun | None:
    mine = [n for n in closure.nodes if n[0] == module]
    if not code or any(n in inside for n in mine):
        return None
    users = set()
    for d in closure.deps:
        if d.kind == "definition" and d.user[0] != module and any(n[0] == module for n in d.nodes):
            if d.how != "local-import" or d.load or d.user in inside:
                return None
            users.add(d.user)
    sites = sorted({(user, line) for (user, line, _bound), key in closure.guarded_imports.items()
                    if user in users and key and key[0] == "def" and key[1] == module} |
                   {(user, line) for (user, line), key in closure.lazy_reads.items()
                    if user in users and key[1] == module})
    if not sites or {u for u, _ in sites} != users:
        return None
    code_set = set(code)
    whole = False
    if _read_as_file_loads(closure, code_set, mine) or _reordered(closure, module, code, mine):
        # the module's definitions need its code as it runs, or run among it: the whole
        # module goes, as upstream runs it (whisper's ``triton_ops.py``, whose kernels are
        # decorated with ``@triton.jit`` after ``try: import triton except ImportError:
        # raise RuntimeError(...)``)
        code = sorted(mine, key=lambda n: n[1])
        code_set, whole = set(code), True
    found = _bound_names(closure, code)
    if found is None:
        return None
    names, plain = found
    if not taken:
        taken |= _names_in_use(closure)
    runner, flag = _names(module[1], taken)
    anchor = min((n for n in [*mine, *users] if n not in code_set), key=position.__getitem__,
                 default=None)
    if anchor is None:
        return None
    return DeferredRun(module, sorted(code, key=lambda n: n[1]), sites, runner, flag,
                       sorted(names), anchor, note, closure.entries[module].facts.relpath,
                       whole, unannotated=plain)


def _read_as_file_loads(closure: Closure, code: set[NodeId], mine: list[NodeId]) -> bool:
    """Whether a statement outside ``code`` reads one of it as the file loads, or reads as it
    loads a statement of the module that may lead to it then: a function's body may run (it
    may be called), a class's methods do not as it is created (its body and bases do)."""
    edges: dict[NodeId, list[tuple[NodeId, bool]]] = {}
    for d in closure.deps:
        edges.setdefault(d.user, []).extend((n, d.load) for n in d.nodes)
    leads: dict[NodeId, bool] = {}

    def reaches(start: NodeId) -> bool:
        if start not in leads:
            seen, todo = {start}, [start]
            while todo:
                node = todo.pop()
                created = closure.stmt(node).kind == "class"
                for n, load in edges.get(node, ()):
                    if n[0] == start[0] and n not in seen and (load or not created):
                        seen.add(n)
                        todo.append(n)
            leads[start] = bool(seen & code)
        return leads[start]

    own = set(mine)
    for d in closure.deps:
        if not d.load or d.user in code:
            continue
        for n in d.nodes:
            if n in code or (n in own and reaches(n)):
                return True
    return False


def _reordered(closure: Closure, module: tuple[str, str], code: list[NodeId],
               mine: list[NodeId]) -> bool:
    """Whether a statement of the module that upstream runs after the code's first statement,
    and that stays at the top, reads or binds as it runs a name of the module the code reads
    or binds too: running the code later would change what either sees (``WORDS += ["b"]``
    after ``WORDS.append("a")``)."""
    ms = closure.modules[module]

    def touched(node: NodeId) -> set[str]:
        st = closure.stmt(node)
        return set(ms.uses(st).load) | set(st.binds)

    own = {b for n in mine for b in closure.stmt(n).binds}
    first = min(n[1] for n in code)
    shared = own & set().union(*(touched(n) for n in code))
    return any(touched(n) & shared for n in mine if n[1] > first and n not in code)


def _bound_names(closure: Closure, code: list[NodeId]
                 ) -> tuple[set[str], set[NodeId]] | None:
    """The names the code (statements of one module) binds as the file has them (after its
    renames), and the statements whose annotations of such names go (``unannotated``), or
    None where a function that declares them ``global`` cannot hold it (``x: int`` without a
    value, ``import *``, a ``global`` statement of its own after a use). Checked on upstream's
    text, once per module and statements: the renames change no binding. A module's
    ``__all__`` that nothing reads, left unrenamed, is none of them: the file's is the
    block's, which a run at the first call would replace (one that is read has a name of its
    own in the file: ``resolve.allocate_names``)."""
    ms = closure.modules[code[0][0]]
    stmts = tuple(n[1] for n in code)
    found = ms.memo(("deferred bound names", stmts), lambda: _upstream_bound(ms, stmts))
    if found is None:
        return None
    upstream, changed = found
    names = {closure.out_names.get(("def", code[0][0], name), name) for name in upstream}
    return names - {"__all__"}, {n for n in code if n[1] in changed}


def _upstream_bound(ms: ModuleSource, stmts: tuple[int, ...]
                    ) -> tuple[tuple[str, ...], frozenset[int]] | None:
    texts = {i: ms.stmt_text(ms.stmts[i]) for i in stmts}
    plain = {i: unannotated(t) for i, t in texts.items()}
    body = textwrap.indent("\n".join(plain[i] for i in stmts), "    ")
    try:
        table = symtable.symtable(f"def _f():\n{body}", "<deferred>", "exec").get_children()[0]
        upstream = sorted(sym.get_name() for sym in table.get_symbols()
                          if sym.is_local() or sym.is_assigned() or sym.is_imported())
        if upstream:
            compile(f"def _f():\n    global {', '.join(upstream)}\n{body}", "<deferred>",
                    "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return tuple(upstream), frozenset(i for i in stmts if plain[i] != texts[i])


def unannotated(text: str) -> str:
    """A module-level statement's text with the annotations of the names it assigns at its
    level dropped (``X: dict[str, int] = {}`` -> ``X = {}``), as a function declaring the
    name ``global`` cannot annotate it. Those without a value, which bind nothing, stay, as
    do those of a name in parentheses (``(x): int = 0``), which a function may have."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    spans = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.AnnAssign) and node.simple and node.value is not None:
            spans.append((node.target.end_lineno, node.target.end_col_offset,
                          node.value.lineno, node.value.col_offset))
        todo.extend(treewalk.children(node))
    if not spans:
        return text
    lines = [line.encode("utf-8") for line in source_lines(text, keepends=True)]
    for l1, c1, l2, c2 in sorted(spans, reverse=True):
        joined = lines[l1 - 1][:c1] + b" = " + lines[l2 - 1][c2:]
        lines[l1 - 1 : l2] = [joined]
    return b"".join(lines).decode("utf-8")


def _names(module: str, taken: set[str]) -> tuple[str, str]:
    """The function's and the flag's names: ``_run_bnb`` and ``_bnb_ran`` for ``peft.tuners.
    lora.bnb``; ``_run_lora_bnb`` where those are taken (two modules named ``bnb``), then
    numbered."""
    parts = [re.sub(r"\W", "_", p).strip("_") for p in module.split(".")]
    parts = [p for p in parts if p] or ["module"]
    bases = ["_".join(parts[-2:]), parts[-1]] if len(parts) > 1 else [parts[-1]]
    for base in [bases[-1], *bases[:-1]]:
        if f"_run_{base}" not in taken and f"_{base}_ran" not in taken:
            return f"_run_{base}", f"_{base}_ran"
    i = 2
    while f"_run_{bases[0]}_{i}" in taken or f"_{bases[0]}_{i}_ran" in taken:
        i += 1
    return f"_run_{bases[0]}_{i}", f"_{bases[0]}_{i}_ran"


def _names_in_use(closure: Closure) -> set[str]:
    """Every identifier in the closure's statements and every name the file binds."""
    words: set[str] = set(closure.out_names.values())
    words |= {e.bound for e in closure.externals.values()}
    for n in closure.nodes:
        words |= closure.modules[n[0]].identifiers(closure.stmt(n))
    return words
