"""The source preview: the selected block's upstream source, with its real line numbers.

Highlighting goes through Pygments (``textual.highlight``), not TextArea's tree-sitter
languages, which are an optional extra. Its styles are theme variables (``$text-accent`` ...)
resolved when the widget renders, so a theme change re-colours the code by itself.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from nnrag_tui.engine.facts import Block


class SourceUnavailable(Exception):
    """The block's file cannot be read (moved, deleted or not text since indexing)."""


def read_block_source(block: Block, roots: dict[str, dict]) -> str:
    """The block's lines ``line..end_line`` as they are on disk now."""
    info = roots.get(block.source)
    if not info or not info.get("root"):
        raise SourceUnavailable(f"repository {block.source!r} has no checkout in the index")
    path = Path(info["root"]) / block.relpath
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SourceUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    if block.end_line > len(lines):
        raise SourceUnavailable(f"{path} changed since it was indexed (press r to re-index)")
    return "\n".join(lines[block.line - 1:block.end_line])


def numbered(code: str, first_line: int) -> Content:
    """Highlighted ``code`` with a gutter of line numbers starting at ``first_line``."""
    lines = code.split("\n")
    width = len(str(first_line + len(lines) - 1))
    styled = highlight(code, language="python").split("\n", allow_blank=True)
    styled += [Content("")] * (len(lines) - len(styled))
    return Content("\n").join(
        Content.assemble((f"{first_line + k:>{width}} ", "$foreground-muted"), "│ ", line)
        for k, line in enumerate(styled[:len(lines)])
    )


class BlockPreview(Vertical):
    """Shows one block: a header (category, rule, bases, docstring) and its source."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.block: Block | None = None
        self.source_text: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="preview-meta")
        with VerticalScroll(id="preview-scroll"):
            yield Static(id="preview-code")

    def on_mount(self) -> None:
        self.border_title = "Source"
        self.clear("Select a block to see its source.")

    def clear(self, message: str) -> None:
        self.block = None
        self.source_text = None
        self.border_title = "Source"
        self.border_subtitle = ""
        self.query_one("#preview-meta", Static).update("")
        self.query_one("#preview-code", Static).update(Content.styled(message, "$foreground-muted"))

    def invalidate(self) -> None:
        """The files may have changed (a re-index): the next ``show`` reads them again."""
        self.block = None

    def show(self, block: Block | None, roots: dict[str, dict]) -> None:
        if block is None:
            self.clear("No block selected.")
            return
        if block == self.block:
            return
        self.block = block
        self.border_title = block.name
        info = roots.get(block.source, {})
        where = f"{block.source} · {block.relpath}:{block.line}-{block.end_line}"
        if info.get("commit"):
            where += f" @ {info['commit'][:10]}"
        elif info.get("version"):
            where += f" ({info['version']})"
        self.border_subtitle = where
        self.query_one("#preview-meta", Static).update(self._meta(block))
        code = self.query_one("#preview-code", Static)
        try:
            self.source_text = read_block_source(block, roots)
        except SourceUnavailable as exc:
            self.source_text = None
            code.update(Content.styled(str(exc), "$text-error"))
        else:
            code.update(numbered(self.source_text, block.line))
        self.query_one("#preview-scroll", VerticalScroll).scroll_home(animate=False)

    @staticmethod
    def _meta(block: Block) -> Content:
        parts: list[Content | str | tuple[str, str]] = [
            (block.category, "$text-accent bold"),
            (f"  ({block.rule})", "$foreground-muted"),
        ]
        if block.bases:
            parts += ["  bases: ", ", ".join(block.bases)]
        if block.guard:
            parts += [(f"  under {block.guard}", "$text-warning")]
        if block.doc:
            parts += ["\n", (block.doc, "italic")]
        return Content.assemble(*parts)
