"""Imports generated block files in fresh module namespaces: one interpreter imports torch once
and forks a child per file (as a fresh ``python -I`` would see it, minus the 1.5 s torch import).
timm and torchvision are hidden so a file cannot lean on an installed copy.

A file that takes longer than ``TIMEOUT`` seconds (``--timeout S``) to import fails, said so: cogdl's
operators compile a C++ extension as they import, and a compile killed before (a timed-out
comparison) leaves torch's build lock behind, on which the next import waits forever.

Usage: python -I bench/import_check.py [--timeout S] FILE... ; prints one JSON line per
file."""

import importlib.abc
import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # -I leaves the script's folder out

from forked import run_forked  # noqa: E402


BLOCKED = ("timm", "torchvision")
TIMEOUT = 120.0  # seconds per file


class _Hide(importlib.abc.MetaPathFinder):
    """Wraps one of the interpreter's finders so that the blocked packages are not there, as
    on a machine without them: ``importlib.util.find_spec`` answers None (transformers asks it
    whether torchvision is installed) and an import raises ModuleNotFoundError."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None
        return self.inner.find_spec(name, path, target)

    def __getattr__(self, name):  # find_distributions (importlib.metadata), invalidate_caches
        return getattr(self.inner, name)


def main(paths, timeout: float = TIMEOUT):
    sys.meta_path[:] = [_Hide(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]
    import torch  # noqa: F401  (warm once, fork per file)

    for path in paths:
        def child(path=path) -> dict:
            # what the file prints when it imports (ultralytics' settings notice) goes to
            # stderr: stdout carries only this script's JSON lines
            sys.stdout.flush()
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            torch.set_num_threads(1)
            # the command line of a fresh ``python -I -c "import NAME"``, not this script's
            # list of files: PyTorch-GAN's scripts define their models beside a module-level
            # ``opt = parser.parse_args()``, which the file keeps and runs as it imports
            sys.argv = ["-c"]
            spec = importlib.util.spec_from_file_location("block_under_test", path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules["block_under_test"] = mod  # as an import would: dataclasses look here
            spec.loader.exec_module(mod)
            return {"ok": True}

        res, status = run_forked(child, timeout=timeout)
        if res is None:
            res = {"ok": False, "error": f"no import after {timeout:g} s" if status == "timeout"
                   else f"the child {status}"}
        elif "error" in res:
            res["ok"] = False
        res["path"] = path
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--timeout"]:
        main(args[2:], float(args[1]))
    else:
        main(args)
