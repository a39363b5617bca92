"""A definition inlined under a name that a function binds for itself would be captured: the
function's reads of it would find its own local instead. BigVGAN's ``AMPBlock1.__init__`` does
``from .cuda.activation1d import Activation1d as CudaActivation1d`` and then binds a local
``Activation1d`` (the CUDA class or the imported torch one), and both upstream classes are
named ``Activation1d``. Nor may an import whose definition is inlined under the name it binds
be dropped where its function binds that name otherwise too."""

import subprocess
import sys

from helpers import extract_tree

FILES = {
    "pkg/__init__.py": "",
    "pkg/torch_act.py": (
        "import torch.nn as nn\n\n\n"
        "class Activation1d(nn.Module):\n"
        "    kind = 'torch'\n\n"
        "    def forward(self, x):\n"
        "        return x\n"),
    "pkg/cuda_act.py": (
        "import torch.nn as nn\n\n\n"
        "class Activation1d(nn.Module):\n"
        "    kind = 'cuda'\n\n"
        "    def forward(self, x):\n"
        "        return -x\n"),
    "pkg/net.py": (
        "import torch.nn as nn\n\n"
        "from .torch_act import Activation1d as TorchActivation1d\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, use_cuda_kernel=False):\n"
        "        super().__init__()\n"
        "        if use_cuda_kernel:\n"
        "            from .cuda_act import Activation1d as CudaActivation1d\n\n"
        "            Activation1d = CudaActivation1d\n"
        "        else:\n"
        "            Activation1d = TorchActivation1d\n"
        "        self.act = Activation1d()\n\n"
        "    def forward(self, x):\n"
        "        return self.act(x)\n"),
}


def run_net(tmp_path, code: str, calls: str) -> list[str]:
    """Runs the generated file ``code``, then prints ``calls`` (which read ``Net``)."""
    out = tmp_path / "Net.py"
    out.write_text(code, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-I", "-c",
         "import runpy; Net = runpy.run_path(%r)['Net']; print(%s)" % (str(out), calls)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.split()


def test_an_import_inside_a_function_is_not_captured_by_the_function_s_locals(tmp_path):
    result = extract_tree(tmp_path, FILES, "Net")
    code = result.generated.code
    assert run_net(tmp_path, code, "Net(use_cuda_kernel=True).act.kind, Net().act.kind") == [
        "cuda", "torch"]
    # the local keeps its name; the inlined classes take others
    assert "            Activation1d = CudaActivation1d\n" in code
    assert "class Activation1d(" not in code


def test_an_import_inside_a_function_is_kept_where_the_function_binds_its_name_otherwise(
        tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/fast.py": "def impl(x):\n    return x + 1\n",
        "pkg/net.py": (
            "import torch.nn as nn\n\n\n"
            "def slow(x):\n    return x + 2\n\n\n"
            "class Net(nn.Module):\n"
            "    def forward(self, x, fast=True):\n"
            "        if fast:\n"
            "            from .fast import impl\n"
            "        else:\n"
            "            impl = slow\n"
            "        return impl(x)\n\n"
            "    def again(self, x):\n"
            "        from .fast import impl\n"
            "        return impl(x)\n"),
    }
    code = extract_tree(tmp_path, files, "Net").generated.code
    assert run_net(tmp_path, code, "Net()(1), Net()(1, fast=False), Net().again(1)") == [
        "2", "3", "2"]
