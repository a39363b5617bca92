"""Quality figures of a set of generated block files, the same measure for every tool:

- fresh-process import rate: bench/import_check.py imports each file in a fresh module namespace
  (torch warm, timm and torchvision blocked, so a file cannot lean on an installed copy);
- files with undefined names: pyflakes (undefined name / local / export), anywhere in the file,
  methods included (bench/extract_bench.py's check);
- definitions identical to upstream: every class and function the file defines at module level
  (also under a top-level ``if``/``try``), decorators included, compared with the definitions of the
  same name in the upstream sources (indentation normalised); those that differ from upstream only
  by missing decorators are counted apart;
- lines per file: median and maximum, physical lines and code lines (neither blank nor a
  comment, so a provenance header or blank-line conventions do not count).
"""

from __future__ import annotations

import ast
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from extract_bench import undefined_names

DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def code_lines(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))


def _norm(text: str) -> str:
    return "\n".join(ln.rstrip() for ln in textwrap.dedent(text).strip("\n").splitlines())


def _top_defs(tree: ast.Module):
    """Module-level definitions, also those under top-level if/try/with blocks."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, DEFS):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for part in ("body", "orelse", "finalbody"):
                todo.extend(getattr(node, part, []) or [])
            for h in getattr(node, "handlers", []) or []:
                todo.extend(h.body)


def _def_text(lines: list[str], node, with_decorators: bool = True) -> str:
    start = node.lineno
    if with_decorators and node.decorator_list:
        start = min(d.lineno for d in node.decorator_list)
    return _norm("".join(lines[start - 1:node.end_lineno]))


class Upstream:
    """Every definition's text in the upstream sources, by name."""

    def __init__(self, roots: list[Path]) -> None:
        self.texts: dict[str, set[str]] = {}
        self.bare: dict[str, set[str]] = {}  # without decorators, for decorated ones
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                try:
                    src = path.read_text(encoding="utf-8")
                    tree = ast.parse(src)
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    continue
                lines = src.splitlines(keepends=True)
                for node in ast.walk(tree):
                    if isinstance(node, DEFS):
                        self.texts.setdefault(node.name, set()).add(_def_text(lines, node))
                        if node.decorator_list:
                            self.bare.setdefault(node.name, set()).add(
                                _def_text(lines, node, with_decorators=False))


def import_check(files: list[str]) -> tuple[int, dict[str, str]]:
    ok, failures = 0, {}
    for i in range(0, len(files), 200):
        out = subprocess.run([sys.executable, "-I", str(HERE / "import_check.py"),
                              *files[i:i + 200]], capture_output=True, text=True,
                             check=False)
        seen = set()
        for line in out.stdout.splitlines():
            d = json.loads(line)
            seen.add(d["path"])
            if d["ok"]:
                ok += 1
            else:
                failures[Path(d["path"]).stem] = d["error"]
        for f in files[i:i + 200]:
            if f not in seen:
                failures[Path(f).stem] = "import check crashed"
    return ok, failures


def quality(files: list[str], upstream: Upstream) -> dict:
    """Figures over ``files`` (paths of generated .py files)."""
    imported, import_failures = import_check(files) if files else (0, {})
    undefined: dict[str, list[str]] = {}
    lines, sloc, defs, identical, stripped, unparsable = [], [], 0, 0, 0, []
    differing: dict[str, list[str]] = {}
    for f in files:
        code = Path(f).read_text(encoding="utf-8")
        lines.append(len(code.splitlines()))
        sloc.append(code_lines(code))
        msgs = undefined_names(code, f)
        if msgs:
            undefined[Path(f).stem] = msgs
        try:
            tree = ast.parse(code)
        except SyntaxError as exc:
            unparsable.append(f"{Path(f).stem}: {exc}")
            continue
        src = code.splitlines(keepends=True)
        for node in _top_defs(tree):
            defs += 1
            text = _def_text(src, node)
            if text in upstream.texts.get(node.name, ()):
                identical += 1
            else:
                if not node.decorator_list and text in upstream.bare.get(node.name, ()):
                    stripped += 1
                differing.setdefault(Path(f).stem, []).append(node.name)
    return {
        "files": len(files),
        "imported": imported,
        "import_failures": import_failures,
        "files_with_undefined_names": len(undefined),
        "undefined": undefined,
        "unparsable": unparsable,
        "definitions": defs,
        "definitions_identical": identical,
        "definitions_decorators_stripped": stripped,
        "definitions_differing": differing,
        "lines_median": statistics.median(lines) if lines else None,
        "lines_max": max(lines, default=None),
        "lines_total": sum(lines),
        "code_lines_median": statistics.median(sloc) if sloc else None,
        "code_lines_max": max(sloc, default=None),
    }
