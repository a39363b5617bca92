"""BlockDiscovery: which classes are blocks, and in which category."""

from __future__ import annotations

import pytest
from helpers import fixture, module_index, write_tree

from nnrag_tui.engine.config import SymbolPatterns
from nnrag_tui.engine.discovery import CATEGORIES, BlockDiscovery, external_is_module


@pytest.fixture(scope="module")
def blocks():
    index = module_index({"zoo": fixture("discovery")})
    found = [b for _, b in BlockDiscovery(index).discover()]
    by_key = {b.key: b for b in found}
    assert len(by_key) == len(found), "a block was listed twice"
    return by_key


def keys_in(blocks, module: str) -> set[str]:
    return {k.split(":", 1)[1] for k in blocks if k.split(":", 1)[0] == module}


def test_every_usual_spelling_of_nn_module(blocks):
    assert keys_in(blocks, "zoo.torch_styles") >= {"ViaAlias", "ViaTorch", "ViaRenamed",
                                                   "ViaName"}
    assert "zoo.from_torch_import_nn:ViaFromTorch" in blocks
    for key in ("zoo.torch_styles:ViaAlias", "zoo.torch_styles:ViaTorch",
                "zoo.torch_styles:ViaRenamed", "zoo.from_torch_import_nn:ViaFromTorch"):
        assert blocks[key].bases == ("torch.nn.Module",)


def test_forward_inherited_from_torch_or_missing(blocks):
    assert "zoo.torch_styles:ViaSequential" in blocks  # nn.Sequential has a forward
    assert "zoo.torch_styles:ViaModuleList" not in blocks  # nn.ModuleList has none
    assert "zoo.torch_styles:NoForward" not in blocks


def test_inheritance_through_corpus_classes(blocks):
    assert keys_in(blocks, "zoo.chain") == {"Base", "Derived", "GrandChild", "FromOtherModule",
                                            "MixedIn"}
    assert blocks["zoo.chain:Derived"].bases == ("zoo.chain.Base",)  # resolved, qualified
    assert blocks["zoo.chain:FromOtherModule"].bases == ("zoo.torch_styles.ViaAlias",)
    assert blocks["zoo.chain:MixedIn"].bases == ("zoo.chain.Mixin", "torch.nn.Module")


def test_a_class_only_type_checkers_see_is_not_a_block(blocks):
    assert "zoo.chain:TypingOnly" not in blocks  # under ``if TYPE_CHECKING:``
    assert "zoo.chain:GrandChild" in blocks  # its sibling at module level is


def test_a_class_only_a_script_run_defines_is_not_a_block():
    # under ``if __name__ == "__main__":``, either way round; its ``else:`` runs on import
    index = module_index({"scripted": fixture("discovery_script")})
    keys = {b.key for _, b in BlockDiscovery(index).discover()}
    assert keys == {"scripted.models:Model", "scripted.models:Imported"}


def test_abstract_classes_are_not_blocks(blocks):
    assert keys_in(blocks, "zoo.abstract") == {"ConcreteHead", "RealHead", "PlainBase",
                                               "PlainChild"}
    # excluded: AbstractHead/AbstractBuild/MetaBuild (abc.abstractmethod under ABCMeta),
    # StillAbstract/StillMetaBuild (inherit an unimplemented abstract method), RaisesHead
    # (forward only raises NotImplementedError), InheritsRaising (inherits that forward).
    # PlainBase/PlainChild: @abstractmethod without ABCMeta does not stop instantiation;
    # PlainInterface(Child): an @abstractmethod forward is no forward, ABCMeta or not


