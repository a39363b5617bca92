"""parse: one file in, plain data out. Imports in their original form, guards, symbols with
exact spans, and every kind of unparseable file recorded with a reason (never an exception)."""

from __future__ import annotations

import pickle
import sys

import pytest
from helpers import fixture

from nnrag_tui.engine.parse import module_name, parse_bytes, read_facts, resolve_relative

PKG = fixture("parse_pkg")


def facts_of(rel: str):
    f = parse_bytes((PKG / rel).read_bytes(), rel)
    assert f.ok, f.error
    return f


def imports_by_bound(facts):
    out = {}
    for imp in facts.imports:
        out.setdefault(imp.bound, []).append(imp)
    return out


def sym(facts, qualname: str, kind: str | None = None):
    found = [s for s in facts.symbols if s.qualname == qualname and (kind is None or
                                                                     s.kind == kind)]
    assert found, f"no symbol {qualname}"
    return found[0]


@pytest.fixture(scope="module")
def mod():
    return facts_of("pkg/sub/deep/mod.py")


# -- module names and relative imports -----------------------------------------------------
def test_module_names():
    assert module_name("timm/layers/mlp.py") == ("timm.layers.mlp", False)
    assert module_name("timm/layers/__init__.py") == ("timm.layers", True)
    assert module_name("top.py") == ("top", False)


@pytest.mark.parametrize("module,is_pkg,level,name,expected", [
    ("pkg.sub.mod", False, 1, None, "pkg.sub"),
    ("pkg.sub.mod", False, 1, "x", "pkg.sub.x"),
    ("pkg.sub.mod", False, 2, "x", "pkg.x"),
    ("pkg.sub", True, 1, "mlp", "pkg.sub.mlp"),  # from a package __init__: its own package
    ("pkg.sub", True, 2, None, "pkg"),
    ("pkg", True, 2, None, ""),  # above the top package
    ("pkg.sub.mod", False, 5, "x", ""),
    ("pkg.mod", False, 0, "os.path", "os.path"),
])
def test_resolve_relative(module, is_pkg, level, name, expected):
    assert resolve_relative(module, is_pkg, level, name) == expected


def test_relative_imports_at_every_level(mod):
    imps = imports_by_bound(mod)
    sibling = imps["sibling"][0]
    assert (sibling.module, sibling.name, sibling.level, sibling.target) == (
        "", "sibling", 1, "pkg.sub.deep")
    assert imps["parent_thing"][0].target == "pkg.sub"
    other = imps["other_thing"][0]
    assert (other.module, other.name, other.asname, other.level, other.target) == (
        "other", "thing", "other_thing", 2, "pkg.sub.other")
    assert other.full_name() == "pkg.sub.other.thing"
    assert imps["Mlp"][0].target == "pkg.layers" and imps["Mlp"][0].level == 3
    assert imps["too_far"][0].target == ""  # climbs above the top package


def test_relative_imports_from_package_init():
    init = facts_of("pkg/layers/__init__.py")
    assert init.module == "pkg.layers" and init.is_package
    imps = imports_by_bound(init)
    assert imps["Mlp"][0].target == "pkg.layers.mlp"
    assert imps["deep"][0].target == "pkg.sub"  # `from ..sub import deep`
    assert imps["h"][0].full_name() == "pkg.sub.deep.mod.helper"
    top = facts_of("pkg/__init__.py")
    assert imports_by_bound(top)["above_top"][0].target == ""


def test_aliases_keep_original_form(mod):
    imps = imports_by_bound(mod)
    np_ = imps["np"][0]
    assert (np_.module, np_.name, np_.asname, np_.full_name()) == ("numpy", None, "np", "numpy")
    abc_mod = imps["abc_mod"][0]
    assert abc_mod.full_name() == "a.b.c"  # import a.b.c as abc_mod binds the leaf module
    os_ = imps["os"][0]
    assert (os_.module, os_.full_name()) == ("os.path", "os")  # import os.path binds os
    t = imps["T"][0]
    assert (t.module, t.name, t.asname, t.full_name()) == ("torch", "Tensor", "T",
                                                           "torch.Tensor")
    assert imps["nn"][0].full_name() == "torch.nn"


