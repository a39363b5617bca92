"""bindings: what a name used in a module refers to, through the import system of the corpus."""

from __future__ import annotations

import pytest
from helpers import entry, fixture, module_index


@pytest.fixture(scope="module")
def index():
    return module_index({"repo": fixture("reexport")})


@pytest.fixture(scope="module")
def vit(index):
    return entry(index, "pkg.models.vit")


def test_reexport_chain_through_package_init(index, vit):
    # vit: `from ..layers import Mlp`; layers/__init__: `from .mlp import Mlp`
    t = index.lookup(vit, "Mlp")
    assert t.kind == "def"
    assert t.qualified == "pkg.layers.mlp.Mlp"
    assert t.how == "re-export"
    assert index.class_symbol(t)[1].name == "Mlp"


def test_two_hop_reexport_with_alias(index, vit):
    # vit: `from pkg import Mlp as TopMlp`; pkg/__init__: `from .layers import Mlp`
    t = index.lookup(vit, "TopMlp")
    assert t.qualified == "pkg.layers.mlp.Mlp"
    assert index.lookup(entry(index, "pkg"), "Mlp").qualified == "pkg.layers.mlp.Mlp"


def test_direct_import_is_marked_direct(index):
    layers = entry(index, "pkg.layers")
    t = index.lookup(layers, "GluMlp")
    assert (t.qualified, t.how) == ("pkg.layers.mlp.GluMlp", "import")


def test_star_import_honours_all(index, vit):
    layers = entry(index, "pkg.layers")
    t = index.lookup(vit, "LayerNorm2d")
    assert t.qualified == "pkg.layers.norm.LayerNorm2d"
    assert t.how == "star"
    # Hidden is defined in norm.py but not in its __all__: `from .norm import *` skips it
    hidden = index.lookup(layers, "Hidden")
    assert hidden.kind == "unresolved"
    assert "Hidden" not in index.exports(entry(index, "pkg.layers.norm"))


def test_star_import_without_all_takes_public_names(index):
    layers = entry(index, "pkg.layers")
    acts = entry(index, "pkg.layers.acts")
    assert index.lookup(layers, "GELU").qualified == "pkg.layers.acts.GELU"
    assert index.lookup(layers, "_private").kind == "unresolved"
    assert {"GELU", "math", "nn"} <= index.exports(acts)
    assert "_private" not in index.exports(acts)
    # a module imported by the starred module passes through as what it is
    math = index.lookup(layers, "math")
    assert (math.kind, math.name) == ("external", "math")


def test_import_a_b_as_c_then_attribute(index, vit):
    # `import pkg.layers.helpers as hp` ... `hp.to_2tuple`
    t = index.resolve_dotted(vit, "hp.to_2tuple")
    assert (t.kind, t.qualified) == ("def", "pkg.layers.helpers.to_2tuple")
    # `import pkg.layers.mlp` binds `pkg`; the full dotted path still resolves
    t = index.resolve_dotted(vit, "pkg.layers.mlp.GluMlp")
    assert t.qualified == "pkg.layers.mlp.GluMlp"


def test_from_dot_import_module_then_attribute(index, vit):
    # `from .. import layers` then `layers.Mlp`
    t = index.resolve_dotted(vit, "layers.Mlp")
    assert (t.kind, t.qualified) == ("def", "pkg.layers.mlp.Mlp")
    # `from ..layers import helpers`: a submodule that the package __init__ never imports
    t = index.resolve_dotted(vit, "helpers.to_2tuple")
    assert t.qualified == "pkg.layers.helpers.to_2tuple"


def test_nested_class_through_attribute(index, vit):
    t = index.resolve_dotted(vit, "hp.Outer.Inner")
    found = index.class_symbol(t)
    assert found is not None and found[1].qualname == "Outer.Inner"


def test_missing_attribute_of_a_corpus_module_is_unresolved(index, vit):
    t = index.resolve_dotted(vit, "layers.NoSuchThing")
    assert t.kind == "unresolved"
    assert index.lookup(vit, "never_bound").kind == "unresolved"


def test_try_importerror_prefers_the_first_branch(index, vit):
    t = index.lookup(vit, "Attn")
    assert t.qualified == "pkg.models.fast.FastAttn"


def test_external_and_builtin_names(index, vit):
    t = index.resolve_dotted(vit, "nn.Module")
    assert (t.kind, t.name) == ("external", "torch.nn.Module")
    t = index.resolve_dotted(vit, "F.relu")
    assert (t.kind, t.name) == ("external", "torch.nn.functional.relu")
    assert index.lookup(vit, "len").kind == "builtin"
    assert index.lookup(vit, "super").kind == "builtin"


def test_same_module_name_in_two_sources_resolves_in_own_source():
    root = fixture("two_sources")
    # "a" has the higher priority: a global pick by module name would always choose it.
    index = module_index({"a": root / "a", "b": root / "b"}, priorities={"a": 1, "b": 2})
    for src in ("a", "b"):
        user = entry(index, "common.user", src)
        t = index.lookup(user, "ConvBlock")  # absolute: `from common.blocks import ConvBlock`
        assert t.entry.source == src
        assert index.class_symbol(t)[1].doc == f"ConvBlock of repository {src.upper()}."
        t = index.resolve_dotted(user, "blocks.ConvBlock")  # relative: `from . import blocks`
        assert t.entry.source == src
    assert index.find_module("common.blocks", None).source == "a"  # no context: priority


def test_a_package_without_an_indexed_init_is_still_a_corpus_module(tmp_path):
    """``import ns.sub`` where ``ns`` has no ``__init__.py`` (a namespace package): ``ns`` is
    the corpus's, not an external package, and ``ns.sub.Block`` resolves into the corpus."""
    from helpers import write_tree

    write_tree(tmp_path, {
        "ns/deep/sub.py": "class Block:\n    pass\n",
        "user.py": "import ns.deep.sub\nimport nsx\nB = ns.deep.sub.Block\n",
    })
    index = module_index({"r": tmp_path})
    user = entry(index, "user")
    assert index.packages >= {"ns", "ns.deep"} and "nsx" not in index.packages
    t = index.lookup(user, "ns")
    assert (t.kind, t.name, t.entry) == ("module", "ns", None)
    t = index.resolve_dotted(user, "ns.deep.sub.Block")
    assert (t.kind, t.entry.module, t.name) == ("def", "ns.deep.sub", "Block")
    assert index.lookup(user, "nsx").kind == "external"
