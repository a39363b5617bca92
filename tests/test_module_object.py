"""A corpus module used as a value (``getattr(layers, kind)``) becomes a module object in the
generated file (engine.moduleobject); the golden case ``attribute`` pins the file itself. Here:
what the dependency tree shows for it, since that statement is not upstream text."""

from __future__ import annotations

import shutil
from pathlib import Path

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.tui.dependencies import DependencyGraph

REPO = Path(__file__).resolve().parent / "fixtures" / "closure" / "attribute" / "repo"


def test_dependency_tree_shows_the_module_object_as_the_file_has_it(tmp_path: Path) -> None:
    shutil.copytree(REPO, tmp_path / "repo")
    cfg = parse_config({"attribute": {"path": str(tmp_path / "repo"), "paths": ["attrpkg"]}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "c", data_dir=tmp_path / "c" / "data") as ex:
        ex.index()
        block = next(b for b in ex.blocks() if b.qualname == "NetPick")
        res, closure = ex.extract_block(block)
    assert res.ok and closure is not None
    graph = DependencyGraph(closure)
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
