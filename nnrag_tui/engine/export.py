"""Exports out of the library: a block into another project's package, and the neutral specs of
many blocks as a JSON Lines dataset.

**Cross-repository export** (``plan_export`` / ``apply_export`` / ``export_block``). The block's
standalone file (freshly extracted, or a saved one) becomes a module of the target package.
Each top-level definition of that file gets a deep fingerprint: its AST without docstrings,
comments or formatting, the names it defines and the module-level names it uses replaced by
placeholders, together with the fingerprints of the definitions it uses and the identity of
every import it relies on (``torch.nn`` is ``torch.nn`` however it was imported). The target
package is scanned the same way, its imports followed inside the package. A definition whose
fingerprint is already in the package is imported from there (a relative import when the
target is a package) instead of being written again, and what only it needed is dropped.
Nothing is overwritten without ``force``; the plan lists every file and why.

**Spec dataset** (``spec_records`` / ``write_jsonl``): one JSON object per block with its
neutral spec (class, constructor and forward signatures, category, dependencies, externals,
provenance): no upstream code. Docstring summaries are upstream text too: they are left out
unless asked for.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.modsource import ModuleSource
from nnrag_tui.engine.parse import module_name, resolve_relative
from nnrag_tui.engine.paths import prepare_folder

SCAN_MAX_FILES = 5000
SCAN_MAX_BYTES = 2_000_000
_BUILTIN_NAMES = frozenset(dir(builtins))


class ExportError(NnragError):
    """The export cannot be done as asked (a missing target, a file it will not overwrite)."""


# -- fingerprints ----------------------------------------------------------------------------
@dataclass
class _Module:
    name: str  # dotted; "" for the file being exported
    is_package: bool
    source: ModuleSource
    path: Path | None = None


class _Fingerprints:
    """Deep fingerprints of the top-level statements of a set of modules, resolving names
    through each module's imports to statements of the other modules in the set."""

    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules
        self.memo: dict[tuple[str, int], str] = {}
        self.active: set[tuple[str, int]] = set()

    # names -------------------------------------------------------------------------------
    def resolve(self, mod: str, name: str, depth: int = 0) -> tuple[str, Any]:
        """What ``name`` means at the top level of ``mod``: ("def", [(mod, idx), ...]),
        ("ext", identity), ("builtin", name) or ("unresolved", name)."""
        m = self.modules[mod]
        binders = m.source.binders.get(name, [])
        defs = [i for i in binders if m.source.stmts[i].kind != "import"]
        if defs:
            return "def", [(mod, i) for i in defs]
        for i in binders:
            node = m.source.stmts[i].node
            for alias in node.names:  # type: ignore[attr-defined]
                if isinstance(node, ast.Import):
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound != name:
                        continue
                    target = alias.name if alias.asname else alias.name.split(".")[0]
                    return "ext", ("module:" if target in self.modules else "") + target
                bound = alias.asname or alias.name
                if bound != name:
                    continue
                base = resolve_relative(m.name, m.is_package, node.level,  # type: ignore
                                        node.module)  # type: ignore[attr-defined]
                if base in self.modules and depth < 20:
                    inner = self.resolve(base, alias.name, depth + 1)
                    if inner[0] != "unresolved":
                        return inner
                full = f"{base}.{alias.name}" if base else alias.name
                if full in self.modules:
                    return "ext", "module:" + full
                return "ext", full
        if name in _BUILTIN_NAMES:
            return "builtin", name
        return "unresolved", name

    # statements --------------------------------------------------------------------------
    def stmt(self, mod: str, idx: int) -> str:
        key = (mod, idx)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if key in self.active:
            return "cycle"
        self.active.add(key)
        try:
            fp = self._compute(mod, idx)
        finally:
            self.active.discard(key)
        self.memo[key] = fp
        return fp

    def _compute(self, mod: str, idx: int) -> str:
        m = self.modules[mod]
        st = m.source.stmts[idx]
        if st.kind not in ("class", "function", "import") and not _immutable(st.node):
            # state (``_ACTS = {}``, ``REG = Registry()``, a loop's variables): its own object,
            # however alike another module's is; what reads it differs from what reads that
            return f"state:{mod}:{idx}"
        node = ast.parse(m.source.stmt_text(st)).body[0]
        _strip_docstrings(node)
        uses = m.source.uses(st)
        free = uses.load | uses.lazy | uses.string_annotation_names
        own: dict[str, str] = {}
        deps: dict[str, str] = {}
        dep_fps: list[str] = []
        for n in treewalk.walk(node):
            names = _names_in(n)
            for ident, setter in names:
                if ident in st.binds:  # defined here (and maybe used here: recursion)
                    setter(own.setdefault(ident, f"__SELF{len(own)}__"))
                elif ident in free:
                    rep = deps.get(ident)
                    if rep is None:
                        kind, what = self.resolve(mod, ident)
                        if kind == "def":
                            rep = f"__DEP{len(dep_fps)}__"
                            dep_fps.append("+".join(self.stmt(dm, di) for dm, di in what))
                        elif kind == "ext":
                            rep = f"__EXT:{what}__"
                        elif kind == "builtin":
                            rep = ident
                        else:
                            rep = f"__UNRESOLVED:{ident}__"
                        deps[ident] = rep
                    setter(rep)
        shallow = ast.dump(node, annotate_fields=False, include_attributes=False)
        return hashlib.sha256("\x00".join([shallow, *dep_fps]).encode()).hexdigest()


