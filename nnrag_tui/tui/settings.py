"""The app's settings: the theme and key remaps (binding id -> keys), kept as JSON in the
user's config directory (platformdirs; ``NNRAG_CONFIG_DIR`` overrides it, which the tests use).

``settings.json``::

    {
      "theme": "nnrag-light",
      "keymap": {"validate": "V", "results.next": "j,ctrl+n"}
    }

Keys the app does not know are kept as they are when it writes the file back. A file that
cannot be read is never overwritten: the app says why and runs with the defaults.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APP_NAME = "nnrag"
CONFIG_ENV = "NNRAG_CONFIG_DIR"
SETTINGS_FILE = "settings.json"


def config_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """``override`` beats ``NNRAG_CONFIG_DIR`` beats platformdirs' user config directory."""
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


@dataclass
class Settings:
    path: Path
    theme: str | None = None
    keymap: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why the file could not be used (it is then left alone)
    _raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, directory: str | os.PathLike[str] | None = None) -> Settings:
        path = config_dir(directory) / SETTINGS_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            return cls(path, problem=f"cannot read {path}: {exc.strerror or exc}")
        try:
            raw = json.loads(text)
        except ValueError as exc:
            return cls(path, problem=f"{path} is not valid JSON ({exc}); using the defaults "
                                     "and leaving the file as it is")
        if not isinstance(raw, dict):
            return cls(path, problem=f"{path}: expected a JSON object; using the defaults")
        problems = []
        theme = raw.get("theme")
        if theme is not None and not isinstance(theme, str):
            problems.append("'theme' must be a theme name")
            theme = None
        keymap = raw.get("keymap") or {}
        if not isinstance(keymap, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in keymap.items()):
            problems.append("'keymap' must map binding ids to keys, e.g. {\"validate\": \"V\"}")
            keymap = {}
        problem = f"{path}: " + "; ".join(problems) if problems else None
        return cls(path, theme, dict(keymap), problem, raw)

    def save(self) -> bool:
        """Writes the file (atomically); False when it was unreadable and is left alone."""
        if self.problem and not self._raw:
            return False
        data = dict(self._raw)
        data["theme"] = self.theme
        data["keymap"] = dict(sorted(self.keymap.items()))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            return False
        self._raw = data
        return True
