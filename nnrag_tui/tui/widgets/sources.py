"""The repositories pane: each configured source with its status (blocks, files, failed files,
snapshot, when it was last indexed, its error), expandable to its packages and files. The
highlighted entry scopes the results: a repository, a package or one file."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from nnrag_tui.engine.facts import Block


@dataclass(frozen=True)
class Scope:
    """What the results are limited to: a repository (None: all), and in it a package (every
    module under it) or one file (``exact``: that module only)."""

    repo: str | None = None
    module: str | None = None
    exact: bool = False

    def admits(self, block: Block) -> bool:
        if self.repo is not None and block.source != self.repo:
            return False
        if self.module is None:
            return True
        if self.exact:
            return block.module == self.module
        return block.module == self.module or block.module.startswith(self.module + ".")


ALL = Scope()


@dataclass
class Entry:
    """One node's data. ``kind``: all, source, package, file, info, error, failures."""

    kind: str
    text: str
    scope: Scope | None = None  # None: highlighting it leaves the scope alone
    count: int | None = None
    package: str = ""  # a package node's dotted name (its children are built on expand)
    built: bool = True
    failed: tuple[tuple[str, str], ...] = ()  # a failures node's (relpath, reason)


@dataclass
class _Package:
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # module -> (relpath, n)
    subpackages: set[str] = field(default_factory=set)
    count: int = 0