Setter = Callable[[str], None]


def _names_in(n: ast.AST) -> list[tuple[str, Setter]]:
    """The identifiers a node holds that can refer to module-level names, each with a setter
    that replaces it."""
    out: list[tuple[str, Setter]] = []
    if isinstance(n, ast.Name):
        out.append((n.id, _setter(n, "id")))
    elif isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        out.append((n.name, _setter(n, "name")))
    elif isinstance(n, (ast.Global, ast.Nonlocal)):
        for i, ident in enumerate(n.names):
            out.append((ident, _item_setter(n.names, i)))
    return out


def _setter(node: ast.AST, attr: str) -> Setter:
    def set_(value: str) -> None:
        setattr(node, attr, value)
    return set_


def _item_setter(items: list[str], i: int) -> Setter:
    def set_(value: str) -> None:
        items[i] = value
    return set_


def _strip_docstrings(node: ast.AST) -> None:
    for sub in treewalk.walk(node):
        if isinstance(sub, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = sub.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                sub.body = body[1:] or [ast.Pass()]


def _skeleton(st) -> str:
    """A cheap pre-filter: the statement kind and its node types, docstrings left out."""
    out: list[str] = []
    stack: list[ast.AST] = [st.node]
    while stack and len(out) < 2000:
        n = stack.pop()
        out.append(type(n).__name__)
        children = list(treewalk.children(n))
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body \
                and _is_docstring(n.body[0]):
            children = [c for c in children if c is not n.body[0]]
        stack.extend(reversed(children))
    return st.kind + ":" + ",".join(out)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
        isinstance(node.value.value, str)


# -- the target package ----------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """Where an export goes: the folder, its dotted package (None: a plain folder whose
    modules import each other as top-level modules) and the import root."""

    folder: Path
    package: str | None
    root: Path

    def module_for(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return module_name(rel)[0]


def find_target(into: str | os.PathLike[str]) -> Target:
    """The package ``into`` belongs to: it is a package when it has an ``__init__.py``, and
    its parents are part of the package while they have one too."""
    folder = Path(into).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"export target {folder} is not a folder")
    # a folder still to be made joins the package its parent belongs to
    is_pkg = (folder / "__init__.py").is_file() if folder.exists() else (
        folder.parent / "__init__.py").is_file()
    if not is_pkg:
        return Target(folder, None, folder)
    root = folder
    while (root.parent / "__init__.py").is_file() and root.parent != root:
        root = root.parent
    top = root.parent
    parts = folder.relative_to(top).parts
    return Target(folder, ".".join(parts), top)


def _scan(target: Target, skip: Path | None, notes: list[str]) -> dict[str, _Module]:
    base = target.root / target.package.split(".")[0] if target.package else target.folder
    modules: dict[str, _Module] = {}
    if not base.is_dir():
        return modules
    files = sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts
                   and not any(part.startswith(".") for part in p.relative_to(base).parts))
    if target.package is None:
        files = [p for p in files if p.parent == base]
    if len(files) > SCAN_MAX_FILES:
        notes.append(f"target has {len(files)} Python files; only the first "
                     f"{SCAN_MAX_FILES} were scanned for reusable definitions")
        files = files[:SCAN_MAX_FILES]
    for p in files:
        if skip is not None and p.resolve() == skip.resolve():
            continue
        try:
            if p.stat().st_size > SCAN_MAX_BYTES:
                continue
            text = p.read_text(encoding="utf-8")
            src = ModuleSource(text, str(p))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
            notes.append(f"skipped {p}: {type(exc).__name__}")
            continue
        rel = p.relative_to(target.root).as_posix()
        name, is_pkg = module_name(rel)
        modules[name] = _Module(name, is_pkg, src, p)
    return modules


# -- plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileAction:
    path: Path
    action: str  # create | overwrite | unchanged | refuse
    reason: str = ""
    content: str | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {"path": str(self.path), "action": self.action, "reason": self.reason}


@dataclass(frozen=True)
class Reuse:
    name: str  # the name in the exported file
    module: str  # where it already is
    target_name: str  # its name there
    import_line: str

    def as_dict(self) -> dict:
        return {"name": self.name, "module": self.module, "target_name": self.target_name,
                "import": self.import_line}


@dataclass
class ExportPlan:
    block: str
    target: Target
    module: str  # the new module's dotted name (or file stem for a plain folder)
    files: list[FileAction]
    reused: list[Reuse]
    written: list[str]  # definitions (names) the new module contains
    dropped: list[str]  # definitions no longer needed because what used them is reused
    notes: list[str] = field(default_factory=list)
    already_present: Reuse | None = None
    code: str = ""

    @property
    def blocked(self) -> list[FileAction]:
        return [f for f in self.files if f.action == "refuse"]

    def as_dict(self) -> dict:
        return {"block": self.block, "target": str(self.target.folder),
                "package": self.target.package, "module": self.module,
                "files": [f.as_dict() for f in self.files],
                "reused": [r.as_dict() for r in self.reused], "written": self.written,
                "dropped": self.dropped, "notes": self.notes,
                "already_present": self.already_present.as_dict()
                if self.already_present else None}

    def text(self, dry_run: bool = False) -> str:
        verb = "would write" if dry_run else "wrote"
        where = self.target.package or str(self.target.folder)
        out = [f"{self.block} -> {where} (module {self.module})"]
        if self.already_present is not None:
            r = self.already_present
            out.append(f"  already present: {r.target_name} in {r.module}; nothing to write")
        for f in self.files:
            label = {"create": verb, "overwrite": f"{verb} (overwriting)",
                     "unchanged": "unchanged", "refuse": "refused"}[f.action]
            out.append(f"  {label}: {f.path}" + (f" ({f.reason})" if f.reason else ""))
        for r in self.reused:
            out.append(f"  reused: {r.name} from {r.module} ({r.import_line})")
        if self.written:
            out.append(f"  definitions written: {', '.join(self.written)}")
        if self.dropped:
            out.append(f"  not needed any more: {', '.join(self.dropped)}")
        out.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(out)


def module_stem(class_name: str) -> str:
    """``ConvNormAct`` -> ``conv_norm_act``; a valid, non-keyword identifier."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", class_name).lower()
    s = re.sub(r"\W+", "_", s).strip("_") or "block"
    if s[0].isdigit():
        s = "m_" + s
    import keyword

    return s + "_" if keyword.iskeyword(s) else s


