"""A name that cannot be resolved is reported with where it occurs: the line that reads it, not
the first line of the class around it, and why, where the lookup knows more than that nothing
binds it. timm_3d's davit imports ``LayerNorm2d`` from ``timm_3d.layers``, which has none (its
3D port dropped it): the header said only ``LayerNorm2d (timm_3d.models.davit:46)``, the line
of ``class Stem``, 14 lines above the read."""

from helpers import extract_tree

LAYERS = "from .mlp import Mlp\n"
MLP = "from torch import nn\n\n\nclass Mlp(nn.Identity):\n    pass\n"
NET = '''\
from torch import nn

from apkg.layers import LayerNorm2d, Mlp


class Net(nn.Module):
    """A stem."""

    def __init__(self, dim=4):
        super().__init__()
        self.mlp = Mlp()
        self.norm = LayerNorm2d(dim)
        self.act = nn.GELU() if dim else gelu_fallback

    def forward(self, x):
        return self.act(self.norm(self.mlp(x)))
'''


def test_an_unresolved_name_is_reported_at_the_line_that_reads_it(tmp_path):
    result = extract_tree(tmp_path, {"apkg/__init__.py": "", "apkg/layers/__init__.py": LAYERS,
                                     "apkg/layers/mlp.py": MLP, "apkg/net.py": NET})
    assert sorted(result.generated.unresolved) == [
        ("LayerNorm2d", "apkg.net:12, apkg.layers has no 'LayerNorm2d'"),
        ("gelu_fallback", "apkg.net:13")]
    code = result.generated.code
    assert "# unresolved: " in code and "LayerNorm2d (apkg.net:12, apkg.layers has no " \
        "'LayerNorm2d')" in code
    assert "class Mlp(nn.Identity):" in code  # the import's other name still comes along


BACKBONE = '''\
from torch import nn

from ..builder import BACKBONES
from ..common import Stem


@BACKBONES.register_module()
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = Stem()

    def forward(self, x):
        return x
'''


def test_a_relative_import_above_the_top_package_is_unresolved_not_a_guessed_package(tmp_path):
    """RepLKNet's ``segmentation/replknet.py`` is meant to be copied into mmseg's
    ``models/backbones/``: its ``from ..builder import BACKBONES`` climbs above the top
    package ``segmentation``, where Python's import fails. The file kept ``from builder import
    BACKBONES``, an import of a package nobody has, and said nothing. A module the sources have
    at their root is still found there (``common``)."""
    result = extract_tree(tmp_path, {"segmentation/replknet.py": BACKBONE,
                                     "common.py": "class Stem:\n    pass\n"})
    assert result.generated.unresolved == [(
        "BACKBONES", "segmentation.replknet:7, `from ..builder import BACKBONES` climbs above "
        "the top package segmentation, to a module builder no source indexed here has: "
        "upstream's import fails as well, unless the module is copied into a package that "
        "has one")]
    code = result.generated.code
    assert "from builder import" not in code and "import builder" not in code
    assert "class Stem:" in code


MEMORY = '''\
from torch import nn


class Memorizing(nn.Module):
    def context(self):
        memories = self.create()
        yield memories

    def clear(self, mask):
        squares = [memories for memories in mask]
        fn = lambda memories: memories
        memories.clear(squares, fn)

    def forward(self, x):
        return x
'''


def test_an_unresolved_name_is_reported_where_it_is_free_not_where_a_scope_binds_it(tmp_path):
    """memorizing-transformers' ``clear_memory`` reads ``knn_memories``, which nothing binds
    there: an upstream slip. The report gave the line of ``knn_memories = ...`` fifteen lines
    above, a local of another method, where a reader finds the name bound and the report
    looks wrong. A comprehension's or a lambda's own variable of that name is no read of it
    either."""
    result = extract_tree(tmp_path, {"apkg/__init__.py": "", "apkg/net.py": MEMORY},
                          "Memorizing")
    assert result.generated.unresolved == [("memories", "apkg.net:12")]


SHARED = '''\
from torch import nn


class Base(nn.Module):
    def reset(self):
        return missing_helper(self)


class First(Base):
    def forward(self, x):
        return x


class Second(Base):
    def forward(self, x):
        return -x
'''


def test_the_line_of_an_unresolved_read_is_worked_out_once_for_every_block(tmp_path,
                                                                          monkeypatch):
    """torchrl's blocks share large base classes that read names nothing binds, and each
    block walked those classes again, with their symbol tables, to find the line of each read:
    two fifths of the time in a profile of 40 of them. The line is the module's fact; every
    block still reports it."""
    from helpers import path_config, write_tree

    from nnrag_tui.engine import scopes
    from nnrag_tui.engine.extractor import BlockExtractor

    walked: list[str] = []
    real = scopes.global_read_lines

    def counting(text, name, *args):
        walked.append(name)
        return real(text, name, *args)

    monkeypatch.setattr(scopes, "global_read_lines", counting)
    root = write_tree(tmp_path / "repo", {"apkg/__init__.py": "", "apkg/net.py": SHARED})
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        reports = [ex.extract_single_block(name).generated.unresolved
                   for name in ("First", "Second", "First")]
    assert reports == [[("missing_helper", "apkg.net:6")]] * 3
    assert walked == ["missing_helper"]