def test_star_import_recorded():
    top = facts_of("pkg/__init__.py")
    stars = [i for i in top.imports if i.is_star]
    assert len(stars) == 1
    assert (stars[0].target, stars[0].level, stars[0].module) == ("pkg.layers", 1, "layers")


def test_all_literal_plus_equals_extend_append():
    top = facts_of("pkg/__init__.py")
    assert top.all_names == ("Renamed", "layers", "Mlp", "Extra", "More", "One")
    assert facts_of("pkg/layers/mlp.py").all_names == ("Mlp",)  # a tuple literal
    assert facts_of("pkg/layers/__init__.py").all_names is None  # no __all__ at all


def test_all_that_is_not_a_literal_is_unknown():
    f = parse_bytes(b"from .a import names\n__all__ = list(names)\n", "p/m.py")
    assert f.ok and f.all_names is None


@pytest.mark.parametrize("src", [
    # torchquantum's standard gates: computed, then a literal extend of seven more names;
    # taking the extend alone exported 7 of the module's 60 gates
    "gates = [A, B]\n__all__ = [g.__name__ for g in gates]\n__all__.extend(['C', 'D'])\n",
    "__all__ = ['A']\n__all__ += sub.__all__\n",
    "__all__ = ['A']\n__all__.extend(sub.__all__)\n",
    "__all__ = ['A']\n__all__.append(name)\n",
])
def test_all_computed_anywhere_is_unknown(src):
    f = parse_bytes(src.encode(), "p/m.py")
    assert f.ok and f.all_names is None


def test_all_literal_after_a_computed_one_is_known_again():
    f = parse_bytes(b"__all__ = list(names)\n__all__ = ['A']\n__all__ += ['B']\n", "p/m.py")
    assert f.all_names == ("A", "B")


# -- guards --------------------------------------------------------------------------------
def test_try_except_importerror_guard(mod):
    imps = imports_by_bound(mod)
    g = imps["special"][0].guard
    assert (g.kind, g.test) == ("try", "ImportError")
    fallback = [s for s in mod.symbols if s.name == "special"]
    assert [s.guard.kind for s in fallback] == ["except"]
    has = [s.guard.kind for s in mod.symbols if s.name == "HAS_SCIPY"]
    assert has == ["try", "except"]


def test_type_checking_guard(mod):
    seq = imports_by_bound(mod)["Sequence"][0]
    assert seq.guard.kind == "type_checking"
    alt = sym(mod, "Sequence", "assign")  # the else branch runs at runtime: a plain `if`
    assert alt.guard.kind == "if" and alt.guard.test == "TYPE_CHECKING"


def test_typing_dot_type_checking_is_recognised():
    f = parse_bytes(b"import typing\nif typing.TYPE_CHECKING:\n    import torch\n", "m.py")
    assert [i.guard.kind for i in f.imports if i.bound == "torch"] == ["type_checking"]


def test_guarded_constants_keep_both_branches_and_the_test(mod):
    limits = [s for s in mod.symbols if s.name == "LIMIT"]
    assert [(s.line, s.guard.kind) for s in limits] == [(33, "if"), (35, "if")]
    assert limits[0].guard.test == "sys.version_info >= (3, 9)"
    assert limits[0].guard.line == 32 and limits[0].guard.end_line == 35
    width = sym(mod, "WIDTH")
    assert width.kind == "assign" and width.guard.kind == ""


# -- classes and functions -----------------------------------------------------------------
def test_nested_classes(mod):
    outer = sym(mod, "Outer")
    inner = sym(mod, "Outer.Inner")
    deepest = sym(mod, "Outer.Inner.Deepest")
    assert (inner.parent, deepest.parent) == ("Outer", "Outer.Inner")
    assert inner.name == "Inner" and inner.bases == ("nn.Module",)
    assert "forward" in inner.methods and "Inner" in outer.methods
    assert outer.line == 49 and outer.end_line == 69
    assert outer.doc == "Outer block."
    assert outer.parent is None


