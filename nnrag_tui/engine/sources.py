"""RepoCache: turns each configured source into a directory of code on local disk.

``url`` sources are shallow, sparse, code-only git clones in the cache (see ``gitcache``);
``path`` sources are used in place; ``dist`` sources are installed distributions found through
``importlib.metadata`` (never imported). Every snapshot records where it came from and, for git,
its commit.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from nnrag_tui.engine.config import FetchPolicy, SourceConfig, glob_match
from nnrag_tui.engine.errors import SourceError

UPDATE_POLICIES = ("never", "missing", "always")


@dataclass(frozen=True)
class Snapshot:
    """One source on disk. ``root`` is the import root: a file ``root/a/b.py`` is module ``a.b``."""

    source: str
    root: Path
    subdirs: tuple[str, ...]  # directories under root to walk ("" = all of root)
    origin: str  # URL, local path or "dist==version"
    commit: str | None = None
    version: str | None = None
    updated: bool = False  # fetched or cloned in this run
    prefix: str = ""  # the import root inside the repository ("src" for a src layout)


class RepoCache:
    def __init__(self, cache_dir: Path, fetch: FetchPolicy | None = None) -> None:
        self.cache_dir = Path(cache_dir)
        self.fetch = fetch or FetchPolicy()

    def materialize(self, src: SourceConfig, policy: str = "missing") -> Snapshot:
        if policy not in UPDATE_POLICIES:
            raise SourceError(f"unknown update policy {policy!r} (use never, missing or always)")
        if src.kind == "path":
            snap = self._local(src)
        elif src.kind == "dist":
            snap = self._dist(src)
        else:
            snap = _at_import_root(src, self._git(src, policy))
        _check_subdirs(src, snap)
        return snap

    def _local(self, src: SourceConfig) -> Snapshot:
        root = Path(src.location)
        if not root.exists():
            raise SourceError(f"{src.name}: path does not exist: {root}")
        if not root.is_dir():
            raise SourceError(f"{src.name}: path is not a directory: {root}")
        commit = _git_head(Path(src.location))
        snap = _at_import_root(src, Snapshot(src.name, root, src.paths or ("",),
                                             str(root), commit=commit))
        if snap.prefix:
            return snap
        subdirs = snap.subdirs
        if (root / "__init__.py").is_file():
            # The path names a package itself: import from its parent so that module names
            # (and relative imports) keep the package name.
            pkg = root.name
            root = root.parent
            subdirs = tuple(f"{pkg}/{p}".rstrip("/") for p in subdirs)
        return Snapshot(src.name, root, subdirs, str(Path(src.location)), commit=commit)

    def _dist(self, src: SourceConfig) -> Snapshot:
        from importlib import metadata

        try:
            dist = metadata.distribution(src.location)
        except metadata.PackageNotFoundError:
            raise SourceError(
                f"{src.name}: distribution {src.location!r} is not installed "
                f"(pip install {src.location}, or use a 'path' source)"
            ) from None
        root = Path(str(dist.locate_file(""))).resolve()
        subdirs = src.paths
        if not subdirs:
            top = (dist.read_text("top_level.txt") or "").split()
            if not top:
                top = sorted(
                    {
                        f.parts[0] if len(f.parts) > 1 else f.stem
                        for f in (dist.files or [])
                        if not f.parts[0].endswith((".dist-info", ".data"))
                        and f.parts[0] != ".." and f.suffix == ".py"  # (scripts in bin/)
                    }
                )
            # a distribution of one module file (TabM's ``tabm.py``) has no package folder
            subdirs = tuple(t if (root / t).is_dir() or not (root / f"{t}.py").is_file()
                            else f"{t}.py" for t in top)
        if not subdirs:
            raise SourceError(f"{src.name}: distribution {src.location!r} has no Python packages")
        version = dist.version
        return Snapshot(
            src.name, root, subdirs, f"{dist.metadata['Name']}=={version}", version=version
        )

    def _git(self, src: SourceConfig, policy: str) -> Snapshot:
        from nnrag_tui.engine import gitcache

        dest = self.cache_dir / "repos" / _safe_dirname(src.name)
        result = gitcache.checkout(
            src.location,
            dest,
            ref=src.ref,
            paths=src.paths,
            policy=policy,
            lfs=self.fetch.lfs,
        )
        subdirs = src.paths or ("",)
        return Snapshot(
            src.name,
            result.path,
            subdirs,
            src.location,
            commit=result.commit,
            updated=result.updated,
        )


def import_root(src: SourceConfig, repo: Path) -> str:
    """The folder of the repository that module names start from: the configured
    ``import_root``, else ``src`` when every configured path lies under a ``src`` folder that
    is not a package itself (the src layout of peft, diffusers, open_clip, flux: their code
    imports ``peft.x``, never ``src.peft.x``), else the repository itself."""
    if src.import_root is not None:
        return src.import_root
    if src.paths and all(p == "src" or p.startswith("src/") for p in src.paths) \
            and not (repo / "src" / "__init__.py").is_file():
        return "src"
    return ""


def _at_import_root(src: SourceConfig, snap: Snapshot) -> Snapshot:
    """The snapshot rooted at the source's import root, its paths made relative to it."""
    prefix = import_root(src, snap.root)
    if not prefix:
        return snap
    root = snap.root / prefix
    if not root.is_dir():
        raise SourceError(f"{src.name}: import_root {prefix!r} is not a folder of "
                          f"{snap.origin}")
    subdirs = tuple(p[len(prefix) + 1:] if p != prefix else "" for p in src.paths) or ("",)
    return Snapshot(snap.source, root, subdirs, snap.origin, commit=snap.commit,
                    version=snap.version, updated=snap.updated, prefix=prefix)


