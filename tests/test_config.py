"""The corpus configuration: accepted forms, and one clear ConfigError per bad field."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from nnrag_tui.engine.config import (
    ConfigWarning,
    SymbolPatterns,
    glob_match,
    load_config,
    parse_config,
)
from nnrag_tui.engine.errors import ConfigError

# The paper tool's repo_config.json, verbatim in form.
PAPER_CONFIG = {
    "huggingface/pytorch-image-models": {
        "url": "https://github.com/huggingface/pytorch-image-models.git",
        "priority": 1,
        "paths": ["timm/models", "timm/layers"],
        "description": "PyTorch Image Models (timm)",
    },
    "pytorch/vision": {
        "url": "https://github.com/pytorch/vision.git",
        "priority": 2,
        "paths": ["torchvision/models", "torchvision/ops"],
        "description": "TorchVision models and ops",
    },
}


def load(tmp_path: Path, data) -> object:
    p = tmp_path / "repo_config.json"
    p.write_text(json.dumps(data, indent=2))
    return load_config(p)


@pytest.fixture(autouse=True)
def strict_warnings():
    """A ConfigWarning fails a test unless the test expects it with pytest.warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        yield


# -- accepted forms ------------------------------------------------------------------------
def test_paper_repo_config_is_accepted_unchanged(tmp_path):
    cfg = load(tmp_path, PAPER_CONFIG)
    assert [s.name for s in cfg.sources] == ["huggingface/pytorch-image-models", "pytorch/vision"]
    timm = cfg.source("huggingface/pytorch-image-models")
    assert timm.kind == "url"
    assert timm.location == "https://github.com/huggingface/pytorch-image-models.git"
    assert timm.priority == 1
    assert timm.paths == ("timm/models", "timm/layers")
    assert timm.description == "PyTorch Image Models (timm)"
    assert timm.ref is None
    assert cfg.source("pytorch/vision").priority == 2
    assert cfg.fetch.code_only and not cfg.fetch.lfs


def test_extended_form_with_fetch_policy_and_global_exclude(tmp_path):
    cfg = load(tmp_path, {
        "repositories": {"timm": {"url": "https://example.org/timm.git", "ref": "v1.0.31",
                                  "paths": ["timm/layers/"]}},
        "fetch": {"code_only": True, "max_file_mb": 2, "lfs": False},
        "exclude": ["**/experimental/**"],
    })
    src = cfg.source("timm")
    assert src.ref == "v1.0.31"
    assert src.paths == ("timm/layers",)  # trailing slash normalised
    assert cfg.fetch.max_file_mb == 2.0
    assert not src.wants("timm/layers/experimental/x.py")
    assert src.wants("timm/layers/mlp.py")


def test_path_source_relative_to_the_config_file(tmp_path):
    (tmp_path / "src").mkdir()
    cfg = load(tmp_path, {"local": {"path": "src"}, "abs": {"path": str(tmp_path)}})
    assert cfg.source("local").kind == "path"
    assert Path(cfg.source("local").location) == (tmp_path / "src").resolve()
    assert Path(cfg.source("abs").location) == tmp_path


@pytest.mark.parametrize("given,expected", [
    (["."], ()), (["./"], ()), (["models", "."], ()), (["models/.."], ()),
    (["./models", "models/", "utils//ops"], ("models", "utils/ops")),
])
def test_paths_are_normalised_and_dot_is_the_whole_repository(given, expected):
    # a git source with paths ["."] once cloned a sparse pattern "/." and indexed 0 files
    cfg = parse_config({"r": {"url": URL, "paths": given}})
    assert cfg.sources[0].paths == expected


def test_dist_source():
    cfg = parse_config({"torch": {"dist": "torch", "paths": ["torch/nn/modules"]}})
    src = cfg.source("torch")
    assert (src.kind, src.location, src.paths) == ("dist", "torch", ("torch/nn/modules",))


def test_disabled_repositories_and_comments_are_skipped():
    cfg = parse_config({
        "_comment": "ignored",
        "off": {"url": "https://example.org/a.git", "enabled": False},
        "on": {"url": "https://example.org/b.git"},
    })
    assert [s.name for s in cfg.sources] == ["on"]


