"""Code that finds files beside its module through ``__file__`` (whisper's ``mel_filters.npz``,
torch_geometric's ``propagate.jinja``): in a generated file ``__file__`` is that file, so the
header names those definitions, the files their string literals point at, and where to put them;
put there, the code works as upstream's does. nnrag puts them there itself where it writes
(``--out``), saves (the library, its export) or validates (the sandbox) the file."""

from __future__ import annotations

import ast
import importlib.util
import shutil

import pytest
from helpers import path_config, write_tree

from nnrag_tui.engine.extractor import BlockExtractor
from nnrag_tui.engine.modulefiles import included_files, literals

pytest.importorskip("torch")

AUDIO = '''import os

import torch
from torch import nn


def scale_table():
    with open(os.path.join(os.path.dirname(__file__), "assets", "scales.txt")) as f:
        return [float(v) for v in f.read().split()]


def lib_dir():
    return os.path.dirname(os.path.abspath(__file__))


class Scaled(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.where = lib_dir()

    def forward(self, x):
        return self.fc(x) * torch.tensor(scale_table())


class Plain(nn.Module):
    def forward(self, x):
        return x * 2
'''


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    root = write_tree(tmp_path_factory.mktemp("repo"), {
        "mfpkg/__init__.py": "",
        "mfpkg/audio.py": AUDIO,
        "mfpkg/assets/scales.txt": "1.0 2.0 3.0\n",
        "mfpkg/assets/unrelated.bin": b"\0",
    })
    work = tmp_path_factory.mktemp("work")
    with BlockExtractor(path_config({"mf": root}), cache_dir=work / "cache",
                        data_dir=work / "data") as ex:
        ex.index()
        yield root, ex.extract_single_block("Scaled"), ex.extract_single_block("Plain")


def test_the_header_names_the_files_and_where_they_go(extracted):
    _, res, plain = extracted
    notes = [n for n in res.generated.notes if "__file__" in n]
    assert notes == [(
        "`__file__` is this file here, not the upstream module, so files looked up beside it "
        "are missing: `scale_table` (mfpkg/audio.py:7) reads mfpkg/assets/scales.txt (as "
        "assets/scales.txt); `lib_dir` (mfpkg/audio.py:12); they go beside this file, at the "
        "path shown, where nnrag writes, saves or validates it; copy them there when you copy "
        "the file")]
    assert notes[0] in res.generated.code  # the header carries it
    assert "unrelated.bin" not in res.generated.code
    assert not [n for n in plain.generated.notes if "__file__" in n]