def test_decorators_are_inside_the_span(mod):
    d = sym(mod, "Decorated")
    assert d.decorators == ("register('decorated')", "torch.jit.interface")
    assert (d.line, d.def_line, d.end_line) == (77, 79, 81)
    f = sym(mod, "frozen")
    assert f.kind == "function" and f.decorators == ("torch.no_grad()",)
    assert (f.line, f.def_line) == (44, 45)
    lines = (PKG / "pkg/sub/deep/mod.py").read_text().splitlines()
    assert lines[d.line - 1].startswith("@register")
    assert lines[d.end_line - 1].strip() == "return x"


def test_abstract_methods_and_keywords(mod):
    base = sym(mod, "Base")
    assert set(base.abstract_methods) == {"build", "forward"}
    assert base.bases == ("nn.Module", "ABC")
    assert sym(mod, "Meta").keywords == ("metaclass=abc.ABCMeta",)
    assert sym(mod, "Outer").abstract_methods == ()


def test_forward_raising_not_implemented(mod):
    assert sym(mod, "RaisesForward").forward_raises  # docstring + raise NotImplementedError(...)
    assert sym(mod, "RaisesBare").forward_raises
    assert not sym(mod, "RaisesSometimes").forward_raises
    assert not sym(mod, "Outer").forward_raises


def test_calls_are_calls_not_definitions(mod):
    outer = sym(mod, "Outer")
    assert "nn.functional.gelu" in outer.calls and "torch.relu" in outer.calls
    assert "forward" not in outer.calls and "Inner" not in outer.calls


def test_assigning_into_an_attribute_or_item_binds_no_name():
    # yolov5's utils/general.py: ``os.environ[...] = ...`` once made ``os`` a module-level
    # definition of that module, and the generated file lost its ``import os``
    src = (b"import os\n_REG = {}\nkey = 'a'\nos.environ['X'] = '1'\n_REG[key] = 2\n"
           b"os.sep_alias: str = '/'\nx, (y, z) = 1, (2, 3)\nw += 1\n")
    f = parse_bytes(src, "m.py")
    assert f.ok, f.error
    assigned = sorted(s.name for s in f.symbols if s.kind == "assign")
    assert assigned == ["_REG", "key", "w", "x", "y", "z"]


def test_facts_pickle_for_the_process_pool(mod):
    assert pickle.loads(pickle.dumps(mod)) == mod


# -- files that cannot be indexed: a reason, never an exception ----------------------------
def test_syntax_error_gives_line():
    f = parse_bytes(b"import torch\n\nclass A(:\n    pass\n", "bad.py")
    assert not f.ok
    assert f.error.startswith("syntax error at line 3")
    assert f.symbols == () and f.sha1


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python parses 3.12 syntax")
@pytest.mark.parametrize("src", [
    b"from dataclasses import dataclass\n\n@dataclass\nclass Pipeline[TIn, TOut](Base):\n    x: int\n",
    b"def load[T: JsonLike](path, obj: T) -> T:\n    return obj\n",
    b"type Pair[T] = tuple[T, T]\n",
])
def test_syntax_of_a_newer_python_is_said_so(src):
    """lerobot needs Python 3.12: its files fail here, and the reason says why."""
    f = parse_bytes(src, "new.py")
    assert not f.ok and f.error.startswith("syntax error at line")
    assert "Python 3.12 syntax, and nnrag runs on Python 3.11 here" in f.error


def test_python2_file_fails_with_reason():
    f = parse_bytes(b"print 'hello'\n", "py2.py")
    assert not f.ok and "syntax error at line 1" in f.error


def test_non_utf8_without_cookie_fails_with_reason():
    f = parse_bytes(b"NAME = 'caf\xe9'\nclass A:\n    pass\n", "latin.py")
    assert not f.ok
    assert f.error.startswith("undecodable") and "utf-8" in f.error


def test_latin1_with_coding_cookie_parses():
    data = (b"# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\n\nclass Caf:\n"
            b"    \"\"\"Caf\xe9 block.\"\"\"\n")
    f = parse_bytes(data, "latin.py")
    assert f.ok, f.error
    assert sym(f, "Caf").doc == "Café block."
    assert sym(f, "Caf").line == 4


