"""The corpus configuration: which repositories to index and how.

Accepts the paper tool's ``repo_config.json`` unchanged (a mapping ``"owner/name" -> {url, priority,
paths, description}``) and an extended form ``{"repositories": {...}, "fetch": {...}}``. A source
is one of ``url`` (+ optional ``ref``), ``path`` (a local directory) or ``dist`` (an installed
distribution found through ``importlib.metadata``).
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrag_tui.engine.errors import ConfigError

DEFAULT_EXCLUDE = (
    "**/tests/**",
    "**/test/**",
    "**/conftest.py",
    "setup.py",
    "**/__pycache__/**",
)
SOURCE_KINDS = ("url", "path", "dist")
SOURCE_KEYS = {
    "url",
    "path",
    "dist",
    "ref",
    "priority",
    "paths",
    "import_root",
    "description",
    "include",
    "exclude",
    "symbols",
    "enabled",
    "external",
}
TOP_KEYS = {"repositories", "fetch", "exclude", "symbols", "description"}
FETCH_KEYS = {"code_only", "max_file_mb", "lfs"}


class ConfigWarning(UserWarning):
    """An unknown key or a questionable value that does not stop the run."""


@dataclass(frozen=True)
class SymbolPatterns:
    """Which classes of a source may become blocks: globs on ``Name`` or ``module:Name``."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()

    def allows(self, module: str, name: str) -> bool:
        full = f"{module}:{name}"

        def hit(pats: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(full, p) for p in pats)

        return hit(self.include) and not hit(self.exclude)


@dataclass(frozen=True)
class FetchPolicy:
    code_only: bool = True
    max_file_mb: float = 5.0
    lfs: bool = False


@dataclass(frozen=True)
class SourceConfig:
    name: str
    kind: str  # "url" | "path" | "dist"
    location: str  # the URL, the directory or the distribution name
    ref: str | None = None
    priority: int = 1
    paths: tuple[str, ...] = ()
    # the folder (relative to the repository) that module names start from: "src" for a
    # src layout (``src/peft/x.py`` is module ``peft.x``); None: found by ``sources``
    import_root: str | None = None
    description: str = ""
    include: tuple[str, ...] = ("**/*.py",)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    symbols: SymbolPatterns = field(default_factory=SymbolPatterns)
    # indexed and browsable, but other blocks import its packages instead of inlining their
    # definitions, as every block imports torch (a framework the users of the blocks install:
    # mmengine under OpenMMLab's repositories)
    external: bool = False

    def wants(self, relpath: str) -> bool:
        """Whether a file under one of ``paths`` (path relative to the import root,
        ``/``-separated) passes the include/exclude globs."""
        return any(glob_match(relpath, g) for g in self.include) and not any(
            glob_match(relpath, g) for g in self.exclude
        )


@dataclass(frozen=True)
class CorpusConfig:
    sources: tuple[SourceConfig, ...]
    fetch: FetchPolicy = field(default_factory=FetchPolicy)
    origin: str = "<built-in default>"

    @property
    def external_sources(self) -> frozenset[str]:
        """The names of the sources marked ``"external": true``."""
        return frozenset(s.name for s in self.sources if s.external)

    def source(self, name: str) -> SourceConfig:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(f"no source named {name!r} in {self.origin}")


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def glob_match(path: str, pattern: str) -> bool:
    """Glob with ``**`` spanning directories (``**/x`` also matches ``x`` at the top)."""
    rx = _GLOB_CACHE.get(pattern)
    if rx is None:
        out, i = [], 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            elif pattern.startswith("**", i):
                out.append(".*")
                i += 2
            elif pattern[i] == "*":
                out.append("[^/]*")
                i += 1
            elif pattern[i] == "?":
                out.append("[^/]")
                i += 1
            else:
                out.append(re.escape(pattern[i]))
                i += 1
        rx = _GLOB_CACHE[pattern] = re.compile("".join(out) + r"\Z")
    return rx.match(path) is not None


def load_config(path: str | Path) -> CorpusConfig:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {p}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ConfigError(f"{p}: not a corpus configuration (nested too deeply)") from None
    return parse_config(data, origin=str(p), base_dir=p.parent)


