"""The registry: the user's saved blocks, under the data directory.

Layout (``<data_dir>/blocks``)::

    .lock                      fcntl lock: one writer at a time (savers, removers, cleanup)
    .staging/                  version directories being built, and temp files (cleaned on open)
    .trash/                    removed blocks on their way out (cleaned on open)
    <Name>/
        .last_version          the highest version ever given out (numbers are never reused)
        v1/
            <Name>.py          the generated file
            spec.json          the neutral spec
            provenance.json    sources, commits, definitions with SHA-1 and SWHID, validation
            required_repos.json  imports -> distributions (PEP 508 pins), source repositories
            MANIFEST.json      written last: the files with their SHA-256, the code digest
        v2/ ...

Crash safety: a version directory is built under ``.staging`` (each file written to a temp
file, fsynced and renamed; ``MANIFEST.json`` last), then renamed into place in one step and the
parent directory fsynced. So a version directory either exists complete or not at all, and the
listing is derived from the version directories themselves: no index file to repair. A version
directory without a readable manifest is never listed. Removal renames into ``.trash`` first.
Readers take no lock; everything that writes holds ``.lock``.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrag_tui.engine import paths
from nnrag_tui.engine.errors import NnragError
from nnrag_tui.engine.modulefiles import is_plain_relative
from nnrag_tui.engine.provenance import (
    add_validation,
    build_provenance,
    build_requirements,
    now,
    same_validation,
    validation_run,
)

BLOCKS_DIR = "blocks"
STAGING = ".staging"
TRASH = ".trash"
LOCK = ".lock"
LAST_VERSION = ".last_version"
MANIFEST = "MANIFEST.json"
SPEC = "spec.json"
PROVENANCE = "provenance.json"
REQUIREMENTS = "required_repos.json"
FORMAT = 1

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
_VERSION_RE = re.compile(r"v([1-9][0-9]{0,8})")


class RegistryError(NnragError):
    """The registry cannot do what was asked (bad name, missing block, refusing to overwrite)."""


class BlockNotSaved(RegistryError):
    """No saved block (or version) by that name."""


def check_name(name: str) -> str:
    """A block name as typed by a user, or an error saying why it cannot be one. Names are
    plain file names: letters, digits, ``_ . + -``, no separators, no leading dot, no NUL."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name:
        why = ("names may not contain path separators" if isinstance(name, str)
               and ("/" in name or "\\" in name) else
               "names may not contain NUL" if isinstance(name, str) and "\0" in name else
               "use letters, digits and _ . + - (no leading dot, no '..', at most 100)")
        raise RegistryError(f"invalid block name {name!r}: {why}")
    return name


def parse_version(version: str | int | None) -> int | None:
    """``"v2"``, ``"2"`` or ``2`` -> 2; ``None`` stays ``None`` (the latest)."""
    if version is None:
        return None
    text = str(version)
    m = _VERSION_RE.fullmatch(text) or _VERSION_RE.fullmatch(f"v{text}")
    if not m:
        raise RegistryError(f"invalid version {version!r}: expected v1, v2, ...")
    return int(m.group(1))


def _slug(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("._") or "block"
    return cleaned[:60]


# ``Registry.list`` shadows the builtin inside the class body, so its annotations use these
_Strs = list[str]
_Ints = list[int]
_Paths = list[Path]
_Rows = list["SavedBlock"]


@dataclass(frozen=True)
class SaveResult:
    name: str
    version: str
    path: Path  # the version directory
    file: Path  # the saved .py
    created: bool  # False: an identical file was already saved (``version`` is that one)
    updated: bool = False  # an existing version got a new validation run recorded

    def as_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "path": str(self.path),
                "file": str(self.file), "created": self.created, "updated": self.updated}


