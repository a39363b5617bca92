"""The same input gives the same bytes: fresh interpreters with different string-hash seeds
(Python randomises the order of a set of strings per process) write identical files.

The fixture has the shape that once broke it: one statement uses ``tensors.Image`` and
``tensors.Video``, two chains of one length through a corpus package, whose definitions live
in two modules (torchvision's ``tv_tensors``); their order in the file came from a set."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import ROOT, write_tree

FILES = {
    "tvp/__init__.py": "",
    "tvp/tensors/__init__.py": "from ._image import Image\nfrom ._video import Video\n",
    "tvp/tensors/_image.py": "import torch\n\n\nclass Image(torch.Tensor):\n    pass\n",
    "tvp/tensors/_video.py": "import torch\n\n\nclass Video(torch.Tensor):\n    pass\n",
    "tvp/kinds.py": "from tvp import tensors\n\nKINDS = (tensors.Video, tensors.Image)\n",
    "tvp/blocks.py": (
        "from torch import nn\n\nfrom tvp import tensors\nfrom tvp.kinds import KINDS\n\n\n"
        "class Holder(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return isinstance(x, (tensors.Image, tensors.Video)) or isinstance(x, KINDS)\n"
    ),
}
SEEDS = range(8)


def test_extraction_gives_the_same_bytes_whatever_the_hash_seed(tmp_path):
    write_tree(tmp_path / "repo", FILES)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"tvp": {"path": str(tmp_path / "repo")}}))
    cmd = [sys.executable, "-m", "nnrag_tui", "extract", "--block", "tvp.blocks:Holder",
           "--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--no-validate",
           "--stdout"]
    outputs = set()
    for seed in SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert "class Image(torch.Tensor):" in run.stdout
        outputs.add(run.stdout)
    assert len(outputs) == 1