def parse_config(data: Any, origin: str = "<config>", base_dir: Path | None = None) -> CorpusConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the top level must be a JSON object, not {_tname(data)}")
    fetch = FetchPolicy()
    global_exclude: tuple[str, ...] = ()
    global_symbols: dict[str, Any] | None = None
    if "repositories" in data and not isinstance(data["repositories"], dict):
        raise ConfigError(f"{origin}: field 'repositories' must be an object mapping names to "
                          f"repositories, not {_tname(data['repositories'])}")
    if isinstance(data.get("repositories"), dict):
        for key in data:
            if key not in TOP_KEYS:
                _warn(f"{origin}: unknown top-level key {key!r} ignored")
        repos = data["repositories"]
        if "fetch" in data:
            fetch = _parse_fetch(data["fetch"], origin)
        if "exclude" in data:
            global_exclude = _str_list(data["exclude"], f"{origin}: exclude")
        if "symbols" in data:
            global_symbols = data["symbols"]
    else:
        repos = data
    if not repos:
        raise ConfigError(f"{origin}: no repositories configured")
    sources = []
    for name, spec in repos.items():
        if str(name).startswith("$") or str(name).startswith("_comment"):
            continue
        src = _parse_source(str(name), spec, origin, base_dir, global_exclude, global_symbols)
        if src is not None:
            sources.append(src)
    if not sources:
        raise ConfigError(f"{origin}: every repository is disabled")
    return CorpusConfig(tuple(sources), fetch, origin)


def _parse_source(
    name: str,
    spec: Any,
    origin: str,
    base_dir: Path | None,
    global_exclude: tuple[str, ...],
    global_symbols: Any,
) -> SourceConfig | None:
    where = f"{origin}: repository {name!r}"
    if not name.strip() or any(ord(c) < 32 for c in name):
        raise ConfigError(f"{where}: a repository name must be non-empty printable text")
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be an object, not {_tname(spec)}")
    for key in spec:
        if key not in SOURCE_KEYS:
            _warn(f"{where}: unknown key {key!r} ignored")
    enabled = spec.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}: field 'enabled' must be true or false")
    if not enabled:
        return None
    external = spec.get("external", False)
    if not isinstance(external, bool):
        raise ConfigError(f"{where}: field 'external' must be true or false")
    kinds = [k for k in SOURCE_KINDS if k in spec]
    if len(kinds) != 1:
        raise ConfigError(
            f"{where}: needs exactly one of 'url', 'path' or 'dist'"
            + (f" (got {', '.join(kinds)})" if kinds else "")
        )
    kind = kinds[0]
    location = spec[kind]
    if not isinstance(location, str) or not location.strip():
        raise ConfigError(f"{where}: field {kind!r} must be a non-empty string")
    location = location.strip()
    if any(ord(c) < 32 for c in location):
        raise ConfigError(f"{where}: field {kind!r} contains control characters")
    if kind == "url":
        check_url(location, where)
    elif kind == "path":
        try:
            lp = Path(location).expanduser()
        except RuntimeError as exc:  # ~user of an unknown user
            raise ConfigError(f"{where}: field 'path' {location!r}: {exc}") from None
        if not lp.is_absolute() and base_dir is not None:
            lp = (base_dir / lp).resolve()
        location = str(lp)
    ref = spec.get("ref")
    if ref is not None:
        if not isinstance(ref, str) or not ref or ref.startswith("-"):
            raise ConfigError(f"{where}: field 'ref' must be a branch, tag or commit name")
        if kind != "url":
            raise ConfigError(f"{where}: field 'ref' only applies to 'url' sources")
    priority = spec.get("priority", 1)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority < 2**31:
        raise ConfigError(f"{where}: field 'priority' must be a positive integer (1 is highest)")
    paths = tuple(dict.fromkeys(
        posixpath.normpath(p.strip("/") or ".")
        for p in _str_list(spec.get("paths", []), f"{where}: field 'paths'")
    ))
    for p in paths:
        if p == ".." or p.startswith("../"):
            raise ConfigError(f"{where}: field 'paths' must stay inside the repository ({p!r})")
    if "." in paths:  # "." (or "./", "a/..") is the whole repository, as no paths at all
        paths = ()
    import_root = _import_root(spec.get("import_root"), paths, kind, where)
    desc = spec.get("description", "")
    if not isinstance(desc, str):
        raise ConfigError(f"{where}: field 'description' must be a string")
    include = _str_list(spec.get("include", ["**/*.py"]), f"{where}: field 'include'")
    exclude = _str_list(spec.get("exclude", list(DEFAULT_EXCLUDE)), f"{where}: field 'exclude'")
    symbols_spec = spec.get("symbols", global_symbols)
    symbols = _parse_symbols(symbols_spec, f"{where}: field 'symbols'")
    return SourceConfig(
        name=name,
        kind=kind,
        location=location,
        ref=ref,
        priority=priority,
        paths=paths,
        import_root=import_root,
        description=desc,
        include=include,
        exclude=exclude + global_exclude,
        symbols=symbols,
        external=external,
    )


