"""A module whose lines end with CRLF upstream (speechbrain's huggingface integrations) is
copied with LF, as the rest of the file: one file, one kind of line ending, said in the
header. Its definitions are otherwise the upstream text.

Lines end where Python's parser ends them: a form feed (a page break between definitions), a
vertical tab or a Unicode line separator in a string or a comment ends none, though
``str.splitlines`` ends one there."""

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


def _extracted(tmp_path: Path, package: str, files: dict[str, str]):
    """The block ``Net`` of ``package`` (its modules ``files``, written byte for byte)."""
    pkg = tmp_path / "repo" / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_bytes(b"")
    for name, text in files.items():
        (pkg / name).write_bytes(text.encode())
    cfg = parse_config({package: {"path": str(tmp_path / "repo"), "paths": [package]}})
    with BlockExtractor(cfg, cache_dir=tmp_path / "c", data_dir=tmp_path / "c" / "data") as ex:
        ex.index()
        res = ex.extract_single_block("Net", tmp_path / "out")
    assert res.ok, res.error
    return res


def _net_output(res, name: str):
    """``Net()(torch.ones(2))`` of the generated file, imported as ``name``."""
    import torch

    spec = importlib.util.spec_from_file_location(name, res.paths[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Net()(torch.ones(2))


def test_a_crlf_module_is_copied_with_lf(tmp_path: Path) -> None:
    res = _extracted(tmp_path, "crpkg", {"net.py": CRLF, "scale.py": LF})
    code = res.generated.code
    assert "\r" not in code
    assert CRLF.replace("\r\n", "\n").split("\n\n\n", 1)[1].rstrip() in code
    assert "# note: crpkg/net.py ends its lines with CRLF upstream; here every line ends " \
        "with LF" in code
    assert "crpkg/scale.py" not in code.split("# note:", 1)[1]
    assert _net_output(res, "crlf_net").tolist() == [3.0, 3.0]


PAGED = (
    "import torch\n"
    "from torch import nn\n"
    "\n"
    "from . import layers\n"
    "\x0c\n"
    "# helpers\x0b for the net\n"
    "def double(x):\n"
    "    return 2 * x\n"
    "\n"
    "\x0c\n"
    "class Net(nn.Module):\n"
    '    """Sums\u2028and doubles\x85(a docstring pasted from a web page)."""\n'
    "\n"
    "    def forward(self, x):\n"
    "        # \x1c\u2029\n"
    "        return layers.Scale()(double(x)) + 1\n"
)


def test_a_form_feed_or_a_line_separator_ends_no_line(tmp_path: Path) -> None:
    res = _extracted(tmp_path, "ffpkg", {"net.py": PAGED, "layers.py": LF})
    assert (res.block.line, res.block.end_line) == (11, 16)
    code = res.generated.code
    assert "ffpkg/net.py, " in code and ": 7-8 double, 11-16 Net" in code
    upstream_net = PAGED.split("\x0c\n")[2]
    assert upstream_net.replace("layers.Scale()", "Scale()") in code  # the one rewrite
    assert PAGED.split("\x0c\n")[1].split("\n", 1)[1] in code  # ``double``, as upstream
    assert _net_output(res, "paged_net").tolist() == [5.0, 5.0]


def test_source_lines_cut_where_ast_numbers_lines() -> None:
    import ast

    from nnrag_tui.engine.lines import source_lines

    for text in (PAGED, CRLF, "x = 1\r\ny = '\x0c'\rz = 3", "", "a = 1"):
        lines = source_lines(text, keepends=True)
        assert "".join(lines) == text
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.stmt) and node.lineno == node.end_lineno:
                row = lines[node.lineno - 1].encode()
                assert row[node.col_offset:node.end_col_offset].decode() == \
                    ast.get_source_segment(text, node)
        assert source_lines(text) == [ln.rstrip("\r\n") for ln in lines]
