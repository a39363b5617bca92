"""Folders a module puts on ``sys.path`` as it runs (engine.syspath), where its source's absolute
imports then also start: torchxrayvision's ``jfhealthcare`` package inserts its own folder and
its modules import each other as top-level ``model``."""

from __future__ import annotations

import ast
import textwrap

import pytest

from nnrag_tui.engine.parse import parse_bytes
from nnrag_tui.engine.syspath import sys_path_folders


def folders(code: str, relpath: str) -> tuple[str, ...]:
    return sys_path_folders(ast.parse(textwrap.dedent(code)).body, relpath)


@pytest.mark.parametrize("expr, relpath, expected", [
    ("os.path.dirname(__file__)", "pkg/sub/__init__.py", ("pkg/sub",)),
    ("os.path.dirname(os.path.abspath(__file__))", "pkg/m.py", ("pkg",)),
    ("os.path.realpath(os.path.dirname(__file__))", "pkg/m.py", ("pkg",)),
    ("os.path.join(os.path.dirname(__file__), 'lib')", "pkg/m.py", ("pkg/lib",)),
    ("os.path.join(os.path.dirname(__file__), '..')", "pkg/sub/m.py", ("pkg",)),
    ("os.path.dirname(os.path.dirname(__file__))", "pkg/sub/m.py", ("pkg",)),
    ("str(Path(__file__).resolve().parent)", "pkg/m.py", ("pkg",)),
    ("str(Path(__file__).parent / 'vendor')", "pkg/m.py", ("pkg/vendor",)),
    ("str(Path(__file__).parents[1])", "pkg/sub/m.py", ("pkg",)),
    ("os.path.dirname(__file__)", "top.py", (".",)),
])
def test_the_folder_of_a_path_made_from_file(expr, relpath, expected):
    assert folders(f"import os, sys\nsys.path.insert(0, {expr})\n", relpath) == expected
    assert folders(f"import os, sys\nsys.path.append({expr})\n", relpath) == expected


def test_a_name_bound_above_and_a_guarded_insert():
    code = """
        import os, sys
        here = os.path.dirname(__file__)
        if here not in sys.path:
            sys.path.insert(0, here)
    """
    assert folders(code, "pkg/sub/__init__.py") == ("pkg/sub",)


def test_what_cannot_be_worked_out_or_leaves_the_source_is_left_out():
    code = """
        import os, sys
        sys.path.append("/opt/lib")
        sys.path.insert(0, os.getcwd())
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        here = os.path.dirname(__file__)
        here = os.environ["X"]
        sys.path.insert(0, here)
        sys.path.insert(0, os.path.dirname(__file__), "extra")
    """
    assert folders(code, "top.py") == ()


def test_a_relative_path_of_its_own_is_kept_marked_as_the_working_folders():
    """KAIR's ``sys.path.insert(0, 'models')`` points into the working folder, whichever it
    is: kept, marked, for engine.bindings; a path above it is left out like the others."""
    code = """
        import sys
        op_path = 'models'
        if op_path not in sys.path:
            sys.path.insert(0, op_path)
        sys.path.insert(0, 'models')
        sys.path.append('./lib/')
        sys.path.append('../other')
    """
    assert folders(code, "models/net.py") == ("cwd:models", "cwd:lib")


def test_inside_a_function_it_runs_only_when_called():
    code = """
        import os, sys
        def setup():
            sys.path.insert(0, os.path.dirname(__file__))
    """
    assert folders(code, "pkg/m.py") == ()


def test_a_script_run_is_not_the_module_as_imported():
    """The index keeps what the module does as it is imported, not as a script."""
    code = textwrap.dedent("""
        import os, sys
        if __name__ == "__main__":
            sys.path.insert(0, os.path.dirname(__file__))
        sys.path.append(os.path.join(os.path.dirname(__file__), "vendor"))
    """).encode()
    facts = parse_bytes(code, "pkg/tool.py")
    assert facts.path_inserts == ("pkg/vendor",)
