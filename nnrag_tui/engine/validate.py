"""The validator [BlockValidator]: six stages, each with its own verdict, time and diagnostics.

1. ``parse``: the file is valid Python for this interpreter (``ast``).
2. ``compile``: it compiles to bytecode.
3. ``static``: no name is undefined anywhere in it, method bodies included (pyflakes:
   UndefinedName, UndefinedLocal, UndefinedExport).
4. ``import``: it imports in a fresh, sandboxed interpreter (``sandbox.Sandbox``).
5. ``instantiate``: the block class can be constructed: with no arguments when the
   constructor allows it, else with arguments inferred from parameter names and annotations.
6. ``forward``: it runs on a probe input; the input that worked and the output shapes are
   recorded.

A block is *validated* when stages 1-4 pass (the paper's bar). Stages 5-6 are deeper levels,
reported as such and never faked: a stage that did not run has no verdict. Each failed stage
gets a cause from the taxonomy (``taxonomy.CAUSES``); the report's cause is the first one.

Stages 1-3 never execute the block's code. With a sandbox they run in its worker process (off
the caller's CPU and GIL), which hands the compiled code to the child that runs stages 4-6;
without one (``deepest="static"``) they run in the caller, which never imports torch.
They are incremental (``StaticCache``): a generated file is a sequence of upstream
definitions that recur from block to block, so each distinct top-level chunk is parsed,
compiled and checked once, and its code object is relocated to its line in each file. On
every timm block this gives the whole-file verdicts exactly, at an eighth of the CPU.
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

from nnrag_tui.engine import taxonomy, treewalk
from nnrag_tui.engine.modsource import TYPING_MODULES
from nnrag_tui.engine.namespace import namespace_writes
from nnrag_tui.engine.parse import JAXTYPING_TYPES, shape_strings
from nnrag_tui.engine.taxonomy import Cause, failure_table, format_failure_table  # noqa: F401

STAGES = ("parse", "compile", "static", "import", "instantiate", "forward")
LEVELS = {"parse": "parsed", "compile": "compiled", "static": "static_clean",
          "import": "imported", "instantiate": "instantiated", "forward": "forward_ran"}
LEVEL_ORDER = ("none", *LEVELS.values())
SANDBOX_STAGES = ("import", "instantiate", "forward")


@dataclass(frozen=True)
class StageVerdict:
    """One stage's outcome. ``detail`` holds the facts (the cause of a failure, the arguments
    used, probe and output shapes, the traceback)."""

    stage: str
    ok: bool
    seconds: float
    diagnostics: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "ok": self.ok, "seconds": round(self.seconds, 6),
                "diagnostics": self.diagnostics, "detail": _jsonable(self.detail)}


@dataclass(frozen=True)
class ValidationReport:
    name: str
    stages: tuple[StageVerdict, ...]
    validated: bool
    level: str
    cause: str | None = None
    cause_summary: str | None = None
    cause_detail: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    sandbox: dict[str, Any] = field(default_factory=dict)

    def stage(self, name: str) -> StageVerdict | None:
        return next((s for s in self.stages if s.stage == name), None)

    def reached(self, level: str) -> bool:
        """Did the block get at least to ``level`` (a name of LEVEL_ORDER)?"""
        return LEVEL_ORDER.index(self.level) >= LEVEL_ORDER.index(level)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "validated": self.validated, "level": self.level,
                "cause": self.cause, "cause_summary": self.cause_summary,
                "cause_detail": _jsonable(self.cause_detail),
                "seconds": round(self.seconds, 6),
                "stages": [s.as_dict() for s in self.stages],
                "sandbox": _jsonable(self.sandbox)}


class Validator:
    """``Validator(sandbox=None)``: with no sandbox it starts (and owns) one on first use.
    ``deepest`` is the last stage to attempt (``"import"`` stops at the validated bar)."""

    def __init__(self, sandbox=None, *, deepest: str = "forward", keep_going: bool = True,
                 timeouts: dict[str, float] | None = None) -> None:
        if deepest not in STAGES:
            raise ValueError(f"deepest must be one of {', '.join(STAGES)}")
        self._sandbox = sandbox
        self._own = sandbox is None
        self.deepest = deepest
        self.keep_going = keep_going
        self.timeouts = dict(timeouts or {})
        self._static_cache = StaticCache()

    @property
    def sandbox(self):
        if self._sandbox is None:
            from nnrag_tui.engine.sandbox import Sandbox

            self._sandbox = Sandbox()
        return self._sandbox

    def close(self) -> None:
        if self._own and self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def __enter__(self) -> Validator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the stages ------------------------------------------------------------------------
    def validate(self, code: str, name: str | None = None, spec: dict | None = None, *,
                 filename: str | None = None, call_sites=None,
                 files: dict[str, bytes] | None = None) -> ValidationReport:
        """Validates the standalone file ``code`` whose block class is ``name`` (default: the
        spec's name, else the file's ``__all__``, else its last class). Never raises for
        anything about the code.

        ``call_sites``: argument sets the corpus uses for this constructor (a list, or a
        callable returning one: ``BlockExtractor.call_sites``), tried in a second sandbox
        run only when the block imports but cannot be built from guessed arguments.
        ``files``: what goes beside the file in the sandbox (``GeneratedBlock.files``)."""
        t_start = time.perf_counter()
        name = name or (spec or {}).get("name") or None
        fname = filename or f"{name or 'block'}.py"
        want = list(STAGES[: STAGES.index(self.deepest) + 1])
        boxed = [s for s in SANDBOX_STAGES if s in want]
        if boxed and self.sandbox.start().get("source_stages"):
            # all six stages in the sandbox child: parse and static checks cost CPU that
            # would otherwise compete with the caller's own work (and its GIL)
            res = self.sandbox.run(code, name, want, timeouts=self.timeouts or None,
                                   keep_going=self.keep_going, files=files)
            verdicts: list[StageVerdict] = []
            causes: list[Cause] = []
            parsed = res.stage_events().get("parse")
            if name is None and parsed is not None:
                name = (parsed.get("verdict") or {}).get("detail", {}).get("target")
            info = self._sandbox_verdicts(res, want, code, verdicts, causes)
            self._with_call_sites(code, name, want, verdicts, causes, call_sites, files)
            return self._report(name or "?", verdicts, causes, t_start, info)
        check = source_stages(code, fname, upto=min(want[-1], "static", key=STAGES.index),
                              keep_going=self.keep_going, cache=self._static_cache)
        verdicts, causes = check.verdicts, check.causes
        name = name or check.target or "?"
        info: dict = {}
        if boxed and check.proceed:
            res = self.sandbox.run(code, name, boxed, timeouts=self.timeouts or None,
                                   files=files)
            info = self._sandbox_verdicts(res, boxed, code, verdicts, causes)
            self._with_call_sites(code, name, want, verdicts, causes, call_sites, files)
        return self._report(name, verdicts, causes, t_start, info)

    def _with_call_sites(self, code, name, want, verdicts, causes, call_sites,
                         files=None) -> None:
        """When the block imports but guessed arguments cannot build it, runs import,
        instantiate (and forward) again with the corpus's own argument sets; their verdicts
        replace the first run's when the block is built. Either way the instantiate verdict
        says how many sets were tried."""
        by = {v.stage: v for v in verdicts}
        inst = by.get("instantiate")
        validated = all(by.get(s) is not None and by[s].ok
                        for s in ("parse", "compile", "static", "import"))
        if (call_sites is None or inst is None or inst.ok or not validated
                or inst.detail.get("cause") != "needs_arguments"):
            return  # (so the instantiate failure is the first run's only cause)
        sets = call_sites() if callable(call_sites) else call_sites
        if not sets:
            return
        stages = [s for s in ("import", "instantiate", "forward") if s in want]
        res = self.sandbox.run(code, name, stages, timeouts=self.timeouts or None,
                               keep_going=self.keep_going, call_sites=sets, files=files)
        again: list[StageVerdict] = []
        again_causes: list[Cause] = []
        self._sandbox_verdicts(res, stages, code, again, again_causes)
        by_again = {v.stage: v for v in again}
        built = by_again.get("instantiate")
        if built is None or not built.ok:
            why = built.diagnostics if built is not None else "the second run did not start"
            i = verdicts.index(inst)
            verdicts[i] = replace(inst, detail={
                **inst.detail, "call_sites_tried": len(sets), "call_sites_error": why})
            return
        built = replace(built, detail={
            **built.detail, "call_sites_tried": len(sets),
            "guessed_arguments_error": inst.diagnostics})
        verdicts[:] = [v for v in verdicts if v.stage not in ("instantiate", "forward")]
        verdicts.append(built)
        if "forward" in by_again:
            verdicts.append(by_again["forward"])
        causes[:] = again_causes

    def _sandbox_verdicts(self, res, stages, code, verdicts, causes) -> dict:
        ends = res.stage_events()
        started = {e["stage"]: e for e in res.events
                   if e.get("ev") == "start" and e.get("stage") in STAGES}
        setup = next((e for e in res.events if e.get("ev") == "setup"), None)
        info = {"protections": res.protections, "exit": res.exit, "killed": res.killed,
                "output": res.output, "output_bytes": res.output_bytes,
                "output_truncated": res.output_truncated, "wall": res.wall}
        if res.error:
            info["error"] = res.error
        for stage in stages:
            end = ends.get(stage)
            if end is not None and "verdict" in end:  # a source stage, judged in the child
                v = _verdict_from_dict(end["verdict"])
                verdicts.append(v)
                if not v.ok:
                    causes.append(Cause(v.detail.get("cause", "other"),
                                        v.detail.get("cause_summary", v.diagnostics),
                                        dict(v.detail.get("cause_detail") or {})))
                    if stage != "static":
                        break
                continue
            if end is not None:
                detail = dict(end.get("detail") or {})
                if end.get("ok"):
                    verdicts.append(StageVerdict(stage, True, float(end.get("seconds", 0.0)),
                                                 _ok_diag(stage, detail), detail))
                    continue
                err = end.get("error") or {}
                cause = taxonomy.classify(stage, err, code=code, detail=detail)
                if err.get("traceback"):
                    detail["traceback"] = err["traceback"]
                detail["error"] = {k: v for k, v in err.items() if k != "traceback"}
                verdicts.append(StageVerdict(
                    stage, False, float(end.get("seconds", 0.0)), _err_diag(err),
                    {"cause": cause.kind, "cause_summary": cause.summary,
                     "cause_detail": cause.detail, **detail}))
                causes.append(cause)
                break
            # no end event: the child was killed, crashed or exited in this stage
            start = started.get(stage)
            if start is None and stage != stages[0]:
                break  # an earlier stage ended the job (already reported)
            if res.error:
                cause = Cause("other", f"sandbox failure: {res.error}", {"stage": stage})
            elif setup is None and start is None and not res.killed:
                failed = next((e for e in res.events if e.get("ev") == "setup_failed"), {})
                why = failed.get("error", {})
                text = (f"{why.get('type')}: {why.get('message')}" if why else
                        res.output.strip()[-300:] or str(res.exit))
                cause = Cause("other", f"the sandbox could not set up the child: {text}",
                              {"stage": "setup", "exit": res.exit})
            else:
                killed = res.killed if res.killed and res.killed.get("stage") in (
                    stage, "setup") else None
                cause = taxonomy.classify(stage, None, killed=killed, exit=res.exit)
            seconds = 0.0
            if start is not None and "t" in start and res.t_exit:
                seconds = max(0.0, float(res.t_exit) - float(start["t"]))
            verdicts.append(StageVerdict(stage, False, seconds, cause.summary,
                                         {"cause": cause.kind, "cause_summary": cause.summary,
                                          "cause_detail": cause.detail}))
            causes.append(cause)
            break
        return info

    def _report(self, name, verdicts, causes, t_start, sandbox_info) -> ValidationReport:
        by = {v.stage: v for v in verdicts}
        level = "none"
        for stage in STAGES:
            v = by.get(stage)
            if v is None or not v.ok:
                break
            level = LEVELS[stage]
        validated = all(by.get(s) is not None and by[s].ok
                        for s in ("parse", "compile", "static", "import"))
        first = causes[0] if causes else None
        return ValidationReport(
            name=name, stages=tuple(verdicts), validated=validated, level=level,
            cause=first.kind if first else None,
            cause_summary=first.summary if first else None,
            cause_detail=dict(first.detail) if first else {},
            seconds=time.perf_counter() - t_start, sandbox=sandbox_info)


# -- stages 1-3 --------------------------------------------------------------------------------
@dataclass
class SourceCheck:
    """The outcome of the source stages: their verdicts and causes, the block class the file
    names, and whether the file can go on to be imported."""

    verdicts: list[StageVerdict]
    causes: list[Cause]
    target: str | None
    proceed: bool
    code_object: Any = None  # the compiled module, for the sandbox child to execute


def standalone_denylist(module: str, imported: frozenset[str] = frozenset({"torch"})
                        ) -> tuple[str, ...]:
    """The packages a block's file may not import when it is validated: the top package of
    the module it came from, so that "validated" means standalone. ``imported``: the packages
    every block imports instead of inlining (``GeneratedBlock.imported_packages``: torch, and
    the sources the configuration marks external), whose own blocks are the exception."""
    top = module.split(".")[0]
    return () if top in imported else (top,)


def source_stages(code: str, filename: str = "block.py", upto: str = "static", *,
                  keep_going: bool = True, cache: StaticCache | None = None, on_start=None,
                  on_end=None) -> SourceCheck:
    """Stages 1-3 (parse, compile, static), which never execute the code. Used by the
    validator in its own process, and by the sandbox child (``on_start``/``on_end`` report
    each stage as it goes)."""
    verdicts: list[StageVerdict] = []
    causes: list[Cause] = []
    last = STAGES.index(upto)

    def start(stage: str) -> float:
        if on_start:
            on_start(stage)
        return time.perf_counter()

    def done(v: StageVerdict, cause: Cause | None = None) -> None:
        verdicts.append(v)
        if cause is not None:
            causes.append(cause)
        if on_end:
            on_end(v)

    def failed(stage: str, t: float, cause: Cause, diag: str, extra=None) -> None:
        done(StageVerdict(stage, False, time.perf_counter() - t, diag,
                          {"cause": cause.kind, "cause_summary": cause.summary,
                           "cause_detail": cause.detail, **(extra or {})}), cause)

    # 1 parse
    t = start("parse")
    if cache is not None:
        quick = _incremental(code, filename, last, keep_going, cache, t, start, done, failed)
        if quick is not None:
            return SourceCheck(verdicts, causes, *quick)
    try:
        tree = ast.parse(code, filename)
    except (SyntaxError, ValueError) as exc:
        cause = (taxonomy.from_syntax(exc, code, "parse") if isinstance(exc, SyntaxError)
                 else Cause("other", f"cannot parse: {exc}", {"stage": "parse"}))
        failed("parse", t, cause, _syntax_diag(exc))
        return SourceCheck(verdicts, causes, None, False)
    except (RecursionError, MemoryError) as exc:
        failed("parse", t, Cause("other", f"cannot parse: {type(exc).__name__}",
                                 {"stage": "parse"}), type(exc).__name__)
        return SourceCheck(verdicts, causes, None, False)
    target = target_class(tree)
    done(StageVerdict("parse", True, time.perf_counter() - t, "", {"target": target}))
    if last < 1:
        return SourceCheck(verdicts, causes, target, True)
    # 2 compile
    t = start("compile")
    try:
        code_object = compile(tree, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        cause = (taxonomy.from_syntax(exc, code, "compile") if isinstance(exc, SyntaxError)
                 else Cause("other", f"cannot compile: {type(exc).__name__}: {exc}",
                            {"stage": "compile"}))
        failed("compile", t, cause, _syntax_diag(exc))
        return SourceCheck(verdicts, causes, target, False)
    done(StageVerdict("compile", True, time.perf_counter() - t))
    if last < 2:
        return SourceCheck(verdicts, causes, target, True, code_object)
    # 3 static
    t = start("static")
    undefined = undefined_names(tree, filename, code=code, cache=cache)
    if undefined:
        cause = taxonomy.from_static(undefined)
        diag = "; ".join(f"line {u['line']}: undefined name {u['name']!r} in {u['scope']}"
                         for u in undefined[:5])
        if len(undefined) > 5:
            diag += f"; and {len(undefined) - 5} more"
        failed("static", t, cause, diag, {"undefined": undefined})
        return SourceCheck(verdicts, causes, target, keep_going, code_object)
    done(StageVerdict("static", True, time.perf_counter() - t))
    return SourceCheck(verdicts, causes, target, True, code_object)


def _verdict_from_dict(d: dict) -> StageVerdict:
    return StageVerdict(str(d.get("stage")), bool(d.get("ok")), float(d.get("seconds", 0.0)),
                        str(d.get("diagnostics", "")), dict(d.get("detail") or {}))


# -- helpers ---------------------------------------------------------------------------------
def undefined_names(tree: ast.Module, filename: str = "block.py", *, code: str | None = None,
                    cache: StaticCache | None = None) -> list[dict]:
    """Every undefined name pyflakes finds (UndefinedName, UndefinedLocal, UndefinedExport),
    with its line and enclosing scope.

    With ``code`` and a ``cache``, pyflakes runs once per distinct top-level statement rather
    than once per file: generated files repeat the same upstream definitions over and over
    (all of timm: 817k lines, 80k distinct). Each statement is checked with exactly the
    module-level names it uses bound before it, so the verdict is pyflakes' own, except for a
    module-level use before its definition, which the import stage reports instead."""
    if code is not None and cache is not None:
        try:
            found = cache.undefined(tree, code, filename)
        except RecursionError:
            found = None
        if found is not None:
            false = known_false_alarms(tree, code, found)
            found = [u for u in found if (u["name"], u["line"]) not in false]
            scopes = _scopes(tree) if found else []
            return [{**u, "scope": _scope_at(scopes, u["line"])} for u in found]
    try:
        msgs = _pyflakes(tree, filename)
    except RecursionError:
        return [{"name": "?", "line": 0, "scope": "module",
                 "kind": "the static check hit the recursion limit"}]
    false = known_false_alarms(tree, code, [{"name": n, "line": ln, "kind": k}
                                            for n, ln, k in msgs])
    msgs = [m for m in msgs if (m[0], m[1]) not in false]
    scopes = _scopes(tree) if msgs else []
    return [{"name": n, "line": line, "scope": _scope_at(scopes, line), "kind": kind}
            for n, line, kind in msgs]


_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)
_UNDEFINED_CODES = frozenset({"F821", "F822", "F823"})


def known_false_alarms(tree: ast.Module, code: str | None, found: list[dict]
                       ) -> set[tuple[str, int]]:
    """(name, line) of pyflakes' undefined-name messages that are not undefined names:

    - the line says so, as flake8 reads it (``# noqa`` or ``# noqa: F821``): zuko's
      ``precedence[:, indices]  # noqa: F821`` reads the ``indices`` of the loop's previous
      iteration;
    - the shapes of jaxtyping's ``Float[Tensor, "batch #variate"]``, where pyflakes reads
      ``batch`` (``parse.shape_strings``), also in an annotation written as a string
      (transformer_lens' ``-> "Float[torch.Tensor, '*leading_dims']"``);
    - the strings of a ``Literal[...]`` imported under another name (``from typing_extensions
      import Literal as Literal_typing_extensions``, as a clash rename makes it), which
      pyflakes takes for string annotations;
    - a local of the enclosing function read above the line that binds it: tsai's
      ``BN1d(n_in) if n_in == n_out`` in a loop that assigns ``n_in`` two lines below reads
      the previous iteration's value (zuko's case, without the ``noqa``). Not a name the
      file fails to define, whatever a path that never bound it would raise;
    - a name read below a module-level statement that stores names into the module's
      namespace (pyro's ``locals()[_name] = _PyroDist``, which makes ``LKJCholesky``;
      engine.namespace), or in a function body, which runs later: pyflakes cannot see what
      such a statement binds, as it cannot for a star import, where it says "may be
      undefined" and not "undefined";
    - a name the module declares with an annotation alone (fairscale's ``PipeModel:
      AsyncPipe``) and a function assigns after ``global PipeModel``: a module-level name
      bound when that function runs, which pyflakes misses in some of the functions reading
      it (it says the same of upstream's file)."""
    if not found:
        return set()
    out: set[tuple[str, int]] = set()
    lines = code.split("\n") if code is not None else []
    for u in found:
        line = lines[u["line"] - 1] if 0 < u["line"] <= len(lines) else ""
        m = _NOQA.search(line) if "#" in line else None
        if m and (not m.group("codes") or _UNDEFINED_CODES & set(
                re.split(r"[,\s]+", m.group("codes").upper()))):
            out.add((u["name"], u["line"]))
    aliases = {a.asname for n in treewalk.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module in TYPING_MODULES for a in n.names
               if a.name == "Literal" and a.asname and a.asname != "Literal"}
    if aliases:
        for n in treewalk.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                # an annotation written as a string (as upstream's ``from __future__ import
                # annotations`` makes it) holding the aliased ``Literal[...]``: pyflakes
                # reports its strings' names at the line of the string
                out.update((name, n.lineno) for name in _aliased_literal_strings(n.value,
                                                                                 aliases))
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                    n.value.id in aliases:
                for c in treewalk.walk(n.slice):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.update((name, c.lineno) for name in _names_pyflakes_reads(c.value))
    for n in treewalk.walk(tree):
        for c in shape_strings(n):
            out.update((name, c.lineno) for name in _names_pyflakes_reads(c.value))
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.update((name, n.lineno) for name in _quoted_shape_names(n.value))
    functions = [n for n in treewalk.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))]
    for u in found:
        if u.get("kind", "UndefinedName") != "UndefinedName":
            continue  # a module-level name shadowed by a later local is pyflakes' real find
        around = [f for f in functions if f.lineno <= u["line"] <= (f.end_lineno or 0)]
        if around and u["name"] in _function_locals(max(around, key=lambda f: f.lineno)):
            out.add((u["name"], u["line"]))
    declared = {st.target.id for st in tree.body if isinstance(st, ast.AnnAssign)
                and st.value is None and isinstance(st.target, ast.Name)}
    if declared:
        set_in_functions = {name for f in functions for name in _assigned_globals(f)}
        out.update((u["name"], u["line"]) for u in found
                   if u.get("kind", "UndefinedName") == "UndefinedName"
                   and u["name"] in declared & set_in_functions)
    writers = namespace_writes(tree.body)
    if writers:
        for u in found:
            if u.get("kind", "UndefinedName") == "UndefinedName" and (
                    u["line"] > min(writers) or any(
                        f.body[0].lineno <= u["line"] <= (f.end_lineno or 0)
                        for f in functions)):
                out.add((u["name"], u["line"]))
    return out