def test_abstractmethod_without_abcmeta_is_instantiable():
    """The premise of the rule above, checked against Python itself."""
    import importlib.util
    path = fixture("discovery") / "zoo" / "abstract.py"
    spec = importlib.util.spec_from_file_location("zoo_abstract", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.PlainChild()
    with pytest.raises(TypeError):
        mod.StillMetaBuild()


def test_same_named_classes_stay_distinct(blocks):
    a, b = blocks["zoo.same_a:Head"], blocks["zoo.same_b:Head"]
    assert a.name == b.name == "Head"
    assert (a.full_name, b.full_name) == ("zoo.same_a.Head", "zoo.same_b.Head")
    assert (a.relpath, b.relpath) == ("zoo/same_a.py", "zoo/same_b.py")


def test_nested_classes(blocks):
    assert keys_in(blocks, "zoo.nested") == {"Outer", "Outer.Inner"}
    inner = blocks["zoo.nested:Outer.Inner"]
    assert inner.name == "Inner" and inner.line == 5 and inner.end_line == 7


def test_base_named_module_but_not_torch_is_not_a_block(blocks):
    # a local `class Module`, a corpus module called `nn`, an alias of a corpus `Module`, and an
    # unbound name: none of them is torch.nn.Module
    assert keys_in(blocks, "zoo.impostors") == set()
    assert keys_in(blocks, "zoo.nn") == set()


def test_spans_cover_the_class(blocks):
    b = blocks["zoo.categories:ConvBnAct"]
    src = (fixture("discovery") / b.relpath).read_text().splitlines()
    assert src[b.line - 1].startswith("class ConvBnAct(")
    assert "return self.bn(self.conv(x))" in src[b.end_line - 1]


@pytest.mark.parametrize("name,category,rule", [
    ("FooAttention", "attention", "name:Attention"),
    ("BarPool2d", "pooling", "name:Pool"),
    ("LayerNorm2d", "normalization", "name:Norm"),
    ("ConvBnAct", "convolution", "name:Conv"),
    ("FocalLoss", "loss", "name:Loss"),
    ("VisionTransformer", "architecture", "method:forward_features"),
    ("Block", "transformer_block", "name:Block"),
    ("Shrink", "pooling", "base:torch.nn.AvgPool2d"),  # from its torch base
    ("Squash", "attention", "op:torch.softmax"),  # from the ops it calls
    ("Identityish", "utility", "default"),  # defines softmax but never calls it
])
def test_categories(blocks, name, category, rule):
    b = blocks[f"zoo.categories:{name}"]
    assert (b.category, b.rule) == (category, rule)


GANS = '''import torch
from torch import nn


class DCGANGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(100, 64, 4)
        self.bn = nn.BatchNorm2d(64)

    def forward(self, z):
        return torch.tanh(self.bn(self.up(z)))


class PatchDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 4)
        self.norm = nn.InstanceNorm2d(64)

    def forward(self, x):
        return self.norm(self.conv(x)).mean()


class AnchorGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(7, 7, 3)

    def forward(self, x):
        return self.conv(x)


class SegmentationModel(nn.Module):
    def forward(self, x):
        return self.head(self.decoder(x))


class FPN(SegmentationModel):
    def __init__(self):
        super().__init__()
        self.decoder = nn.Identity()
        self.head = nn.Identity()
'''


def test_a_whole_network_is_an_architecture_by_its_name(tmp_path):
    """PyTorch-GAN's generators and discriminators were "normalization" or "convolution" by
    the first layer they call; torchvision's ``AnchorGenerator`` makes anchors, no images.
    Time-Series-Library names each of its 49 networks ``Model`` (one was "convolution" by its
    ``Conv1d``), and segmentation_models.pytorch's ``FPN`` is a ``SegmentationModel``: both were
    "utility"."""
    write_tree(tmp_path / "gans", {"nets.py": GANS})
    index = module_index({"gans": tmp_path})
    found = {b.qualname: (b.category, b.rule) for _, b in BlockDiscovery(index).discover()}
    assert found == {"DCGANGenerator": ("architecture", "name:Generator"),
                     "PatchDiscriminator": ("architecture", "name:Discriminator"),
                     "AnchorGenerator": ("pooling", "op:nn.AdaptiveAvgPool2d"),
                     "Model": ("architecture", "name:Model"),
                     "SegmentationModel": ("architecture", "name:Model"),
                     "FPN": ("architecture", "base:gans.nets.SegmentationModel")}


VARIANTS = '''\
from torch import nn


class SiT(nn.Module):
    def __init__(self, depth=28, hidden_size=1152, num_heads=16):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(depth))

    def forward(self, x):
        return self.blocks[0](x)


class ConvBN(nn.Module):
    def __init__(self, inp, oup, kernel_size=3, padding=1):
        super().__init__()
        self.conv = nn.Conv2d(inp, oup, kernel_size, padding=padding)

    def forward(self, x):
        return self.conv(x)


def SiT_XL_2(**kwargs):
    return SiT(depth=28, hidden_size=1152, num_heads=16, **kwargs)


def SiT_S_2(pretrained=False, **kwargs):
    model = SiT(depth=12, hidden_size=384, num_heads=6, **kwargs)
    return model


def conv_bn(inp, oup):
    return ConvBN(inp, oup, kernel_size=3, padding=1)
'''


def test_a_class_that_size_variant_functions_build_is_an_architecture(tmp_path):
    """SiT, DiT, MAR and PixArt-α name their networks with acronyms, and were "utility" (or a
    layer's category, by the first op they call). Their modules build them with fixed sizes
    in functions such as ``SiT_XL_2(**kwargs)``. A helper that takes the layer's inputs and
    fixes its kernel (``conv_bn(inp, oup)``) is no variant of a network."""
    write_tree(tmp_path / "sit", {"models.py": VARIANTS})
    index = module_index({"sit": tmp_path})
    found = {b.qualname: (b.category, b.rule) for _, b in BlockDiscovery(index).discover()}
    assert found == {"SiT": ("architecture", "variant:SiT_XL_2"),
                     "ConvBN": ("convolution", "name:Conv")}


FRAMEWORK_SUBCLASSES = """\
import pytorch_lightning as pl
from lightning.pytorch import LightningModule
from mmengine.model import BaseModule
from transformers import PreTrainedModel
from transformers.models.bert.modeling_bert import BertPreTrainedModel
from transformers import TFPreTrainedModel
from somewhere import Unknown


class Enformer(PreTrainedModel):
    def forward(self, x):
        return x


class BertHead(BertPreTrainedModel):
    def forward(self, x):
        return x


class Classifier(pl.LightningModule):
    def forward(self, x):
        return x


class OnlySteps(LightningModule):
    def training_step(self, batch, i):
        return batch


class Backbone(BaseModule):
    def forward(self, x):
        return x


class KerasHead(TFPreTrainedModel):
    def forward(self, x):
        return x


class Elsewhere(Unknown):
    def forward(self, x):
        return x


class Method(pl.LightningModule):
    def training_step(self, batch, i):
        return batch


class SimCLR(Method):
    def forward(self, x):
        return x
"""


def test_a_subclass_of_a_frameworks_module_class_is_a_block(tmp_path):
    """enformer-pytorch's own model is ``Enformer(PreTrainedModel)``, with transformers not a
    source; a LightningModule or an OpenMMLab BaseModule with a forward of its own is a block
    too. One without a forward, a TensorFlow twin and an unknown base are not."""
    write_tree(tmp_path / "fw", {"models.py": FRAMEWORK_SUBCLASSES})
    index = module_index({"fw": tmp_path})
    found = {b.qualname: (b.bases, b.category) for _, b in BlockDiscovery(index).discover()}
    assert found == {  # a whole model by its base; an OpenMMLab module may be any layer
        "Enformer": (("transformers.PreTrainedModel",), "architecture"),
        "BertHead": (("transformers.models.bert.modeling_bert.BertPreTrainedModel",),
                     "architecture"),
        "Classifier": (("pytorch_lightning.LightningModule",), "architecture"),
        "Backbone": (("mmengine.model.BaseModule",), "utility"),
        "SimCLR": (("fw.models.Method",), "architecture"),  # (solo-learn's methods)
    }


def test_every_category_is_one_of_the_papers(blocks):
    assert {b.category for b in blocks.values()} <= set(CATEGORIES)


def test_symbol_patterns_scope_the_blocks():
    index = module_index({"zoo": fixture("discovery")})
    pats = {"zoo": SymbolPatterns(include=("*Attention*", "zoo.chain:*"),
                                  exclude=("*:GrandChild",))}
    keys = {b.key for _, b in BlockDiscovery(index, pats).discover()}
    assert keys == {"zoo.categories:FooAttention", "zoo.chain:Base", "zoo.chain:Derived",
                    "zoo.chain:FromOtherModule", "zoo.chain:MixedIn"}


def test_torch_nn_modules_as_a_corpus_source():
    root = fixture("torch_corpus")
    index = module_index({"torch": root / "torch_src", "user": root / "user_src"})
    keys = {b.key for _, b in BlockDiscovery(index).discover()}
    assert keys == {
        "torch.nn.modules.linear:Identity",
        "torch.nn.modules.container:Sequential",
        "user.models:Plain",
        "user.models:MyIdentity",  # through the corpus copy of torch's Identity
    }


@pytest.mark.parametrize("name,expected", [
    ("torch.nn.Module", True),
    ("torch.nn.Conv2d", True),
    ("torch.nn.modules.conv._ConvNd", True),
    ("torch.nn.functional.relu", False),
    ("torch.nn.Parameter", False),
    ("torch.nn.utils.parametrize.Foo", False),
    ("numpy.Module", False),
    ("torch.Tensor", False),
])
def test_external_torch_names(name, expected):
    assert external_is_module(name) is expected


def test_a_base_bound_by_an_alias_is_followed(tmp_path):
    """rwkv's ``class RWKV(MyModule)`` where the module binds ``MyModule = torch.jit.
    ScriptModule`` or ``torch.nn.Module`` under an ``if``; brevitas' 111 classes derived from
    ``brevitas.jit.ScriptModule``, bound so in another module. A name bound by a call is no
    alias, and aliases of each other end the walk."""
    write_tree(tmp_path / "al", {"__init__.py": "", "jit.py": (
        "import os\n\nimport torch\n\n"
        "if os.environ.get('AL_JIT') == '1':\n    ScriptModule = torch.jit.ScriptModule\n"
        "else:\n    ScriptModule = torch.nn.Module\n"), "models.py": (
        "import torch\n\nfrom al import jit\nfrom al.jit import ScriptModule as Mod\n\n"
        "class Plain(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "Local = Plain\nMade = type('Made', (torch.nn.Module,), {})\nLoopA = LoopB\nLoopB = LoopA\n\n\n"
        "class ViaChain(jit.ScriptModule):\n    def forward(self, x):\n        return x\n\n\n"
        "class ViaImported(Mod):\n    def forward(self, x):\n        return x\n\n\n"
        "class ViaLocal(Local):\n    pass\n\n\n"
        "class ViaCall(Made):\n    def forward(self, x):\n        return x\n\n\n"
        "class ViaLoop(LoopA):\n    def forward(self, x):\n        return x\n\n\n"
        "class NoForward(jit.ScriptModule):\n    pass\n")})
    index = module_index({"al": tmp_path})
    found = {b.key: b for _, b in BlockDiscovery(index).discover()}
    assert set(found) == {"al.models:Plain", "al.models:ViaChain", "al.models:ViaImported",
                          "al.models:ViaLocal"}
    both = ("torch.jit.ScriptModule", "torch.nn.Module")
    assert found["al.models:ViaChain"].bases == both
    assert found["al.models:ViaImported"].bases == both
    assert found["al.models:ViaLocal"].bases == ("al.models.Plain",)



def test_a_base_imported_in_a_try_and_aliased_in_its_except_is_followed(tmp_path):
    """pennylane's ``qnn/torch.py``: ``try: from torch.nn import Module`` / ``except
    ImportError: Module = Mock``, then ``class TorchLayer(Module)``. With torch installed the
    base is ``torch.nn.Module``, so the class is a block."""
    write_tree(tmp_path / "ql", {"__init__.py": "", "layer.py": (
        "try:\n    import torch\n    from torch.nn import Module\n"
        "except ImportError:\n    from unittest.mock import Mock\n\n    Module = Mock\n\n\n"
        "class TorchLayer(Module):\n    def forward(self, x):\n        return x\n")})
    index = module_index({"ql": tmp_path})
    found = {b.key: b for _, b in BlockDiscovery(index).discover()}
    assert set(found) == {"ql.layer:TorchLayer"}
    assert found["ql.layer:TorchLayer"].bases == ("torch.nn.Module", "unittest.mock.Mock")

def test_a_module_called_through_its_own_call_is_a_block():
    # timm's JsdCrossEntropy and TRL's ULDLoss override ``__call__`` and have no ``forward``;
    # a ``__call__`` that hands over to nn.Module's (or to ``forward``), or only raises, is none
    index = module_index({"calls": fixture("discovery_call")})
    keys = {b.key for _, b in BlockDiscovery(index).discover()}
    assert keys == {"calls.losses:OwnCall", "calls.losses:InheritsCall"}


def test_a_cross_entropy_is_a_loss(tmp_path):
    # timm's SoftTargetCrossEntropy, LabelSmoothingCrossEntropy and JsdCrossEntropy (whose
    # softmax made it "attention") are losses without "Loss" in their names
    write_tree(tmp_path / "ce", {"__init__.py": "", "losses.py": (
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\n"
        "class SoftTargetCrossEntropy(nn.Module):\n    def forward(self, x, target):\n"
        "        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()\n\n\n"
        "class JsdCrossEntropy(nn.Module):\n    def __call__(self, output, target):\n"
        "        return F.softmax(output, dim=1).mean()\n")})
    index = module_index({"ce": tmp_path})
    found = {b.qualname: (b.category, b.rule) for _, b in BlockDiscovery(index).discover()}
    assert found == {"SoftTargetCrossEntropy": ("loss", "name:CrossEntropy"),
                     "JsdCrossEntropy": ("loss", "name:CrossEntropy")}