def _check_subdirs(src: SourceConfig, snap: Snapshot) -> None:
    """A source none of whose configured ``paths`` exists is an error, not an empty source
    (a typo in ``paths`` would otherwise index nothing and say nothing)."""
    try:
        os.listdir(snap.root)
    except OSError as exc:
        raise SourceError(f"{src.name}: cannot read {snap.root}: {exc.strerror or exc}") from None
    if not src.paths:
        return
    present = [sub for sub in snap.subdirs if os.path.exists(os.path.join(snap.root, sub))]
    if not present:
        raise SourceError(f"{src.name}: none of the configured paths exists in {snap.origin}: "
                          + ", ".join(src.paths))


def iter_files(snap: Snapshot, src: SourceConfig
               ) -> Iterator[tuple[str, os.stat_result, str | None]]:
    """Yields ``(relpath, stat, reason)`` for every wanted ``.py`` entry of a snapshot, sorted.

    ``reason`` is None for a regular file to read; otherwise the entry cannot be indexed and
    ``reason`` says why (a broken or looping symlink, a FIFO or device named ``.py``, an
    unreadable directory, a symlink leaving a git clone), so that it is recorded rather than
    silently missing. Real directories are walked before symlinked ones (the same tree reached
    twice is indexed once, under its real path); directory symlinks are followed only inside
    the snapshot's root (a ``data -> /mnt/datasets`` link is never walked) and never loop;
    file symlinks out of a git clone are not read."""
    seen_dirs: set[tuple[int, int]] = set()
    out: dict[str, tuple[os.stat_result, str | None]] = {}
    root = str(snap.root)
    real_root = os.path.realpath(root)
    contain_files = src.kind == "url"

    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)

    prefix = root.rstrip(os.sep) + os.sep

    def rel_of(path: str) -> str:
        if path.startswith(prefix):  # what scandir gives: much faster than relpath
            rel = path[len(prefix):]
            return rel.replace(os.sep, "/") if os.sep != "/" else rel
        return os.path.relpath(path, root).replace(os.sep, "/")

    def record(path: str, st: os.stat_result, reason: str | None) -> None:
        out.setdefault(rel_of(path), (st, reason))

    def dir_wanted(path: str) -> bool:
        rel = rel_of(path)
        return not any(glob_match(f"{rel}/x.py", g) for g in src.exclude)

    def walk(start: str, links: list[str]) -> None:
        stack = [start]
        while stack:
            d = stack.pop()
            try:
                st = os.stat(d)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen_dirs:
                continue
            seen_dirs.add(key)
            try:
                entries = list(os.scandir(d))
            except OSError as exc:
                if rel_of(d) != "." and dir_wanted(d):
                    record(d, st, f"unreadable directory: {exc.strerror or exc}")
                continue
            for e in entries:
                name = e.name
                if name.startswith(".") or name == "__pycache__":
                    continue
                try:
                    is_link = e.is_symlink()
                    if e.is_dir():  # follows symlinks
                        if is_link:
                            links.append(e.path)
                        else:
                            stack.append(e.path)
                        continue
                except OSError:
                    pass
                if not name.endswith(".py") or not src.wants(rel_of(e.path)):
                    continue
                st_e, reason = _entry(e, contain_files, inside)
                if st_e is not None:
                    record(e.path, st_e, reason)

    links: list[str] = []
    for sub in snap.subdirs:
        start = os.path.join(root, sub) if sub else root
        if os.path.isfile(start) and start.endswith(".py"):
            try:
                out.setdefault(rel_of(start), (os.stat(start), None))
            except OSError:
                pass
            continue
        walk(start, links)
    # then the directory symlinks met on the way, shallowest first, when they stay inside
    while links:
        links.sort(key=lambda p: (p.count(os.sep), p))
        link = links.pop(0)
        if inside(link):
            walk(link, links)
        elif link.endswith(".py") and src.wants(rel_of(link)):
            try:
                record(link, os.lstat(link), "symbolic link to a directory outside the "
                                             "source tree (not followed)")
            except OSError:
                pass
    for rel in sorted(out):
        st, reason = out[rel]
        yield rel, st, reason