@dataclass(frozen=True)
class SavedBlock:
    """One row of the listing: a saved name and its latest version."""

    name: str
    latest: str
    versions: tuple[str, ...]
    key: str
    category: str | None
    repo: str | None
    saved_at: str
    validated: bool | None  # None: never validated
    level: str | None
    path: Path

    def as_dict(self) -> dict:
        return {"name": self.name, "latest": self.latest, "versions": list(self.versions),
                "key": self.key, "category": self.category, "repo": self.repo,
                "saved_at": self.saved_at, "validated": self.validated, "level": self.level,
                "path": str(self.path)}


@dataclass(frozen=True)
class SavedVersion:
    """One saved version with its documents and the paths of its files."""

    name: str
    version: str
    versions: tuple[str, ...]
    path: Path
    files: dict[str, Path]  # code, spec, provenance, requirements, manifest
    manifest: dict
    spec: dict
    provenance: dict
    requirements: dict = field(default_factory=dict)

    @property
    def code_path(self) -> Path:
        return self.files["code"]

    def as_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "versions": list(self.versions),
                "path": str(self.path), "files": {k: str(v) for k, v in self.files.items()},
                "manifest": self.manifest, "spec": self.spec, "provenance": self.provenance,
                "requirements": self.requirements}


class Registry:
    """``Registry(data_dir)``; ``None`` is the user data directory (``NNRAG_DATA_DIR``)."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None) -> None:
        self.data_dir = paths.data_dir(data_dir) if data_dir is None else Path(data_dir)
        self.root = self.data_dir / BLOCKS_DIR
        self.cleanup()

    # -- reading (no lock: every directory that is listed is complete) ---------------------
    def names(self) -> _Strs:
        try:
            entries = os.listdir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted((e for e in entries if _NAME_RE.fullmatch(e)), key=str.lower)

    def versions(self, name: str) -> _Ints:
        """The complete versions of ``name``, oldest first."""
        try:
            entries = os.listdir(self.root / name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for e in entries:
            m = _VERSION_RE.fullmatch(e)
            if m and (self.root / name / e / MANIFEST).is_file():
                found.append(int(m.group(1)))
        return sorted(found)

    def list(self) -> _Rows:
        rows = []
        for name in self.names():
            versions = self.versions(name)
            for v in reversed(versions):  # the newest version that reads cleanly
                vdir = self.root / name / f"v{v}"
                manifest = _read_json(vdir / MANIFEST)
                if manifest is None:
                    continue
                val = (_read_json(vdir / PROVENANCE) or {}).get("validation") or {}
                rows.append(SavedBlock(
                    name=name, latest=f"v{v}", versions=tuple(f"v{x}" for x in versions),
                    key=manifest.get("key", ""), category=manifest.get("category"),
                    repo=manifest.get("repo"), saved_at=manifest.get("saved_at", ""),
                    validated=val.get("validated") if val else None,
                    level=val.get("level") if val else None, path=vdir))
                break
        return rows

    def show(self, name: str, version: str | int | None = None) -> SavedVersion:
        name = check_name(name)
        v, versions = self._resolve(name, version)
        vdir = self.root / name / f"v{v}"
        docs = {}
        for key, fname in (("manifest", MANIFEST), ("spec", SPEC), ("provenance", PROVENANCE),
                           ("requirements", REQUIREMENTS)):
            doc = _read_json(vdir / fname)
            if doc is None:
                raise RegistryError(f"saved block {name!r} v{v}: {fname} is missing or "
                                    f"unreadable in {vdir}")
            docs[key] = doc
        files = {"code": vdir / docs["manifest"]["code"], "spec": vdir / SPEC,
                 "provenance": vdir / PROVENANCE, "requirements": vdir / REQUIREMENTS,
                 "manifest": vdir / MANIFEST}
        return SavedVersion(name, f"v{v}", tuple(f"v{x}" for x in versions), vdir, files,
                            docs["manifest"], docs["spec"], docs["provenance"],
                            docs["requirements"])

    def verify(self, name: str, version: str | int | None = None) -> _Strs:
        """Problems with a saved version's files (missing, or bytes not matching the
        manifest); empty when it is intact."""
        name = check_name(name)
        v, _ = self._resolve(name, version)
        vdir = self.root / name / f"v{v}"
        manifest = _read_json(vdir / MANIFEST)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            return [f"{MANIFEST}: missing or unreadable"]
        problems = []
        for fname, digest in manifest["files"].items():
            try:
                data = (vdir / fname).read_bytes()
            except OSError as exc:
                problems.append(f"{fname}: {exc.strerror or exc}")
                continue
            if fname.endswith(".json") and _read_json(vdir / fname) is None:
                problems.append(f"{fname}: not valid JSON")
            elif fname.endswith(".py") and not _parses(data):
                problems.append(f"{fname}: not valid Python")
            elif digest is not None and hashlib.sha256(data).hexdigest() != digest:
                problems.append(f"{fname}: content does not match the manifest")
        for rel, digest in (manifest.get("module_files") or {}).items():
            if not is_plain_relative(rel):
                problems.append(f"{rel}: not a path inside the version's folder")
                continue
            try:
                data = (vdir / rel).read_bytes()
            except OSError as exc:
                problems.append(f"{rel}: {exc.strerror or exc}")
                continue
            if hashlib.sha256(data).hexdigest() != digest:
                problems.append(f"{rel}: content does not match the manifest")
        return problems

    def code(self, name: str, version: str | int | None = None) -> str:
        return self.show(name, version).code_path.read_text(encoding="utf-8")

    # -- writing ---------------------------------------------------------------------------
    def save(self, extraction: Any, validation: Any = None, *,
             sources: dict[str, dict] | None = None, name: str | None = None) -> SaveResult:
        """Saves an extraction (``BlockExtractor.extract_single_block``'s result).

        ``sources`` is ``extractor.store.source_roots()``: it is where the inlined definitions'
        files are read to compute their SWHIDs. ``validation`` is the validator's report, or
        None. ``name`` defaults to the class name; when that name already holds a different
        block (same class name from another repository or module), ``<Class>_<repo>`` is used.
        Saving the same code again creates nothing (a new validation run is recorded on the
        existing version); changed code becomes the next version."""
        g = getattr(extraction, "generated", None)
        if g is None:
            why = getattr(extraction, "error", None) or "it was not extracted"
            raise RegistryError(f"cannot save {getattr(extraction, 'requested', '?')!r}: {why}")
        if name is not None:
            check_name(name)
        if sources is None:
            sources = getattr(extraction, "sources", None)
        code = g.code.encode("utf-8")
        digest = hashlib.sha256(code).hexdigest()
        block = getattr(extraction, "block", None)
        spec_src = (g.spec or {}).get("source", {}) if isinstance(g.spec, dict) else {}
        repo = getattr(block, "source", None) or spec_src.get("repo")
        identity = (repo, g.key)
        run = validation_run(validation) if validation is not None else None
        with self._lock():
            target = name or self._pick_name(g.name, identity)
            for v in reversed(self.versions(target)):
                vdir = self.root / target / f"v{v}"
                manifest = _read_json(vdir / MANIFEST) or {}
                if manifest.get("code_sha256") != digest:
                    continue
                updated = False
                if run is not None:
                    prov = _read_json(vdir / PROVENANCE)
                    if prov is not None and not same_validation(prov, run):
                        add_validation(prov, run)
                        self._replace(vdir / PROVENANCE, _json_bytes(prov))
                        updated = True
                return SaveResult(target, f"v{v}", vdir, vdir / manifest["code"],
                                  created=False, updated=updated)
            return self._create(target, extraction, code, digest, repo, sources, run)

    def remove(self, name: str, version: str | int | None = None) -> _Strs:
        """Removes one version, or (``version=None``) every version of ``name``; returns the
        versions removed. Atomic: renamed out of the listing first, deleted after."""
        name = check_name(name)
        with self._lock():
            v, versions = self._resolve(name, version)
            trash = self.root / TRASH
            trash.mkdir(exist_ok=True)
            gone = [v] if version is not None else versions
            if version is not None and len(versions) > 1:
                victim = self.root / name / f"v{v}"
            else:
                victim = self.root / name
            dest = trash / f"{name}.{uuid.uuid4().hex}"
            os.rename(victim, dest)
            _fsync_dir(victim.parent)
            shutil.rmtree(dest, ignore_errors=True)
        return [f"v{x}" for x in gone]

    def export(self, name: str, dest_dir: str | os.PathLike[str],
               version: str | int | None = None, *, force: bool = False) -> _Paths:
        """Copies a saved version into ``dest_dir`` as ``<Name>.py``, ``<Name>.spec.json``,
        ``<Name>.provenance.json`` and ``<Name>.required_repos.json`` (one folder can hold many
        blocks). Refuses to overwrite an existing file unless ``force``."""
        saved = self.show(name, version)
        dest = Path(dest_dir)
        if dest.exists() and not dest.is_dir():
            raise RegistryError(f"export destination {dest} is not a directory")
        plan = [(saved.files["code"], dest / f"{saved.name}.py")]
        plan += [(saved.files[k], dest / f"{saved.name}.{fname}")
                 for k, fname in (("spec", SPEC), ("provenance", PROVENANCE),
                                  ("requirements", REQUIREMENTS))]
        # the files the code finds beside itself, at the same place beside <Name>.py
        plan += [(saved.path / rel, dest / rel) for rel in
                 (saved.manifest.get("module_files") or {}) if is_plain_relative(rel)]
        if not force:
            existing = [str(d) for _, d in plan if d.exists() or d.is_symlink()]
            if existing:
                raise RegistryError("refusing to overwrite " + ", ".join(existing)
                                    + " (use --force)")
        try:
            dest.mkdir(parents=True, exist_ok=True)
            for src, out in plan:
                out.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(out, src.read_bytes(), tmp_dir=dest)
            _fsync_dir(dest)
        except OSError as exc:
            raise RegistryError(f"cannot export to {dest}: {exc.strerror or exc}") from None
        return [out for _, out in plan]

    def cleanup(self) -> None:
        """Removes what an interrupted writer left behind (staging and trash, name folders
        with no complete version). Skipped when another process holds the lock: it may be
        using them."""
        if not self.root.is_dir():
            return
        try:
            with self._lock(blocking=False) as got:
                if not got:
                    return
                for sub in (STAGING, TRASH):
                    d = self.root / sub
                    if d.is_dir():
                        for entry in os.listdir(d):
                            _rm(d / entry)
                for name in self.names():
                    if not self.versions(name):
                        trash = self.root / TRASH
                        trash.mkdir(exist_ok=True)
                        dest = trash / f"{name}.{uuid.uuid4().hex}"
                        os.rename(self.root / name, dest)
                        _rm(dest)
        except (OSError, RegistryError):
            return  # a read-only registry still lists

    # -- internals -------------------------------------------------------------------------
    @contextmanager
    def _lock(self, blocking: bool = True) -> Iterator[bool]:
        """The writers' lock; yields False instead of waiting when ``blocking`` is off and
        another process holds it."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fh = (self.root / LOCK).open("a+")
        except OSError as exc:
            raise RegistryError(f"cannot write the registry at {self.root}: "
                                f"{exc.strerror or exc}") from None
        with fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _resolve(self, name: str, version: str | int | None) -> tuple[int, _Ints]:
        versions = self.versions(name)
        if not versions:
            raise BlockNotSaved(f"no saved block named {name!r}")
        v = parse_version(version)
        if v is None:
            return versions[-1], versions
        if v not in versions:
            raise BlockNotSaved(f"saved block {name!r} has no version v{v} (saved: "
                                + ", ".join(f"v{x}" for x in versions) + ")")
        return v, versions

    def _pick_name(self, cls: str, identity: tuple) -> str:
        base = cls if _NAME_RE.fullmatch(cls) and ".." not in cls else _slug(cls)
        repo = _slug(str(identity[0] or "repo"))
        candidates = [base, f"{base}_{repo}"]
        candidates += (f"{base}_{repo}_{i}" for i in range(2, 1000))
        for cand in candidates:
            versions = self.versions(cand)
            if not versions:
                if (self.root / cand).exists() and not (self.root / cand).is_dir():
                    continue  # a stray file in the way
                return cand
            m = _read_json(self.root / cand / f"v{versions[-1]}" / MANIFEST) or {}
            if (m.get("repo"), m.get("key")) == identity:
                return cand
        raise RegistryError(f"too many different blocks saved as {base!r}")

    def _next_version(self, name: str) -> int:
        last = 0
        try:
            last = int((self.root / name / LAST_VERSION).read_text().strip() or 0)
        except (OSError, ValueError):
            pass
        return max([last, *self.versions(name)]) + 1

    def _create(self, name: str, extraction: Any, code: bytes, digest: str, repo: str | None,
                sources: dict | None, run: dict | None) -> SaveResult:
        g = extraction.generated
        version = self._next_version(name)
        saved_at = now()
        provenance = build_provenance(extraction, sources, code)
        provenance = {"name": name, "version": f"v{version}", "saved_at": saved_at,
                      **provenance}
        if run is not None:
            add_validation(provenance, run)
        requirements = build_requirements(g.code, provenance["sources"])
        code_name = f"{name}.py"
        files = {code_name: code, SPEC: _json_bytes(g.spec),
                 PROVENANCE: _json_bytes(provenance), REQUIREMENTS: _json_bytes(requirements)}
        # what the code finds beside itself through ``__file__`` (GeneratedBlock.files)
        found = g.files() if callable(getattr(g, "files", None)) else {}
        beside = {rel: data for rel, data in sorted(found.items())
                  if is_plain_relative(rel) and rel not in files and rel != MANIFEST}
        block = getattr(extraction, "block", None)
        manifest = {
            "format": FORMAT, "name": name, "version": f"v{version}", "saved_at": saved_at,
            "class": g.name, "key": g.key, "repo": repo,
            "category": getattr(block, "category", None) or (g.spec or {}).get("category"),
            "code": code_name, "code_sha256": digest,
            # provenance.json gains validation runs later, so it has no fixed digest
            "files": {f: None if f == PROVENANCE else hashlib.sha256(b).hexdigest()
                      for f, b in files.items()},
        }
        if beside:
            manifest["module_files"] = {rel: hashlib.sha256(data).hexdigest()
                                        for rel, data in beside.items()}
        staging = self.root / STAGING
        staging.mkdir(exist_ok=True)
        work = staging / f"{name}.v{version}.{uuid.uuid4().hex}"
        work.mkdir()
        for fname, data in files.items():
            _write_atomic(work / fname, data, sync_dir=False)
        for rel, data in beside.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(work / rel, data, sync_dir=False)
        # last: the mark of a complete version
        _write_atomic(work / MANIFEST, _json_bytes(manifest), sync_dir=False)
        _fsync_dir(work)
        name_dir = self.root / name
        if not name_dir.is_dir():
            name_dir.mkdir()
            _fsync_dir(self.root)
        final = name_dir / f"v{version}"
        os.rename(work, final)
        _fsync_dir(name_dir)
        _fsync_dir(staging)
        self._replace(name_dir / LAST_VERSION, f"{version}\n".encode())
        return SaveResult(name, f"v{version}", final, final / code_name, created=True)

    def _replace(self, path: Path, data: bytes) -> None:
        staging = self.root / STAGING
        staging.mkdir(exist_ok=True)
        _write_atomic(path, data, tmp_dir=staging)


# -- file helpers ---------------------------------------------------------------------------
def _json_bytes(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _parses(code: bytes) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _write_atomic(path: Path, data: bytes, tmp_dir: Path | None = None,
                  sync_dir: bool = True) -> None:
    """Temp file in ``tmp_dir`` (default: beside ``path``; same filesystem), fsync, rename,
    fsync the directory (unless the caller fsyncs it once for several files)."""
    tmp = (tmp_dir or path.parent) / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory
    finally:
        os.close(fd)


def _rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
