"""RepoCache: turns each configured source into a directory of code on local disk.

``url`` sources are shallow, sparse, code-only git clones in the cache (see ``gitcache``);
``path`` sources are used in place; ``dist`` sources are installed distributions found through
``importlib.metadata`` (never imported). Every snapshot records where it came from and, for git,
its commit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from nnrag_tui.engine.config import FetchPolicy, SourceConfig
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


class RepoCache:
    def __init__(self, cache_dir: Path, fetch: FetchPolicy | None = None) -> None:
        self.cache_dir = Path(cache_dir)
        self.fetch = fetch or FetchPolicy()

    def materialize(self, src: SourceConfig, policy: str = "missing") -> Snapshot:
        if policy not in UPDATE_POLICIES:
            raise SourceError(f"unknown update policy {policy!r} (use never, missing or always)")
        if src.kind == "path":
            return self._local(src)
        if src.kind == "dist":
            return self._dist(src)
        return self._git(src, policy)

    def _local(self, src: SourceConfig) -> Snapshot:
        root = Path(src.location)
        if not root.exists():
            raise SourceError(f"{src.name}: path does not exist: {root}")
        if not root.is_dir():
            raise SourceError(f"{src.name}: path is not a directory: {root}")
        subdirs = src.paths or ("",)
        if (root / "__init__.py").is_file():
            # The path names a package itself: import from its parent so that module names
            # (and relative imports) keep the package name.
            pkg = root.name
            root = root.parent
            subdirs = tuple(f"{pkg}/{p}".rstrip("/") for p in subdirs)
        commit = _git_head(Path(src.location))
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
                        f.parts[0]
                        for f in (dist.files or [])
                        if len(f.parts) > 1 and not f.parts[0].endswith((".dist-info", ".data"))
                        and f.suffix == ".py"
                    }
                )
            subdirs = tuple(top)
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


def iter_files(snap: Snapshot, src: SourceConfig) -> Iterator[tuple[str, os.stat_result]]:
    """Yields ``(relpath, stat)`` for every wanted ``.py`` file of a snapshot, sorted, never
    following directory symlinks out of the tree and never looping."""
    seen_dirs: set[tuple[int, int]] = set()
    out: list[tuple[str, os.stat_result]] = []
    root = str(snap.root)
    for sub in snap.subdirs:
        start = os.path.join(root, sub) if sub else root
        if os.path.isfile(start) and start.endswith(".py"):
            rel = os.path.relpath(start, root).replace(os.sep, "/")
            try:
                out.append((rel, os.stat(start)))
            except OSError:
                pass
            continue
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
            except OSError:
                continue
            for e in entries:
                name = e.name
                if name.startswith(".") or name == "__pycache__":
                    continue
                try:
                    if e.is_dir():
                        stack.append(e.path)
                    elif name.endswith(".py") and e.is_file():  # never a FIFO or a device
                        rel = os.path.relpath(e.path, root).replace(os.sep, "/")
                        if src.wants(rel):
                            out.append((rel, e.stat()))
                except OSError:
                    continue
    out.sort(key=lambda t: t[0])
    dedup: dict[str, os.stat_result] = {}
    for rel, st in out:
        dedup.setdefault(rel, st)
    yield from dedup.items()


def _git_head(path: Path) -> str | None:
    """The commit of a local directory that is a git work tree, read without running git."""
    p = path.resolve()
    if {"site-packages", "dist-packages"} & set(p.parts):
        return None  # an installed package, even if some parent happens to be a git checkout
    for d in (p, *p.parents):
        head = d / ".git" / "HEAD"
        if head.is_file():
            try:
                text = head.read_text().strip()
                if text.startswith("ref: "):
                    ref = d / ".git" / text[5:]
                    if ref.is_file():
                        return ref.read_text().strip()
                    packed = d / ".git" / "packed-refs"
                    if packed.is_file():
                        for line in packed.read_text().splitlines():
                            if line.endswith(" " + text[5:]):
                                return line.split()[0]
                    return None
                return text
            except OSError:
                return None
    return None


def _safe_dirname(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".") or "repo"
