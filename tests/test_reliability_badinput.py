"""Bad input everywhere a user types (part 1), through the real CLI in a subprocess:
configurations with wrong types, unknown source kinds, unreachable URLs, paths that do not
exist. Each is refused with a non-zero exit code and one ``nnrag: error: ...`` line naming the
problem, never a traceback. Part 2 (cache directories, block and registry names) is
``test_reliability_badinput_names.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import git_env, make_bare_repo
from reliability_helpers import (
    FIXPKG,
    cli_env,
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


# -- configurations --------------------------------------------------------------------------
BAD_CONFIGS = {
    "path is a number": ('{"a": {"path": 5}}', "field 'path' must be a non-empty string"),
    "priority is text": ('{"a": {"path": "/tmp", "priority": "high"}}', "field 'priority'"),
    "priority overflows": ('{"a": {"path": "/tmp", "priority": 99999999999999999999999}}',
                           "field 'priority'"),
    "paths is a number": ('{"a": {"path": "/tmp", "paths": 3}}', "field 'paths'"),
    "paths leave the repository": ('{"a": {"path": "/tmp", "paths": ["../etc"]}}',
                                   "must stay inside the repository"),
    "enabled is text": ('{"a": {"path": "/tmp", "enabled": "yes"}}', "field 'enabled'"),
    "symbols is a number": ('{"a": {"path": "/tmp", "symbols": 5}}', "field 'symbols'"),
    "unknown source kind": ('{"a": {"svn": "svn://x"}}', "needs exactly one of"),
    "two source kinds": ('{"a": {"path": "/tmp", "dist": "torch"}}', "needs exactly one of"),
    "ref on a path source": ('{"a": {"path": "/tmp", "ref": "main"}}', "field 'ref'"),
    "ref is an option": ('{"a": {"url": "file:///x", "ref": "--upload-pack=x"}}', "field 'ref'"),
    "url is an option": ('{"a": {"url": "-oProxyCommand=x"}}', "must not start with '-'"),
    "url is a remote helper": ('{"a": {"url": "ext::sh -c x"}}', "remote helper"),
    "top level is a list": ("[1, 2]", "top level must be a JSON object"),
    "repositories is a list": ('{"repositories": []}', "field 'repositories'"),
    "no repositories": ("{}", "no repositories configured"),
    "all disabled": ('{"a": {"path": "/tmp", "enabled": false}}', "every repository is disabled"),
    "fetch limit negative": (('{"repositories": {"a": {"path": "/tmp"}}, '
                              '"fetch": {"max_file_mb": -1}}'), "max_file_mb"),
    "not JSON": ('{"a": {"path": "/tmp",}', "not valid JSON (line 1"),
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "empty repository name": ('{"": {"path": "/tmp"}}', "repository name"),
    "NUL in a path": ('{"a": {"path": "/tmp\\u0000x"}}', "control characters"),
    "home of an unknown user": ('{"a": {"path": "~no_such_user_here/x"}}', "field 'path'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config(case, tmp_path, env):
    text, needle = BAD_CONFIGS[case]
    cfg = tmp_path / "bad.json"
    cfg.write_text(text, encoding="utf-8")
    line = refused(run_cli(["index", "--config", str(cfg)], env=env), needle)
    assert str(cfg) in line  # which file


@pytest.mark.parametrize("what", ["missing", "directory", "latin-1", "empty"])
def test_unreadable_config_file(what, tmp_path, env):
    cfg = tmp_path / "c.json"
    if what == "directory":
        cfg.mkdir()
    elif what == "latin-1":
        cfg.write_bytes(b'{"caf\xe9": {"path": "/tmp"}}')
    elif what == "empty":
        cfg.write_text("")
    needle = {"missing": "config file not found", "directory": "cannot read config file",
              "latin-1": "cannot read config file", "empty": "not valid JSON"}[what]
    refused(run_cli(["blocks", "--config", str(cfg)], env=env), needle)


# -- sources that cannot be had --------------------------------------------------------------
def source_config(tmp_path: Path, spec: dict) -> Path:
    cfg = tmp_path / "src.json"
    cfg.write_text(json.dumps({"broken": spec}))
    return cfg


@pytest.mark.parametrize("spec,needle", [
    ({"url": "file:///nonexistent/repo.git"}, "git clone failed"),
    ({"path": "/nonexistent/dir"}, "path does not exist"),
    ({"path": "/etc/hostname"}, "not a directory"),
    ({"dist": "no-such-distribution-xyz"}, "is not installed"),
    ({"path": "/tmp", "paths": ["no_such_dir_a", "no_such_dir_b"]},
     "none of the configured paths exists"),
], ids=["unreachable-url", "missing-path", "path-is-a-file", "missing-dist", "missing-paths"])
def test_source_that_cannot_be_had(spec, needle, tmp_path, env):
    cfg = source_config(tmp_path, spec)
    line = refused(run_cli(["index", "--config", str(cfg)], env=env), needle)
    assert line.startswith("nnrag: error: broken: ")  # names the source
    # and `blocks`, `extract` say the same instead of listing or extracting nothing
    refused(run_cli(["blocks", "--config", str(cfg)], env=env), needle)


def test_unknown_ref_and_policy_never(tmp_path, env, monkeypatch):
    git_env(tmp_path, monkeypatch)
    url, _ = make_bare_repo(tmp_path / "remote", FIXPKG)
    env = {**env, **{k: v for k, v in cli_env().items() if k.startswith("GIT_")}}
    cfg = source_config(tmp_path, {"url": url, "ref": "no-such-branch"})
    refused(run_cli(["index", "--config", str(cfg)], env=env), "unknown ref 'no-such-branch'")
    cfg = source_config(tmp_path, {"url": url})
    refused(run_cli(["index", "--config", str(cfg), "--policy", "never"], env=env),
            "not cached and update policy is 'never'")


def test_one_bad_source_does_not_hide_the_good_ones(tmp_path, env, good_config):
    cfg = tmp_path / "mixed.json"
    good = json.loads(good_config.read_text())
    cfg.write_text(json.dumps({**good, "gone": {"path": "/nonexistent"}}))
    proc = run_cli(["blocks", "--json", "--config", str(cfg)], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "nnrag: error: gone: path does not exist" in proc.stderr
    assert [b["name"] for b in json.loads(proc.stdout)] == ["Tiny"]