def test_default_excludes_drop_tests_and_setup():
    src = parse_config({"r": {"path": "/x"}}).source("r")
    assert src.wants("pkg/models/resnet.py")
    assert not src.wants("pkg/tests/test_resnet.py")
    assert not src.wants("tests/test_top.py")
    assert not src.wants("setup.py")
    assert not src.wants("pkg/conftest.py")


def test_glob_double_star_spans_directories():
    assert glob_match("a/b/c.py", "**/*.py")
    assert glob_match("c.py", "**/*.py")
    assert glob_match("a/b/c.py", "a/**")
    assert not glob_match("a/b/c.py", "a/*.py")
    assert glob_match("a/c.py", "a/*.py")


# -- symbol patterns -----------------------------------------------------------------------
def test_symbol_patterns_on_name_and_module_name():
    pats = SymbolPatterns(include=("*Attention*", "timm.layers.*:*"), exclude=("*Legacy*",))
    assert pats.allows("timm.models.vit", "SelfAttention")
    assert pats.allows("timm.layers.mlp", "Mlp")
    assert not pats.allows("timm.models.vit", "Mlp")
    assert not pats.allows("timm.layers.mlp", "LegacyMlp")


def test_symbols_in_config_list_and_object_forms():
    cfg = parse_config({
        "repositories": {
            "a": {"path": "/a", "symbols": ["*Conv*"]},
            "b": {"path": "/b", "symbols": {"include": ["*"], "exclude": ["pkg.old:*"]}},
            "c": {"path": "/c"},
        },
        "symbols": {"exclude": ["*Test*"]},
    })
    assert cfg.source("a").symbols.allows("m", "ConvBnAct")
    assert not cfg.source("a").symbols.allows("m", "Mlp")
    assert cfg.source("b").symbols.allows("pkg.new", "Mlp")
    assert not cfg.source("b").symbols.allows("pkg.old", "Mlp")
    # the top-level "symbols" applies where a repository has none of its own
    assert not cfg.source("c").symbols.allows("m", "TestNet")
    assert cfg.source("c").symbols.allows("m", "Net")


# -- unknown keys: warned, not fatal -------------------------------------------------------
def test_unknown_repository_key_is_warned_not_fatal():
    with pytest.warns(ConfigWarning, match="'branch'"):
        cfg = parse_config({"r": {"url": "https://example.org/r.git", "branch": "main"}})
    assert cfg.source("r").location == "https://example.org/r.git"


def test_unknown_top_level_and_fetch_keys_are_warned():
    with pytest.warns(ConfigWarning) as record:
        cfg = parse_config({"repositories": {"r": {"path": "/r"}}, "verbose": True,
                            "fetch": {"weights": True}})
    messages = " ".join(str(w.message) for w in record)
    assert "'verbose'" in messages and "'weights'" in messages
    assert cfg.source("r").kind == "path"