def _assigned_globals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function declares ``global`` and assigns, in its nested functions too
    (pykan's ``fit`` does so in the closure it hands to the optimizer)."""
    declared = {n for st in treewalk.walk(func) if isinstance(st, ast.Global) for n in st.names}
    if not declared:
        return set()
    return {n.id for n in treewalk.walk(func) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and n.id in declared}


def _function_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function's own scope binds by assignment (not in its nested scopes), less
    those it declares global or nonlocal."""
    bound: set[str] = set()
    declared: set[str] = set()
    stack: list[ast.AST] = list(func.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bound.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
                          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(treewalk.children(n))
    return bound - declared


def _aliased_literal_strings(text: str, aliases: set[str]) -> set[str]:
    """The names pyflakes reads in the strings of an aliased ``Literal[...]`` inside ``text``,
    a string it takes for an annotation (``"Literal_typing_extensions['front', 'back']"``
    reads ``front`` and ``back``); strings nested in its strings too."""
    if not any(a in text for a in aliases):
        return set()
    try:
        expr = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for n in treewalk.walk(expr):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                n.value.id in aliases:
            for c in treewalk.walk(n.slice):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    out |= _names_pyflakes_reads(c.value)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out |= _aliased_literal_strings(n.value, aliases)
    return out


def _names_pyflakes_reads(text: str) -> set[str]:
    """The names pyflakes finds in a string it takes for an annotation: ``"one-hot"`` reads
    ``one`` and ``hot``."""
    expr = _pyflakes_annotation(text)
    return set() if expr is None else {n.id for n in treewalk.walk(expr) if isinstance(n, ast.Name)}


def _pyflakes_annotation(text: str) -> ast.expr | None:
    """The expression pyflakes parses a string annotation into: one expression statement, so
    that jaxtyping's ``"*leading_dims"`` reads ``leading_dims`` (transformer_lens)."""
    try:
        body = ast.parse(text.strip()).body
    except (SyntaxError, ValueError):
        return None
    return body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None


_JAXTYPING_IN_TEXT = re.compile(r"\b(?:" + "|".join(sorted(JAXTYPING_TYPES)) + r")\s*\[")


def _quoted_shape_names(text: str) -> set[str]:
    """The names pyflakes reads in the shapes of a jaxtyping annotation written as a string:
    transformer_lens' ``-> "Float[torch.Tensor, '... ldim']"`` or ``"Union[Float[...], ...]"``
    (pyflakes reports them at the line of the outer string)."""
    if len(text) > 4000 or not _JAXTYPING_IN_TEXT.search(text):
        return set()
    expr = _pyflakes_annotation(text)
    if expr is None:
        return set()
    out: set[str] = set()
    for n in treewalk.walk(expr):
        for c in shape_strings(n):
            out |= _names_pyflakes_reads(c.value)
        if isinstance(n, ast.Constant) and isinstance(n.value, str):  # (shorter: it ends)
            out |= _quoted_shape_names(n.value)
    return out


def _pyflakes(tree: ast.Module, filename: str, local_names: set | None = None
              ) -> list[tuple[str, int, str]]:
    """(name, line, message kind) of pyflakes' undefined-name messages, in file order.
    ``local_names`` receives the names bound in any function or class scope."""
    from pyflakes import checker, messages

    kinds = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
    c = checker.Checker(tree, filename=filename, withDoctest=False)
    if local_names is not None:
        for scope in c.deadScopes:
            if not isinstance(scope, checker.ModuleScope):
                local_names.update(scope)
    return [(str(m.message_args[0]), m.lineno, type(m).__name__)
            for m in sorted(c.messages, key=lambda m: (m.lineno, m.col))
            if isinstance(m, kinds)]


class StaticCache:
    """Per-statement pyflakes results, reused across files (see ``undefined_names``).

    Phase 1, keyed by the statement's text: the names it uses without binding them.
    Phase 2, keyed by the text and which of those names the module binds: pyflakes' messages
    for the statement with exactly those names bound before it (UndefinedLocal depends on
    them), as offsets from the statement's first line."""

    def __init__(self, max_entries: int = 200_000) -> None:
        # text -> (messages alone, names it uses unbound, names it binds in inner scopes)
        self.free: dict[bytes, tuple[tuple, frozenset, frozenset]] = {}
        self.messages: dict[tuple[bytes, frozenset], tuple[tuple[str, int, str], ...]] = {}
        self.chunks: dict[bytes, _Chunk] = {}  # text -> compiled chunk (``_incremental``)
        self.max_entries = max_entries
        self.hits = self.misses = 0

    def undefined(self, tree: ast.Module, code: str, filename: str) -> list[dict] | None:
        lines = code.split("\n")
        bound, star = module_bindings(tree, global_lines={
            i for i, ln in enumerate(lines, 1) if _GLOBAL_STMT.match(ln)})
        if star:
            return None  # pyflakes' star-import rules need the whole file
        out: list[dict] = []
        for st in tree.body:
            first = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", ())])
            text = "\n".join(lines[first - 1: st.end_lineno]).encode()
            key = _digest(text) + bytes([min(st.col_offset, 255)])
            found = self.unit(key, lambda st=st: [st], first, bound, filename)
            out.extend({"name": n, "line": first + off, "kind": kind}
                       for n, off, kind in found)
        for name, line in _exports(tree):
            if name not in bound:
                out.append({"name": name, "line": line, "kind": "UndefinedExport"})
        out.sort(key=lambda u: u["line"])
        return out

    def unit(self, key: bytes, body, first: int, bound: set[str], filename: str
             ) -> tuple[tuple[str, int, str], ...]:
        """pyflakes' undefined-name messages for one unit of top-level statements (``body()``
        gives them, lines counted so that the unit starts at ``first``) in a module that
        binds ``bound``: (name, line offset from the unit's start, kind)."""
        entry = self.free.get(key)
        if entry is None:
            self.misses += 1
            inner: set[str] = set()
            alone = tuple((n, line - first, kind) for n, line, kind in
                          _pyflakes(_module(body()), filename, inner)
                          if kind != "UndefinedExport")
            entry = (alone, frozenset(n for n, _, _ in alone), frozenset(inner))
            self._put(self.free, key, entry)
        else:
            self.hits += 1
        alone, free, inner = entry
        used = frozenset(n for n in free if n in bound)
        if not used & inner:
            # no inner scope rebinds a module name it uses: binding those names only
            # removes their UndefinedName messages (no UndefinedLocal can appear)
            return tuple(m for m in alone if m[0] not in used)
        found = self.messages.get((key, used))
        if found is None:
            msgs = _pyflakes(_module(body(), sorted(used)), filename)
            found = tuple((n, line - first, kind) for n, line, kind in msgs
                          if kind != "UndefinedExport")
            self._put(self.messages, (key, used), found)
        return found

    def _put(self, table: dict, key, value) -> None:
        if len(table) >= self.max_entries:
            table.clear()
        table[key] = value


def _module(body: list[ast.stmt], bound: list[str] = ()) -> ast.Module:
    """A module of the statements ``body`` alone, with ``bound`` names assigned before them
    (on line 0, where pyflakes has nothing to say about them)."""
    pre = [ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store(), lineno=0, col_offset=0)],
                      value=ast.Constant(value=None, lineno=0, col_offset=0),
                      lineno=0, col_offset=0) for n in bound]
    return ast.Module(body=[*pre, *body], type_ignores=[])


