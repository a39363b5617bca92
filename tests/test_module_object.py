"""A corpus module used as a value (``getattr(layers, kind)``) becomes a module object in the
generated file (engine.moduleobject); the golden case ``attribute`` pins the file itself. Here:
what the dependency tree shows for it, since that statement is not upstream text."""

from __future__ import annotations

import shutil
from pathlib import Path

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.tui.dependencies import DependencyGraph

CASES = Path(__file__).resolve().parent / "fixtures" / "closure"


def extracted(tmp_path: Path, case: str, package: str, qualname: str):
    """Golden case ``case``'s repository indexed (its package ``package``) and its block
    ``qualname`` extracted: (the result, the dependency graph of its closure)."""
    shutil.copytree(CASES / case / "repo", tmp_path / "repo")
    cfg = parse_config({case: {"path": str(tmp_path / "repo"), "paths": [package]}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "c", data_dir=tmp_path / "c" / "data") as ex:
        ex.index()
        block = next(b for b in ex.blocks() if b.qualname == qualname)
        res, closure = ex.extract_block(block)
    assert res.ok and closure is not None
    return res, DependencyGraph(closure)


def test_dependency_tree_shows_the_module_object_as_the_file_has_it(tmp_path: Path) -> None:
    res, graph = extracted(tmp_path, "attribute", "attrpkg", "NetPick")
    layers = next(c for c in graph.children(graph.root) if c.name == "layers")
    assert (layers.kind, layers.how, layers.target) == ("module", "module-object",
                                                        "attrpkg.layers")
    snippet = graph.source(layers)
    assert snippet is not None
    assert snippet.where == "made by nnrag: the module attrpkg.layers, used as a value"
    assert snippet.text in res.generated.code  # the renamed member included: Norm=RmsNorm
    assert "    Norm=RmsNorm,\n" in snippet.text + "\n"
    # what it holds is listed under it, each with how it was found
    held = {c.name: (c.kind, c.target) for c in graph.children(layers)}
    assert held["Mlp"] == ("class", "attrpkg.layers.mlp.Mlp")
    assert held["Norm"] == ("class", "attrpkg.layers.norm.RmsNorm")


def test_dependency_tree_shows_the_stand_in_for_a_computed_import(tmp_path: Path) -> None:
    """spikingjelly's ``_register_dispatch`` imports a module by a name it computes: the tree
    shows that call leading to the file's stand-in for ``importlib.import_module``, as the file
    has it, and the module objects it holds under it (engine.computed_imports)."""
    res, graph = extracted(tmp_path, "torch_ops_deferred", "defops", "HalvesOnRequest")
    todo, helper = [graph.root], None
    while todo and helper is None:  # (the helper is a few calls below the block)
        node = todo.pop()
        kids = graph.children(node)
        helper = next((c for c in kids if c.name == "register_from_package"), None)
        todo += [c for c in kids if c.kind != "externals"]
    assert helper is not None
    stand_in = next(c for c in graph.children(helper) if c.name == "importlib.import_module")
    assert (stand_in.kind, stand_in.how) == ("function", "computed-import")
    snippet = graph.source(stand_in)
    assert snippet is not None
    assert snippet.where == ("made by nnrag: `importlib.import_module`, returning the modules "
                             "the file holds")
    assert snippet.text.startswith("def _import_module(name, package=None):")
    assert snippet.text in res.generated.code
    held = {c.name: (c.kind, c.target) for c in graph.children(stand_in)}
    assert held == {"_implementations": ("module", "defops.implementations"),
                    "externals": ("externals", "")}  # (importlib, for any other name)
