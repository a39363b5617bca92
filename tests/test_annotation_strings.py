"""A file that mixes modules with and without ``from __future__ import annotations`` cannot
have the import: the definitions from the modules that had it get their annotations written
as strings (engine.rewrite, ``quote``). Those strings must be exactly what the import makes of
them upstream, which CPython itself tells: each statement is run once compiled under the
import and once rewritten without it, and every annotation the two make is compared."""

from __future__ import annotations

import __future__

import pytest

from nnrag_tui.engine.rewrite import QUOTED, rewrite_statement

STATEMENTS = {
    "signature": (
        "def f(a: int, /, b: Optional[Tensor] = None, *args: Tuple[int, ...], c: 'Mlp',\n"
        "      d: Dict[str,  # a comment inside\n"
        "              List['Mlp']] = {}, **kw: Any) -> Callable[..., None]:\n"
        "    x: NotEvaluated = 1\n"
        "    return x\n"),
    "class body": (
        "class Config:\n"
        "    width: int = 8\n"
        "    act: Literal['relu', \"gelu\"] = 'relu'\n"
        "    layers: list[\n"
        "        Mlp\n"
        "    ]\n"
        "    def forward(self, x: Tensor | None) -> 'Tensor':\n"
        "        return x\n"),
    "made when a function runs": (
        "def make(dtype):\n"
        "    def kernel(x: array(ndim=4, dtype=dtype)) -> None:\n"
        "        y: Local = x\n"
        "    class Holder:\n"
        "        value: dtype\n"
        "    return kernel, Holder\n"),
    "module variable": "WIDTHS: dict[str, type[Mlp]] = {}\n",
    "starred": "def g(*args: *Ts) -> tuple[*Ts]:\n    return args\n",
}


def _annotations(code: str, flags: int) -> list[dict]:
    """Every annotation running ``code`` makes: the module's own, its functions' and its
    classes' with their methods' (``make``'s: those it returns once called)."""
    ns: dict = {}
    exec(compile(code, "<stmt>", "exec", flags=flags, dont_inherit=True), ns)  # noqa: S102
    made = list(ns["make"](float)) if "make" in ns else \
        [ns[k] for k in sorted(ns) if not k.startswith("__") and callable(ns[k])]
    found = [ns.get("__annotations__", {})]
    for obj in made:
        found.append(dict(vars(obj).get("__annotations__", {})) if isinstance(obj, type)
                     else obj.__annotations__)
        if isinstance(obj, type):
            found += [v.__annotations__ for v in vars(obj).values() if callable(v)]
    return found


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_written_strings_are_what_the_future_import_makes(name):
    text = STATEMENTS[name]
    out, log = rewrite_statement(text, {}, {}, quote=True)
    assert log == [QUOTED]
    upstream = _annotations(text, __future__.annotations.compiler_flag)
    assert any(upstream), "the statement makes annotations"
    assert _annotations(out, 0) == upstream


def test_a_local_variable_s_annotation_is_left_as_written():
    """Python never evaluates it, with the import or without: nothing to rewrite."""
    out, _ = rewrite_statement(STATEMENTS["signature"], {}, {}, quote=True)
    assert "    x: NotEvaluated = 1\n" in out
    out, _ = rewrite_statement(STATEMENTS["made when a function runs"], {}, {}, quote=True)
    assert "        y: Local = x\n" in out and "        value: 'dtype'\n" in out


def test_renames_are_made_inside_the_strings():
    """A clash renames ``Mlp`` in the file: the string names what the file binds, as the
    string upstream names what its module binds."""
    text = "def f(a: Mlp, b: 'Mlp', c: layers.Mlp) -> List[Mlp]:\n    return a\n"
    out, log = rewrite_statement(text, {"Mlp": "Mlp_1"}, {"layers.Mlp": "Mlp_1"}, quote=True)
    assert out.splitlines()[0] == \
        "def f(a: 'Mlp_1', b: \"'Mlp_1'\", c: 'Mlp_1') -> 'List[Mlp_1]':"
    assert "renamed `Mlp` -> `Mlp_1`" in log and QUOTED in log


def test_without_quote_annotations_stay_as_written():
    text = STATEMENTS["signature"]
    assert rewrite_statement(text, {}, {}) == (text, [])


def test_an_annotation_that_cannot_be_unparsed_stays_as_written(monkeypatch):
    """Should CPython's parser refuse the text, the statement still comes out, renamed."""
    from nnrag_tui.engine import rewrite

    def refuse(text, starred):
        raise SyntaxError("refused")

    monkeypatch.setattr(rewrite, "_unparsed", refuse)
    rewrite._cached.cache_clear()
    try:
        out, log = rewrite_statement("def f(a: Mlp) -> int:\n    return a\n", {"Mlp": "Mlp_1"},
                                     {}, quote=True)
    finally:
        rewrite._cached.cache_clear()
    assert out == "def f(a: Mlp_1) -> int:\n    return a\n"
    assert log == ["renamed `Mlp` -> `Mlp_1`"]