def _entry(e: os.DirEntry, contain: bool, inside) -> tuple[os.stat_result | None, str | None]:
    """The stat of a ``.py`` entry (its target's, for a symlink: what the fast path compares)
    and why it cannot be read as a file, or None when it can. ``(None, None)``: it vanished."""
    try:
        st = e.stat()
    except FileNotFoundError:
        if not os.path.islink(e.path):
            return None, None
        try:
            return os.lstat(e.path), f"broken symbolic link (to {os.readlink(e.path)!r})"
        except OSError:
            return None, None
    except OSError as exc:
        try:
            return os.lstat(e.path), f"unreadable: {exc.strerror or exc}"
        except OSError:
            return None, None
    if not stat.S_ISREG(st.st_mode):
        return st, "not a regular file"
    if contain and e.is_symlink() and not inside(e.path):
        return st, "symbolic link to outside the repository (not followed)"
    return st, None


def checkout_packages(roots: dict[str, dict]) -> dict[str, str]:
    """{source: package} for each ``path`` source indexed from its folder's parent because the
    folder holds an ``__init__.py`` (``SourceCache._local``), where the folder is a repository
    checkout of its own (``.git`` in it): a package folder is installed or unpacked, a
    research repository's root with a stray ``__init__.py`` is cloned, and its modules import
    their neighbours as top-level modules (``bindings.ModuleIndex.run_folders``). ``roots``:
    ``IndexStore.source_roots()``."""
    out = {}
    for name, r in roots.items():
        if r.get("kind") != "path" or r.get("import_root"):
            continue
        folder = Path(r["origin"])
        if (Path(r["root"]) == folder.parent and (folder / "__init__.py").is_file()
                and (folder / ".git").exists()):
            out[name] = folder.name
    return out


def _git_head(path: Path) -> str | None:
    """The commit of a local directory that is a git work tree: HEAD, read from ``.git``, and
    only if the work tree tracks files under ``path`` (one ``git ls-files``): a folder of
    unpacked sources inside some project's checkout, git-ignored or never added, is at no
    commit of that project."""
    p = path.resolve()
    if {"site-packages", "dist-packages"} & set(p.parts):
        return None  # an installed package, even if some parent happens to be a git checkout
    for d in (p, *p.parents):
        head = d / ".git" / "HEAD"
        if head.is_file():
            sha = _read_head(d / ".git", head)
            return sha if sha is not None and _tracks(d, p) else None
    return None


def _read_head(git_dir: Path, head: Path) -> str | None:
    try:
        text = head.read_text().strip()
        if not text.startswith("ref: "):
            return text
        ref = git_dir / text[5:]
        if ref.is_file():
            return ref.read_text().strip()
        packed = git_dir / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + text[5:]):
                    return line.split()[0]
    except OSError:
        pass
    return None


def _tracks(work_tree: Path, path: Path) -> bool:
    """Whether git tracks a file under ``path`` in ``work_tree``; True when git cannot say
    (not installed, a broken repository): the commit is then reported as before."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(work_tree), "ls-files", "-z", "--", str(path)],
            capture_output=True, timeout=30, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return True
    return proc.returncode != 0 or bool(proc.stdout)


def _safe_dirname(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".") or "repo"
