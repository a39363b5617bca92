"""Module-level code of a module upstream imports only inside functions: run where upstream
runs it, at the first such import, not when the file is imported.

ultralytics' ``nn/text_model.py`` has ``try: import clip except ImportError:
checks.check_requirements("git+https://github.com/ultralytics/CLIP.git"); import clip``, and
``nn/tasks.py`` imports that module only inside the functions that build a text model. Upstream,
importing ``tasks`` runs none of it. A file with that ``try`` at its top level attempts a pip
install as it is imported, and without clip fails to import where upstream's module does not.
cogdl's ``operators/spmm.py`` compiles a C++ extension (``load(name="spmm_cpu", ...)``) at the
first call of the function that imports it; at the top level, the file compiles it as it loads.

Such a module's code (its statements in the closure other than definitions, assignments and
imports: the ``try``, ``if``, ``for``, ``with`` and expression statements the header's note on
it lists) goes, in upstream's order, into a function of its own that declares every name that
code binds ``global`` (a class or function defined there keeps its plain ``__qualname__``), runs
it once and records that it did: ``_run_text_model()``. Each import inside a function that
imports that module calls it first, as upstream's import runs the module. It is defined before
the module's first statement and before the first function with such an import, so that it is
there whenever one is called; the module's other statements stay where they were.

Where the module's other statements need the code as they run (whisper's ``triton_ops.py``
decorates its kernels with ``@triton.jit`` after ``try: import triton except ImportError:
raise RuntimeError(...)``), or run among it on what it touches too (``STEPS["save"] =
len(STEPS)`` after a loop filling ``STEPS``), the whole module goes into that function, in
upstream's order. Not at all, and the note keeps saying the code runs as the file loads:
  - a function cannot hold it (``x: int = 0`` cannot name a global, ``import *``);
  - the module, or an import that runs it, is already inside another statement
    (engine.nesting's guards and groups, engine.typing_only's ``if TYPE_CHECKING:``), or an
    import that reaches it runs at load time (in a class body).
"""

from __future__ import annotations

import re
import symtable
import textwrap
from dataclasses import dataclass

from nnrag_tui.engine.closure import Closure, NodeId
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
    note: int  # the index in ``closure.notes`` of the header's note on the module
    relpath: str  # the module's path
    whole: bool = False  # all its statements, not only its code

    def note_text(self, closure: Closure) -> str:
        """The header's note on the module, replacing the one that says its code runs as
        the file is imported."""
        ms = closure.modules[self.module]
        lines = ", ".join(f"{ms.stmts[n[1]].line}-{ms.stmts[n[1]].end_line}" for n in self.nodes)
        return (f"{self.relpath} is imported only inside "
                f"functions upstream ({self.where(closure)}), so its module-level code runs at "
                f"the first such import; here its lines {lines} run in `{self.runner}()`, "
                "which each of those imports calls first")

    def where(self, closure: Closure) -> str:
        sites = sorted({(closure.entries[n[0]].facts.relpath, line) for n, line in self.sites})
        more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
        return f"{sites[0][0]}:{sites[0][1]}{more}"

    def statement_note(self, closure: Closure) -> str:
        """The header's line on each of its statements."""
        return (f"indented, inside `{self.runner}()`, which the imports of its module inside "
                f"functions call first ({self.where(closure)}), as upstream runs it then")

    def code(self, texts: dict[NodeId, str], separator) -> str:
        """The function, its flag and the code at column 0, from the statements' texts."""
        body = []
        for prev, node in zip([None, *self.nodes], self.nodes):
            if prev is not None:
                body.append(separator(prev, node))
            body.append(texts[node].rstrip() + "\n")
        declared = "\n".join(textwrap.wrap(", ".join([self.flag, *self.names]), 90,
                                           initial_indent="global ",
                                           subsequent_indent="global ",
                                           break_on_hyphens=False))
        declared = re.sub(r",\n", "\n", declared)
        doc = "\n    ".join(textwrap.wrap(  # (continuation lines: indented keeps them)
            f"{self.relpath}'s module-level code, run once: upstream runs it at the first "
            "import of that module.", 88, break_on_hyphens=False, break_long_words=False))
        inner = (f'"""{doc}"""\n{declared}\nif {self.flag}:\n    return\n'
                 + "".join(body) + ("\n" if self.whole else "") + f"{self.flag} = True\n")
        return (f"{self.flag} = False\n\n\ndef {self.runner}():\n" + indented(inner, "    "))


def deferred_runs(closure: Closure, inside: set[NodeId]) -> list[DeferredRun]:
    """The modules whose code runs at the first import of them inside a function (see the
    module's docstring). ``inside``: the statements already emitted inside another (the guards
    and groups of engine.nesting, engine.typing_only's group)."""
    if not closure.deferred_code:
        return []
    position = {n: i for i, n in enumerate(closure.nodes)}
    taken: set[str] = set()  # (read only once a module's code does go into a function)
    runs: list[DeferredRun] = []
    for module, (note, code) in sorted(closure.deferred_code.items()):
        run = _deferred_run(closure, module, note, [n for n in code if n in position],
                            inside, position, taken)
        if run is not None:
            taken |= {run.runner, run.flag}
            runs.append(run)
    return runs


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
                    if user in users and key and key[0] == "def" and key[1] == module})
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
    names = _bound_names(closure, code)
    if names is None:
        return None
    if not taken:
        taken |= _names_in_use(closure)
    runner, flag = _names(module[1], taken)
    anchor = min((n for n in [*mine, *users] if n not in code_set), key=position.__getitem__,
                 default=None)
    if anchor is None:
        return None
    return DeferredRun(module, sorted(code, key=lambda n: n[1]), sites, runner, flag,
                       sorted(names), anchor, note, closure.entries[module].facts.relpath,
                       whole)


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


def _bound_names(closure: Closure, code: list[NodeId]) -> set[str] | None:
    """The names the code binds as the file has them (after its renames), or None where a
    function that declares them ``global`` cannot hold it (``x: int = 0``, ``import *``, a
    ``global`` statement of its own after a use). Checked on upstream's text: the renames
    change no binding."""
    text = "\n".join(closure.modules[n[0]].stmt_text(closure.stmt(n)) for n in code)
    body = textwrap.indent(text, "    ")
    try:
        table = symtable.symtable(f"def _f():\n{body}", "<deferred>", "exec").get_children()[0]
        upstream = sorted(sym.get_name() for sym in table.get_symbols()
                          if sym.is_local() or sym.is_assigned() or sym.is_imported())
        if upstream:
            compile(f"def _f():\n    global {', '.join(upstream)}\n{body}", "<deferred>",
                    "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return {closure.out_names.get(("def", code[0][0], name), name) for name in upstream}


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
        words |= set(re.findall(r"[A-Za-z_]\w*", closure.modules[n[0]].stmt_text(closure.stmt(n))))
    return words