def test_only_typing_s_assert_type_has_forward_references():
    """torchtitan's ``spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})`` is spmd_types'
    function, whose dict keys are mesh dimensions: reading them as forward references left
    ``dp``, ``cp`` and ``tp`` unresolved in 26 of its files. typing's keeps its strings."""
    import ast

    from nnrag_tui.engine.modsource import typing_call_strings

    def strings(text: str) -> list[str]:
        return [c.value for c in typing_call_strings(ast.parse(text, mode="eval").body)]

    assert strings('spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})') == []
    assert strings('assert_type(x, "Model")') == ["Model"]
    assert strings('typing.assert_type(x, "Model")') == ["Model"]
    assert strings('typing_extensions.assert_type(x, list["Model"])') == ["Model"]


def test_a_cast_is_typing_s_only_after_a_name_bound_to_typing():
    """GPTQModel's triton kernels call ``tl.cast(tl.load(..., eviction_policy="evict_last"),
    ...)``: triton's ``cast``, whose first argument is a value. Read as typing's, its strings
    were forward references, and 175 of its files reported ``evict_last`` as unresolved.
    ``import typing as t`` makes ``t.cast("Model", x)`` typing's, whose string is a type."""
    from nnrag_tui.engine.modsource import ModuleSource

    ms = ModuleSource(
        "import typing as t\n"
        "import triton.language as tl\n"
        "\n"
        "def kernel(p):\n"
        "    return tl.cast(tl.load(p, eviction_policy='evict_last'), tl.float16)\n"
        "\n"
        "def typed(x):\n"
        "    return t.cast('Model', x)\n")
    kernel, typed = ms.stmts[2], ms.stmts[3]
    assert "evict_last" not in ms.uses(kernel).string_annotation_names
    assert ms.uses(typed).string_annotation_names == {"Model"}


def test_a_type_alias_s_strings_name_types(tmp_path):
    """GPTQModel's ``CalibrationInputType = Union[List[...], List[str], "HFDataset", ...]``:
    a string in a subscript of typing's is a forward reference, which pyflakes reads (and
    ``typing.get_type_hints`` looks up) in the module. The definition it names comes along,
    and a name nothing binds is reported, where before neither was read at all. A string in
    a subscript of anything else (``list["x"]``, ``Literal["x"]``) is a value."""
    from helpers import extract_tree
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    result = extract_tree(tmp_path, {"apkg/__init__.py": "", "apkg/net.py": (
        "import typing as t\nfrom typing import List, Literal, Union\n\nfrom torch import nn\n\n"
        "Inputs = Union[List[str], \"Missing\"]\nOther = t.Optional['Helper']\n"
        "Plain = (list[\"plain\"], Literal[\"mode\"])\n\n\nclass Helper:\n    pass\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x: Inputs, y: Other = None):\n"
        "        return x, Plain\n")})
    assert result.generated.unresolved == [("Missing", "apkg.net:6")]
    code = result.generated.code
    assert "class Helper:" in code
    import io
    out = io.StringIO()
    check(code, "Net.py", Reporter(out, out))
    line = _line(code, "Inputs =")
    assert out.getvalue().splitlines() == [f"Net.py:{line}:27: undefined name 'Missing'"]


def _line(code: str, start: str) -> int:
    return next(i for i, ln in enumerate(code.splitlines(), 1) if ln.startswith(start))


def test_a_rename_reaches_into_a_type_alias_s_strings():
    """Two ``Helper`` classes in one file: the one a type alias names by string is renamed
    there too, as it is in an annotation; a string in ``list[...]`` is not a type."""
    from nnrag_tui.engine.modsource import TypingNames

    typing = TypingNames(members=frozenset({"Union"}))
    out, log = rewrite_statement("Alias = (Union[int, 'Helper'], list['Helper'])\n",
                                 {"Helper": "Helper_1"}, {}, typing=typing)
    assert out == "Alias = (Union[int, 'Helper_1'], list['Helper'])\n"
    assert log == ["renamed `Helper` -> `Helper_1`"]
    out, _ = rewrite_statement("Alias = Union[int, 'Helper']\n", {"Helper": "Helper_1"}, {})
    assert out == "Alias = Union[int, 'Helper']\n"  # (Union not typing's here)


def test_annotated_metadata_holds_values_not_types():
    """boxmot's ``SessionIdentifier = Annotated[str, Path(pattern=r"^[A-Za-z0-9]...$")]``:
    what follows the type in ``Annotated[...]`` is metadata, whose strings pyflakes does not
    read as forward references (``Annotated[int, "meta"]`` would have read ``meta``); the
    type's own strings are."""
    import ast

    from nnrag_tui.engine.modsource import annotation_strings

    def strings(text: str) -> list[str]:
        return sorted(c.value for c in annotation_strings(ast.parse(text, mode="eval").body))

    assert strings('Annotated["Model", "meta", Path(pattern="x")]') == ["Model"]
    assert strings('typing.Annotated[Optional["Model"], Doc("text")]') == ["Model"]
    assert strings('Annotated["Model"]') == ["Model"]
    assert strings('Union["Model", Annotated[int, "meta"]]') == ["Model"]
