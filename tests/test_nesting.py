"""A module upstream imports only in a ``try`` that catches ImportError goes inside that ``try``
(engine.nesting): the text it becomes behaves as upstream's import did, with the package
missing and with it there. The golden case ``optional_module`` covers the whole file."""

from __future__ import annotations

from nnrag_tui.engine.rewrite import ImportEdits, indented, rewrite_statement

GUARD = "try:\n    from .kernels import fused\nexcept ImportError:\n    fused = None\n"


def _nest(package: str) -> str:
    code = f'import {package}\n\n\ndef fused(x):\n    """Doubles.\n\n    Twice.\n    """\n' \
           "    return 2 * x\n"
    imports = ImportEdits(guarded={(2, "fused"): None},
                          nested={2: (code, "kernels.py runs inside this `try`")})
    out, log = rewrite_statement(GUARD, {}, {}, imports)
    assert sorted(log) == ["guarded import of `fused` dropped (inlined)",
                           "kernels.py runs inside this `try`"]
    return out


def test_without_the_package_the_fallback_holds():
    namespace: dict = {}
    exec(_nest("nnrag_missing_kernels"), namespace)  # noqa: S102  (the text it became)
    assert namespace["fused"] is None


def test_with_the_package_the_module_runs_and_its_docstring_is_upstreams():
    namespace: dict = {}
    exec(_nest("math"), namespace)  # noqa: S102
    assert namespace["fused"](3) == 6
    assert namespace["fused"].__doc__ == "Doubles.\n\n    Twice.\n    "


def test_the_try_body_ends_with_the_module_no_blank_lines_before_except():
    assert "        return 2 * x\nexcept ImportError:\n" in _nest("math")


def test_indented_leaves_blank_lines_and_string_continuations():
    code = 'x = """a\nb"""\n\ny = f"""{x}\nc"""\n'
    assert indented(code, "    ") == '    x = """a\nb"""\n\n    y = f"""{x}\nc"""\n'


CUROPE = {
    "models/curope/__init__.py": "from .curope2d import cuRoPE2D\n",
    "models/curope/curope2d.py": (
        "import torch\n\n"
        "try:\n"
        "    import nnrag_missing_curope as _kernels  # installed\n"
        "except ModuleNotFoundError:\n"
        "    from . import curope as _kernels  # built in place\n\n\n"
        "class cuRoPE2D(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return _kernels.rope_2d(x)\n"),
    "models/pos_embed.py": (
        "import torch\n\n"
        "try:\n"
        "    from models.curope import cuRoPE2D\n"
        "    RoPE2D = cuRoPE2D\n"
        "except ImportError:\n"
        "    class RoPE2D(torch.nn.Module):\n"
        "        slow = True\n\n"
        "        def forward(self, x):\n"
        "            return x\n"),
}


def test_a_module_whose_own_try_fails_on_every_branch_goes_inside_the_guard(tmp_path):
    """CroCo's ``curope2d.py`` imports its compiled kernels in a ``try`` whose ``except
    ModuleNotFoundError:`` imports them too (installed, or built in place), and
    ``pos_embed.py`` imports it in a ``try`` whose ``except ImportError:`` defines a slower
    ``RoPE2D``. Without the kernels upstream's ``RoPE2D`` is that one; the file held the
    kernels' ``try`` at its top and raised ModuleNotFoundError as a whole."""
    import subprocess
    import sys

    from helpers import extract_tree

    res = extract_tree(tmp_path, CUROPE, "models.pos_embed:RoPE2D")
    code = res.generated.code
    assert "runs inside this `try`, indented" in code
    path = tmp_path / "RoPE2D.py"
    path.write_text(code)
    run = subprocess.run([sys.executable, "-I", "-c",
                          f"import runpy; print(runpy.run_path({str(path)!r})['RoPE2D'].slow)"],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


def test_a_block_left_empty_is_found_in_handlers_and_cases_not_in_expressions():
    """The statements that become ``pass`` when nothing is left of them: the only one of a
    ``try``'s body, of an ``except`` handler and of a ``case``; a lambda in a statement holds
    no block of statements."""
    import ast

    from nnrag_tui.engine.rewrite import _alone_in_block

    tree = ast.parse("try:\n    import a\nexcept ImportError:\n    import b\n"
                     "match x:\n    case 1:\n        y = f(lambda: 0)\n    case _:\n"
                     "        import c\n        import d\n")
    tried, matched = tree.body
    lone = {id(tried.body[0]), id(tried.handlers[0].body[0]), id(matched.cases[0].body[0])}
    assert _alone_in_block(tree, lambda st, module_level: False) == lone
    # a block whose every statement leaves nothing: its first statement
    assert _alone_in_block(tree, lambda st, module_level: isinstance(st, ast.Import)) == \
        lone | {id(matched.cases[1].body[0])}
