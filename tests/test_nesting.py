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
