"""A module whose lines end with CRLF upstream (speechbrain's huggingface integrations) is
copied with LF, as the rest of the file: one file, one kind of line ending, said in the
header. Its definitions are otherwise the upstream text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import BlockExtractor

CRLF = (
    "import torch\r\n"
    "from torch import nn\r\n"
    "\r\n"
    "from .scale import Scale\r\n"
    "\r\n"
    "\r\n"
    "class Net(nn.Module):\r\n"
    '    """Docstring\r\n'
    '    on two lines."""\r\n'
    "\r\n"
    "    def forward(self, x):\r\n"
    "        return Scale()(x) + 1\r\n"
)
LF = "from torch import nn\n\n\nclass Scale(nn.Module):\n    def forward(self, x):\n        return 2 * x\n"


def test_a_crlf_module_is_copied_with_lf(tmp_path: Path) -> None:
    pkg = tmp_path / "repo" / "crpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_bytes(b"")
    (pkg / "net.py").write_bytes(CRLF.encode())
    (pkg / "scale.py").write_bytes(LF.encode())
    cfg = parse_config({"crlf": {"path": str(tmp_path / "repo"), "paths": ["crpkg"]}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "c", data_dir=tmp_path / "c" / "data") as ex:
        ex.index()
        res = ex.extract_single_block("Net", tmp_path / "out")
    assert res.ok, res.error
    code = res.generated.code
    assert "\r" not in code
    assert CRLF.replace("\r\n", "\n").split("\n\n\n", 1)[1].rstrip() in code
    assert "# note: crpkg/net.py ends its lines with CRLF upstream; here every line ends " \
        "with LF" in code
    assert "crpkg/scale.py" not in code.split("# note:", 1)[1]
    spec = importlib.util.spec_from_file_location("crlf_net", res.paths[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch

    assert torch.equal(mod.Net()(torch.ones(2)), torch.full((2,), 3.0))
