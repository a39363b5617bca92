"""bindings: what a name used in a module refers to, through the import system of the corpus."""

from __future__ import annotations

import pytest
from helpers import entry, fixture, module_index, write_tree

from nnrag_tui.engine.facts import ImportRecord


@pytest.fixture(scope="module")
def index():
    return module_index({"repo": fixture("reexport")})


@pytest.fixture(scope="module")
def vit(index):
    return entry(index, "pkg.models.vit")


def test_reexport_chain_through_package_init(index, vit):
    # vit: `from ..layers import Mlp`; layers/__init__: `from .mlp import Mlp`
    t = index.lookup(vit, "Mlp")
    assert t.kind == "def"
    assert t.qualified == "pkg.layers.mlp.Mlp"
    assert t.how == "re-export"
    assert index.class_symbol(t)[1].name == "Mlp"


def test_two_hop_reexport_with_alias(index, vit):
    # vit: `from pkg import Mlp as TopMlp`; pkg/__init__: `from .layers import Mlp`
    t = index.lookup(vit, "TopMlp")
    assert t.qualified == "pkg.layers.mlp.Mlp"
    assert index.lookup(entry(index, "pkg"), "Mlp").qualified == "pkg.layers.mlp.Mlp"


def test_direct_import_is_marked_direct(index):
    layers = entry(index, "pkg.layers")
    t = index.lookup(layers, "GluMlp")
    assert (t.qualified, t.how) == ("pkg.layers.mlp.GluMlp", "import")


def test_star_import_honours_all(index, vit):
    layers = entry(index, "pkg.layers")
    t = index.lookup(vit, "LayerNorm2d")
    assert t.qualified == "pkg.layers.norm.LayerNorm2d"
    assert t.how == "star"
    # Hidden is defined in norm.py but not in its __all__: `from .norm import *` skips it
    hidden = index.lookup(layers, "Hidden")
    assert hidden.kind == "unresolved"
    assert "Hidden" not in index.exports(entry(index, "pkg.layers.norm"))


def test_star_import_without_all_takes_public_names(index):
    layers = entry(index, "pkg.layers")
    acts = entry(index, "pkg.layers.acts")
    assert index.lookup(layers, "GELU").qualified == "pkg.layers.acts.GELU"
    assert index.lookup(layers, "_private").kind == "unresolved"
    assert {"GELU", "math", "nn"} <= index.exports(acts)
    assert "_private" not in index.exports(acts)
    # a module imported by the starred module passes through as what it is
    math = index.lookup(layers, "math")
    assert (math.kind, math.name) == ("external", "math")


def test_import_a_b_as_c_then_attribute(index, vit):
    # `import pkg.layers.helpers as hp` ... `hp.to_2tuple`
    t = index.resolve_dotted(vit, "hp.to_2tuple")
    assert (t.kind, t.qualified) == ("def", "pkg.layers.helpers.to_2tuple")
    # `import pkg.layers.mlp` binds `pkg`; the full dotted path still resolves
    t = index.resolve_dotted(vit, "pkg.layers.mlp.GluMlp")
    assert t.qualified == "pkg.layers.mlp.GluMlp"


def test_from_dot_import_module_then_attribute(index, vit):
    # `from .. import layers` then `layers.Mlp`
    t = index.resolve_dotted(vit, "layers.Mlp")
    assert (t.kind, t.qualified) == ("def", "pkg.layers.mlp.Mlp")
    # `from ..layers import helpers`: a submodule that the package __init__ never imports
    t = index.resolve_dotted(vit, "helpers.to_2tuple")
    assert t.qualified == "pkg.layers.helpers.to_2tuple"


def test_nested_class_through_attribute(index, vit):
    t = index.resolve_dotted(vit, "hp.Outer.Inner")
    found = index.class_symbol(t)
    assert found is not None and found[1].qualname == "Outer.Inner"


def test_missing_attribute_of_a_corpus_module_is_unresolved(index, vit):
    t = index.resolve_dotted(vit, "layers.NoSuchThing")
    assert t.kind == "unresolved"
    assert index.lookup(vit, "never_bound").kind == "unresolved"


def test_try_importerror_prefers_the_first_branch(index, vit):
    t = index.lookup(vit, "Attn")
    assert t.qualified == "pkg.models.fast.FastAttn"


