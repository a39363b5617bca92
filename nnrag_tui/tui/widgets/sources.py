"""The repositories pane: each configured source with its files, blocks, snapshot and errors.
The highlighted entry filters the results by repository."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

ALL = "\0all"  # an option id no source can have


def source_prompt(row: dict) -> Content:
    """Name; files and blocks; failed files and the snapshot (commit or version); the error."""
    parts: list[Content | str | tuple[str, str]] = [(row["name"], "bold")]
    error = row.get("error")
    if error:
        parts += [("  ✗", "$text-error bold")]
    if row.get("files"):
        parts += ["\n", f"  {row['files']:,} files · {row.get('blocks') or 0:,} blocks"]
        detail: list[Content | str | tuple[str, str]] = []
        if row.get("failed"):
            detail += [(f"{row['failed']:,} failed", "$text-warning"), " · "]
        if row.get("commit"):
            detail += [f"@ {row['commit'][:12]}"]
        elif row.get("version"):
            detail += [f"{row.get('kind', '')} {row['version']}"]
        else:
            detail += [row.get("kind", "")]
        parts += ["\n", ("  ", ""), Content.assemble(*detail).stylize_before("$foreground-muted")]
    elif not error:
        parts += ["\n", (f"  {row.get('state', 'not indexed yet')}", "$foreground-muted italic")]
    if error:
        parts += ["\n", (f"  {error}", "$text-error")]
    return Content.assemble(*parts)


class SourcesList(OptionList):
    class Changed(Message):
        """The user picked another repository (``None`` is all of them)."""

        def __init__(self, repo: str | None) -> None:
            super().__init__()
            self.repo = repo

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.repo: str | None = None
        self.rows: tuple[dict, ...] = ()

    def on_mount(self) -> None:
        self.border_title = "Repositories"

    def set_sources(self, rows: Sequence[dict]) -> None:
        """``rows`` as ``BlockExtractor.sources()`` gives them; a configured source that is not
        in the index yet has only a ``name`` (and optionally a ``state``)."""
        self.rows = tuple(rows)
        total = sum(r.get("blocks") or 0 for r in rows)
        repos = f"{len(rows)} repo{'s' if len(rows) != 1 else ''}"
        options = [Option(Content.assemble(("All repositories", "bold"), "\n",
                                           (f"  {repos} · {total:,} blocks", "$foreground-muted")),
                          id=ALL)]
        options += [Option(source_prompt(r), id=r["name"]) for r in rows]
        if self.repo is not None and self.repo not in {r["name"] for r in rows}:
            self.repo = None
            self.post_message(self.Changed(None))
        with self.prevent(OptionList.OptionHighlighted):
            self.set_options(options)
            self.highlighted = self.get_option_index(self.repo or ALL)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        picked = None if event.option_id in (None, ALL) else event.option_id
        if picked != self.repo:
            self.repo = picked
            self.post_message(self.Changed(picked))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
