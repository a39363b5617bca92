"""Which generated files build a C++ extension as they import (``builds_at_import``): their
import is given the time a build takes in the sandbox (``SandboxLimits.build_timeout``)."""

from __future__ import annotations

import textwrap

from nnrag_tui.engine.extensions import builds_at_import


def line(code: str) -> int | None:
    return builds_at_import(textwrap.dedent(code))


def test_a_build_run_at_import_is_found_however_the_builder_is_named():
    assert line("""
        import os
        from torch.utils.cpp_extension import load
        dcn_dir = os.path.dirname(__file__)
        try:
            deform_conv_cpu = load(name="deform_conv_cpu", sources=["a.cpp"])
        except Exception:
            deform_conv_cpu = None
        """) == 6
    assert line("import torch.utils.cpp_extension as ce\nif True:\n    ce.load_inline('a', '')\n") == 3
    assert line("from torch.utils import cpp_extension\nclass K:\n"
                "    lib = cpp_extension.load('k', ['k.cpp'])\n") == 3
    assert line("import torch\nX = torch.utils.cpp_extension.load('a', [])\n") == 2
    assert line("from torch.utils.cpp_extension import load_inline as li\nli('a', '')\n") == 2


def test_a_build_that_does_not_run_at_import_or_is_not_torchs_is_not():
    assert line("from torch.utils.cpp_extension import load\n"
                "def build():\n    return load(name='a', sources=[])\n") is None
    assert line("from torch.utils.cpp_extension import load\nf = lambda: load('a', [])\n") is None
    assert line("import json\nfrom torch.utils.cpp_extension import CppExtension\n"
                "cfg = json.load(open('c.json'))\n") is None
    assert line("import torch\nm = torch.hub.load('repo', 'model')  # cpp_extension\n") is None
    assert line("this is not python: cpp_extension.load(") is None