def test_external_and_builtin_names(index, vit):
    t = index.resolve_dotted(vit, "nn.Module")
    assert (t.kind, t.name) == ("external", "torch.nn.Module")
    t = index.resolve_dotted(vit, "F.relu")
    assert (t.kind, t.name) == ("external", "torch.nn.functional.relu")
    assert index.lookup(vit, "len").kind == "builtin"
    assert index.lookup(vit, "super").kind == "builtin"


def test_same_module_name_in_two_sources_resolves_in_own_source():
    root = fixture("two_sources")
    # "a" has the higher priority: a global pick by module name would always choose it.
    index = module_index({"a": root / "a", "b": root / "b"}, priorities={"a": 1, "b": 2})
    for src in ("a", "b"):
        user = entry(index, "common.user", src)
        t = index.lookup(user, "ConvBlock")  # absolute: `from common.blocks import ConvBlock`
        assert t.entry.source == src
        assert index.class_symbol(t)[1].doc == f"ConvBlock of repository {src.upper()}."
        t = index.resolve_dotted(user, "blocks.ConvBlock")  # relative: `from . import blocks`
        assert t.entry.source == src
    assert index.find_module("common.blocks", None).source == "a"  # no context: priority


def test_a_package_without_an_indexed_init_is_still_a_corpus_module(tmp_path):
    """``import ns.sub`` where ``ns`` has no ``__init__.py`` (a namespace package): ``ns`` is
    the corpus's, not an external package, and ``ns.sub.Block`` resolves into the corpus."""
    from helpers import write_tree

    write_tree(tmp_path, {
        "ns/deep/sub.py": "class Block:\n    pass\n",
        "user.py": "import ns.deep.sub\nimport nsx\nB = ns.deep.sub.Block\n",
    })
    index = module_index({"r": tmp_path})
    user = entry(index, "user")
    assert index.packages >= {"ns", "ns.deep"} and "nsx" not in index.packages
    t = index.lookup(user, "ns")
    assert (t.kind, t.name, t.entry) == ("module", "ns", None)
    t = index.resolve_dotted(user, "ns.deep.sub.Block")
    assert (t.kind, t.entry.module, t.name) == ("def", "ns.deep.sub", "Block")
    assert index.lookup(user, "nsx").kind == "external"


def test_a_module_beside_the_folder_a_script_runs_in(tmp_path):
    """UniFormer's ``object_detection/`` (no ``__init__.py``) holds ``mmcv_custom/`` beside
    its scripts, and its backbones run ``from mmcv_custom import load_checkpoint``: Python
    finds it there as the script runs, the folder being first on ``sys.path``. The innermost
    such folder first; never inside a package (mamba's ``mamba_ssm/ops/triton/`` is no
    ``triton``), never a standard library module, never the importing module itself
    (hyena-dna's ``src/ops/fftconv.py`` runs ``import fftconv``, its compiled extension)."""
    write_tree(tmp_path, {
        "det/helpers/__init__.py": "from .scale import Scale\n",
        "det/helpers/scale.py": "class Scale:\n    pass\n",
        "det/seg/helpers/__init__.py": "class Scale:\n    pass\n",
        "det/seg/net.py": "from helpers import Scale\n",
        "det/models/net.py": ("from helpers import Scale\nimport helpers.scale as hs\n"
                              "import logging\nimport fftconv\n"),
        "det/logging.py": "LEVEL = 1\n",
        "det/models/fftconv.py": "import fftconv\n",
        "pkg/__init__.py": "",
        "pkg/ops/__init__.py": "",
        "pkg/ops/triton/__init__.py": "",
        "pkg/ops/norm.py": "import triton\n",
    })
    index = module_index({"r": tmp_path})
    net = entry(index, "det.models.net")
    t = index.lookup(net, "Scale")
    assert (t.kind, t.qualified, t.how) == ("def", "det.helpers.scale.Scale", "heuristic")
    assert t.confidence < 1.0
    t = index.lookup(net, "hs")
    assert (t.kind, t.name, t.how) == ("module", "det.helpers.scale", "heuristic")
    assert index.script_folder("helpers", net) == "det"
    # the innermost folder first
    t = index.lookup(entry(index, "det.seg.net"), "Scale")
    assert t.qualified == "det.seg.helpers.Scale"
    # a standard library module and the importer itself are not looked for beside
    assert index.lookup(net, "logging").kind == "external"
    own = entry(index, "det.models.fftconv")
    assert index.lookup(own, "fftconv").kind == "external"
    assert index.lookup(net, "fftconv").entry is own  # (a module beside it, for another)
    # inside a package: an external package of that name
    assert index.lookup(entry(index, "pkg.ops.norm"), "triton").kind == "external"


