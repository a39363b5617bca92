"""Interactive block search: substring first, then subsequence ("fuzzy-ish"), on the class name
and the qualified name. Pure Python and free of Textual so it can be tested and timed alone.

Ranking of one query token against a block, best first: the name equals it, the name starts
with it, the name contains it, the qualified name (or ``module:Qual``) contains it, the name
holds it as a subsequence (``mha`` in ``MultiheadAttention``; tighter matches first), one
component of the module path does (``swn`` in ``timm.models.swin``; never across dots, where
letters in order match nearly anything). A token with ``.`` or ``:`` is a path and only matches as a substring.
Every whitespace-separated token must match; ties go to the tighter match, the shorter name,
then index order (repository priority, module, name). 20k blocks take about 60 ms a query.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nnrag_tui.engine.facts import Block

NO_MATCH = 99


@dataclass(frozen=True)
class SearchResult:
    """Blocks matching the query and repository, before the category filter, and the counts
    per category a category list shows."""

    matched: tuple[int, ...]  # indices into BlockSearch.blocks, ranked
    counts: Counter[str]


class BlockSearch:
    def __init__(self, blocks: Sequence[Block]) -> None:
        self.blocks: tuple[Block, ...] = tuple(blocks)
        self._names = [b.name.lower() for b in self.blocks]
        self._full = [b.full_name.lower() for b in self.blocks]
        self._keys = [b.key.lower() for b in self.blocks]
        self._parts = [b.module.lower().split(".") for b in self.blocks]

    def __len__(self) -> int:
        return len(self.blocks)

    def search(self, query: str, repo: str | None = None,
               admit: Callable[[Block], bool] | None = None) -> SearchResult:
        """``admit``: a further test on each block (a package or file scope)."""
        candidates = [i for i, b in enumerate(self.blocks) if (repo is None or b.source == repo)
                      and (admit is None or admit(b))]
        tokens = query.lower().split()
        if tokens:
            scores = {i: (0, 0) for i in candidates}
            for token in tokens:
                scores = self._score(token, scores)
            names = self._names
            candidates = sorted(scores, key=lambda i: (*scores[i], len(names[i]), i))
        counts = Counter(self.blocks[i].category for i in candidates)
        return SearchResult(tuple(candidates), counts)

    def filter(self, query: str, category: str | None = None,
               repo: str | None = None) -> list[Block]:
        found = self.search(query, repo)
        return self.select(found, category)

    def select(self, found: SearchResult, category: str | None) -> list[Block]:
        blocks = self.blocks
        if category is None:
            return [blocks[i] for i in found.matched]
        return [blocks[i] for i in found.matched if blocks[i].category == category]

    def _score(self, token: str, scores: dict[int, tuple[int, int]]
               ) -> dict[int, tuple[int, int]]:
        names, full, keys, parts = self._names, self._full, self._keys, self._parts
        keyed = ":" in token
        subseq = _subsequence(token)
        dotted = keyed or "." in token
        out: dict[int, tuple[int, int]] = {}
        for i, (score, spread) in scores.items():
            name = names[i]
            m = None
            if not dotted and name == token:
                rank = 0
            elif not dotted and name.startswith(token):
                rank = 1
            elif not dotted and token in name:
                rank = 2
            elif token in full[i] or (keyed and token in keys[i]):
                rank = 3
            elif dotted:  # a path is meant literally
                continue
            elif (m := subseq.match(name)) is not None:
                rank = 4
            elif (m := _first_match(subseq, parts[i])) is not None:
                rank = 5
            else:
                continue
            gap = 0
            if m is not None:  # spread of the match, plus a penalty unless it starts the name
                gap = m.end() - m.start(1) - len(token) + (2 if m.start(1) else 0)
            out[i] = (score + rank, spread + gap)
        return out


def _first_match(pattern: re.Pattern[str], texts: list[str]) -> re.Match[str] | None:
    for text in texts:
        m = pattern.match(text)
        if m is not None:
            return m
    return None


def _subsequence(token: str) -> re.Pattern[str]:
    """``attn`` -> ``[^a]*(a)[^t]*t[^t]*t[^n]*n``: anchored and deterministic, so a failed
    match costs linear time (a lazy ``a.*?t.*?t`` backtracks badly on long qualified names).
    The match is the leftmost one; ``end - start(1)`` measures how spread out it is."""
    parts = []
    for k, ch in enumerate(token):
        c = re.escape(ch)  # also a valid escape inside a character class
        parts.append(f"[^{c}]*" + (f"({c})" if k == 0 else c))
    return re.compile("".join(parts), re.DOTALL)
