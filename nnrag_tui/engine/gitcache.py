"""Shallow, sparse, code-only git clones kept in the cache.

``checkout(url, dest, ...)`` leaves a work tree of the wanted ``paths`` at ``dest`` and returns
its commit. Clones are made in a temporary directory next to ``dest`` and renamed into place, so
a crash never leaves a half clone that looks good; a lock file serialises processes sharing one
clone. Every git call runs with prompts disabled, a time-out, and the URL passed after ``--``.
Bad URLs are rejected by ``config.check_url``; its ``ConfigError`` is re-raised as ``SourceError``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnrag_tui.engine.config import check_url
from nnrag_tui.engine.errors import ConfigError, SourceError

GIT_TIMEOUT = 600.0  # seconds allowed for one git call (network calls included)
POLICIES = ("never", "missing", "always")
MARKER = "nnrag-source.json"  # kept in <dest>/.git
# 2: the sparse checkout has the Python files of the folders the paths start in (1: the paths
# alone); 3: and the root's setup.py (engine.extensions); a clone of another layout is made
# again where the network may be used
LAYOUT = 3
_SAFE = ("-c", "protocol.ext.allow=never", "-c", "advice.detachedHead=false")
_SCRUB = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
          "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


@dataclass(frozen=True)
class CheckoutResult:
    path: Path  # the work tree
    commit: str  # full sha of HEAD
    updated: bool  # cloned or fetched new commits in this call


def checkout(url: str, dest: Path, *, ref: str | None = None, paths: Sequence[str] = (),
             policy: str = "missing", lfs: bool = False) -> CheckoutResult:
    """Makes ``dest`` a sparse shallow clone of ``url`` at ``ref`` according to ``policy``
    (``never``: cache only; ``missing``: clone if absent; ``always``: also fetch when the
    remote moved). Raises ``SourceError`` with a one-line message on any failure."""
    try:
        check_url(url)
    except ConfigError as e:
        raise SourceError(str(e)) from None
    if policy not in POLICIES:
        raise SourceError(f"unknown update policy {policy!r} (use never, missing or always)")
    if ref is not None and (not ref or ref.startswith("-") or any(c in ref for c in "\n\r\0 ")):
        raise SourceError(f"{_redact(url)}: invalid ref {ref!r}")
    dest = Path(dest).absolute()
    want = {"url": url, "ref": ref, "paths": sorted(p.strip("/") for p in paths),
            "layout": LAYOUT}
    git = _Git(url, lfs)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _locked(dest.parent / f"{dest.name}.lock"):
        for junk in dest.parent.glob(f".{dest.name}.tmp-*"):
            shutil.rmtree(junk, ignore_errors=True)
        marker = _read_marker(dest)
        # a clone of an older layout still serves where the network may not be used
        same = marker == want or (policy == "never" and marker is not None
                                  and {**marker, "layout": LAYOUT} == want)
        good = same and _head(git, dest) is not None
        if policy == "never" and not good:
            state = "not cached" if not dest.exists() else "cached clone is stale or differs"
            raise SourceError(f"{_redact(url)}: {state} and update policy is 'never'")
        if not good:
            _clone(git, dest, ref, want)
            return CheckoutResult(dest, _head(git, dest) or "", True)
        commit = _head(git, dest) or ""
        if policy == "always" and _remote_commit(git, ref) != commit:
            _write_marker(dest, want, complete=False)
            git.run("fetch", "-q", "--depth", "1", "--filter=blob:none", "origin",
                    ref or "HEAD", cwd=dest, what="fetch")
            git.run("reset", "-q", "--hard", "FETCH_HEAD", cwd=dest, what="checkout")
            _write_marker(dest, want, complete=True)
            new = _head(git, dest) or ""
            return CheckoutResult(dest, new, new != commit)
        return CheckoutResult(dest, commit, False)


class _Git:
    """Runs git for one URL with a safe environment; failures become ``SourceError``."""

    def __init__(self, url: str, lfs: bool) -> None:
        self.url = url
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", SSH_ASKPASS="true",
                   GCM_INTERACTIVE="never", LC_ALL="C")
        env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        if not lfs:
            env["GIT_LFS_SKIP_SMUDGE"] = "1"
        self.env = env

    def run(self, *args: str, cwd: Path | None = None, what: str = "git",
            stdin: str | None = None) -> str:
        cmd = ["git", *_SAFE, *args]
        try:
            proc = subprocess.Popen(
                cmd, cwd=cwd, env=self.env, text=True, errors="replace",
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            msg = "git is not installed (or not on PATH)"
            raise SourceError(f"{_redact(self.url)}: {msg}") from None
        try:
            out, err = proc.communicate(stdin, timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise SourceError(
                f"{_redact(self.url)}: git {what} timed out after {GIT_TIMEOUT:g} s") from None
        if proc.returncode != 0:
            raise SourceError(f"{_redact(self.url)}: git {what} failed: {_cause(err)}")
        return out


# what git says when the remote has no such ref (a commit it does not have, or a name)
_NO_SUCH_REF = ("not our ref", "couldn't find remote ref", "unadvertised object")


def _clone(git: _Git, dest: Path, ref: str | None, want: dict[str, Any]) -> None:
    """Clones into a temporary sibling of ``dest`` and renames it into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        work = tmp / "clone"
        args = ["clone", "-q", "--depth", "1", "--filter=blob:none", "--no-checkout"]
        try:
            git.run(*args, *(["--branch", ref] if ref else []), "--", git.url, str(work),
                    what="clone")
            target = None
        except SourceError as e:
            if not ref or "not found in upstream" not in str(e):
                raise
            # Not a branch or tag: fetch the ref (e.g. a full commit sha) by name.
            shutil.rmtree(work, ignore_errors=True)
            git.run("init", "-q", str(work), what="init")
            git.run("remote", "add", "origin", "--", git.url, cwd=work, what="remote add")
            try:
                git.run("fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", ref,
                        cwd=work, what="fetch")
            except SourceError as e2:
                if not any(m in str(e2) for m in _NO_SUCH_REF):
                    raise  # (a remote that fails to send it: git's own words say why)
                raise SourceError(f"{_redact(git.url)}: unknown ref {ref!r} (not a branch, "
                                  f"tag or full commit sha of the remote)") from e2
            target = "FETCH_HEAD"
        if want["paths"]:
            git.run("sparse-checkout", "set", "--no-cone", "--stdin", cwd=work,
                    what="sparse-checkout", stdin=sparse_patterns(want["paths"]))
        git.run("checkout", "-q", *(["--detach", target] if target else []), cwd=work,
                what="checkout")
        _write_marker(work, want, complete=True)
        if dest.exists() or dest.is_symlink():
            os.rename(dest, tmp / "old")  # the stale clone goes away with tmp
        os.rename(work, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remote_commit(git: _Git, ref: str | None) -> str:
    """The commit the remote has for ``ref`` (``HEAD`` when None), via ``git ls-remote``."""
    name = ref or "HEAD"
    out = git.run("ls-remote", "--", git.url, name, f"{name}^{{}}", what="ls-remote")
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, refname = line.partition("\t")
        refs[refname.strip()] = sha.strip()
    full = [f"{name}^{{}}", name] if name == "HEAD" or name.startswith("refs/") else []
    for cand in (*full, f"refs/heads/{name}", f"refs/tags/{name}^{{}}", f"refs/tags/{name}"):
        if cand in refs:
            return refs[cand]
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", name):
        return name  # a commit sha never moves
    raise SourceError(f"{_redact(git.url)}: unknown ref {name!r} on the remote")


def _head(git: _Git, dest: Path) -> str | None:
    if not (dest / ".git").is_dir():
        return None
    try:
        return git.run("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=dest).strip() or None
    except SourceError:
        return None


def _read_marker(dest: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((dest / ".git" / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("complete", False) is not True:
        return None
    return data


def _write_marker(dest: Path, want: dict[str, Any], complete: bool) -> None:
    path = dest / ".git" / MARKER
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**want, "complete": complete}))
    os.replace(tmp, path)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sparse_patterns(paths: Sequence[str]) -> str:
    """The sparse checkout of ``paths``: each path whole, the Python files of the folder
    each path starts in, and the root's ``setup.py``. Indexing walks ``paths`` only; the other
    modules of the package are read where a class's base lives among them
    (``transformers/models`` derives from ``transformers.modeling_utils``) and named in the
    header as modules the file imports, so they must be on disk too; ``setup.py`` names the
    compiled extensions building the package makes (engine.extensions): code only, never data
    or weights."""
    tops = sorted({p.split("/")[0] for p in paths if "/" in p})
    return "".join(["/" + _escape(p) + "\n" for p in paths]
                   + [f"/{_escape(top)}/**/*.py\n" for top in tops] + ["/setup.py\n"])


def _escape(path: str) -> str:
    """A literal path as a gitignore-style sparse pattern."""
    return re.sub(r"([*?\[\]\\!#])", r"\\\1", path)


def _cause(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for prefix in ("fatal:", "error:"):
        for ln in lines:
            if ln.startswith(prefix):
                return _redact(ln[len(prefix):].strip())
    return _redact(lines[-1]) if lines else "unknown error"


def _redact(text: str) -> str:
    """``text`` without any user, password or token embedded in a URL."""
    return re.sub(r"([a-z][a-z0-9+.-]*://)[^/@\s']*@", r"\1", text, flags=re.IGNORECASE)