def test_a_folder_its_source_imports_through_by_name_is_no_script_folder(tmp_path):
    """safari's ``src/tasks/tasks.py`` imports ``src.tasks.metrics`` by its full name, so its
    scripts run at the root, and its ``import torchmetrics as tm`` and ``from torchmetrics
    import MetricCollection`` are the installed package, not the neighbour
    ``src/tasks/torchmetrics.py`` (the file held a module object of that neighbour, which has
    no ``MetricCollection``). A folder nothing imports through by name still is one."""
    write_tree(tmp_path, {
        "src/tasks/metrics.py": "def mse(a, b):\n    return a - b\n",
        "src/tasks/torchmetrics.py": "def accuracy(a, b):\n    return a\n",
        "src/tasks/tasks.py": ("import src.tasks.metrics as M\nimport torchmetrics as tm\n"
                               "from torchmetrics import MetricCollection\n"),
        "tools/helper.py": "class Helper:\n    pass\n",
        "tools/run.py": "from helper import Helper\n",
    })
    index = module_index({"r": tmp_path})
    tasks = entry(index, "src.tasks.tasks")
    assert index.lookup(tasks, "M").name == "src.tasks.metrics"
    t = index.lookup(tasks, "tm")
    assert (t.kind, t.name) == ("external", "torchmetrics")
    assert index.lookup(tasks, "MetricCollection").kind == "external"
    assert index.script_folder("torchmetrics", tasks) is None
    t = index.lookup(entry(index, "tools.run"), "Helper")
    assert (t.qualified, t.how) == ("tools.helper.Helper", "heuristic")


def test_a_folder_a_module_puts_on_sys_path_by_a_relative_path_is_still_one(tmp_path):
    """KAIR's ``models/network_faceenhancer.py`` runs ``sys.path.insert(0, 'models')`` and
    ``from op import upfirdn2d`` (``models/op/``), and its scripts import
    ``models.select_model`` by name: run at the root, they find ``op`` in ``models/``."""
    write_tree(tmp_path, {
        "models/op/__init__.py": "from .upfirdn2d import upfirdn2d\n",
        "models/op/upfirdn2d.py": "def upfirdn2d(x):\n    return x\n",
        "models/select_model.py": "def define_model():\n    pass\n",
        "models/net.py": ("import sys\nif 'models' not in sys.path:\n"
                          "    sys.path.insert(0, 'models')\nfrom op import upfirdn2d\n"),
        "main.py": "from models.select_model import define_model\n",
    })
    index = module_index({"r": tmp_path})
    t = index.lookup(entry(index, "models.net"), "upfirdn2d")
    assert (t.qualified, t.how) == ("models.op.upfirdn2d.upfirdn2d", "heuristic")