def _digest(data: bytes) -> bytes:
    import hashlib

    return hashlib.sha1(data).digest()


# -- incremental source stages ---------------------------------------------------------------
@dataclass(frozen=True)
class _Chunk:
    """One top-level chunk of source (a statement with its decorators and trailing comments),
    compiled once, wherever it appears: the code object (lines from 1, relocated for each
    file), what it binds at module level, its ``__all__`` names and classes."""

    text: str
    code: Any
    bound: frozenset[str]
    star: bool
    exports: tuple[tuple[str, int], ...]
    classes: tuple[str, ...]
    doc_first: bool  # starts with a string: compiled alone it would set __doc__


_CHUNK_START = re.compile(r"[A-Za-z_@]")
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")
_DEF_START = re.compile(r"(?:async\s+def|def|class)\b")
_FUTURE_IMPORT = re.compile(r"^from[ \t]+__future__[ \t]+import[ \t]+([^#\n]+)", re.MULTILINE)


def split_chunks(code: str) -> list[tuple[int, str]]:
    """(first line, text) of each top-level chunk: a new chunk starts at every unindented
    line that can begin a statement (decorators stay with their definition, ``else``/
    ``except``/``finally`` with theirs). A line inside a string or brackets may start a
    false chunk; the chunk before it then fails to parse on its own, which the caller
    detects."""
    lines = code.split("\n")
    starts = [0]
    in_decorators = lines[0].startswith("@")
    for i in range(1, len(lines)):
        ln = lines[i]
        if not _CHUNK_START.match(ln) or _CONTINUATION.match(ln):
            continue
        if in_decorators:
            in_decorators = not _DEF_START.match(ln)
            continue
        in_decorators = ln.startswith("@")
        starts.append(i)
    ends = [*starts[1:], len(lines)]
    return [(a + 1, "\n".join(lines[a:b]) + ("\n" if b < len(lines) else ""))
            for a, b in zip(starts, ends)]


