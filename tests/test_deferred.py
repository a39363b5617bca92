"""The function that runs a lazily imported module's code is named after the module, and two
modules of the same name (peft's ``lora/bnb.py`` and ``adalora/bnb.py``) get names a reader
can tell apart. The golden case ``deferred_code`` covers the whole file."""

import pytest

from nnrag_tui.engine.deferred import _names, unannotated


def test_the_runner_is_named_after_its_module_and_clashes_take_the_package():
    assert _names("peft.tuners.lora.bnb", set()) == ("_run_bnb", "_bnb_ran")
    taken = {"_run_bnb", "_bnb_ran"}
    assert _names("peft.tuners.adalora.bnb", taken) == ("_run_adalora_bnb", "_adalora_bnb_ran")
    taken |= {"_run_adalora_bnb"}
    assert _names("peft.tuners.adalora.bnb", taken) == ("_run_adalora_bnb_2",
                                                        "_adalora_bnb_2_ran")
    # a name the file already uses for something else is never taken
    assert _names("pkg._private", {"_run_private"}) == ("_run_pkg_private", "_pkg_private_ran")
    assert _names("top", {"_run_top"}) == ("_run_top_2", "_top_2_ran")
    # a module named by a file no import statement could name is still an identifier here
    assert _names("scripts.train-net", set()) == ("_run_train_net", "_train_net_ran")


def _extract_net(tmp_path, limits: str) -> str:
    from helpers import extract_tree

    return extract_tree(tmp_path, {
        "apkg/__init__.py": "",
        "apkg/limits.py": limits,
        "apkg/net.py": ("from torch import nn\n\n\nclass Net(nn.Module):\n"
                        "    def forward(self, x):\n        from .limits import limit\n"
                        "        return x * limit()\n"),
    }).generated.code


def test_code_a_function_cannot_hold_stays_at_the_top(tmp_path):
    """``LIMIT: int`` with no value cannot name a global inside a function: that module's
    code stays where it was, and the header says it runs as the file is imported."""
    code = _extract_net(tmp_path, "import os\n\nif os.sep:\n    LIMIT: int\n    LIMIT = 3\n\n\n"
                                  "def limit():\n    return LIMIT\n")
    assert "\nif os.sep:\n    LIMIT: int\n    LIMIT = 3\n" in code and "_run_limits" not in code
    assert "here its lines 3-5 run when this file is imported" in code


def test_an_annotated_assignment_runs_in_the_function_without_its_annotation(tmp_path):
    """``LIMIT: int = 3`` becomes ``LIMIT = 3`` in the function that runs the module's code
    at the first import, and the header lists that rewrite; the file then runs it there."""
    code = _extract_net(tmp_path, "import os\n\nif os.sep:\n    LIMIT: int = 3\n"
                                  "    SIZES: dict[str, int] = {\"a\": LIMIT}\n\n\n"
                                  "def limit():\n    return LIMIT + SIZES[\"a\"]\n")
    assert "    if os.sep:\n        LIMIT = 3\n        SIZES = {\"a\": LIMIT}\n" in code
    assert "global _limits_ran, LIMIT, SIZES" in code
    assert ("apkg/limits.py:3: indented, inside `_run_limits()`, which the imports of its "
            "module inside functions call first (apkg/net.py:6), as upstream runs it then; the "
            "annotations of the names it assigns dropped") in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    assert "LIMIT" not in namespace
    import torch
    assert namespace["Net"]()(torch.ones(1)).item() == 6.0
    assert namespace["LIMIT"] == 3


def test_the_runner_takes_no_name_a_kept_statement_already_spells(tmp_path):
    """The runner's name must not be one upstream's code already has, in code, a string or a
    comment: ``_run_limits`` spelled in the module's function gives the runner the package's
    name too, ``_run_apkg_limits``. The words of every statement are kept per statement, as each closure
    that holds it asks."""
    code = _extract_net(tmp_path, "import os\n\nif os.sep:\n    LIMIT = 3\n\n\n"
                                  "def limit():\n    # not _run_limits, nor _limits_ran\n"
                                  "    return LIMIT\n")
    assert "def _run_apkg_limits():" in code and "global _apkg_limits_ran, LIMIT" in code
    assert "def _run_limits():" not in code


def test_an_assignment_that_calls_the_corpus_runs_at_the_first_import(tmp_path):
    """BigVGAN's ``cuda/activation1d.py``, imported only inside the function that asks for
    the CUDA kernel, builds it as it runs: ``anti_alias_activation_cuda = load.load()``,
    which fails without CUDA. Upstream's model imports on a CPU; so does the file, which
    runs that assignment in the function its import calls. An assignment that calls only
    outside the corpus stays at the top."""
    code = _extract_net(tmp_path, (
        "import logging\n\n_logger = logging.getLogger(__name__)\n\n\n"
        "def build():\n    raise RuntimeError(\"no CUDA here\")\n\n\n"
        "kernel = build()\n\n\n"
        "def limit():\n    _logger.info('limit')\n    return kernel\n"))
    assert "\n_logger = logging.getLogger(__name__)\n" in code
    assert "global _limits_ran, kernel\n" in code
    assert "here its lines 10-10 run in `_run_limits()`" in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)  # upstream's module imports too
    import torch
    with pytest.raises(RuntimeError, match="no CUDA here"):
        namespace["Net"]()(torch.ones(1))


