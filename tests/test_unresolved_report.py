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
