"""Tests for engine.gitcache against local bare repositories (file:// URLs, no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nnrag_tui.engine import gitcache
from nnrag_tui.engine.errors import SourceError

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(autouse=True)
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "gitconfig"
    cfg.write_text("[user]\n\tname = Test\n\temail = test@example.com\n"
                   "[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{k}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{k}_EMAIL", "test@example.com")


class Remote:
    """A work repo plus the bare repo it pushes to; ``url`` is the bare repo's file:// URL."""

    def __init__(self, base: Path) -> None:
        self.work = base / "work"
        self.bare = base / "remote.git"
        self.work.mkdir()
        git("init", "-q", cwd=self.work)
        self.write({"pkg/__init__.py": "", "pkg/a.py": "A = 1\n", "pkg/sub/b.py": "B = 1\n",
                    "docs/big.bin": "x" * 4096, "README.md": "hi\n"})
        self.first = self.commit("first")
        git("tag", "-a", "v1", "-m", "v1", cwd=self.work)
        git("branch", "dev", cwd=self.work)
        git("clone", "-q", "--bare", str(self.work), str(self.bare))
        git("config", "uploadpack.allowFilter", "true", cwd=self.bare)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        self.url = self.bare.as_uri()

    def write(self, files: dict[str, str]) -> None:
        for rel, text in files.items():
            p = self.work / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)

    def commit(self, msg: str) -> str:
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", msg, cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def push_change(self, files: dict[str, str], branch: str = "main") -> str:
        self.write(files)
        sha = self.commit("change")
        git("push", "-q", "origin", f"HEAD:{branch}", cwd=self.work)
        return sha


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    base = tmp_path / "remote"
    base.mkdir()
    return Remote(base)


def files_of(path: Path) -> set[str]:
    return {
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(path).parts
    }


def test_clone_sparse_paths(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "repo"
    r = gitcache.checkout(remote.url, dest, paths=("pkg",))
    assert r == gitcache.CheckoutResult(dest, remote.first, True)
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"}
    assert git("rev-parse", "--is-shallow-repository", cwd=dest) == "true"
    assert git("config", "remote.origin.partialclonefilter", cwd=dest) == "blob:none"
    missing = git("rev-list", "--objects", "--missing=print", "HEAD", cwd=dest)
    big = git("rev-parse", "HEAD:docs/big.bin", cwd=remote.work)
    assert f"?{big}" in missing.splitlines()  # blobs outside `paths` were never fetched
    assert not list(dest.parent.glob(".repo.tmp-*"))


def test_a_sparse_clone_has_the_roots_setup_py(remote: Remote, tmp_path: Path) -> None:
    """It names the compiled extensions that building the package makes (pytorch3d's
    ``pytorch3d._C``), which the package's modules import (engine.extensions)."""
    remote.push_change({"setup.py": "from setuptools import setup\n", "tools/run.py": "\n"})
    dest = tmp_path / "cache" / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg",))
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py", "setup.py"}


def test_server_without_filter_support(remote: Remote, tmp_path: Path) -> None:
    git("config", "uploadpack.allowFilter", "false", cwd=remote.bare)
    dest = tmp_path / "repo"
    r = gitcache.checkout(remote.url, dest, paths=("pkg",))
    assert r.commit == remote.first
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"}
    new = remote.push_change({"pkg/a.py": "A = 2\n"})
    assert gitcache.checkout(remote.url, dest, paths=("pkg",), policy="always").commit == new


def test_clone_all_when_no_paths(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest)
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py",
                              "docs/big.bin", "README.md"}


