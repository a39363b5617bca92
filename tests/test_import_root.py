"""Where module names start: a src layout (peft, diffusers, open_clip, flux keep their package
under ``src/`` and import it as ``peft.x``) and an explicit ``import_root``.

Before, ``src/srcpkg/models/net.py`` was module ``src.srcpkg.models.net``: the package's own
absolute imports (``from srcpkg.layers import Mlp``) led outside the corpus, so they stayed
imports of a package the user does not have, and the block's key named a module that does
not exist."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from helpers import git_env, make_bare_repo, write_tree
from pyflakes import api as pyflakes_api
from pyflakes import reporter as pyflakes_reporter

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.provenance import build_provenance

LAYERS = '''
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)
'''

NET = '''
import torch.nn as nn

from srcpkg.layers import Mlp
from ..utils import twice


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.mlp = Mlp(dim)

    def forward(self, x):
        return twice(self.mlp(x))
'''

UTILS = '''
def twice(x):
    return 2 * x
'''


def package(prefix: str) -> dict[str, str]:
    return {f"{prefix}srcpkg/__init__.py": "",
            f"{prefix}srcpkg/layers.py": textwrap.dedent(LAYERS),
            f"{prefix}srcpkg/utils.py": textwrap.dedent(UTILS),
            f"{prefix}srcpkg/models/__init__.py": "",
            f"{prefix}srcpkg/models/net.py": textwrap.dedent(NET),
            "README.md": "a src layout\n"}


def undefined(code: str) -> int:
    import io
    out = io.StringIO()
    return pyflakes_api.check(code, "net.py", pyflakes_reporter.Reporter(out, out))


def extract_net(cfg: dict, tmp_path: Path):
    ex = BlockExtractor(parse_config(cfg), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data")
    ex.index()
    return ex, ex.extract_single_block("Net")


def test_src_layout_from_a_git_url_names_modules_from_src(tmp_path, monkeypatch):
    git_env(tmp_path, monkeypatch)
    (tmp_path / "upstream").mkdir()
    url, sha = make_bare_repo(tmp_path / "upstream", package("src/"))
    ex, res = extract_net({"owner/srcpkg": {"url": url, "paths": ["src/srcpkg"]}}, tmp_path)
    with ex:
        assert res.ok, res.error
        assert res.block.key == "srcpkg.models.net:Net"
        code = res.generated.code
        # the package's own absolute import is followed into the corpus and inlined
        assert "class Mlp(nn.Module):" in code and "def twice(x):" in code
        assert "import srcpkg" not in code and "from srcpkg" not in code
        assert undefined(code) == 0
        assert f"@ {sha} (paths below are under its src/)" in code
        assert "#   srcpkg/models/net.py, " in code
        # provenance names the file where it is in the repository
        prov = build_provenance(res, ex.store.source_roots(), code.encode("utf-8"))
        assert prov["block"]["path"] == "src/srcpkg/models/net.py"
        assert res.generated.spec["source"]["path"] == "src/srcpkg/models/net.py"
        assert {d["path"] for d in prov["definitions"]} == {
            "src/srcpkg/layers.py", "src/srcpkg/utils.py", "src/srcpkg/models/net.py"}
        assert {s["import_root"] for s in prov["sources"]} == {"src"}


def test_explicit_import_root_on_a_path_source(tmp_path):
    repo = write_tree(tmp_path / "repo", package("python/"))
    ex, res = extract_net({"r": {"path": str(repo), "import_root": "python",
                                 "paths": ["python/srcpkg"]}}, tmp_path)
    with ex:
        assert res.ok, res.error
        assert res.block.key == "srcpkg.models.net:Net"
        assert "from srcpkg" not in res.generated.code and undefined(res.generated.code) == 0
    # a missing import_root folder is one clear error, not an empty source
    bad = BlockExtractor(parse_config({"r": {"path": str(repo), "import_root": "lib"}}),
                         cache_dir=tmp_path / "cache2", data_dir=tmp_path / "data2")
    with bad:
        report = bad.index()
        (src,) = report.sources
        assert "import_root 'lib' is not a folder of" in src["error"]


@pytest.mark.parametrize("src_is_package", [False, True])
def test_src_is_the_import_root_only_when_it_is_not_a_package(tmp_path, src_is_package):
    files = package("src/")
    if src_is_package:  # an old-style repository whose code imports ``src.x``
        files["src/__init__.py"] = ""
    repo = write_tree(tmp_path / "repo", files)
    ex = BlockExtractor(parse_config({"r": {"path": str(repo), "paths": ["src/srcpkg"]}}),
                        cache_dir=tmp_path / "cache", data_dir=tmp_path / "data")
    with ex:
        ex.index()
        keys = {b.key for b in ex.blocks()}
        assert keys == ({"src.srcpkg.models.net:Net", "src.srcpkg.layers:Mlp"} if src_is_package
                        else {"srcpkg.models.net:Net", "srcpkg.layers:Mlp"})


def test_changing_the_import_root_reindexes_without_stale_modules(tmp_path):
    repo = write_tree(tmp_path / "repo", package("src/"))
    kw = {"cache_dir": tmp_path / "cache", "data_dir": tmp_path / "data"}
    with BlockExtractor(parse_config({"r": {"path": str(repo), "paths": ["src/srcpkg"],
                                            "import_root": "."}}), **kw) as ex:
        ex.index()
        assert {b.key for b in ex.blocks()} == {"src.srcpkg.models.net:Net",
                                                "src.srcpkg.layers:Mlp"}
    with BlockExtractor(parse_config({"r": {"path": str(repo), "paths": ["src/srcpkg"]}}),
                        **kw) as ex:
        ex.index()
        assert {b.key for b in ex.blocks()} == {"srcpkg.models.net:Net", "srcpkg.layers:Mlp"}
        res = ex.extract_single_block("Net")
        assert res.ok and "from srcpkg" not in res.generated.code