def age(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "never indexed"
    s = max(0.0, (now or time.time()) - ts)
    if s < 60:
        return "indexed just now"
    if s < 3600:
        return f"indexed {int(s // 60)} min ago"
    if s < 86400:
        return f"indexed {int(s // 3600)} h ago"
    return f"indexed {int(s // 86400)} days ago"


def source_details(row: dict) -> list[Entry]:
    """The info lines under a repository: files, snapshot, last index, error."""
    out = []
    if row.get("files") is not None:
        files = f"{row['files']:,} files"
        if row.get("failed"):
            files += f" · {row['failed']:,} failed"
        out.append(Entry("info", files))
    if row.get("commit"):
        out.append(Entry("info", f"@ {row['commit'][:12]}"))
    elif row.get("version"):
        out.append(Entry("info", f"{row.get('kind') or ''} {row['version']}".strip()))
    elif row.get("kind"):
        out.append(Entry("info", str(row["kind"])))
    if "indexed_at" in row:
        out.append(Entry("info", age(row.get("indexed_at"))))
    elif row.get("state"):
        out.append(Entry("info", row["state"]))
    if row.get("error"):
        out.append(Entry("error", str(row["error"])))
    return out


class SourcesTree(Tree[Entry]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "sources--muted", "sources--error", "sources--count", "sources--warning",
    }

    DEFAULT_CSS = """
    SourcesTree {
        & > .sources--muted { color: $text-muted; }
        & > .sources--error { color: $text-error; }
        & > .sources--warning { color: $text-warning; }
        & > .sources--count { color: $text-muted; }
    }
    """

    class Changed(Message):
        """The user picked another scope."""

        def __init__(self, scope: Scope) -> None:
            super().__init__()
            self.scope = scope

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("Repositories", id=id, classes=classes)
        self.show_root = False
        self.guide_depth = 2
        self.scope: Scope = ALL
        self.rows: tuple[dict, ...] = ()
        self._packages: dict[str, dict[str, _Package]] = {}  # source -> package -> contents

    def on_mount(self) -> None:
        self.border_title = "Repositories"

    # -- data ------------------------------------------------------------------------------
    def set_sources(self, rows: Sequence[dict], blocks: Sequence[Block] = (),
                    failures: Sequence[tuple[str, str, str]] = ()) -> None:
        """``rows`` as ``BlockExtractor.sources()`` gives them (a configured source not in the
        index yet has only a ``name`` and a ``state``); ``blocks`` give the packages and
        files; ``failures`` are (source, relpath, reason) of files that did not parse."""
        self.rows = tuple(rows)
        self._packages = _packages(blocks)
        expanded = {n.data.scope for n in self._walk() if n.is_expanded and n.data is not None}
        cursor_scope = self.scope
        total = sum(r.get("blocks") or 0 for r in rows)
        root = self.root
        with self.prevent(Tree.NodeHighlighted):
            root.remove_children()
            root.add_leaf(Text("All repositories"), Entry("all", "All repositories", ALL, total))
            for row in rows:
                name = row["name"]
                bad = [(rel, why) for s, rel, why in failures if s == name]
                node = root.add(Text(name), Entry("source", name, Scope(name), row.get("blocks")))
                for info in source_details(row):
                    node.add_leaf(Text(info.text), info)
                if bad:
                    fail = node.add(Text(f"{len(bad)} files did not parse"),
                                    Entry("failures", f"{len(bad)} files did not parse",
                                          failed=tuple(bad), built=False))
                    fail.allow_expand = True
                self._add_packages(node, name, "")
            if self.scope != ALL and not any(self._matches(n) for n in self._walk()):
                self.scope = ALL  # the repository or package went away
                self.post_message(self.Changed(ALL))
            for n in self._walk():
                if n.data is not None and n.data.scope in expanded and n.allow_expand:
                    self._build_children(n)
                    n.expand()
        self._place_cursor(cursor_scope)

    def _add_packages(self, node: TreeNode[Entry], source: str, package: str) -> None:
        """The packages and files directly under ``package`` ("" for the top level)."""
        tree = self._packages.get(source, {})
        here = tree.get(package)
        if here is None:
            return
        for sub in sorted(here.subpackages):
            child = node.add(Text(f"{sub.rsplit('.', 1)[-1]}/"),
                             Entry("package", f"{sub.rsplit('.', 1)[-1]}/", Scope(source, sub),
                                   tree[sub].count, package=sub, built=False))
            child.allow_expand = True
        for module, (relpath, n) in sorted(here.files.items(), key=lambda kv: kv[1][0]):
            base = relpath.rsplit("/", 1)[-1]
            node.add_leaf(Text(base), Entry("file", base, Scope(source, module, exact=True), n))

    def _walk(self):
        todo = list(self.root.children)
        while todo:
            n = todo.pop(0)
            yield n
            todo.extend(n.children)

    def _matches(self, node: TreeNode[Entry]) -> bool:
        return node.data is not None and node.data.scope == self.scope

    def _place_cursor(self, scope: Scope) -> None:
        for n in self._walk():
            if n.data is not None and n.data.scope == scope and n.data.kind != "info":
                with self.prevent(Tree.NodeHighlighted):
                    self.move_cursor(n, animate=False)
                return
        with self.prevent(Tree.NodeHighlighted):
            self.cursor_line = 0

    def select_scope(self, scope: Scope) -> None:
        self.scope = scope
        self._place_cursor(scope)
        self.post_message(self.Changed(scope))

    # -- events ----------------------------------------------------------------------------
    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        event.stop()
        self._build_children(event.node)

    def _build_children(self, node: TreeNode[Entry]) -> None:
        """Adds a package's or a failures node's children the first time it opens."""
        data = node.data
        if data is None or data.built:
            return
        data.built = True
        if data.kind == "package" and data.scope is not None and data.scope.repo:
            self._add_packages(node, data.scope.repo, data.package)
        elif data.kind == "failures":
            for rel, why in data.failed:
                node.add_leaf(Text(f"{rel}: {why}"), Entry("error", f"{rel}: {why}"))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Entry]) -> None:
        event.stop()
        data = event.node.data
        if data is None or data.scope is None:
            return
        if data.scope != self.scope:
            self.scope = data.scope
            self.post_message(self.Changed(data.scope))

    def on_tree_node_selected(self, event: Tree.NodeSelected[Entry]) -> None:
        event.stop()

    # -- rendering -------------------------------------------------------------------------
    def render_label(self, node: TreeNode[Entry], base_style: Style, style: Style) -> Text:
        data = node.data
        text = super().render_label(node, base_style, style)
        if data is None:
            return text
        if data.kind == "source" and (self._row(data.text) or {}).get("error"):
            text.append(" ✗", self.get_component_rich_style("sources--error"))
        if data.kind == "all" or data.kind == "source":
            text.stylize("bold")
        if data.kind == "info":
            text.stylize(self.get_component_rich_style("sources--muted"))
        elif data.kind in ("error", "failures"):
            text.stylize(self.get_component_rich_style(
                "sources--error" if data.kind == "error" else "sources--warning"))
        if data.count is not None:
            text.append(f"  {data.count:,}", self.get_component_rich_style("sources--count"))
        return text

    def _row(self, name: str) -> dict | None:
        return next((r for r in self.rows if r["name"] == name), None)


def _packages(blocks: Sequence[Block]) -> dict[str, dict[str, _Package]]:
    """source -> package ("" is the top level) -> its subpackages and files with blocks."""
    out: dict[str, dict[str, _Package]] = {}
    for b in blocks:
        tree = out.setdefault(b.source, {})
        is_init = b.relpath.endswith("__init__.py")
        parts = b.module.split(".")
        # the package a file sits in: its module's parent, or (an __init__) the module itself
        pkg_parts = parts if is_init else parts[:-1]
        tree.setdefault("", _Package()).count += 1
        for k in range(1, len(pkg_parts) + 1):
            pkg = ".".join(pkg_parts[:k])
            parent = ".".join(pkg_parts[:k - 1])
            tree.setdefault(parent, _Package()).subpackages.add(pkg)
            tree.setdefault(pkg, _Package()).count += 1
        home = tree.setdefault(".".join(pkg_parts), _Package())
        relpath, n = home.files.get(b.module, (b.relpath, 0))
        home.files[b.module] = (relpath, n + 1)
    return out
