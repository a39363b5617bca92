"""Uniqueness (nnrag dedup): hand-made duplicates at each level (exact, lexical, structural),
non-duplicates that must stay apart, the diversity top-up, the loaders and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture, write_config, write_tree

from nnrag_tui.cli import main
from nnrag_tui.engine import dedup
from nnrag_tui.engine.dedup import DedupItem, DedupOptions, deduplicate

# -- hand-made texts -------------------------------------------------------------------------
MLP = '''
import torch
from torch import nn


class Mlp(nn.Module):
    """Two linear layers with an activation in between."""

    def __init__(self, dim, hidden=None, drop=0.0):
        super().__init__()
        hidden = hidden or 4 * dim
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)
        self.scale = nn.Parameter(torch.ones(dim))

    def reset_parameters(self):
        nn.init.trunc_normal_(self.fc1.weight, std=0.02)
        nn.init.zeros_(self.fc1.bias)
        nn.init.trunc_normal_(self.fc2.weight, std=0.02)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x * self.scale
'''

# comments, docstrings, formatting, quotes and a cosmetic prefix: the same block
MLP_COSMETIC = '''
import torch
from torch import nn

# a copy with another name
class MyMlp(nn.Module):
    def __init__(self, dim, hidden = None, drop = 0.0):   # spacing
        super().__init__()
        hidden = (hidden
                  or 4 * dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)
        self.scale = nn.Parameter(torch.ones(dim))

    def reset_parameters(self):
        """Initialise."""
        nn.init.trunc_normal_(self.fc1.weight, std=0.02)
        nn.init.zeros_(self.fc1.bias)
        nn.init.trunc_normal_(self.fc2.weight, std=0.02)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        # the same forward
        x = self.fc1(x); x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x * self.scale
'''

# one more statement in forward: a lexical near-duplicate (Jaccard >= 0.9), not exact
MLP_LEXICAL = MLP.replace("        x = self.drop2(x)\n",
                          "        x = self.drop2(x)\n        x = torch.clamp(x, -10.0, 10.0)\n")

# every bound name renamed, methods reordered, literals changed: a structural clone only
MLP_STRUCTURAL = '''
import torch
from torch import nn


class FeedForward(nn.Module):

    def forward(self, inp):
        h = self.lin_a(inp)
        h = self.activation(h)
        h = self.dropout_a(h)
        h = self.ln(h)
        h = self.lin_b(h)
        h = self.dropout_b(h)
        return h * self.gamma

    def reset_parameters(self):
        nn.init.trunc_normal_(self.lin_a.weight, std=0.01)
        nn.init.zeros_(self.lin_a.bias)
        nn.init.trunc_normal_(self.lin_b.weight, std=0.01)
        nn.init.zeros_(self.lin_b.bias)

    def __init__(self, features, inner=None, p=0.1):
        super().__init__()
        inner = inner or 2 * features
        self.lin_a = nn.Linear(features, inner)
        self.activation = nn.GELU()
        self.dropout_a = nn.Dropout(p)
        self.ln = nn.LayerNorm(inner)
        self.lin_b = nn.Linear(inner, features)
        self.dropout_b = nn.Dropout(p)
        self.gamma = nn.Parameter(torch.ones(features))
'''

# same shape as the MLP but convolutions and batch norm: a different block
CONV = (MLP.replace("nn.Linear", "nn.Conv2d").replace("nn.LayerNorm", "nn.BatchNorm2d")
        .replace("nn.GELU", "nn.ReLU").replace("class Mlp", "class ConvMlp"))

ATTENTION = '''
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads=8):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)
'''

# thin wrappers around different module-level helpers: structurally alike, not clones
SWISH = '''
from torch import nn


class Swish(nn.Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return swish(x, self.inplace)
'''
MISH = SWISH.replace("Swish", "Mish").replace("swish(", "mish(")


def items(**texts: str) -> list[DedupItem]:
    return [DedupItem(id=k, text=v, name=k) for k, v in texts.items()]


def run(texts: dict[str, str], **opts) -> dedup.DedupReport:
    return deduplicate(items(**texts), DedupOptions(**opts))


# -- each level ------------------------------------------------------------------------------
def test_comments_docstrings_formatting_and_a_cosmetic_prefix_are_exact_duplicates():
    rep = run({"Mlp": MLP, "MyMlp": MLP_COSMETIC, "_Mlp": MLP.replace("class Mlp",
                                                                      "class _Mlp")})
    assert rep.kept == ["Mlp"]
    assert {r.id: (r.level, r.similarity, r.matched) for r in rep.removed.values()} == {
        "MyMlp": ("exact", 1.0, "Mlp"), "_Mlp": ("exact", 1.0, "Mlp")}
    assert dedup.canonical_source(MLP) == dedup.canonical_source(MLP_COSMETIC)
    assert "Initialise" not in dedup.canonical_source(MLP_COSMETIC)


def test_a_prefix_only_counts_at_a_word_boundary():
    assert dedup.strip_prefixes("MyConv") == "Conv"
    assert dedup.strip_prefixes("__rag_Net") == "Net"
    assert dedup.strip_prefixes("Mystic") == "Mystic"
    assert dedup.strip_prefixes("GaussianBlur") == "GaussianBlur"
    assert dedup.strip_prefixes("My") == "My"


def test_one_added_statement_is_a_lexical_near_duplicate():
    sim = dedup.similarity(MLP, MLP_LEXICAL)
    assert sim["exact"] == 0.0 and 0.9 <= sim["lexical"] < 1.0
    rep = run({"Mlp": MLP, "MlpClamped": MLP_LEXICAL})
    r = rep.removed["MlpClamped"]
    assert (r.level, r.matched) == ("lexical", "Mlp")
    assert r.similarity == pytest.approx(sim["lexical"])


def test_renamed_variables_reordered_methods_changed_literals_are_a_structural_clone():
    sim = dedup.similarity(MLP, MLP_STRUCTURAL)
    assert sim["lexical"] < 0.5  # lexically far apart
    assert sim["structural"] == 1.0
    rep = run({"Mlp": MLP, "FeedForward": MLP_STRUCTURAL})
    r = rep.removed["FeedForward"]
    assert (r.level, r.similarity, r.matched) == ("structural", 1.0, "Mlp")


def test_statement_order_inside_a_function_counts_structurally():
    lines = MLP_STRUCTURAL.splitlines()
    i = lines.index("        super().__init__()")
    j = lines.index("        inner = inner or 2 * features")
    lines[i], lines[j] = lines[j], lines[i]
    swapped = "\n".join(lines)
    assert dedup.similarity(MLP, swapped)["structural"] < 1.0
    assert dedup.similarity(MLP_STRUCTURAL, swapped)["structural"] < 1.0


def test_thresholds_are_configurable():
    sim = dedup.similarity(MLP, MLP_LEXICAL)["lexical"]
    strict = run({"Mlp": MLP, "MlpClamped": MLP_LEXICAL}, tau=min(1.0, sim + 0.01),
                 kappa=1.0)
    assert "MlpClamped" not in strict.removed or strict.removed["MlpClamped"].level != "lexical"
    loose = run({"Mlp": MLP, "Swish": SWISH, "Mish": MISH}, kappa=0.5)
    assert "Mish" in loose.removed  # at kappa 0.5 the two wrappers are clones


def test_non_duplicates_stay_apart():
    texts = {"Mlp": MLP, "ConvMlp": CONV, "Attention": ATTENTION, "Swish": SWISH,
             "Mish": MISH}
    rep = run(texts)
    assert rep.removed == {}
    assert rep.counts() == {"total": 5, "exact": 0, "lexical": 0, "structural": 0,
                            "topup": 0, "unique": 5}
    # different layer types in the same shape, different helpers in a wrapper
    assert dedup.similarity(MLP, CONV)["structural"] < 0.95
    assert dedup.similarity(SWISH, MISH)["structural"] < 0.95


def test_every_removed_member_names_a_kept_match_within_the_threshold():
    texts = {"Mlp": MLP, "MyMlp": MLP_COSMETIC, "MlpClamped": MLP_LEXICAL,
             "FeedForward": MLP_STRUCTURAL, "Attention": ATTENTION, "Swish": SWISH}
    rep = run(texts)
    assert sorted(rep.kept) == ["Attention", "Mlp", "Swish"]
    for r in rep.removed.values():
        again = dedup.similarity(texts[r.id], texts[r.matched])
        key = {"exact": "exact", "lexical": "lexical", "structural": "structural"}[r.level]
        assert again[key] == pytest.approx(r.similarity)
        assert again[key] >= {"exact": 1.0, "lexical": 0.9, "structural": 0.95}[r.level]
    clusters = {c.representative: sorted(m.id for m in c.members) for c in rep.clusters()}
    assert clusters == {"Mlp": ["FeedForward", "MlpClamped", "MyMlp"], "Attention": [],
                        "Swish": []}
    table = {r["family"]: r for r in rep.table()}
    assert table["total"] == {"family": "total", "total": 6, "exact": 1, "lexical": 1,
                              "structural": 1, "topup": 0, "unique": 3, "unique_pct": 50.0}


def test_the_representative_is_the_preferred_member():
    its = [DedupItem("a", MLP_COSMETIC, "MyMlp"), DedupItem("b", MLP, "Mlp", validated=True)]
    rep = deduplicate(its)
    assert rep.kept == ["b"] and rep.removed["a"].matched == "b"
    its = [DedupItem("a", MLP_COSMETIC, "alt-Mlp"), DedupItem("b", MLP, "rag-Mlp")]
    rep = deduplicate(its, DedupOptions(prefer=("rag",)))
    assert rep.kept == ["b"]


def test_text_that_does_not_parse_is_compared_by_tokens():
    broken = "class Broken(nn.Module:\n    def forward(self, x):\n        return x\n"
    rep = run({"one": broken, "two": broken + "# a comment\n", "Mlp": MLP})
    assert rep.removed["two"].level == "exact"
    assert rep.as_dict()["unparsable"][0]["id"] == "one"
    assert any("did not parse" in n for n in rep.notes)


def test_split_statement_groups_give_the_same_fingerprint_as_the_whole_module(monkeypatch):
    tricky = '''"""Module docstring
