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
