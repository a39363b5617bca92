"""RunOrder: the order upstream's import of a module runs the statements of what it imports."""

from __future__ import annotations

from pathlib import Path

from helpers import module_index

from nnrag_tui.engine.imported_along import RunOrder


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def order_of(tmp_path: Path, files: dict[str, str], start: str,
             external: tuple[str, ...] = ("torch",)) -> RunOrder:
    index = module_index({"pkg": write(tmp_path / "src", files)})
    entry = index.find_module(start, None)
    assert entry is not None
    return RunOrder(index, entry, lambda m: m.split(".")[0] in external)


def key(module: str) -> tuple[str, str]:
    return ("pkg", module)


def test_packages_run_first_and_an_import_runs_its_module_before_the_lines_below(tmp_path):
    run = order_of(tmp_path, {
        "pkg/__init__.py": "from .b import x\n",
        "pkg/b.py": "x = 1\nfrom .c import y\nz = 2\n",
        "pkg/c.py": "y = 1\n",
        "pkg/a.py": "import torch\nfrom .c import y\nw = 3\n",
    }, "pkg.a")
    # pkg/__init__ -> b (line 1) -> c -> b (line 3) -> a
    assert run.position(key("pkg"), 1) < run.position(key("pkg.b"), 1)
    assert run.position(key("pkg.b"), 1) < run.position(key("pkg.c"), 1)
    assert run.position(key("pkg.c"), 1) < run.position(key("pkg.b"), 3)
    assert run.position(key("pkg.b"), 3) < run.position(key("pkg.a"), 3)


def test_a_package_that_imports_the_module_runs_it_inside_its_own_import(tmp_path):
    # importing pkg.mod runs pkg/__init__.py first, which imports pkg.mod at its line 1
    run = order_of(tmp_path, {
        "pkg/__init__.py": "from .mod import f\nafter = 1\n",
        "pkg/mod.py": "def f():\n    pass\n",
    }, "pkg.mod")
    assert run.position(key("pkg"), 1) < run.position(key("pkg.mod"), 1)
    assert run.position(key("pkg.mod"), 1) < run.position(key("pkg"), 2)


def test_a_cycle_runs_each_module_once_and_what_is_not_imported_has_no_position(tmp_path):
    run = order_of(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\nfrom . import typed\nA = 1\n",
        "pkg/b.py": "from . import a\nB = 1\n",
        "pkg/never.py": "N = 1\n",
        "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from . import never\n",
    }, "pkg.a")
    assert run.position(key("pkg.b"), 2) < run.position(key("pkg.a"), 3)
    assert run.position(key("pkg.typed"), 1) < run.position(key("pkg.a"), 3)
    assert run.position(key("pkg.never"), 1) is None  # only type checkers import it


def test_an_import_leads_to_the_importing_repository_s_own_module(tmp_path):
    # two repositories both have ``pkg.b``; the first has priority, but ``pkg.a`` of the
    # second imports its own, as the bindings resolve it
    first = write(tmp_path / "first", {"pkg/__init__.py": "", "pkg/b.py": "B = 1\n"})
    second = write(tmp_path / "second", {"pkg/__init__.py": "", "pkg/b.py": "B = 2\n",
                                         "pkg/a.py": "from .b import B\nA = B\n"})
    index = module_index({"first": first, "second": second})
    entry = next(e for e in index.entries.values() if e.key == ("second", "pkg.a"))
    run = RunOrder(index, entry, lambda m: m.split(".")[0] == "torch")
    assert run.position(("second", "pkg.b"), 1) < run.position(("second", "pkg.a"), 2)
    assert run.position(("first", "pkg.b"), 1) is None