# -- every bad config: ConfigError naming the field ----------------------------------------
URL = "https://example.org/r.git"
BAD = {
    "top level a list": ([{"url": URL}], ["top level", "object"]),
    "empty": ({}, ["no repositories"]),
    "repositories not an object": ({"repositories": ["r"]}, ["repositories"]),
    "repo not an object": ({"r": "https://example.org/r.git"}, ["'r'", "object"]),
    "none of url/path/dist": ({"r": {"priority": 1}}, ["'r'", "url", "path", "dist"]),
    "url and path": ({"r": {"url": URL, "path": "/x"}}, ["'r'", "url, path"]),
    "url, path and dist": ({"r": {"url": URL, "path": "/x", "dist": "t"}}, ["url, path, dist"]),
    "url not a string": ({"r": {"url": 42}}, ["'r'", "'url'"]),
    "url empty": ({"r": {"url": "  "}}, ["'url'"]),
    "path not a string": ({"r": {"path": ["/x"]}}, ["'path'"]),
    "dist empty": ({"r": {"dist": ""}}, ["'dist'"]),
    "priority negative": ({"r": {"url": URL, "priority": -1}}, ["'r'", "'priority'"]),
    "priority zero": ({"r": {"url": URL, "priority": 0}}, ["'priority'"]),
    "priority a string": ({"r": {"url": URL, "priority": "1"}}, ["'priority'"]),
    "priority a bool": ({"r": {"url": URL, "priority": True}}, ["'priority'"]),
    "priority a float": ({"r": {"url": URL, "priority": 1.5}}, ["'priority'"]),
    "paths not a list": ({"r": {"url": URL, "paths": {"a": 1}}}, ["'paths'"]),
    "paths not strings": ({"r": {"url": URL, "paths": ["a", 3]}}, ["'paths'"]),
    "paths escaping the repo": ({"r": {"url": URL, "paths": ["../etc"]}}, ["'paths'"]),
    "description not a string": ({"r": {"url": URL, "description": 7}}, ["'description'"]),
    "ref on a path source": ({"r": {"path": "/x", "ref": "main"}}, ["'ref'"]),
    "ref an option": ({"r": {"url": URL, "ref": "--upload-pack=x"}}, ["'ref'"]),
    "ref not a string": ({"r": {"url": URL, "ref": 1}}, ["'ref'"]),
    "include not a list": ({"r": {"url": URL, "include": 5}}, ["'include'"]),
    "exclude not strings": ({"r": {"url": URL, "exclude": [None]}}, ["'exclude'"]),
    "symbols wrong type": ({"r": {"url": URL, "symbols": 3}}, ["'symbols'"]),
    "enabled not a bool": ({"r": {"url": URL, "enabled": "no"}}, ["'enabled'"]),
    "ext:: url": ({"r": {"url": "ext::sh -c touch% /tmp/pwned"}}, ["'r'", "ext::"]),
    "ext:: url in capitals": ({"r": {"url": "EXT::sh -c id"}}, ["remote helper"]),
    "fd:: url": ({"r": {"url": "fd::17"}}, ["remote helper"]),
    "url an option": ({"r": {"url": "--upload-pack=touch /tmp/x"}}, ["'r'", "'-'"]),
    "url short option": ({"r": {"url": "-uhttps://example.org/r.git"}}, ["'-'"]),
    "url with newline": ({"r": {"url": "https://a/b\n-x"}}, ["control"]),
    "fetch max_file_mb negative": ({"repositories": {"r": {"url": URL}},
                                    "fetch": {"max_file_mb": -1}}, ["max_file_mb"]),
    "fetch lfs not bool": ({"repositories": {"r": {"url": URL}}, "fetch": {"lfs": "yes"}},
                           ["lfs"]),
    "fetch weights policy": ({"repositories": {"r": {"url": URL}}, "fetch": "everything"},
                             ["fetch"]),
    "all disabled": ({"r": {"url": URL, "enabled": False}}, ["disabled"]),
    "import_root not a string": ({"r": {"url": URL, "import_root": 1}}, ["'import_root'"]),
    "import_root escaping the repo": ({"r": {"url": URL, "import_root": "../x"}},
                                      ["'import_root'", "inside the repository"]),
    "import_root absolute": ({"r": {"path": "/x", "import_root": "/src"}},
                             ["'import_root'", "inside the repository"]),
    "import_root on a dist": ({"r": {"dist": "timm", "import_root": "src"}},
                              ["'import_root'", "'dist'"]),
    "paths outside import_root": ({"r": {"url": URL, "import_root": "src",
                                         "paths": ["src/pkg", "tools"]}},
                                  ["'paths'", "'tools'", "outside import_root 'src'"]),
}


def test_import_root_is_normalised_and_optional():
    cfg = parse_config({"a": {"url": URL, "import_root": "./python/", "paths": ["python/pkg"]},
                        "b": {"url": URL, "import_root": "."}, "c": {"url": URL}})
    assert cfg.source("a").import_root == "python"
    assert cfg.source("b").import_root == ""  # the repository itself, never the src guess
    assert cfg.source("c").import_root is None  # found when the source is read


@pytest.mark.parametrize("data,needles", BAD.values(), ids=list(BAD))
def test_bad_config_names_the_field(data, needles):
    with pytest.raises(ConfigError) as err:
        parse_config(data, origin="cfg.json")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("cfg.json")
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_invalid_json_reports_line_and_column(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{\n  "r": {\n    "url": "https://example.org/r.git",\n  }\n}\n')
    with pytest.raises(ConfigError, match=r"broken\.json: not valid JSON \(line 4, column"):
        load_config(p)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found: .*nope.json"):
        load_config(tmp_path / "nope.json")


def test_config_that_is_not_utf8(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(b'{"r\xe9": {"path": "/x"}}')
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(p)