def test_a_name_two_star_imports_bind_is_the_one_run_last_when_read(tmp_path):
    """torch_mimicry's ``modules/__init__.py`` runs ``from .layers import *`` (an ``SNLinear``
    function wrapping ``nn.Linear``), ``from .resblocks import *``, then ``from
    .spectral_norm import *`` (an ``SNLinear`` class). A module that imports ``SNLinear``
    from the package once it has run gets the class; ``resblocks``, which imports it halfway
    (the package's star import of it runs it), gets the function. Guarded star imports keep
    their order: the ``try``'s comes before its fallback's. The blocks built from the
    generated files hold what upstream's hold."""
    from helpers import extract_tree

    files = {
        "mm/__init__.py": "",
        "mm/modules/__init__.py": ("from .layers import *\nfrom .resblocks import *\n"
                                   "from .spectral_norm import *\n"
                                   "try:\n    from .fast import *\n"
                                   "except ImportError:\n    from .slow import *\n"),
        "mm/modules/layers.py": ("from torch import nn\n\n\ndef SNLinear(*args, **kwargs):\n"
                                 "    return nn.Linear(*args, **kwargs)\n"),
        "mm/modules/spectral_norm.py": ("from torch import nn\n\n\n"
                                        "class SNLinear(nn.Linear):\n    pass\n"),
        "mm/modules/resblocks.py": ("from torch import nn\n\nfrom mm.modules import SNLinear\n\n"
                                    "__all__ = ['Block']\n\n\n"
                                    "class Block(nn.Module):\n    def __init__(self):\n"
                                    "        super().__init__()\n"
                                    "        self.l1 = SNLinear(8, 8)\n\n"
                                    "    def forward(self, x):\n        return self.l1(x)\n\n\n"
                                    "def late_linear():\n"
                                    "    from mm.modules import SNLinear as Late\n\n"
                                    "    return Late(8, 8)\n"),
        "mm/modules/fast.py": "def kernel():\n    return 'fast'\n",
        "mm/modules/slow.py": "def kernel():\n    return 'slow'\n",
        "mm/net.py": ("from torch import nn\n\nfrom mm.modules import Block, SNLinear, kernel\n\n\n"
                      "class Net(nn.Module):\n    def __init__(self):\n"
                      "        super().__init__()\n        self.block = Block()\n"
                      "        self.l5 = SNLinear(8, 1)\n        self.kind = kernel()\n\n"
                      "    def forward(self, x):\n        return self.l5(self.block(x))\n"),
    }
    index = module_index({"r": write_tree(tmp_path / "tree", files)})
    net, blocks = entry(index, "mm.net"), entry(index, "mm.modules.resblocks")
    assert index.resolve_dotted(net, "SNLinear").qualified == "mm.modules.spectral_norm.SNLinear"
    assert index.resolve_dotted(blocks, "SNLinear").qualified == "mm.modules.layers.SNLinear"
    assert index.resolve_dotted(net, "kernel").qualified == "mm.modules.fast.kernel"
    # an import inside a function runs once the package has run to its end
    late = ImportRecord("Late", "mm.modules", "SNLinear", "Late", 0, "mm.modules", 18, 18)
    assert index.follow_import(blocks, late).qualified == "mm.modules.spectral_norm.SNLinear"

    result = extract_tree(tmp_path / "x", files)
    namespace: dict = {"__name__": "generated_mm"}
    exec(compile(result.generated.code, "Net.py", "exec"), namespace)
    built = namespace["Net"]()
    assert type(built.l5).__name__ == "SNLinear" and built.kind == "fast"
    assert type(built.block.l1).__name__ == "Linear"


def test_a_name_two_imports_bind_is_the_one_imported_last(tmp_path):
    """slot_attention's ``from torch import einsum, nn`` and later ``from einops import ...,
    einsum``: its methods call einops' ``einsum``, whose arguments come in another order. The
    file kept torch's import and dropped einops' one, and its forward raised where upstream's
    runs. Here ``math.sqrt`` and then ``cmath.sqrt``: the block takes the square root of -4,
    and a constant computed between the two imports, as the module runs, takes math's."""
    import torch
    from helpers import extract_tree

    result = extract_tree(tmp_path, {"apkg/__init__.py": "", "apkg/net.py": (
        "from math import pi, sqrt\nfrom torch import nn\n\nROOT = sqrt(9.0)\n\n"
        "from cmath import sqrt\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x * abs(sqrt(-4.0)) * (pi > 3) * ROOT\n")})
    code = result.generated.code
    assert "from cmath import sqrt\n" in code and "ROOT = sqrt_math(9.0)" in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)  # noqa: S102  (the generated file)
    # math's sqrt(-4.0) raises; cmath's sqrt(9.0) is complex, and the product would be too
    assert namespace["ROOT"] == 3.0 and isinstance(namespace["ROOT"], float)
    assert namespace["Net"]()(torch.ones(1)).tolist() == [6.0]


def test_a_module_bound_by_import_module_of_a_string(tmp_path):
    # physicsnemo's ``network_module = importlib.import_module("...diffusion_unets")``: the
    # name is that module, as ``import ... as`` binds it, where the sources have it
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/nets.py": "class Net:\n    pass\n",
        "pkg/use.py": ("import importlib\n"
                       "nets = importlib.import_module('pkg.nets')\n"
                       "missing = importlib.import_module('pkg.gone')\n"
                       "ext = importlib.import_module('json')\n"
                       "twice = importlib.import_module('pkg.nets')\n"
                       "twice = None\n"),
    })
    index = module_index({"repo": tmp_path})
    use = entry(index, "pkg.use")
    t = index.lookup(use, "nets")
    assert (t.kind, t.name, t.how) == ("module", "pkg.nets", "import")
    assert index.resolve_dotted(use, "nets.Net").qualified == "pkg.nets.Net"
    # no module of the sources, or bound otherwise too: the statement as written
    for name in ("missing", "ext", "twice"):
        assert (index.lookup(use, name).kind, index.lookup(use, name).name) == ("def", name)
