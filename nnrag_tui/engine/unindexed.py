"""Modules of a source's own tree that its ``paths`` leave out, read on demand for discovery.

A source indexed as ``transformers/models`` has classes whose bases live elsewhere in the same
package (``transformers.modeling_layers.GradientCheckpointingLayer``,
``transformers.modeling_utils.PreTrainedModel``). Those bases are external names to the index,
so without a look at their modules such a class cannot be told to be an ``nn.Module``. This
reads just the modules a base chain reaches, straight from the source's tree on disk (parsed,
never imported), and only for that question: their classes are never blocks, and extraction
keeps them as imports, as it keeps everything outside the indexed paths.
"""

from __future__ import annotations

import os

from nnrag_tui.engine.bindings import ModuleEntry, ModuleIndex
from nnrag_tui.engine.facts import Symbol
from nnrag_tui.engine.parse import read_facts

MAX_HOPS = 8  # re-exports followed from one unindexed module to the next


class UnindexedModules:
    def __init__(self, index: ModuleIndex, roots: dict[str, str], max_bytes: int) -> None:
        self.index = index
        self.roots = {name: os.path.realpath(root) for name, root in roots.items() if root}
        self.max_bytes = max_bytes
        self._entries: dict[tuple[str, str], ModuleEntry | None] = {}

    def class_symbol(self, source: str, dotted: str) -> tuple[ModuleEntry, Symbol] | None:
        """The class an external dotted name (``pkg.mod.Class``) names, when ``pkg.mod`` is a
        file of ``source``'s tree outside the index; re-exports are followed."""
        for _ in range(MAX_HOPS):
            parts = dotted.split(".")
            for i in range(len(parts) - 1, 0, -1):
                entry = self.module(source, ".".join(parts[:i]))
                if entry is not None:
                    break
            else:
                return None
            t = self.index.resolve_dotted(entry, ".".join(parts[i:]))
            found = self.index.class_symbol(t)
            if found is not None or t.kind != "external" or t.name == dotted:
                return found
            dotted = t.name
        return None

    def module(self, source: str, module: str) -> ModuleEntry | None:
        key = (source, module)
        if key in self._entries:
            return self._entries[key]
        self._entries[key] = entry = self._read(source, module)
        return entry

    def _read(self, source: str, module: str) -> ModuleEntry | None:
        root = self.roots.get(source)
        parts = module.split(".")
        if root is None or not all(p.isidentifier() for p in parts):
            return None
        for rel in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
            path = os.path.join(root, rel)
            # a file of the tree itself: never one a symbolic link leads out of it
            if not os.path.isfile(path) or not os.path.realpath(path).startswith(root + os.sep):
                continue
            facts, _ = read_facts(root, rel, self.max_bytes)
            if facts is None or not facts.ok:
                return None
            return ModuleEntry.from_facts(source, self.index.priority.get(source, 0), -1, facts)
        return None