def test_an_import_in_code_that_never_runs_keeps_no_group_in_its_try(tmp_path):
    """A module needing a package that may be missing, imported inside a function of the
    network and inside one of a class that only an ``if TYPE_CHECKING:`` import leads to
    (nerfstudio's trainer): that class never runs, so the module still runs in its function
    at the network's import, not in a ``try`` as the file is imported."""
    from helpers import path_config, write_tree

    from nnrag_tui.engine.extractor import BlockExtractor

    root = write_tree(tmp_path / "repo", {
        "apkg/__init__.py": "",
        "apkg/kern.py": "import nnrag_missing_triton as triton\n\n\ndef fast(x):\n"
                        "    return triton.go(x)\n",
        "apkg/trainer.py": "class Trainer:\n    def step(self, x):\n"
                           "        from .kern import fast\n\n        return fast(x)\n",
        "apkg/net.py": ("from typing import TYPE_CHECKING\n\nfrom torch import nn\n\n"
                        "if TYPE_CHECKING:\n    from .trainer import Trainer\n\n\n"
                        "class Net(nn.Module):\n"
                        "    def forward(self, x, trainer: \"Trainer\" = None):\n"
                        "        if trainer is not None:\n            from .kern import fast\n\n"
                        "            return fast(x)\n        return x\n"),
    })
    with BlockExtractor(path_config({"r": root}), cache_dir=tmp_path / "cache",
                        data_dir=tmp_path / "data") as ex:
        ex.index()
        code = ex.extract_single_block("Net").generated.code
    assert "class Trainer:" in code and "of its own" not in code
    assert "\ndef _run_kern():\n" in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    import pytest
    import torch
    net = namespace["Net"]()
    assert net(torch.ones(1)).item() == 1.0
    with pytest.raises(ModuleNotFoundError, match="nnrag_missing_triton"):
        net(torch.ones(1), trainer=object())


def test_only_what_a_function_cannot_hold_loses_its_annotation():
    """``X: T = v`` at the module's level, in any of its blocks, becomes ``X = v``; an
    annotation in a function or a class body, a name in parentheses, and one without a value
    stay as they are, and the text stays upstream's elsewhere."""
    text = ("if fast:\n    SIZES: dict[str, int] = {  # sizes\n        'a': 1,\n    }\n"
            "else:\n    (LIMIT): int = 3\n    WIDTH: int\n"
            "    def f(x: int = 1):\n        y: int = x\n        return y\n")
    assert unannotated(text) == text.replace("SIZES: dict[str, int] = {", "SIZES = {")
    compile("def _f():\n    global SIZES, LIMIT, f\n" + "\n".join(
        "    " + line for line in unannotated(text.replace("    WIDTH: int\n", "")).splitlines()),
        "<t>", "exec")


def _kern_net(tmp_path, init: str) -> str:
    from helpers import extract_tree

    return extract_tree(tmp_path, {
        "apkg/__init__.py": init,
        "apkg/kern.py": "import nnrag_missing_triton as triton\n\n\ndef fast(x):\n"
                        "    return triton.go(x)\n",
        "apkg/net.py": ("from torch import nn\n\n\nclass Net(nn.Module):\n"
                        "    def forward(self, x, fast_path=False):\n"
                        "        if fast_path:\n            from .kern import fast\n\n"
                        "            return fast(x)\n        return x\n"),
    }).generated.code


def test_a_module_the_package_imports_runs_as_the_file_is_imported(tmp_path):
    """solo's ``methods/base.py`` imports ``utils/backbones.py`` (which needs timm, and
    registers its models in timm's registry) only inside ``__init__``, but ``solo/__init__.py``
    imports ``solo.utils``, whose ``__init__`` imports ``backbones``: upstream's import of any
    method runs it, and fails without timm. So does the file's, rather than deferring that
    module to the first call and saying upstream imports it only inside functions."""
    code = _kern_net(tmp_path, "from . import kern\n")
    assert "_run_kern" not in code and "imported only" not in code
    assert "\nimport nnrag_missing_triton as triton\n" in code
    with pytest.raises(ModuleNotFoundError, match="nnrag_missing_triton"):
        exec(compile(code, "Net.py", "exec"), {})


def test_a_module_the_package_imports_under_a_guard_still_runs_at_the_first_call(tmp_path):
    """Where the package's ``__init__`` imports it in a ``try`` that catches ImportError,
    upstream's import does without the package: the module still runs in its function at
    the first import inside a function, and the file imports without the package."""
    code = _kern_net(tmp_path, "try:\n    from . import kern\nexcept ImportError:\n    pass\n")
    assert "\ndef _run_kern():\n" in code
    namespace: dict = {}
    exec(compile(code, "Net.py", "exec"), namespace)
    import torch
    net = namespace["Net"]()
    assert net(torch.ones(1)).item() == 1.0
    with pytest.raises(ModuleNotFoundError, match="nnrag_missing_triton"):
        net(torch.ones(1), fast_path=True)