def _import_root(value: Any, paths: tuple[str, ...], kind: str, where: str) -> str | None:
    """``import_root``: a folder inside the repository, above every configured path."""
    if value is None:
        return None
    what = f"{where}: field 'import_root'"
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a folder of the repository, such as \"src\"")
    if kind == "dist":
        raise ConfigError(f"{what} does not apply to 'dist' sources (an installed "
                          "distribution's import root is its site-packages)")
    root = posixpath.normpath(value.strip().strip("/") or ".")
    if root == ".." or root.startswith("../") or value.strip().startswith("/"):
        raise ConfigError(f"{what} must stay inside the repository ({value!r})")
    if root == ".":
        return ""
    outside = [p for p in paths if p != root and not p.startswith(root + "/")]
    if outside:
        raise ConfigError(f"{where}: field 'paths' {outside[0]!r} is outside import_root "
                          f"{root!r}: module names start at import_root, so every path must "
                          "lie under it")
    return root


def check_url(url: str, where: str = "url") -> None:
    """A URL is data, never an option or a transport helper."""
    if url.startswith("-"):
        raise ConfigError(f"{where}: URL {url!r} must not start with '-'")
    if url.lower().startswith("ext::") or "::" in url.split("/", 1)[0]:
        raise ConfigError(f"{where}: URL {url!r} uses a git remote helper, which is not allowed")
    if any(c in url for c in "\n\r\0"):
        raise ConfigError(f"{where}: URL contains control characters")


def _parse_symbols(spec: Any, where: str) -> SymbolPatterns:
    if spec is None:
        return SymbolPatterns()
    if isinstance(spec, list):
        return SymbolPatterns(include=_str_list(spec, where))
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a list of patterns or an object with include/exclude")
    for key in spec:
        if key not in ("include", "exclude"):
            _warn(f"{where}: unknown key {key!r} ignored")
    return SymbolPatterns(
        include=_str_list(spec.get("include", ["*"]), f"{where}.include"),
        exclude=_str_list(spec.get("exclude", []), f"{where}.exclude"),
    )


def _parse_fetch(spec: Any, origin: str) -> FetchPolicy:
    where = f"{origin}: fetch"
    if isinstance(spec, str):
        if spec not in ("code", "code-only", "code_only"):
            raise ConfigError(f"{where}: policy must be 'code-only' (weights are never fetched)")
        return FetchPolicy()
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be an object")
    for key in spec:
        if key not in FETCH_KEYS:
            _warn(f"{where}: unknown key {key!r} ignored")
    code_only = spec.get("code_only", True)
    lfs = spec.get("lfs", False)
    mb = spec.get("max_file_mb", 5.0)
    if not isinstance(code_only, bool) or not isinstance(lfs, bool):
        raise ConfigError(f"{where}: 'code_only' and 'lfs' must be true or false")
    if isinstance(mb, bool) or not isinstance(mb, (int, float)) or mb <= 0:
        raise ConfigError(f"{where}: 'max_file_mb' must be a positive number")
    return FetchPolicy(code_only=code_only, max_file_mb=float(mb), lfs=lfs)


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _tname(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(v), type(v).__name__)


def _warn(msg: str) -> None:
    warnings.warn(msg, ConfigWarning, stacklevel=3)


def default_config() -> CorpusConfig:
    """What every install has: the installed torch's ``torch/nn/modules``, plus timm,
    torchvision and transformers when they are installed. torch is found without importing it.

    timm and torchvision are indexed whole, so that their blocks are standalone files.
    transformers only as ``transformers/models``: its models' closure through the library's
    own machinery (configuration and modeling utils, hub integration) is tens of thousands of
    lines, so that machinery stays imported, which each such file's header says."""
    from importlib import metadata

    sources: list[SourceConfig] = []
    defaults = [
        ("torch", "torch", ("torch/nn/modules",), 2),
        ("timm", "timm", ("timm",), 1),
        ("torchvision", "torchvision", ("torchvision",), 1),
        ("transformers", "transformers", ("transformers/models",), 3),
    ]
    for name, dist, paths, prio in defaults:
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        sources.append(SourceConfig(name=name, kind="dist", location=dist, paths=paths, priority=prio))
    if not sources:
        raise ConfigError(
            "the built-in default corpus needs torch installed (pip install torch); "
            "or give --config FILE"
        )
    return CorpusConfig(tuple(sources), FetchPolicy(), "<built-in default>")