def _relocate(code, delta: int, filename: str):
    """``code`` (and every code object inside it) moved ``delta`` lines down, in ``filename``:
    line tables are relative to ``co_firstlineno``, so tracebacks and inspect see the file's
    own lines."""
    import types

    consts = tuple(_relocate(c, delta, filename) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + delta, co_filename=filename,
                        co_consts=consts)


def _incremental(code, filename, last, keep_going, cache, t, start, done, failed):
    """Stages 1-3 chunk by chunk, each distinct chunk parsed, compiled and checked once per
    cache: generated files repeat upstream definitions (all of timm: 817k lines, 80k
    distinct). Returns (target, proceed, code objects) or None, before reporting anything,
    when the file must be taken whole (a chunk that does not parse alone, a star import, a
    ``__future__`` import past the top)."""
    import __future__

    flags = 0
    for m in _FUTURE_IMPORT.finditer(code):
        for name in m.group(1).replace("(", " ").replace(")", " ").replace("\\", " ").split(","):
            feature = getattr(__future__, name.strip().split(" ")[0], None)
            if feature is None:
                return None
            flags |= feature.compiler_flag
    chunks = split_chunks(code)
    fresh: dict[bytes, ast.Module] = {}
    found: list[tuple[int, bytes, _Chunk | None]] = []
    for i, (line, text) in enumerate(chunks):
        if i and "__future__" in text and _FUTURE_IMPORT.search(text):
            return None
        key = _digest(text.encode()) + flags.to_bytes(4, "little")
        chunk = cache.chunks.get(key)
        if chunk is None and key not in fresh:
            try:
                fresh[key] = ast.parse(text, filename)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        found.append((line, key, chunk))
    exports = [(n, line + off - 1) for line, key, ch in found
               for n, off in (ch.exports if ch else _exports(fresh[key]))]
    classes = [c for _, key, ch in found
               for c in (ch.classes if ch else [st.name for st in fresh[key].body
                                                if isinstance(st, ast.ClassDef)])]
    target = exports[0][0] if exports else (classes[-1] if classes else None)
    done(StageVerdict("parse", True, time.perf_counter() - t, "",
                      {"target": target, "chunks": len(chunks), "new_chunks": len(fresh)}))
    if last < 1:
        return target, True, None
    # 2 compile: the new chunks, then every chunk moved to its place in this file
    t = start("compile")
    parts = []
    try:
        for (line, key, ch), (_, text) in zip(found, chunks):
            if ch is None:
                ch = cache.chunks.get(key) or _new_chunk(fresh[key], text, key, flags, cache)
            parts.append((line, key, ch))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:  # the whole file gives the error its true line
            compile(code, filename, "exec", flags=flags, dont_inherit=True)
            exc: BaseException = SyntaxError("a statement does not compile")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as whole:
            exc = whole
        cause = (taxonomy.from_syntax(exc, code, "compile") if isinstance(exc, SyntaxError)
                 else Cause("other", f"cannot compile: {type(exc).__name__}: {exc}",
                            {"stage": "compile"}))
        failed("compile", t, cause, _syntax_diag(exc))
        return target, False, None
    code_objects = [(_relocate(ch.code, line - 1, filename), bool(i and ch.doc_first))
                    for i, (line, _, ch) in enumerate(parts)]
    done(StageVerdict("compile", True, time.perf_counter() - t))
    if last < 2:
        return target, True, code_objects
    # 3 static
    t = start("static")
    bound: set[str] = set()
    star = False
    for _, _, ch in parts:
        bound |= ch.bound
        star = star or ch.star
    if star:  # pyflakes' star-import rules need the whole file
        tree = ast.parse(code, filename)
        undefined = undefined_names(tree, filename, code=code)
    else:
        undefined = []
        for line, key, ch in parts:

            def body(ch=ch, key=key):
                return (fresh.get(key) or ast.parse(ch.text, filename)).body

            undefined.extend({"name": n, "line": line + off, "kind": kind}
                             for n, off, kind in cache.unit(key, body, 1, bound, filename))
        undefined.extend({"name": n, "line": line, "kind": "UndefinedExport"}
                         for n, line in exports if n not in bound)
        if undefined:
            whole = ast.parse(code, filename)
            false = known_false_alarms(whole, code, undefined)
            scopes = _scopes(whole)
            undefined = sorted(({**u, "scope": _scope_at(scopes, u["line"])}
                                for u in undefined if (u["name"], u["line"]) not in false),
                               key=lambda u: u["line"])
    if undefined:
        cause = taxonomy.from_static(undefined)
        diag = "; ".join(f"line {u['line']}: undefined name {u['name']!r} in {u['scope']}"
                         for u in undefined[:5])
        if len(undefined) > 5:
            diag += f"; and {len(undefined) - 5} more"
        failed("static", t, cause, diag, {"undefined": undefined})
        return target, keep_going, code_objects
    done(StageVerdict("static", True, time.perf_counter() - t))
    return target, True, code_objects