class NotAClass:
"""
import torch
from torch import nn

X = """
def not_a_def():
"""


@torch.no_grad()
def helper(x):
    return x + 1
if X:
    Y = 1
else:
    Y = 2
try:
    import numpy
except ImportError:
    numpy = None
finally:
    pass


class Block(nn.Module):
    """Doc."""
    def forward(self, x):
        return helper(x) + Y
__all__ = ["Block"]
'''
    texts = [tricky, MLP, ATTENTION, MLP_STRUCTURAL, "x = (\n1,\n2)\n"]
    split = [dedup.fingerprint(t) for t in texts]
    monkeypatch.setattr(dedup, "_segments", lambda text: [text.rstrip()])
    monkeypatch.setattr(dedup, "_RESULTS", {})
    monkeypatch.setattr(dedup, "_META", {})
    whole = [dedup.fingerprint(t) for t in texts]
    for a, b in zip(split, whole):
        assert (a.exact, a.shape, a.lexical.tolist(), a.structural.tolist()) == (
            b.exact, b.shape, b.lexical.tolist(), b.structural.tolist())
        assert a.error is None


def test_a_process_pool_gives_the_same_answer(monkeypatch):
    texts = {f"m{i}": MLP.replace("4 * dim", f"{i} * dim").replace("class Mlp",
                                                                     f"class Mlp{i}")
             for i in range(6)}
    texts.update({"a": ATTENTION, "s": SWISH, "k": MISH})
    serial = run(texts, workers=1)
    monkeypatch.setattr(dedup, "_PARALLEL_MIN", 2)
    pooled = run(texts, workers=2)
    assert pooled.removed == serial.removed
    assert [f.exact for f in pooled.fingerprints] == [f.exact for f in serial.fingerprints]


# -- the diversity top-up --------------------------------------------------------------------
def test_top_up_gives_a_family_back_members_but_never_a_near_duplicate_of_them():
    pool4 = MLP_LEXICAL.replace("-10.0, 10.0", "-5.0, 5.0")
    assert dedup.similarity(MLP_LEXICAL, pool4)["lexical"] >= 0.9
    sim13 = dedup.similarity(MLP_LEXICAL, MLP_STRUCTURAL)
    assert sim13["lexical"] < 0.9 and sim13["structural"] < 0.95
    its = [DedupItem("mlp", MLP, "Mlp", family="utility"),
           DedupItem("pool1", MLP_LEXICAL, "Pool1", family="pooling"),
           DedupItem("pool2", MLP_COSMETIC, "Pool2", family="pooling"),
           DedupItem("pool4", pool4, "Pool4", family="pooling"),
           DedupItem("pool3", MLP_STRUCTURAL, "Pool3", family="pooling")]
    plain = deduplicate(its, DedupOptions(min_support=0))
    assert plain.kept == ["mlp"]
    rep = deduplicate(its, DedupOptions(min_support=3))
    # pool2 is an exact copy of mlp and pool4 a near-duplicate of pool1: neither comes back
    assert [t.id for t in rep.topups] == ["pool1", "pool3"]
    assert [t.family for t in rep.topups] == ["pooling", "pooling"]
    assert set(rep.kept) == {"mlp", "pool1", "pool3"}
    assert rep.removed["pool2"].level == "exact" and "pool4" in rep.removed
    row = next(r for r in rep.table() if r["family"] == "pooling")
    assert (row["total"], row["topup"], row["unique"]) == (4, 2, 2)
    # checked against everything kept, nothing comes back: each is a near-duplicate of mlp
    assert deduplicate(its, DedupOptions(min_support=3, topup_scope="all")).topups == []


def test_top_up_takes_the_most_distinct_member_first():
    near = ATTENTION.replace("self.proj(x)", "self.proj(x) + x").replace(
        "heads=8", "heads=4").replace("attn.softmax(dim=-1)", "attn.softmax(dim=-1) * 1.0")
    near_copy = near.replace("heads=4", "heads=6")
    far_copy = CONV.replace("std=0.02", "std=0.03")
    assert dedup.similarity(near, near_copy)["lexical"] >= 0.9
    assert dedup.similarity(CONV, far_copy)["lexical"] >= 0.9
    close = dedup.similarity(ATTENTION, near_copy)
    assert close["lexical"] < 0.9 and close["structural"] < 0.95  # admissible, but close
    # family "attn" keeps ATTENTION; its other members were removed as near-duplicates of
    # members of family "other"
    its = [DedupItem("far", CONV, "Far", family="other"),
           DedupItem("near", near, "Near", family="other"),
           DedupItem("base", ATTENTION, "Base", family="attn"),
           DedupItem("near_copy", near_copy, "NearCopy", family="attn"),
           DedupItem("far_copy", far_copy, "FarCopy", family="attn")]
    assert deduplicate(its).kept == ["far", "near", "base"]
    rep = deduplicate(its, DedupOptions(min_support=2))
    assert [t.id for t in rep.topups] == ["far_copy"]
    assert rep.topups[0].lexical < 0.2
    rep = deduplicate(its, DedupOptions(min_support=3))
    assert [t.id for t in rep.topups] == ["far_copy", "near_copy"]


def test_families_by_name_stem():
    assert dedup.name_stem("ast-activation-AlexNet-033377476d30570c325e7aad9fa4c15c") == \
        "AlexNet"
    assert dedup.name_stem("FractalNet-626c3eb9-5c0a-43be-bcba-745592729769") == "FractalNet"
    assert dedup.name_stem("rag-003f24dda0265971fea206c01cbd5718") == "rag"
    assert dedup.name_stem("alt-nn1-0006f20cc50a90b11b218f712d9bc45b.py") == "alt"
    assert dedup.name_stem("MyConv2d") == "Conv"
    its = [DedupItem("x", MLP, "AlexNet-1"), DedupItem("y", ATTENTION, "ast-AlexNet-2")]
    assert set(dedup.assign_families(its, DedupOptions(family="stem")).values()) == {"AlexNet"}
    assert set(dedup.assign_families(its, DedupOptions()).values()) == {""}


def test_bad_options_are_one_clear_error():
    with pytest.raises(dedup.DedupError, match="tau"):
        deduplicate(items(a=MLP), DedupOptions(tau=1.5))
    with pytest.raises(dedup.DedupError, match="unique"):
        deduplicate([DedupItem("a", MLP), DedupItem("a", ATTENTION)])


# -- loaders and the command -----------------------------------------------------------------
@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    # sorted paths are the preference order: a_mlp.py is the representative
    return write_tree(tmp_path / "files", {
        "a_mlp.py": MLP, "copies/my_mlp.py": MLP_COSMETIC, "copies/clamped.py": MLP_LEXICAL,
        "ff.py": MLP_STRUCTURAL, "b_attention.py": ATTENTION, "__pycache__/x.py": MLP,
        "notes.txt": "not python"})


def nnrag(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_files_and_folders(corpus: Path):
    found = dedup.items_from_paths([corpus, corpus / "a_mlp.py"])
    assert [Path(i.id).name for i in found] == [
        "a_mlp.py", "b_attention.py", "clamped.py", "my_mlp.py", "ff.py"]
    with pytest.raises(dedup.DedupError, match="no such file"):
        dedup.items_from_paths([corpus / "missing"])


def test_dedup_command_json(capsys, corpus: Path):
    code, out, _ = nnrag(capsys, "dedup", str(corpus), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["source"] == "files"
    assert d["counts"] == {"total": 5, "exact": 1, "lexical": 1, "structural": 1, "topup": 0,
                           "unique": 2}
    mlp = d["clusters"][0]
    assert mlp["size"] == 4 and Path(mlp["representative"]).name == "a_mlp.py"
    assert {Path(m["id"]).name: m["level"] for m in mlp["members"]} == {
        "my_mlp.py": "exact", "clamped.py": "lexical", "ff.py": "structural"}
    assert all(m["matched"] == mlp["representative"] for m in mlp["members"])
    assert d["table"][-1]["family"] == "total"


def test_dedup_command_text_and_markdown(capsys, corpus: Path):
    code, out, _ = nnrag(capsys, "dedup", str(corpus), "--members")
    assert code == 0
    assert "5 items (files): 1 exact, 1 lexical" in out and "2 unique (40.0%)" in out
    assert "ff.py: structural 1.000 ~ a_mlp" in out
    code, out, _ = nnrag(capsys, "dedup", str(corpus), "--markdown", "--tau", "0.99")
    assert code == 0
    assert out.startswith("| family | total | exact | lexical |")
    assert "| **total** | 5 |" in out


def test_dedup_command_errors_are_one_line(capsys, corpus: Path):
    code, _, err = nnrag(capsys, "dedup", str(corpus), "--tau", "2")
    assert code == 2 and err.strip().startswith("nnrag: error:") and "tau" in err
    code, _, err = nnrag(capsys, "dedup", str(corpus / "nope.py"))
    assert code == 2 and "no such file" in err and "Traceback" not in err


def test_dedup_over_the_index(capsys, tmp_path: Path):
    zoo = fixture("discovery") / "zoo"
    cfg = write_config(tmp_path / "cfg.json", {"zoo": {"path": str(zoo)}})
    code, out, err = nnrag(capsys, "dedup", "--index", "--config", str(cfg), "--cache-dir",
                           str(tmp_path / "cache"), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["source"] == "index" and d["counts"]["total"] == 29
    assert all(c["representative"].startswith("zoo:") for c in d["clusters"])
    families = {r["family"] for r in d["table"]}
    assert "total" in families and families - {"total"} <= {
        "attention", "convolution", "transformer_block", "pooling", "normalization", "loss",
        "architecture", "utility"}


def test_index_items_are_class_text_or_extracted_files(tmp_path: Path):
    from nnrag_tui.engine.extractor import BlockExtractor

    zoo = fixture("discovery") / "zoo"
    with BlockExtractor(write_config(tmp_path / "c.json", {"zoo": {"path": str(zoo)}}),
                        cache_dir=tmp_path / "cache") as ex:
        ex.index()
        its, _ = dedup.items_from_index(ex, match="*Attention*")
        assert its and all(i.text.lstrip().startswith(("class", "@")) for i in its)
        block = ex.blocks(match="*Attention*")[0]
        assert its[0].text.splitlines()[0].lstrip().startswith(("class", "@"))
        assert its[0].family == block.category and its[0].origin == "zoo"
        gen, _ = dedup.items_from_index(ex, match="*Attention*", extracted=True)
        assert gen[0].text.startswith("# Generated by nnrag")


class _Row:
    def __init__(self, name, category, validated):
        self.name, self.category, self.repo, self.validated = name, category, "zoo", validated


class _FakeRegistry:
    """The registry's duck type: ``list()`` rows and ``show(name).code_path``."""

    def __init__(self, root: Path, blocks: dict[str, tuple[str, str, bool | None]]):
        self.root = root
        self.blocks = blocks
        for name, (text, _, _) in blocks.items():
            (root / f"{name}.py").write_text(text)

    def list(self):
        return [_Row(n, c, v) for n, (_, c, v) in self.blocks.items()]

    def show(self, name):
        class Saved:
            code_path = self.root / f"{name}.py"
        return Saved()


def test_registry_items_prefer_validated_blocks(tmp_path: Path):
    reg = _FakeRegistry(tmp_path, {"A": (MLP_COSMETIC, "utility", None),
                                   "B": (MLP, "utility", True),
                                   "C": (ATTENTION, "attention", False)})
    its, notes = dedup.items_from_registry(reg)
    assert [i.id for i in its] == ["A", "B", "C"] and notes == []
    rep = deduplicate(its)
    assert rep.kept == ["B", "C"] and rep.removed["A"].matched == "B"