def test_put_where_the_header_says_the_file_works(extracted, tmp_path):
    root, res, _ = extracted
    path = tmp_path / "Scaled.py"
    path.write_text(res.generated.code)
    spec = importlib.util.spec_from_file_location("mf_scaled", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch
    block = mod.Scaled()
    with pytest.raises(FileNotFoundError):
        block(torch.ones(1, 3))
    (tmp_path / "assets").mkdir()
    shutil.copy(root / "mfpkg/assets/scales.txt", tmp_path / "assets/scales.txt")
    assert block(torch.zeros(1, 3)).shape == (1, 3)
    assert mod.scale_table() == [1.0, 2.0, 3.0]


def test_written_with_out_the_files_go_beside_the_file(extracted, tmp_path):
    """asteroid's ``SingleSrcPMSQE`` loads ``bark_matrix_16k.mat`` from beside its module:
    ``--out DIR`` writes it to DIR at the path the header shows, and the file works there."""
    root, res, plain = extracted
    out = tmp_path / "out"
    res.write(out)
    assert (out / "assets/scales.txt").read_bytes() == (root / "mfpkg/assets/scales.txt"
                                                        ).read_bytes()
    assert not (out / "assets/unrelated.bin").exists()
    assert str(out / "assets/scales.txt") in res.paths
    assert res.generated.spec["files"] == ["assets/scales.txt"]
    spec = importlib.util.spec_from_file_location("mf_scaled_out", out / "Scaled.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch
    assert mod.Scaled()(torch.zeros(1, 3)).shape == (1, 3)
    plain.write(out)
    assert "files" not in plain.generated.spec
    # a file of the same name already there, with other content, is kept and said
    (out / "assets/scales.txt").write_text("9.0 9.0 9.0\n")
    res.notes.clear()
    res.write(out)
    assert (out / "assets/scales.txt").read_text() == "9.0 9.0 9.0\n"
    assert any("kept the existing" in n for n in res.notes)


def test_the_sandbox_has_the_files_beside_the_block(extracted):
    from nnrag_tui.engine.sandbox import Sandbox, SandboxLimits
    from nnrag_tui.engine.validate import Validator

    _, res, _ = extracted
    g = res.generated
    sb = Sandbox(limits=SandboxLimits(import_timeout=20.0, instantiate_timeout=20.0,
                                      forward_timeout=20.0))
    with sb, Validator(sb) as v:
        with_files = v.validate(g.code, g.name, g.spec, files=g.files())
        without = v.validate(g.code, g.name, g.spec)
    assert with_files.level == "forward_ran" and with_files.stage("forward").ok
    assert without.level != "forward_ran" and not without.stage("forward").ok
    assert "scales.txt" in without.stage("forward").diagnostics


def test_the_library_keeps_and_exports_the_files(extracted, tmp_path):
    from nnrag_tui.engine.registry import Registry

    _, res, _ = extracted
    reg = Registry(tmp_path / "lib")
    saved = reg.save(res)
    assert (saved.path / "assets/scales.txt").read_text() == "1.0 2.0 3.0\n"
    assert reg.verify(saved.name) == []
    exported = reg.export(saved.name, tmp_path / "export")
    assert tmp_path / "export/assets/scales.txt" in exported
    assert (tmp_path / "export/assets/scales.txt").read_text() == "1.0 2.0 3.0\n"
    (saved.path / "assets/scales.txt").write_text("tampered")
    assert reg.verify(saved.name) == ["assets/scales.txt: content does not match the manifest"]


def test_validating_a_written_file_reads_the_files_its_spec_lists(extracted, tmp_path, capsys):
    """``nnrag validate DIR/Scaled.py`` after ``extract --out DIR``: the sandbox gets the
    files the spec beside it lists, so the forward pass finds its table as upstream's does."""
    import json

    from nnrag_tui.cli import main

    _, res, _ = extracted
    out = tmp_path / "out"
    res.write(out)
    main(["validate", str(out / "Scaled.py"), "--json", "--timeout", "20"])
    report = json.loads(capsys.readouterr().out)
    assert report["level"] == "forward_ran", report
    (out / "Scaled.spec.json").unlink()  # without the spec, nothing says what goes beside it
    main(["validate", str(out / "Scaled.py"), "--json", "--timeout", "20"])
    report = json.loads(capsys.readouterr().out)
    assert report["level"] != "forward_ran"


def test_the_sandbox_puts_nothing_outside_the_block_folder(tmp_path):
    """A path that climbs out of the block's folder, or an absolute one, is refused (the
    engine never sends one: the rule also guards a hand-made job)."""
    import base64

    from nnrag_tui.engine.modulefiles import is_plain_relative
    from nnrag_tui.engine.sandbox_worker import _put_files

    work = tmp_path / "block"
    work.mkdir()
    data = base64.b64encode(b"x").decode()
    prot: dict = {"notes": []}
    bad = ["../escape.txt", "/tmp/abs.txt", "a//b.txt", "assets/../../up.txt", ""]
    made = _put_files(str(work), {**{b: data for b in bad}, "assets/ok.txt": data}, prot)
    assert made == [str(work / "assets"), str(work / "assets/ok.txt")]
    assert (work / "assets/ok.txt").read_bytes() == b"x"
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "up.txt").exists()
    assert len([n for n in prot["notes"] if n.startswith("refused")]) == len(bad)
    assert [b for b in bad if is_plain_relative(b)] == []
    assert is_plain_relative("assets/ok.txt") and is_plain_relative("ok.txt")


def test_a_folder_found_through_file_brings_the_files_named_elsewhere(tmp_path):
    """torchani's ``paths.py`` has ``_RESOURCES = Path(__file__).resolve().parent /
    "resources"`` and ``constants.py`` opens ``_resources_dir() / "functional_d3bj_constants
    .json"`` as it imports: the statement with ``__file__`` names only the folder, so no file
    came along and three torchani blocks raised FileNotFoundError on import."""
    root = write_tree(tmp_path / "repo", {
        "rpkg/__init__.py": "",
        "rpkg/paths.py": ("from pathlib import Path\n\n"
                          "_RESOURCES = Path(__file__).resolve().parent / \"resources\"\n\n\n"
                          "def resources_dir():\n    return _RESOURCES\n"),
        "rpkg/constants.py": (
            "import json\n\nfrom rpkg.paths import resources_dir\n\n"
            "with open(resources_dir() / \"scales.json\") as f:\n    SCALES = json.load(f)\n"),
        "rpkg/layers.py": ("from torch import nn\n\nfrom rpkg.constants import SCALES\n\n\n"
                           "class Scaled(nn.Module):\n    def forward(self, x):\n"
                           "        return x * SCALES[\"gain\"]\n"),
        "rpkg/resources/scales.json": '{"gain": 3.0}\n',
        "rpkg/resources/other.json": "{}\n",
    })
    out, mod = written_and_imported(tmp_path, root, "Scaled", ["resources/scales.json"])
    assert not (out / "resources/other.json").exists()
    import torch
    assert mod.Scaled()(torch.ones(1)).item() == 3.0


def written_and_imported(tmp_path, root, block: str, files: list[str]):
    """``block`` of the repository at ``root`` extracted with the files its spec must list,
    written with them to ``tmp_path/out``, and imported from there."""
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        res = ex.extract_single_block(block)
    assert res.generated.spec["files"] == files
    out = tmp_path / "out"
    res.write(out)
    spec = importlib.util.spec_from_file_location(f"written_{block}", out / f"{block}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the files are read as the file imports
    return out, mod


def test_a_suffix_found_through_file_brings_the_files_named_without_it(tmp_path):
    """lightly-train's dinov2 configs: ``load_config(name)`` opens ``Path(__file__).parent /
    (name + ".yaml")`` and ``load_and_merge_config`` calls ``load_config(
    "ssl_default_config")``. No literal named a file whole, so none came along and
    ``DepthAnythingDepthEstimation`` raised FileNotFoundError where upstream builds."""
    root = write_tree(tmp_path / "repo", {
        "cpkg/__init__.py": "",
        "cpkg/configs.py": (
            "import json\nimport pathlib\n\n\n"
            "def load_config(config_name):\n"
            "    config_filename = config_name + \".json\"\n"
            "    return json.loads((pathlib.Path(__file__).parent / config_filename)"
            ".read_text())\n\n\n"
            "def merged(name):\n"
            "    return {**load_config(\"defaults\"), **load_config(name)}\n"),
        "cpkg/model.py": (
            "from torch import nn\n\nfrom cpkg.configs import merged\n\n\n"
            "class Configured(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.gain = merged(\"eval/small\")[\"gain\"]\n\n"
            "    def forward(self, x):\n        return x * self.gain\n"),
        "cpkg/defaults.json": '{"gain": 1.0}\n',
        "cpkg/eval/small.json": '{"gain": 3.0}\n',
        "cpkg/eval/large.json": '{"gain": 9.0}\n',
    })
    out, mod = written_and_imported(tmp_path, root, "Configured",
                                    ["defaults.json", "eval/small.json"])
    assert not (out / "eval/large.json").exists()
    import torch
    assert mod.Configured()(torch.ones(1)).item() == 3.0


def test_a_directory_named_by_nothing_else_brings_the_files_named_below_it(tmp_path):
    """enformer's ``DIR = Path(__file__).parents[0]`` names no file or folder itself, and the
    next statement loads ``DIR / "precomputed" / "tf_gammas.pt"`` as the module imports: the
    file that statement names comes along, and a file nothing names does not."""
    root = write_tree(tmp_path / "repo", {
        "epkg/__init__.py": "",
        "epkg/model.py": (
            "import json\nfrom pathlib import Path\n\nfrom torch import nn\n\n"
            "DIR = Path(__file__).parents[0]\n"
            "GAINS = json.loads((DIR / \"precomputed\" / \"gains.json\").read_text())\n\n\n"
            "class Gained(nn.Module):\n    def forward(self, x):\n"
            "        return x * GAINS[\"gain\"]\n"),
        "epkg/precomputed/gains.json": '{"gain": 3.0}\n',
        "epkg/precomputed/other.json": "{}\n",
    })
    out, mod = written_and_imported(tmp_path, root, "Gained", ["precomputed/gains.json"])
    assert not (out / "precomputed/other.json").exists()
    import torch
    assert mod.Gained()(torch.ones(1)).item() == 3.0


def test_a_file_above_the_module_folder_comes_along_in_a_copy_of_the_tree(tmp_path):
    """facenet's ``PNet`` loads ``os.path.join(os.path.dirname(__file__), "../data/pnet.pt")``:
    beside a generated file that path is above its folder, where nnrag writes nothing. The
    module's ``__file__`` is its upstream path in a folder beside the file instead, laid out as
    upstream's tree, and the file goes there: the path resolves as upstream's does."""
    root = write_tree(tmp_path / "repo", {
        "fpkg/__init__.py": "",
        "fpkg/models/__init__.py": "",
        "fpkg/models/net.py": (
            "import os\n\nfrom torch import nn\n\n\nclass PNet(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.path = os.path.join(os.path.dirname(__file__), \"../data/pnet.pt\")\n\n"
            "    def forward(self, x):\n        return x\n"),
        "fpkg/data/pnet.pt": b"\0weights",
    })
    out, mod = written_and_imported(tmp_path, root, "PNet", [
        "r.files/fpkg/data/pnet.pt", "r.files/fpkg/models/net.py"])
    code = (out / "PNet.py").read_text()
    assert "`__file__` in the statements of fpkg/models/net.py is r.files/fpkg/models/net.py " \
        "beside this file" in code
    assert "put it there yourself" not in code
    # (what nnrag wrote: not the ``__pycache__`` importing it leaves where bytecode is written)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts) == [
        "PNet.py", "PNet.spec.json", "r.files/fpkg/data/pnet.pt", "r.files/fpkg/models/net.py"]
    assert (out / "r.files/fpkg/models/net.py").read_bytes() == b""
    with open(mod.PNet().path, "rb") as fh:
        assert fh.read() == b"\0weights"


def test_a_file_reached_from_the_module_path_itself_comes_along(tmp_path):
    """CrypTen's ``CrypTenConfig`` reads ``os.path.join(__file__, "../../../configs/
    default.yaml")``: the path climbs from the module's own path, taken as a folder, to a
    ``configs/`` folder of the source tree beside the package. Resolved from the module's
    folder instead, it left the tree, so nothing came along and the file raised
    FileNotFoundError as it imported, where upstream's module imports."""
    root = write_tree(tmp_path / "repo", {
        "qpkg/__init__.py": "",
        "qpkg/config/__init__.py": "",
        "qpkg/config/config.py": (
            "import os\n\n\nclass Config:\n    PATH = os.path.normpath(\n"
            "        os.path.join(__file__, \"../../../configs/default.yaml\"))\n\n"
            "    def __init__(self):\n        with open(Config.PATH) as fh:\n"
            "            self.scale = float(fh.read().split()[-1])\n\n\ncfg = Config()\n"),
        "qpkg/net.py": (
            "from torch import nn\n\nfrom qpkg.config.config import cfg\n\n\n"
            "class Scaled(nn.Module):\n    def forward(self, x):\n        return x * cfg.scale\n"),
        "configs/default.yaml": "scale: 3\n",
        "configs/other.yaml": "unrelated: 1\n",
    })
    out, mod = written_and_imported(tmp_path, root, "Scaled", [
        "r.files/configs/default.yaml", "r.files/qpkg/config/config.py"])
    assert "`Config` (qpkg/config/config.py:4) reads configs/default.yaml" in \
        (out / "Scaled.py").read_text()
    import torch

    assert torch.equal(mod.Scaled()(torch.ones(2)), torch.full((2,), 3.0))
    assert not (out / "r.files/configs/other.yaml").exists()


def test_a_root_found_through_parents_brings_the_files_named_below_it(tmp_path):
    """ultralytics' ``utils/__init__.py`` binds ``FILE = Path(__file__).resolve()``, ``ROOT =
    FILE.parents[1]`` and reads ``ROOT / "cfg/default.yaml"`` as it imports, so the detection
    models raised FileNotFoundError as the file imported, where upstream's module imports."""
    root = write_tree(tmp_path / "repo", {
        "ypkg/__init__.py": "",
        "ypkg/utils/__init__.py": (
            "from pathlib import Path\n\nFILE = Path(__file__).resolve()\n"
            "ROOT = FILE.parents[1]\nDEFAULT_CFG_PATH = ROOT / \"cfg/default.yaml\"\n"
            "DEFAULT_CFG = DEFAULT_CFG_PATH.read_text()\n"),
        "ypkg/cfg/default.yaml": "scale: 3\n",
        "ypkg/cfg/other.yaml": "unrelated: 1\n",
        "ypkg/nn/__init__.py": "",
        "ypkg/nn/tasks.py": (
            "from torch import nn\n\nfrom ypkg.utils import DEFAULT_CFG\n\n\n"
            "class Detect(nn.Module):\n    def forward(self, x):\n"
            "        return x * int(DEFAULT_CFG.split()[-1])\n"),
    })
    out, mod = written_and_imported(tmp_path, root, "Detect", [
        "r.files/ypkg/cfg/default.yaml", "r.files/ypkg/utils/__init__.py"])
    code = (out / "Detect.py").read_text()
    assert "its statements name ypkg/cfg/default.yaml" in code
    assert "ypkg/utils/__init__.py:3: `__file__` -> upstream's path in the folder" in code
    import torch

    assert mod.DEFAULT_CFG == "scale: 3\n"
    assert torch.equal(mod.Detect()(torch.ones(2)), torch.full((2,), 3.0))
    assert not (out / "r.files/ypkg/cfg/other.yaml").exists()


def test_a_package_searched_recursively_brings_its_files_of_the_names_suffix(tmp_path):
    """ultralytics' ``DetectionModel(cfg="yolo26n.yaml")``: ``yaml_model_load`` drops the scale
    letter and ``check_file`` globs ``ROOT / "**" / "yolo26.yaml"``, ``ROOT`` found through
    ``__file__``. No literal names that file, so it did not come along and the model raised
    FileNotFoundError where upstream builds: every ``.yaml`` of the package comes now, in the
    copy of its tree, and nothing the search cannot find."""
    root = write_tree(tmp_path / "repo", {
        "ypkg/__init__.py": "",
        "ypkg/utils/__init__.py": (
            "from pathlib import Path\n\nFILE = Path(__file__).resolve()\n"
            "ROOT = FILE.parents[1]\n"),
        "ypkg/utils/checks.py": (
            "import glob\n\nfrom ypkg.utils import ROOT\n\n\n"
            "def check_file(file):\n"
            "    files = glob.glob(str(ROOT / \"**\" / file), recursive=True)\n"
            "    if not files:\n        raise FileNotFoundError(f\"'{file}' does not exist\")\n"
            "    return files[0]\n"),
        "ypkg/cfg/models/v1/net.yaml": "width: 3\n",
        "ypkg/cfg/models/v1/net-wide.yaml": "width: 5\n",
        "ypkg/cfg/models/v1/notes.txt": "not searched for\n",
        "ypkg/nn/__init__.py": "",
        "ypkg/nn/tasks.py": (
            "import re\n\nfrom torch import nn\n\nfrom ypkg.utils.checks import check_file\n\n\n"
            "class Detect(nn.Module):\n    def __init__(self, cfg=\"netn.yaml\"):\n"
            "        super().__init__()\n"
            "        path = check_file(re.sub(r\"n\\.yaml$\", \".yaml\", cfg))\n"
            "        with open(path) as fh:\n"
            "            self.width = int(fh.read().split()[-1])\n\n"
            "    def forward(self, x):\n        return x * self.width\n"),
    })
    out, mod = written_and_imported(tmp_path, root, "Detect", [
        "r.files/ypkg/cfg/models/v1/net-wide.yaml", "r.files/ypkg/cfg/models/v1/net.yaml",
        "r.files/ypkg/utils/__init__.py"])
    assert mod.Detect().width == 3
    assert mod.Detect("net-wide.yaml").width == 5
    assert not (out / "r.files/ypkg/cfg/models/v1/notes.txt").exists()


def test_every_file_a_folder_lookup_reads_comes_along_however_many(tmp_path):
    """ludwig's ``_PATH_HERE`` in ``schema/metadata/__init__.py`` loads five YAML files beside
    it as the module imports (``_load("optimizers.yaml")`` ...). The header names four and
    says how many more; all five go beside the file, or its import fails."""
    names = ["a", "b", "c", "d", "e"]
    loads = "".join(f'{n.upper()} = _load("{n}.json")\n' for n in names)
    root = write_tree(tmp_path / "repo", {
        "mpkg/__init__.py": "",
        "mpkg/meta.py": (
            "import json\nimport os\n\n_PATH_HERE = os.path.abspath(os.path.dirname(__file__))\n"
            "\n\ndef _load(name):\n    with open(os.path.join(_PATH_HERE, \"configs\", name)) "
            "as f:\n        return json.load(f)\n\n\n" + loads),
        "mpkg/layers.py": (
            "from torch import nn\n\nfrom mpkg.meta import A, B, C, D, E\n\n\n"
            "class Summed(nn.Module):\n    def forward(self, x):\n"
            "        return x * (A[\"v\"] + B[\"v\"] + C[\"v\"] + D[\"v\"] + E[\"v\"])\n"),
        **{f"mpkg/configs/{n}.json": f'{{"v": {i}}}\n' for i, n in enumerate(names)},
    })
    out, mod = written_and_imported(tmp_path, root, "Summed",
                                    [f"configs/{n}.json" for n in names])
    code = (out / "Summed.py").read_text()
    assert "mpkg/configs/d.json (as configs/d.json) and 1 more" in code
    import torch
    assert mod.Summed()(torch.ones(1)).item() == 10.0


def test_a_torch_hub_repository_beside_the_module_comes_along_whole(tmp_path):
    """controlnet_aux's normalbae ``Encoder`` builds its backbone with ``torch.hub.load(
    os.path.join(os.path.dirname(__file__), 'efficientnet_repo'), ..., source='local')``:
    hub imports that folder's ``hubconf.py`` and the package beside it at run time. Its files
    are Python, which never came along, so the block raised FileNotFoundError where upstream
    builds."""
    root = write_tree(tmp_path / "repo", {
        "hpkg/__init__.py": "",
        "hpkg/encoder.py": (
            "import os\n\nimport torch\nfrom torch import nn\n\n\n"
            "class Encoder(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        repo = os.path.join(os.path.dirname(__file__), 'tiny_repo')\n"
            "        self.body = torch.hub.load(repo, 'tiny', width=3, source='local')\n\n"
            "    def forward(self, x):\n        return self.body(x)\n"),
        "hpkg/tiny_repo/hubconf.py": ("dependencies = ['torch']\n\n"
                                      "from tinynet.model import tiny  # noqa: F401\n"),
        "hpkg/tiny_repo/tinynet/__init__.py": "",
        "hpkg/tiny_repo/tinynet/model.py": (
            "from torch import nn\n\n\ndef tiny(width):\n    return nn.Linear(width, width)\n"),
        "hpkg/tiny_repo/LICENSE": "MIT\n",
        "hpkg/other_repo/hubconf.py": "dependencies = []\n",
    })
    files = ["tiny_repo/LICENSE", "tiny_repo/hubconf.py", "tiny_repo/tinynet/__init__.py",
             "tiny_repo/tinynet/model.py"]
    out, mod = written_and_imported(tmp_path, root, "Encoder", files)
    assert not (out / "other_repo").exists()
    header = (out / "Encoder.py").read_text().split("\n\n", 1)[0]
    assert "loads the torch.hub repository hpkg/tiny_repo (as tiny_repo, its 4 files)" in header
    import torch
    block = mod.Encoder()
    assert block(torch.ones(2, 3)).shape == (2, 3)


@pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")
def test_a_package_read_through_importlib_resources_brings_its_files(tmp_path):
    """audiotools' ``playback.py``: ``from . import templates`` and, as it imports,
    ``importlib_resources.files(templates).joinpath("headers.html").read_text()``, where
    ``templates`` is a package of data files only. The generated file had a module object
    for it with no spec and none of its files, so ``files()`` raised TypeError where upstream
    imports. The object is now the anchor of the package's files, which go beside the file
    in a folder named by the package; read through importlib.resources and its backport."""
    pytest.importorskip("importlib_resources")
    root = write_tree(tmp_path / "repo", {
        "rpkg/__init__.py": "",
        "rpkg/templates/__init__.py": "import os\n\nSEP = os.sep\n",
        "rpkg/templates/scale.txt": "3.0\n",
        "rpkg/templates/extra/shift.txt": "0.5\n",
        "rpkg/other/__init__.py": "from . import ops\n",
        "rpkg/other/ops.py": "def double(x):\n    return 2 * x\n",
        "rpkg/other/unrelated.txt": "no\n",
        "rpkg/render.py": (
            "import importlib.resources\nfrom importlib.resources import read_text\n\n"
            "import importlib_resources as pkg_resources\nimport torch\nfrom torch import nn\n\n"
            "from . import templates\nfrom .other import ops\n\n"
            "SCALE = float(pkg_resources.files(templates).joinpath('scale.txt').read_text())\n"
            "SAME = float(read_text(templates, 'scale.txt'))\n\n\n"
            "def shift():\n"
            "    path = importlib.resources.files(templates) / 'extra' / 'shift.txt'\n"
            "    return float(path.read_text())\n\n\n"
            "class Scaled(nn.Module):\n"
            "    def forward(self, x):\n"
            "        return getattr(ops, 'double')(x) * SCALE * SAME + shift()\n"),
    })
    out, mod = written_and_imported(tmp_path, root, "Scaled", [
        "rpkg.templates/scale.txt", "rpkg.templates/extra/shift.txt"])
    import torch
    assert mod.Scaled()(torch.ones(1)).item() == 18.5
    code = (out / "Scaled.py").read_text()
    header = code.split("\n\n", 1)[0]
    assert ("rpkg.render:11 reads its files through importlib.resources, so it has a spec "
            "that points at the folder rpkg.templates beside this file, where its 2 data files "
            "go (scale.txt, extra/shift.txt)") in header
    # a module object nothing hands to importlib.resources stays a plain one
    assert 'ops.__spec__' not in code and not (out / "rpkg.other").exists()
    # the anchor is a package, as upstream's is: ``files()`` of the stdlib refuses a module
    assert mod.templates.__path__ == [str(out / "rpkg.templates")]
    assert mod.templates.os is mod.os  # what the package binds, as upstream's holds it


def test_sources_joined_from_a_folder_above_come_along_with_the_headers_they_include(tmp_path):
    """easyocr's deformable convolution: ``dcn_dir = os.path.dirname(os.path.dirname(
    __file__))`` in ``DBNet/assets/ops/dcn/functions/deform_conv.py``, then
    ``cpp_extension.load(..., sources=[os.path.join(dcn_dir, 'src', "deform_conv_cpu.cpp"),
    ...])``, and that source includes ``"deform_conv_cpu_kernel.h"``. No literal spelled a path
    (``src/...`` was two of them), the sources lay deeper than the tree is read and no Python
    statement named the header: nothing came along, the compile failed and
    ``DeformConvPack`` raised "Input type is cpu, but 'deform_conv_cpu.*.so' is not imported
    successfully" where upstream's runs."""
    root = write_tree(tmp_path / "repo", {
        "dpkg/__init__.py": "",
        "dpkg/net/assets/ops/dcn/__init__.py": "",
        "dpkg/net/assets/ops/dcn/functions/__init__.py": "",
        "dpkg/net/assets/ops/dcn/functions/kernel.py": (
            "import os\n\nfrom torch import nn\n\n"
            "dcn_dir = os.path.dirname(os.path.dirname(__file__))\n"
            "SOURCES = [os.path.join(dcn_dir, 'src', \"k_cpu.cpp\")]\n\n\n"
            "class Kernel(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        with open(SOURCES[0]) as fh:\n            self.text = fh.read()\n\n"
            "    def forward(self, x):\n        return x\n"),
        "dpkg/net/assets/ops/dcn/src/k_cpu.cpp":
            '#include <torch/extension.h>\n#include "k_kernel.h"\nint k() { return K; }\n',
        "dpkg/net/assets/ops/dcn/src/k_kernel.h": '#include "detail/k_const.h"\n',
        "dpkg/net/assets/ops/dcn/src/detail/k_const.h": "#define K 3\n",
        "dpkg/net/assets/ops/dcn/src/k_cuda.cu": "// not named\n",
    })
    tree = "r.files/dpkg/net/assets/ops/dcn"
    out, mod = written_and_imported(tmp_path, root, "Kernel", [
        f"{tree}/src/k_cpu.cpp", f"{tree}/functions/kernel.py", f"{tree}/src/detail/k_const.h",
        f"{tree}/src/k_kernel.h"])
    assert "int k()" in mod.Kernel().text
    assert (out / tree / "src/k_kernel.h").read_text() == '#include "detail/k_const.h"\n'
    assert (out / tree / "src/detail/k_const.h").read_text() == "#define K 3\n"
    assert not (out / tree / "src/k_cuda.cu").exists()
    code = (out / "Kernel.py").read_text()
    assert "its statements name dpkg/net/assets/ops/dcn/src/k_cpu.cpp" in code
    assert "include headers from their folders, which go with them: " \
        f"{tree}/src/detail/k_const.h, {tree}/src/k_kernel.h" in code


def test_literals_joined_by_a_statement_name_the_path_they_make():
    """The parts a statement joins name one path, however it joins them; a literal that is
    not a part of a path join names nothing more than itself."""
    def joined(code: str) -> set[str]:
        return {w for w in literals(ast.parse(code).body[0]) if "/" in w}

    assert joined("p = os.path.join(d, 'src', \"k.cpp\")") == {"src/k.cpp"}
    assert joined("p = ROOT / 'cfg' / 'models' / 'a.yaml'") == {"cfg/models/a.yaml"}
    assert joined("p = ROOT.joinpath('cfg', 'a.yaml')") == {"cfg/a.yaml"}
    assert joined("p = osp.join(here, '..', 'data', 'x.pt')") == {"../data/x.pt"}
    assert joined("p = os.path.join(d, 'a', name, 'b.txt')") == set()  # no run of two
    assert joined("p = ', '.join(['a', 'b'])") == set()  # str.join joins no path
    assert joined("p = 6 / 2") == set()


def test_included_headers_are_followed_from_the_including_file(tmp_path):
    """Quoted includes are looked up from the including file's folder, and theirs from
    theirs; an include the folder does not have (the compiler's own) and a cycle end it."""
    write_tree(tmp_path, {
        "src/a.cpp": '#include <vector>\n#include "a.h"\n  #  include "cuda_runtime.h"\n',
        "src/a.h": '#include "../common/c.h"\n#include "a.h"\n',
        "common/c.h": '#include "../src/a.cpp"\n',
        "src/unused.h": "",
    })
    assert included_files(str(tmp_path / "src/a.cpp")) == ("../common/c.h", "a.h")
    assert included_files(str(tmp_path / "src/a.py")) == ()


def test_a_header_a_statement_names_itself_is_not_said_to_come_as_an_include(tmp_path):
    """stylegan2-ada's ``bias_act`` names its header beside its sources (``headers=
    ['bias_act.h']``): it comes as a named file, and the header note lists only the
    includes that nothing names."""
    root = write_tree(tmp_path / "repo", {
        "spkg/__init__.py": "",
        "spkg/ops.py": (
            "import os\n\nfrom torch import nn\n\n"
            "FILES = [os.path.join(os.path.dirname(__file__), f) for f in "
            "['bias_act.cpp', 'bias_act.h']]\n\n\n"
            "class Op(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.sizes = [os.path.getsize(f) for f in FILES]\n\n"
            "    def forward(self, x):\n        return x\n"),
        "spkg/bias_act.cpp": '#include "bias_act.h"\n#include "util.h"\n',
        "spkg/bias_act.h": "#pragma once\n",
        "spkg/util.h": "#pragma once\n",
    })
    out, mod = written_and_imported(tmp_path, root, "Op", ["bias_act.cpp", "bias_act.h",
                                                           "util.h"])
    assert mod.Op().sizes == [40, 13]
    assert "which go with them: util.h\n" in (out / "Op.py").read_text()


def test_a_header_included_from_above_the_file_s_folder_is_named_not_dropped(tmp_path):
    """A source beside the module includes ``"../include/k.h"``: beside the generated file
    that is above its folder, where nnrag writes nothing. The header says where it goes."""
    root = write_tree(tmp_path / "repo", {
        "hpkg/__init__.py": "",
        "hpkg/ops/__init__.py": "",
        "hpkg/ops/k.py": (
            "import os\n\nfrom torch import nn\n\n"
            "SOURCE = os.path.join(os.path.dirname(__file__), 'k.cpp')\n\n\n"
            "class K(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.size = os.path.getsize(SOURCE)\n\n"
            "    def forward(self, x):\n        return x\n"),
        "hpkg/ops/k.cpp": '#include "../include/k.h"\n#include "k_impl.h"\n',
        "hpkg/ops/k_impl.h": "#pragma once\n",
        "hpkg/include/k.h": "#pragma once\n",
    })
    out, mod = written_and_imported(tmp_path, root, "K", ["k.cpp", "k_impl.h"])
    assert mod.K().size == 46
    assert ("include headers from their folders, which go with them: k_impl.h; and "
            "../include/k.h (from this file's folder), above it, where nnrag does not write: "
            "put it there yourself") in (out / "K.py").read_text()
