"""The repositories pane: each configured source with its files, blocks, snapshot and errors.
The highlighted entry filters the results by repository."""

from __future__ import annotations

from typing import Sequence

from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

ALL = "\0all"  # an option id no source can have


def source_prompt(row: dict) -> Content:
    parts: list[Content | str | tuple[str, str]] = [(row["name"], "bold")]
    if row.get("error"):
        parts += [("  ✗", "$text-error bold")]
    if row.get("indexed_at") is None and not row.get("error"):
        parts += ["\n", (f"  {row.get('state', 'not indexed yet')}", "$text-muted italic")]
    else:
        parts += ["\n", (f"  {row.get('files', 0):,} files · {row.get('blocks', 0):,} blocks",
                         "")]
        if row.get("failed"):
            parts += [(f" · {row['failed']:,} failed", "$text-warning")]
        if row.get("commit"):
            parts += ["\n", (f"  @ {row['commit'][:12]}", "$text-muted")]
        elif row.get("version"):
            parts += ["\n", (f"  {row.get('kind', '')} {row['version']}", "$text-muted")]
        elif row.get("kind"):
            parts += ["\n", (f"  {row['kind']}", "$text-muted")]
    if row.get("error"):
        parts += ["\n", (f"  {row['error']}", "$text-error")]
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
        options = [Option(Content.assemble(("All repositories", "bold"), "\n",
                                           (f"  {len(rows)} configured · {total:,} blocks",
                                            "$text-muted")), id=ALL)]
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