def test_utf8_bom_parses_with_correct_lines():
    f = parse_bytes(b"\xef\xbb\xbfimport torch\n\nclass A(torch.nn.Module):\n    pass\n", "bom.py")
    assert f.ok, f.error
    assert sym(f, "A").line == 3
    assert f.imports[0].bound == "torch"


def test_nul_bytes_are_binary():
    f = parse_bytes(b"x = 1\n\0\0\0", "blob.py")
    assert not f.ok and "NUL" in f.error


def test_crlf_line_endings():
    f = parse_bytes(b"x = 1\r\n\r\nclass B:\r\n    pass\r\n", "crlf.py")
    assert f.ok and sym(f, "B").line == 3 and f.lines == 4


def test_empty_file():
    f = parse_bytes(b"", "pkg/__init__.py")
    assert f.ok and f.symbols == () and f.is_package and f.lines == 0


def test_oversize_file_is_not_read(tmp_path):
    (tmp_path / "big.py").write_text("x = 1\n" * 1000)
    facts, mtime = read_facts(str(tmp_path), "big.py", max_bytes=1000)
    assert not facts.ok and facts.error.startswith("too large")
    assert mtime > 0


def test_vanished_fifo_and_directory_files_are_recorded_not_read(tmp_path):
    import os

    facts, _ = read_facts(str(tmp_path), "missing.py", max_bytes=1000)
    assert not facts.ok and facts.error == "vanished while indexing"
    os.mkfifo(tmp_path / "fifo.py")  # reading it would block forever
    facts, _ = read_facts(str(tmp_path), "fifo.py", max_bytes=1000)
    assert not facts.ok and facts.error == "not a regular file"
    (tmp_path / "dir.py").mkdir()
    facts, _ = read_facts(str(tmp_path), "dir.py", max_bytes=1000)
    assert not facts.ok and facts.error == "not a regular file"


def test_read_facts_skips_identical_bytes(tmp_path):
    (tmp_path / "m.py").write_text("class A:\n    pass\n")
    first, _ = read_facts(str(tmp_path), "m.py", 10_000)
    again, _ = read_facts(str(tmp_path), "m.py", 10_000, expected_sha1=first.sha1)
    assert again is None
    changed, _ = read_facts(str(tmp_path), "m.py", 10_000, expected_sha1="0" * 40)
    assert changed == first


@pytest.mark.parametrize("data", [
    b"x = " + b"(" * 10000 + b"1" + b")" * 10000 + b"\n",
    b"x = " + b"[" * 10000 + b"]" * 10000 + b"\n",
    b"x = " + b"+".join([b"1"] * 100000) + b"\n",
    b"class A(" + b".".join([b"a"] * 50000) + b"):\n    pass\n",
    b"@" + b"+".join([b"d"] * 50000) + b"\nclass A:\n    pass\n",
    b"f = " + b"lambda: " * 5000 + b"1\n",
    b"".join(b" " * i + b"if x:\n" for i in range(150)) + b" " * 150 + b"pass\n",
], ids=["parens", "brackets", "binop-chain", "attribute-chain", "decorator", "lambdas",
        "indentation"])
def test_pathological_nesting_fails_cleanly(data):
    f = parse_bytes(data, "deep.py")
    assert not f.ok
    assert "nested" in f.error or "syntax error" in f.error


def test_deep_but_legal_class_nesting_is_parsed():
    src = "".join("    " * i + f"class C{i}:\n" for i in range(60)) + "    " * 60 + "pass\n"
    f = parse_bytes(src.encode(), "nest.py")
    assert f.ok
    assert len([s for s in f.symbols if s.kind == "class"]) == 60