def _new_chunk(tree: ast.Module, text: str, key: bytes, flags: int,
               cache: StaticCache) -> _Chunk:
    code = compile(tree, "<chunk>", "exec", flags=flags, dont_inherit=True)
    bound, star = module_bindings(tree, global_lines={
        i for i, ln in enumerate(text.split("\n"), 1) if _GLOBAL_STMT.match(ln)})
    body = tree.body
    chunk = _Chunk(
        text=text, code=code, bound=frozenset(bound), star=star,
        exports=tuple(_exports(tree)),
        classes=tuple(st.name for st in body if isinstance(st, ast.ClassDef)),
        doc_first=bool(body) and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str))
    cache._put(cache.chunks, key, chunk)
    return chunk


_GLOBAL_STMT = re.compile(r"\s+global\s+[A-Za-z_]")


def module_bindings(tree: ast.Module, global_lines: set[int] | None = None
                    ) -> tuple[set[str], bool]:
    """The names bound at module level anywhere in the file (in any order, under any
    condition, or through ``global`` in a function), and whether it has a star import.
    ``global_lines``: the only lines that may hold a ``global`` statement (None: any)."""
    bound: set[str] = set()
    star = False

    def targets(node) -> None:
        if isinstance(node, ast.Name):
            bound.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                targets(e)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    def block(body) -> None:
        nonlocal star
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(st.name)
                if global_lines is None or any(st.lineno <= n <= st.end_lineno
                                               for n in global_lines):
                    for node in treewalk.walk(st):
                        if isinstance(node, ast.Global):
                            bound.update(node.names)
            elif isinstance(st, ast.Import):
                bound.update((a.asname or a.name.split(".")[0]) for a in st.names)
            elif isinstance(st, ast.ImportFrom):
                for a in st.names:
                    if a.name == "*":
                        star = True
                    else:
                        bound.add(a.asname or a.name)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    targets(t)
            elif isinstance(st, ast.AugAssign) or (isinstance(st, ast.AnnAssign)
                                                   and st.value is not None):
                targets(st.target)  # ``X: T`` alone binds nothing, for pyflakes as for Python
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                targets(st.target)
                block(st.body)
                block(st.orelse)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                block(st.body)
            elif isinstance(st, (ast.If, ast.While)):
                block(st.body)
                block(st.orelse)
            elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
                block(st.body)
                for h in st.handlers:
                    if h.name:
                        bound.add(h.name)
                    block(h.body)
                block(st.orelse)
                block(st.finalbody)
            elif type(st).__name__ == "Match":
                for case in st.cases:
                    for node in treewalk.walk(case.pattern):
                        for attr in ("name", "rest"):
                            if isinstance(getattr(node, attr, None), str):
                                bound.add(getattr(node, attr))
                    block(case.body)
            if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Import, ast.ImportFrom)):
                for node in treewalk.walk(st) if _has_walrus(st) else ():
                    if isinstance(node, ast.NamedExpr):
                        targets(node.target)

    block(tree.body)
    return bound, star


