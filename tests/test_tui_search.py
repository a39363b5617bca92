"""The app's interactive search (pure Python; no Textual needed)."""

from __future__ import annotations

from nnrag_tui.engine.facts import Block
from nnrag_tui.tui.search import BlockSearch


def block(name: str, module: str = "pkg.layers", source: str = "repo",
          category: str = "utility") -> Block:
    return Block(source, module, name, module.replace(".", "/") + ".py", 1, 3, category, "r")


BLOCKS = [
    block("Attention", category="attention"),
    block("MultiheadAttention", "pkg.nn.activation", category="attention"),
    block("AttentionPool2d", "pkg.models.clip", category="pooling"),
    block("WindowAttention", "pkg.models.swin", "other", category="attention"),
    block("Mlp"),
    block("ConvMlp", "pkg.models.convnext", category="convolution"),
    block("PatchEmbed", "pkg.layers.patch_embed"),
    block("Block", "pkg.models.vit", category="transformer_block"),
]


def names(found: list[Block]) -> list[str]:
    return [b.name for b in found]


def test_empty_query_keeps_index_order() -> None:
    assert names(BlockSearch(BLOCKS).filter("")) == [b.name for b in BLOCKS]


def test_exact_then_prefix_then_substring_then_subsequence() -> None:
    found = names(BlockSearch(BLOCKS).filter("attention"))
    assert found == ["Attention", "AttentionPool2d", "WindowAttention", "MultiheadAttention"]
    # subsequence ("mha" in MultiheadAttention) comes last and only where letters are in order
    assert names(BlockSearch(BLOCKS).filter("mha")) == ["MultiheadAttention"]


def test_case_is_ignored_and_every_word_must_match() -> None:
    search = BlockSearch(BLOCKS)
    assert names(search.filter("MLP")) == ["Mlp", "ConvMlp"]
    assert names(search.filter("conv mlp")) == ["ConvMlp"]
    assert names(search.filter("mlp zzz")) == []


def test_qualified_names_match_as_paths() -> None:
    search = BlockSearch(BLOCKS)
    assert names(search.filter("pkg.models.swin")) == ["WindowAttention"]
    assert names(search.filter("pkg.models.clip:AttentionPool2d")) == ["AttentionPool2d"]
    # a path is literal: no subsequence matching on dotted words
    assert names(search.filter("pkg.mdls")) == []
    # a plain word also finds blocks by their module (swin -> WindowAttention)
    assert names(search.filter("swin")) == ["WindowAttention"]


def test_repository_and_category_filters_and_counts() -> None:
    search = BlockSearch(BLOCKS)
    found = search.search("attention", repo="repo")
    assert found.counts == {"attention": 2, "pooling": 1}
    assert names(search.select(found, "attention")) == ["Attention", "MultiheadAttention"]
    assert names(search.filter("", category="transformer_block")) == ["Block"]
    assert names(search.filter("", repo="other")) == ["WindowAttention"]


def test_regex_characters_in_the_query_are_literal() -> None:
    search = BlockSearch(BLOCKS + [block("Odd[x]Name")])
    assert names(search.filter("[x]")) == ["Odd[x]Name"]
    assert names(search.filter("d[]n")) == ["Odd[x]Name"]
    assert names(search.filter(".*")) == []


def test_subsequences_stay_inside_one_path_component() -> None:
    search = BlockSearch(BLOCKS)
    assert names(search.filter("swn")) == ["WindowAttention"]  # s-w-n in "swin"
    # m-l-p spread over "models.clip" is not a match
    assert "AttentionPool2d" not in names(search.filter("mlp"))