def test_statements_that_store_into_the_module_namespace_are_recorded():
    """pyro's loop ``locals()[_name] = _PyroDist``, schnetpack's ``globals().update(...)`` and
    ``setattr(sys.modules[__name__], ...)`` bind names no statement spells out: the index
    keeps their lines. A function storing into ``globals()`` when it is called (torchani's
    module ``__getattr__``) or a store into ``os.environ`` is not one."""
    src = b'''import os
import sys

os.environ["X"] = "1"


def __getattr__(name):
    globals()[name] = 1
    return 1


for _name in ("A", "B"):
    locals()[_name] = type(_name, (), {})
globals().update({"C": 3})
if True:
    setattr(sys.modules[__name__], "D", 4)
vars()["E"] = 5
table = dict(globals())
'''
    facts = parse_bytes(src, "pkg/m.py")
    assert facts.namespace_writes == (12, 14, 15, 17)
    assert parse_bytes(b"import os\nos.environ['X'] = '1'\n", "pkg/n.py").namespace_writes == ()


def test_module_level_calls_of_a_function_storing_into_globals_are_recorded():
    """CrypTen's ``regular.py`` makes the names of its ``__all__`` by calling, in a module-level
    loop, a function whose body stores into ``globals()``: the loop is such a statement. A
    call of a function that stores into its own ``locals()``, or one inside another function,
    is not."""
    src = b'''__all__ = ["flatten", "view"]


def _add(name):
    def fn(self):
        return getattr(self, name)()

    if name not in globals():
        globals()[name] = fn


def _local(name):
    locals()[name] = 1


def later():
    _add("squeeze")


for function_name in __all__:
    _add(function_name)
_local("x")
'''
    facts = parse_bytes(src, "pkg/regular.py")
    assert facts.namespace_writes == (20,)


# -- a module bound by importlib.import_module of one string -------------------------------

def _module_imports(src: str, rel: str = "pkg/sub/mod.py"):
    return {r.bound: (r.target, r.level, r.line) for r in
            parse_bytes(src.encode(), rel).module_imports}


def test_import_module_of_a_string_is_recorded_as_an_import():
    # physicsnemo's preconditioners: ``network_module = importlib.import_module("...")``
    src = ("import importlib\nfrom importlib import import_module as im\n"
           "nets = importlib.import_module('pkg.nets')\n"
           "sib = im('.sibling', __package__)\n"
           "own = importlib.import_module('.inner', package=__name__)\n"
           "up = importlib.import_module('..top', __package__)\n")
    assert _module_imports(src) == {"nets": ("pkg.nets", 0, 3),
                                    "sib": ("pkg.sub.sibling", 1, 4),
                                    "own": ("pkg.sub.mod.inner", 1, 5),
                                    "up": ("pkg.top", 2, 6)}
    # ``import importlib.util`` binds ``importlib`` too
    assert _module_imports("import importlib.util\nx = importlib.import_module('pkg.a')\n") \
        == {"x": ("pkg.a", 0, 2)}
    # in a package's ``__init__``, ``__name__`` and ``__package__`` are the package
    assert _module_imports("import importlib\nx = importlib.import_module('.a', __name__)\n",
                           "pkg/sub/__init__.py") == {"x": ("pkg.sub.a", 1, 2)}


@pytest.mark.parametrize("src", [
    "x = importlib.import_module('pkg.nets')\n",  # importlib not imported: some other name
    "import importlib.util as ilu\nx = ilu.import_module('pkg.nets')\n",  # (not importlib)
    "import importlib\nx = importlib.import_module('pkg.' + name)\n",  # computed
    "import importlib\nx = importlib.import_module('.a')\n",  # relative without an anchor
    "import importlib\nx = importlib.import_module('.a', 'pkg')\n",  # an anchor of its own
    "import importlib\nx = importlib.import_module('...a', __package__)\n",  # above the top
    ("import importlib\ntry:\n    x = importlib.import_module('pkg.a')\nexcept ImportError:\n"
     "    x = None\n"),  # guarded: bound one way or another as it runs
    "import importlib\nx, y = importlib.import_module('pkg.a'), 1\n",
    "import importlib\nx = importlib.import_module('pkg.a').Net\n",  # a member, not the module
    "from mylib import import_module\nx = import_module('pkg.a')\n",
    "import importlib\ndef f():\n    x = importlib.import_module('pkg.a')\n",
])
def test_other_import_module_calls_are_no_import(src):
    assert _module_imports(src) == {}
