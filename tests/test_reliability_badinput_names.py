"""Bad input everywhere a user types (part 2), through the real CLI in a subprocess: cache
directories that cannot be used, block names that do not exist, are empty or match many, and
registry names that try to leave the registry. Each is refused with a non-zero exit code and
one ``nnrag: error: ...`` line naming the problem, never a traceback. Part 1 (configurations
and sources) is ``test_reliability_badinput.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_tree
from reliability_helpers import (
    FIXPKG,
    one_block_config,
    private_env,
    refused,
    run_cli,
)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return private_env(tmp_path)


@pytest.fixture
def good_config(tmp_path) -> Path:
    return one_block_config(tmp_path)


# -- cache and data directories --------------------------------------------------------------
def test_cache_dir_that_is_a_file(tmp_path, env, good_config):
    (tmp_path / "file").write_text("x")
    for cache in (tmp_path / "file", tmp_path / "file" / "sub"):
        refused(run_cli(["index", "--config", str(good_config), "--cache-dir", str(cache)],
                        env=env), "cannot use the cache directory")


def test_corrupt_index_says_how_to_recover(tmp_path, env, good_config):
    cache = tmp_path / "garbage"
    cache.mkdir()
    (cache / "index.sqlite3").write_bytes(b"not a database at all" * 500)
    refused(run_cli(["index", "--config", str(good_config), "--cache-dir", str(cache)], env=env),
            "delete it and run `nnrag index` again")


# -- block names -----------------------------------------------------------------------------
@pytest.mark.parametrize("args,needle", [
    (["extract", "--block", "NoSuchBlock"], "no block named 'NoSuchBlock'"),
    (["extract", "--block", "fixpkg.nowhere:Tiny"], "no block named"),
    (["extract", "--block", ""], "a block name cannot be empty"),
    (["extract", "--blocks", "Tiny", "  "], "a block name cannot be empty"),
    (["extract", "--from-file", "/nonexistent/names.txt"], "cannot read block list"),
    (["blocks", "--category", "not-a-category"], "invalid choice"),
    (["index", "--workers", "0"], "must be at least 1"),
    (["extract", "--from-file", "NAMES", "--limit", "-3"], "must be at least 1"),
    (["extract", "--from-file", "NAMES", "--start-from", "Other"], "--start-from 'Other'"),
    (["extract", "--from-file", "LATIN1"], "not UTF-8"),
    (["extract", "--block", "Tiny", "--repo", "nosuchrepo"], "--repo: no repository named 'nosuchrepo'"),
], ids=["unknown", "wrong-module", "empty", "blank-in-list", "list-missing", "bad-category",
        "zero-workers", "negative-limit", "start-from-missing", "list-not-utf8", "unknown-repo"])
def test_bad_block_names(args, needle, tmp_path, env, good_config):
    names = tmp_path / "names.txt"
    names.write_text("Tiny\n")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"Caf\xe9\n")
    args = [{"NAMES": str(names), "LATIN1": str(latin)}.get(a, a) for a in args]
    refused(run_cli([*args, "--config", str(good_config)], env=env), needle)


def test_a_name_matching_several_blocks_says_which_it_took(tmp_path, env):
    """Ambiguity is reported, never silent: the pick (best priority) and every other one."""
    a = write_tree(tmp_path / "a", FIXPKG)
    b = write_tree(tmp_path / "b", {"other/__init__.py": "",
                                    "other/blocks.py": FIXPKG["fixpkg/blocks.py"]})
    cfg = tmp_path / "two.json"
    cfg.write_text(json.dumps({"first": {"path": str(a / "fixpkg"), "priority": 1},
                               "second": {"path": str(b / "other"), "priority": 2}}))
    proc = run_cli(["extract", "--block", "Tiny", "--stdout", "--no-validate", "--config",
                    str(cfg)], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    note = [ln for ln in proc.stderr.splitlines() if "blocks are named 'Tiny'" in ln]
    assert note and "took fixpkg.blocks:Tiny" in note[0] and "other.blocks:Tiny (second)" in \
        note[0]
    assert "class Tiny(nn.Module)" in proc.stdout
    # --repo takes the other one, with no note: nothing else was a candidate
    proc = run_cli(["extract", "--block", "Tiny", "--repo", "second", "--stdout",
                    "--no-validate", "--config", str(cfg)], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "# block: other.blocks:Tiny" in proc.stdout
    assert "blocks are named" not in proc.stderr


# -- registry names --------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["registry", "show", "../x"],
    ["registry", "show", ".."],
    ["registry", "show", "a/../../etc"],
    ["registry", "remove", "../x"],
    ["registry", "remove", "/etc/passwd"],
    ["registry", "export", "../x", "OUT"],
    ["registry", "show", "-"],
])
def test_registry_names_that_leave_the_registry(args, tmp_path, env):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    refused(run_cli(args, env=env), "invalid block name")
    assert not (tmp_path / "out").exists()


def test_registry_unknown_name_and_version(tmp_path, env):
    refused(run_cli(["registry", "show", "Nothing"], env=env), "no saved block named 'Nothing'")
    refused(run_cli(["registry", "remove", "Nothing", "--version", "v1"], env=env),
            "no saved block named")
