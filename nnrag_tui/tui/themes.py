"""Themes from JSON files: the project's ``themes/`` folder (in a checkout or an editable
install; a wheel installs it as ``<prefix>/share/nnrag/themes``), then the ``themes`` folder of the
user's config directory (a user theme with the same name replaces a shipped one). Each file
holds the keyword arguments of ``textual.theme.Theme``."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from textual.theme import Theme


def _shipped() -> Path:
    checkout = Path(__file__).resolve().parents[2] / "themes"
    installed = Path(sys.prefix) / "share" / "nnrag" / "themes"
    return checkout if checkout.is_dir() or not installed.is_dir() else installed


SHIPPED = _shipped()
DEFAULT_THEME = "nnrag-dark"
_FIELDS = {f.name for f in dataclasses.fields(Theme)}


def theme_dirs(config_dir: Path) -> list[Path]:
    return [SHIPPED, config_dir / "themes"]


def load_theme(path: Path) -> Theme:
    """One theme file; ``ValueError`` says what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")  # noqa: TRY004
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(f"{path}: unknown theme field(s) {', '.join(unknown)}")
    for required in ("name", "primary"):
        if not isinstance(data.get(required), str):
            raise ValueError(f"{path}: '{required}' is required")  # noqa: TRY004
    try:
        theme = Theme(**data)
        theme.to_color_system()  # checks the colours now, not when the theme is picked
    except Exception as exc:  # noqa: BLE001  (bad colour strings raise several types)
        raise ValueError(f"{path}: {exc}") from None
    return theme


def load_themes(dirs: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Every theme in ``dirs`` (later directories win), and the problems found."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.json")):
            try:
                theme = load_theme(path)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems
