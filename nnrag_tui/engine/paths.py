"""Where nnrag keeps its cache and data. The one place that knows about platformdirs."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "nnrag"


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Clones and the SQLite index. ``--cache-dir`` beats ``NNRAG_CACHE_DIR`` beats platformdirs."""
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get("NNRAG_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME))


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The user's registry of saved blocks. ``--data-dir`` / ``NNRAG_DATA_DIR`` override it."""
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get("NNRAG_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


def prepare_folder(path: str | os.PathLike[str]) -> str | None:
    """Creates the folder ``path`` (and its parents) to write into; returns why it cannot be,
    naming the part of the path that is a file, or None."""
    path = Path(path)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                return f"{part} is a file, not a folder"
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(path, os.W_OK | os.X_OK):
        return "permission denied"
    return None
