"""The source preview: the selected block's regenerated file (provenance header on top, what
``nnrag extract`` writes), or its upstream definition with the real line numbers, or the source
of a node picked in the dependency tree.

Highlighting goes through Pygments (``textual.highlight``), not TextArea's tree-sitter
languages, which are an optional extra. Its styles are theme variables (``$text-accent`` ...)
resolved when the widget renders, so a theme change re-colours the code by itself.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.containers import ScrollableContainer, Vertical
from textual.content import Content
from textual.widgets import Static

from nnrag_tui.engine.facts import Block
from nnrag_tui.engine.lines import source_lines
from nnrag_tui.tui.blockview import BlockView
from nnrag_tui.tui.dependencies import Snippet

GENERATED, UPSTREAM = "generated", "upstream"


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
    lines = source_lines(text)
    if block.end_line > len(lines):
        raise SourceUnavailable(f"{path} changed since it was indexed (press r to re-index)")
    return "\n".join(lines[block.line - 1:block.end_line])


def numbered(code: str, first_line: int, mark: int | None = None) -> Content:
    """Highlighted ``code`` with a gutter of line numbers starting at ``first_line`` (none
    when it is 0); line ``mark`` gets a marker in the gutter."""
    from textual.highlight import highlight  # Pygments: imported with the first source shown

    lines = code.split("\n")
    styled = highlight(code, language="python").split("\n", allow_blank=True)
    styled += [Content("")] * (len(lines) - len(styled))
    if first_line <= 0:
        return Content("\n").join(styled[:len(lines)])
    width = len(str(first_line + len(lines) - 1))
    rows = []
    for k, line in enumerate(styled[:len(lines)]):
        n = first_line + k
        if n == mark:
            gutter = Content.assemble((f"{n:>{width}} ", "$text-error bold"),
                                      ("▶ ", "$text-error bold"))
        else:
            gutter = Content.assemble((f"{n:>{width}} ", "$foreground-muted"), "│ ")
        rows.append(gutter + line)
    return Content("\n").join(rows)


def snippet_content(snippet: Snippet) -> Content:
    parts = [numbered(text, first) for first, text in snippet.chunks]
    return Content("\n\n").join(parts)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class BlockPreview(Vertical):
    """Shows one block: a header (category, rule, bases, docstring) and a source."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.block: Block | None = None
        self.roots: dict[str, dict] = {}
        self.mode = GENERATED
        self.view: BlockView | None = None
        self.waiting = False  # the extraction waits for the index
        self.unavailable: str | None = None  # why there will be no regenerated file
        self.snippet: Snippet | None = None  # a dependency's source, shown instead
        self.upstream_text: str | None = None
        self.upstream_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="preview-meta")
        with ScrollableContainer(id="preview-scroll"):
            yield Static(id="preview-code")

    def on_mount(self) -> None:
        self.clear("Select a block to see its source.")

    # -- state -----------------------------------------------------------------------------
    @property
    def source_text(self) -> str | None:
        """What is on show, as text (what copy copies)."""
        if self.block is None:
            return None
        if self.snippet is not None:
            return self.snippet.text
        if self.mode == UPSTREAM:
            return self.upstream_text
        return self.view.code if self.view is not None else None

    def clear(self, message: str) -> None:
        self.block = None
        self.view = None
        self.snippet = None
        self.upstream_text = None
        self.border_title = "Source"
        self.border_subtitle = ""
        self.query_one("#preview-meta", Static).update("")
        code = self.query_one("#preview-code", Static)
        code.set_class(True, "-message")
        code.update(Content.styled(message, "$foreground-muted"))

    def invalidate(self) -> None:
        """The files may have changed (a re-index): the next ``show`` reads them again."""
        self.block = None
        self.view = None

    def show(self, block: Block | None, roots: dict[str, dict]) -> bool:
        """Shows ``block``; True when it is a different block than before (the caller then
        asks for its regenerated file)."""
        if block is None:
            self.clear("No block selected.")
            return False
        if block == self.block:
            return False
        self.block = block
        self.roots = roots
        self.view = None
        self.snippet = None
        self.waiting = False
        self.unavailable = None
        try:
            self.upstream_text = read_block_source(block, roots)
            self.upstream_error = None
        except SourceUnavailable as exc:
            self.upstream_text = None
            self.upstream_error = str(exc)
        self.query_one("#preview-meta", Static).update(self._meta(block))
        self._render_source()
        return True

    def set_view(self, view: BlockView) -> None:
        if view.block != self.block:
            return
        self.view = view
        self.waiting = False
        if self.mode == GENERATED and self.snippet is None:
            self._render_source()

    def set_waiting(self, block: Block) -> None:
        if block == self.block and self.view is None:
            self.waiting = True
            if self.mode == GENERATED and self.snippet is None:
                self._render_source()

    def set_unavailable(self, block: Block, why: str) -> None:
        """No regenerated file will come (the index is incomplete)."""
        if block == self.block and self.view is None:
            self.unavailable = why
            if self.mode == GENERATED and self.snippet is None:
                self._render_source()

    def show_snippet(self, snippet: Snippet | None) -> None:
        """A dependency's source (None: back to the block)."""
        if self.block is None:
            return
        self.snippet = snippet
        self._render_source()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.snippet = None
        self._render_source()

    def toggle(self) -> str:
        """Regenerated file <-> upstream definition (and back from a dependency's source)."""
        self.set_mode(UPSTREAM if self.mode == GENERATED else GENERATED)
        return self.mode

    # -- rendering -------------------------------------------------------------------------
    def _render_source(self) -> None:
        block = self.block
        if block is None:
            return
        code = self.query_one("#preview-code", Static)
        # a message wraps in the pane; code keeps its lines (and scrolls sideways)
        code.set_class(self.snippet is None and (
            (self.mode == UPSTREAM and self.upstream_text is None)
            or (self.mode == GENERATED and (self.view is None or not self.view.ok))),
            "-message")
        if self.snippet is not None:
            self.border_title = f"{block.name} › {self.snippet.title}"
            self.border_subtitle = self.snippet.where
            code.update(snippet_content(self.snippet))
        elif self.mode == UPSTREAM:
            self.border_title = f"{block.name} · upstream"
            self.border_subtitle = self._where(block)
            if self.upstream_text is None:
                code.update(Content.styled(self.upstream_error or "", "$text-error"))
            else:
                code.update(numbered(self.upstream_text, block.line))
        else:
            self.border_title = f"{block.name} · regenerated"
            view = self.view
            if view is None:
                self.border_subtitle = self._where(block)
                if self.unavailable:
                    text, style = self.unavailable, "$text-warning"
                elif self.waiting:
                    text = ("Waiting for indexing to finish before regenerating (u shows the "
                            "upstream definition now)…")
                    style = "$text-muted"
                else:
                    text, style = "Regenerating the standalone file…", "$text-muted"
                code.update(Content.styled(text, style))
            elif not view.ok:
                self.border_subtitle = self._where(block)
                code.update(Content.assemble(("Cannot regenerate this block: ", "$text-error"),
                                             (view.error or "", "$text-error"), "\n\n",
                                             ("u shows the upstream definition.",
                                              "$text-muted")))
            else:
                g = view.extraction.generated
                assert g is not None
                parts = [_count(g.lines, "line"), _count(len(g.definitions), "definition"),
                         _count(len(g.externals), "import")]
                if g.unresolved:
                    parts.append(f"{len(g.unresolved)} unresolved")
                self.border_subtitle = " · ".join(parts)
                code.update(numbered(g.code.rstrip("\n"), 1))
        self.query_one("#preview-scroll", ScrollableContainer).scroll_home(animate=False)

    def _where(self, block: Block) -> str:
        info = self.roots.get(block.source, {})
        where = f"{block.source} · {block.relpath}:{block.line}-{block.end_line}"
        if info.get("commit"):
            where += f" @ {info['commit'][:10]}"
        elif info.get("version"):
            where += f" ({info['version']})"
        return where

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