def test_nested_and_file_paths(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg/sub/", "README.md"))
    # the package's other Python files come along (bases and imports live there), no data
    assert files_of(dest) == {"pkg/sub/b.py", "README.md", "pkg/__init__.py", "pkg/a.py"}
    other = tmp_path / "docs"
    gitcache.checkout(remote.url, other, paths=("docs",))
    assert files_of(other) == {"docs/big.bin"}


def test_policy_missing_does_not_refetch(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg",))
    remote.push_change({"pkg/a.py": "A = 2\n"})
    r = gitcache.checkout(remote.url, dest, paths=("pkg",), policy="missing")
    assert (r.commit, r.updated) == (remote.first, False)
    assert (dest / "pkg/a.py").read_text() == "A = 1\n"


def test_policy_always_picks_up_new_commit(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg",))
    r = gitcache.checkout(remote.url, dest, paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (remote.first, False)
    new = remote.push_change({"pkg/a.py": "A = 2\n", "docs/other.bin": "y"})
    r = gitcache.checkout(remote.url, dest, paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (new, True)
    assert (dest / "pkg/a.py").read_text() == "A = 2\n"
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"}
    r = gitcache.checkout(remote.url, dest, paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (new, False)


def test_policy_never(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    with pytest.raises(SourceError, match="not cached.*never") as e:
        gitcache.checkout(remote.url, dest, policy="never")
    assert remote.url in str(e.value) and "\n" not in str(e.value)
    assert not dest.exists()
    gitcache.checkout(remote.url, dest)
    remote.push_change({"pkg/a.py": "A = 2\n"})
    r = gitcache.checkout(remote.url, dest, policy="never")
    assert (r.commit, r.updated) == (remote.first, False)
    with pytest.raises(SourceError, match="never"):
        gitcache.checkout(remote.url, dest, ref="dev", policy="never")


def test_changed_config_reclones(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg/sub",))
    r = gitcache.checkout(remote.url, dest, paths=("docs",))
    assert r.updated and files_of(dest) == {"docs/big.bin"}
    new = remote.push_change({"pkg/a.py": "A = 2\n"}, branch="dev")
    r = gitcache.checkout(remote.url, dest, ref="dev", paths=("docs",))
    assert (r.commit, r.updated) == (new, True)


def test_tag_ref(remote: Remote, tmp_path: Path) -> None:
    remote.push_change({"pkg/a.py": "A = 2\n"})
    dest = tmp_path / "repo"
    r = gitcache.checkout(remote.url, dest, ref="v1", paths=("pkg",))
    assert r.commit == remote.first
    assert (dest / "pkg/a.py").read_text() == "A = 1\n"
    r = gitcache.checkout(remote.url, dest, ref="v1", paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (remote.first, False)
    r = gitcache.checkout(remote.url, dest, ref="refs/tags/v1", paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (remote.first, True)  # new ref spelling: re-cloned
    r = gitcache.checkout(remote.url, dest, ref="refs/tags/v1", paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (remote.first, False)


def test_branch_ref_follows_branch(remote: Remote, tmp_path: Path) -> None:
    remote.push_change({"pkg/a.py": "A = 2\n"})  # main moves, dev stays
    dest = tmp_path / "repo"
    r = gitcache.checkout(remote.url, dest, ref="dev")
    assert r.commit == remote.first
    new = remote.push_change({"pkg/a.py": "A = 3\n"}, branch="dev")
    r = gitcache.checkout(remote.url, dest, ref="dev", policy="always")
    assert (r.commit, r.updated) == (new, True)
    assert (dest / "pkg/a.py").read_text() == "A = 3\n"


def test_commit_sha_ref(remote: Remote, tmp_path: Path) -> None:
    remote.push_change({"pkg/a.py": "A = 2\n"})
    dest = tmp_path / "repo"
    r = gitcache.checkout(remote.url, dest, ref=remote.first, paths=("pkg",))
    assert (r.commit, r.updated) == (remote.first, True)
    assert (dest / "pkg/a.py").read_text() == "A = 1\n"
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"}
    r = gitcache.checkout(remote.url, dest, ref=remote.first, paths=("pkg",), policy="always")
    assert (r.commit, r.updated) == (remote.first, False)


def test_unknown_ref(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    with pytest.raises(SourceError, match="unknown ref 'nope'") as e:
        gitcache.checkout(remote.url, dest, ref="nope")
    assert remote.url in str(e.value) and "\n" not in str(e.value)
    assert not dest.exists() and not list(tmp_path.glob(".repo.tmp-*"))
    with pytest.raises(SourceError, match="invalid ref"):
        gitcache.checkout(remote.url, dest, ref="--upload-pack=x")


def test_unknown_commit_sha_and_a_remote_that_fails_to_send_one(remote: Remote,
                                                                 tmp_path: Path) -> None:
    """A commit the remote does not have is an unknown ref. A remote that has the commit but
    fails to send it (a mirror missing one of its blobs) is not: the message says what git
    says, where it used to claim the ref was unknown."""
    with pytest.raises(SourceError, match="unknown ref '1{40}'"):
        gitcache.checkout(remote.url, tmp_path / "a", ref="1" * 40)
    blob = git("rev-parse", f"{remote.first}:docs/big.bin", cwd=remote.work)
    (remote.bare / "objects" / blob[:2] / blob[2:]).unlink()
    git("config", "uploadpack.allowFilter", "false", cwd=remote.bare)
    with pytest.raises(SourceError) as e:
        gitcache.checkout(remote.url, tmp_path / "b", ref=remote.first, paths=("pkg",))
    assert "unknown ref" not in str(e.value)
    assert "git fetch failed" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.tmp-*"))


@pytest.mark.parametrize("url", ["-oops", "ext::sh -c x", "--upload-pack=touch x"])
def test_bad_url_rejected(url: str, tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        gitcache.checkout(url, tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


def test_missing_repo_clear_message(tmp_path: Path) -> None:
    url = (tmp_path / "no-such.git").as_uri()
    with pytest.raises(SourceError) as e:
        gitcache.checkout(url, tmp_path / "repo")
    msg = str(e.value)
    assert msg.startswith(url) and "clone failed" in msg and "\n" not in msg
    assert "does not appear to be a git repository" in msg


def test_credentials_not_in_message(tmp_path: Path) -> None:
    url = "http://user:s3cret@127.0.0.1:9/x.git"  # port 9: connection refused, no network
    with pytest.raises(SourceError) as e:
        gitcache.checkout(url, tmp_path / "repo")
    assert "s3cret" not in str(e.value) and "127.0.0.1" in str(e.value)


def test_unknown_policy(remote: Remote, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="update policy"):
        gitcache.checkout(remote.url, tmp_path / "repo", policy="sometimes")


def test_leftover_temp_and_half_clone(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    junk = tmp_path / ".repo.tmp-crashed"
    (junk / "clone" / ".git").mkdir(parents=True)
    # A directory at dest without a complete marker is a crash leftover, never trusted.
    (dest / ".git").mkdir(parents=True)
    (dest / "stale.py").write_text("")
    r = gitcache.checkout(remote.url, dest, paths=("pkg",))
    assert r.updated and r.commit == remote.first
    assert not junk.exists() and not (dest / "stale.py").exists()
    # An update interrupted half way (marker left incomplete) forces a fresh clone.
    marker = dest / ".git" / gitcache.MARKER
    marker.write_text(marker.read_text().replace('"complete": true', '"complete": false'))
    r = gitcache.checkout(remote.url, dest, paths=("pkg",), policy="missing")
    assert r.updated and gitcache._read_marker(dest) is not None


def test_a_clone_of_the_older_layout(remote: Remote, tmp_path: Path) -> None:
    """Clones made before the package's Python files came along (layout 1: the paths alone)
    are made again where the network may be used, and still serve offline."""
    dest = tmp_path / "repo"
    gitcache.checkout(remote.url, dest, paths=("pkg/sub",))
    marker = dest / ".git" / gitcache.MARKER
    old = json.loads(marker.read_text())
    del old["layout"]
    marker.write_text(json.dumps(old))
    (dest / "pkg" / "a.py").unlink()  # as a layout-1 clone has it
    r = gitcache.checkout(remote.url, dest, paths=("pkg/sub",), policy="never")
    assert not r.updated and not (dest / "pkg" / "a.py").exists()
    r = gitcache.checkout(remote.url, dest, paths=("pkg/sub",), policy="missing")
    assert r.updated and (dest / "pkg" / "a.py").is_file()
    assert json.loads(marker.read_text())["layout"] == gitcache.LAYOUT


def test_git_not_installed(remote: Remote, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SourceError, match="git is not installed"):
        gitcache.checkout(remote.url, tmp_path / "repo")


def test_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setattr(gitcache, "GIT_TIMEOUT", 0.5)
    with pytest.raises(SourceError, match="timed out after 0.5 s"):
        gitcache.checkout("https://example.invalid/x.git", tmp_path / "repo")


def test_concurrent_threads(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    results: list[gitcache.CheckoutResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(gitcache.checkout(remote.url, dest, paths=("pkg",), policy="always"))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert {r.commit for r in results} == {remote.first}
    assert sum(r.updated for r in results) == 1  # only the first one cloned


def test_concurrent_processes(remote: Remote, tmp_path: Path) -> None:
    dest = tmp_path / "repo"
    code = ("import sys; from pathlib import Path; from nnrag_tui.engine import gitcache; "
            "print(gitcache.checkout(sys.argv[1], Path(sys.argv[2]), paths=('pkg',)).commit)")
    pythonpath = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath}
    procs = [subprocess.Popen([sys.executable, "-c", code, remote.url, str(dest)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert {o.strip() for o, _ in outs} == {remote.first}
    assert files_of(dest) == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"}