def _has_walrus(st: ast.stmt) -> bool:
    return any(isinstance(n, ast.NamedExpr) for n in treewalk.walk(st)) if isinstance(
        st, (ast.Expr, ast.Assign, ast.If, ast.While, ast.AnnAssign, ast.AugAssign,
             ast.Return)) else False


def _exports(tree: ast.Module) -> list[tuple[str, int]]:
    """The names listed in a module-level ``__all__`` (list or tuple of strings)."""
    out = []
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            tgts = st.targets if isinstance(st, ast.Assign) else [st.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in tgts) and \
                    isinstance(st.value, (ast.List, ast.Tuple)):
                out.extend((e.value, st.lineno) for e in st.value.elts
                           if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return out


def _scopes(tree: ast.Module) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []

    def walk(node, prefix: str) -> None:
        for child in treewalk.children(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}.{child.name}" if prefix else child.name
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((start, child.end_lineno or child.lineno, q))
                walk(child, q)
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def _scope_at(scopes, line: int) -> str:
    best = None
    for start, end, q in scopes:
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, end, q)
    return best[2] if best else "module level"


def target_class(tree: ast.Module) -> str | None:
    """The block class of a file: the first name of ``__all__``, else its last class."""
    for name, _ in _exports(tree):
        return name
    classes = [st.name for st in tree.body if isinstance(st, ast.ClassDef)]
    return classes[-1] if classes else None