def plan_export(code: str, class_name: str, into: str | os.PathLike[str], *,
                module: str | None = None, force: bool = False,
                label: str | None = None) -> ExportPlan:
    """The plan for writing ``code`` (a standalone block file whose block class is
    ``class_name``) as module ``module`` (default: the class name in snake case) of the
    package at ``into``. Writes nothing."""
    target = find_target(into)
    stem = module or module_stem(class_name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", stem):
        raise ExportError(f"invalid module name {stem!r}")
    dest = target.folder / f"{stem}.py"
    dotted = f"{target.package}.{stem}" if target.package else stem
    notes: list[str] = []
    try:
        src = ModuleSource(code, f"<{class_name}>")
    except SyntaxError as exc:
        raise ExportError(f"the block's file does not parse: {exc.msg} (line {exc.lineno})"
                          ) from None
    top = class_name.split(".")[0]
    roots = [i for i in src.binders.get(top, []) if src.stmts[i].kind != "import"]
    if not roots:
        raise ExportError(f"the block's file defines no {top!r}")
    modules = _scan(target, dest, notes)
    modules[""] = _Module("", False, src)
    fps = _Fingerprints(modules)

    # what the package already has, by fingerprint (pre-filtered by skeleton)
    mine = {i: _skeleton(st) for i, st in enumerate(src.stmts)
            if st.kind in ("class", "function") or (
                st.kind == "assign" and _immutable(st.node) and not _is_all(st.node))}
    wanted = set(mine.values())
    present: dict[str, tuple[str, str]] = {}
    for mname, m in sorted(modules.items()):
        if not mname:
            continue
        for st in m.source.stmts:
            if st.kind in ("import", "other") or _skeleton(st) not in wanted:
                continue
            try:
                fp = fps.stmt(mname, st.index)
            except (SyntaxError, ValueError, RecursionError):
                continue
            names = sorted(st.binds)
            if names and fp not in present:
                present[fp] = (mname, names[0])

    def match(i: int) -> tuple[str, str] | None:
        st = src.stmts[i]
        if i not in mine or len(st.binds) != 1:
            return None
        return present.get(fps.stmt("", i))

    # the block itself may be there already
    if len(roots) == 1 and (hit := match(roots[0])) is not None:
        reuse = _reuse(top, hit, target, dotted)
        plan = ExportPlan(label or class_name, target, dotted, [], [], [], [], notes,
                          already_present=reuse)
        return plan

    # needed statements: from the block, through dependencies, stopping at reused ones, and
    # from every statement no reused definition leads to: the file has it for what it does
    # (a registry's ``_ACTS["tanh"] = torch.tanh``, a class a decorator registers, a loop
    # filling a table), though no name of the block leads to it
    def reads(i: int) -> list[int]:
        st = src.stmts[i]
        if st.kind == "import":
            return []
        uses = src.uses(st)
        return [j for name in uses.load | uses.lazy | uses.string_annotation_names
                for j in src.binders.get(name, []) if j != i]

    read = [reads(i) for i in range(len(src.stmts))]
    deps = read.__getitem__

    reused: dict[int, tuple[str, str]] = {}
    for i in range(len(src.stmts)):
        if i not in roots and (hit := match(i)) is not None:
            reused[i] = hit
    behind: set[int] = set()  # what reused definitions lead to
    stack = [j for i in reused for j in deps(i)]
    while stack:
        i = stack.pop()
        if i not in behind and i not in reused:
            behind.add(i)
            stack.extend(deps(i))
    needed: list[int] = []
    seen: set[int] = set()
    stack = list(roots) + [i for i, st in enumerate(src.stmts)
                           if i not in behind and i not in reused and st.kind != "import"
                           or _is_all(st.node) or _is_alias_of(st, top)]
    while stack:
        i = stack.pop()
        if i in seen or i in reused:
            continue
        seen.add(i)
        needed.append(i)
        stack.extend(deps(i))
    wanted_reuse = {j for i in seen for j in read[i]}
    reused = {i: hit for i, hit in reused.items() if i in wanted_reuse}
    keep = set(needed)
    reuses = [_reuse(min(src.stmts[i].binds), hit, target, dotted)
              for i, hit in sorted(reused.items())]
    text = _render(code, src, keep, reuses, target, dotted)
    written = [n for i, st in enumerate(src.stmts) if i in keep and st.kind != "import"
               and not _is_all(st.node) for n in sorted(st.binds)]
    dropped = [n for i, st in enumerate(src.stmts) if i not in keep and i not in reused
               and st.kind != "import" for n in sorted(st.binds)]
    files: list[FileAction] = []
    if not target.folder.exists() and target.package:
        files.append(FileAction(target.folder / "__init__.py", "create",
                                "new subpackage", ""))
    files.append(_action(dest, text, force))
    return ExportPlan(label or class_name, target, dotted, files, reuses, written, dropped,
                      notes, code=text)


def _immutable(node: ast.stmt) -> bool:
    """Whether an assignment binds a value another module's equal one can stand for: built of
    constants and names, never a container display or a call (``_ACTS = {}`` in two modules
    are two registries; ``DEFAULT_DIM = 8`` is one value)."""
    value = getattr(node, "value", None)
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or value is None:
        return False
    return all(isinstance(n, (ast.Constant, ast.Name, ast.Attribute, ast.Tuple, ast.BinOp,
                              ast.UnaryOp, ast.Load, ast.operator, ast.unaryop))
               for n in treewalk.walk(value))


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def _is_alias_of(st, top: str) -> bool:
    """``Inner = Outer.Inner``: the generator's export of a nested block class."""
    node = st.node
    return (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == top)


def _reuse(name: str, hit: tuple[str, str], target: Target, dest_module: str) -> Reuse:
    module, target_name = hit
    alias = f" as {name}" if name != target_name else ""
    if target.package is None:
        line = f"from {module} import {target_name}{alias}"
    else:
        line = f"from {_relative(dest_module, module)} import {target_name}{alias}"
    return Reuse(name, module, target_name, line)


def _relative(dest_module: str, module: str) -> str:
    """How ``dest_module`` (a plain module) imports ``module`` relatively."""
    here = dest_module.split(".")[:-1]  # the destination's package
    there = module.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    dots = "." * (len(here) - common + 1)
    rest = ".".join(there[common:])
    return dots + rest


def _render(code: str, src: ModuleSource, keep: set[int], reuses: list[Reuse],
            target: Target, dotted: str) -> str:
    header = []
    for line in code.splitlines():
        if line.startswith("#"):
            header.append(line)
        else:
            break
    where = target.package or str(target.folder)
    header.append(f"# exported into {where} as {dotted.rsplit('.', 1)[-1]}"
                  + (": reuses " + ", ".join(f"{r.target_name} ({r.module})" for r in reuses)
                     if reuses else ""))
    parts = ["\n".join(header)]
    future = [src.stmt_text(st).rstrip() for i, st in enumerate(src.stmts)
              if i in keep and isinstance(st.node, ast.ImportFrom)
              and st.node.module == "__future__"]
    groups: dict[bool, list[str]] = {True: [], False: []}  # standard library first
    for i, st in enumerate(src.stmts):
        text = src.stmt_text(st).rstrip()
        if i in keep and st.kind == "import" and text not in future:
            groups[_is_stdlib(st.node)].append(text)
    if future:
        parts.append("\n".join(future))
    parts.extend("\n".join(g) for g in (groups[True], groups[False]) if g)
    if reuses:
        parts.append("\n".join(r.import_line for r in reuses))
    body = [src.stmt_text(st).rstrip() for i, st in enumerate(src.stmts)
            if i in keep and st.kind != "import"]  # upstream order: definition before use
    return "\n\n".join(parts) + "\n\n\n" + "\n\n\n".join(body) + "\n"


def _is_stdlib(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        top = (node.module or "").split(".")[0] if not node.level else ""
    else:
        top = node.names[0].name.split(".")[0]  # type: ignore[attr-defined]
    return top in getattr(sys, "stdlib_module_names", ())


def _action(path: Path, content: str, force: bool) -> FileAction:
    if path.is_dir():
        return FileAction(path, "refuse", "a folder has this name", content)
    if path.exists() or path.is_symlink():
        try:
            same = path.read_text(encoding="utf-8") == content
        except (OSError, UnicodeDecodeError):
            same = False
        if same:
            return FileAction(path, "unchanged", "identical file already there", content)
        if not force:
            return FileAction(path, "refuse", "exists (use --force to overwrite)", content)
        return FileAction(path, "overwrite", "", content)
    return FileAction(path, "create", "", content)


def apply_export(plan: ExportPlan) -> list[Path]:
    """Writes the plan's files (atomically); refuses, writing nothing, when one of them would
    overwrite a file without ``force``. Returns the paths written."""
    if plan.blocked:
        raise ExportError("refusing to overwrite " + ", ".join(
            f"{f.path} ({f.reason})" for f in plan.blocked))
    written: list[Path] = []
    try:
        for f in plan.files:
            if f.action in ("create", "overwrite") and f.content is not None:
                f.path.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(f.path, f.content)
                written.append(f.path)
    except OSError as exc:
        raise ExportError(f"cannot write {f.path}: {exc.strerror or exc}") from None
    return written


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def block_code(extractor=None, name: str = "", *, registry=None) -> tuple[str, str, str]:
    """The standalone file of a block to export: ``(code, class name, label)``, from the
    registry's saved file when ``registry`` is given, else freshly extracted."""
    if registry is not None:
        saved = registry.show(name)
        code = Path(saved.code_path).read_text(encoding="utf-8")
        cls = (saved.spec or {}).get("name") or (saved.manifest or {}).get("class") or name
        return code, cls, f"{saved.name} {saved.version}"
    res = extractor.extract_single_block(name)
    if not res.ok:
        raise ExportError(f"cannot export {name!r}: {res.error}")
    return res.generated.code, res.generated.name, res.block.key


def export_block(code: str, class_name: str, into: str | os.PathLike[str], *,
                 module: str | None = None, force: bool = False, dry_run: bool = False,
                 label: str | None = None) -> ExportPlan:
    """Plans, and unless ``dry_run`` applies, the export of a standalone block file."""
    plan = plan_export(code, class_name, into, module=module, force=force, label=label)
    if not dry_run and plan.already_present is None:
        apply_export(plan)
    return plan


# -- the spec dataset ------------------------------------------------------------------------
def neutral_spec(spec: dict, summaries: bool = False) -> dict:
    """A spec for the dataset: the docstring summary (upstream text) only when asked for."""
    out = dict(spec)
    if not summaries:
        out.pop("summary", None)
    return out


def spec_records(extractor, *, category: str | None = None, repo: str | None = None,
                 match: str | None = None, limit: int | None = None,
                 summaries: bool = False, registry=None,
                 progress: Callable[[int, int], None] | None = None) -> Iterator[dict]:
    """One record per block of the index: its neutral spec from a fresh extraction (a
    class-only spec, with ``error``, when the block cannot be extracted), plus the saved
    block's validation when ``registry`` holds it."""
    from nnrag_tui.engine.generate import regenerate
    from nnrag_tui.engine.spec import build_spec, find_class

    blocks = extractor.blocks(category=category, repo=repo, match=match)
    if limit is not None:
        blocks = blocks[:limit]
    roots = extractor.store.source_roots()
    resolver = extractor.resolver()
    saved = _saved_validations(registry) if registry is not None else {}
    for n, b in enumerate(blocks):
        rec: dict[str, Any] = {"id": f"{b.source}:{b.key}", "name": b.name, "key": b.key,
                               "repo": b.source, "category": b.category,
                               "upstream_lines": b.lines}
        try:
            _, g = regenerate(resolver, b, roots)
        except (NnragError, SyntaxError, RecursionError, ValueError, OSError) as exc:
            rec["extracted"] = False
            rec["error"] = f"{type(exc).__name__}: {exc}"
            try:
                ms = resolver.module_source(resolver.index.entries[(b.source, b.module)])
                cls = find_class(ast.Module(body=[s.node for s in ms.stmts], type_ignores=[]),
                                 b.qualname)
            except (NnragError, KeyError, SyntaxError, OSError):
                cls = None
            spec = build_spec(cls, name=b.name, qualname=b.full_name, category=b.category,
                              bases=list(b.bases), dependencies=[], externals=[],
                              source={"repo": b.source, "module": b.module,
                                      "path": b.relpath, "lines": [b.line, b.end_line]})
        else:
            rec["extracted"] = True
            rec["generated_lines"] = g.lines
            rec["unresolved"] = sorted({name for name, _ in g.unresolved})
            spec = g.spec
        rec["spec"] = neutral_spec(spec, summaries)
        val = saved.get((b.source, b.key))
        if val is not None:
            rec["validation"] = val
        if progress is not None:
            progress(n + 1, len(blocks))
        yield rec


def registry_spec_records(registry, summaries: bool = False) -> Iterator[dict]:
    """One record per saved block: its saved spec and validation verdict."""
    for row in registry.list():
        saved = registry.show(row.name)
        prov = saved.provenance or {}
        blk = prov.get("block") or {}
        rec: dict[str, Any] = {"id": f"{blk.get('repo')}:{blk.get('key')}", "name": row.name,
                               "version": saved.version, "key": blk.get("key"),
                               "repo": blk.get("repo"), "category": blk.get("category"),
                               "spec": neutral_spec(saved.spec or {}, summaries)}
        val = prov.get("validation")
        if val:
            rec["validation"] = {"validated": val.get("validated"), "level": val.get("level")}
        yield rec


def _saved_validations(registry) -> dict[tuple[str | None, str | None], dict]:
    out: dict[tuple[str | None, str | None], dict] = {}
    for row in registry.list():
        if getattr(row, "validated", None) is None:
            continue
        out[(getattr(row, "repo", None), getattr(row, "key", None))] = {
            "validated": row.validated, "level": getattr(row, "level", None),
            "saved_as": row.name}
    return out


def write_jsonl(records: Iterable[dict], path: str | os.PathLike[str] | None, *,
                force: bool = False, stream=None) -> int:
    """Writes the records one per line to ``path`` (atomically; refuses to overwrite without
    ``force``) or to ``stream``. Returns how many were written."""
    if path is None:
        n = 0
        for rec in records:
            stream.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
        return n
    p = Path(path)
    if p.exists() and not force:
        raise ExportError(f"refusing to overwrite {p} (use --force)")
    if p.exists() and p.is_dir():
        raise ExportError(f"{p} is a folder")
    problem = prepare_folder(p.parent)
    if problem:
        raise ExportError(f"cannot write {p}: {problem}")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                n += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        _discard(tmp)
        raise ExportError(f"cannot write {p}: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise
    return n


def _discard(tmp: Path) -> None:
    """Removes a half-written temporary file, if there is one to remove."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