def _syntax_diag(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        text = (exc.text or "").strip()
        return f"line {exc.lineno}: {exc.msg}" + (f": {text[:120]}" if text else "")
    return f"{type(exc).__name__}: {exc}"


def _err_diag(err: dict) -> str:
    etype = str(err.get("type", "Error")).rsplit(".", 1)[-1]
    msg = str(err.get("message", "")).strip().splitlines()
    first = msg[0] if msg else ""
    where = ""
    frames = err.get("frames") or []
    mine = [f for f in frames if str(f.get("file", "")).endswith("block.py")]
    if mine:
        f = mine[-1]
        where = f" (line {f.get('line')}, in {f.get('func')})"
    return f"{etype}: {first[:300]}{where}"


def _ok_diag(stage: str, detail: dict) -> str:
    if stage == "instantiate":
        args = detail.get("args") or {}
        shown = ", ".join(f"{k}={v}" for k, v in args.items())
        if detail.get("call_site"):
            shown = f"as at {detail['call_site']}: {shown}"
        return f"({shown})" + (f", {detail['parameters']:,} parameters"
                               if "parameters" in detail else "")
    if stage == "forward":
        shp = "; ".join("x".join(map(str, s)) for s in detail.get("input", [])) or "no input"
        # a 0-d tensor (a loss) has the shape []: a scalar, not "no tensor"
        out = "; ".join("x".join(map(str, s)) or "scalar"
                        for s in detail.get("output", [])) or "no tensor"
        return f"{shp} -> {out}"
    return ""


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return repr(obj)
