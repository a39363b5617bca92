"""Imports generated block files in fresh module namespaces: one interpreter imports torch once
and forks a child per file (as a fresh ``python -I`` would see it, minus the 1.5 s torch import).
timm and torchvision are blocked so a file cannot lean on an installed copy.

Usage: python -I bench/import_check.py FILE... ; prints one JSON line per file."""

import importlib.abc
import importlib.util
import json
import os
import sys


class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("timm", "torchvision"):
            raise ImportError(f"{name} is blocked in the import check")
        return None


def main(paths):
    sys.meta_path.insert(0, _Block())
    import torch  # noqa: F401  (warm once, fork per file)

    for path in paths:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                torch.set_num_threads(1)
                spec = importlib.util.spec_from_file_location("block_under_test", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                msg = {"ok": True}
            except BaseException as exc:  # noqa: BLE001
                msg = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
            os.write(w, json.dumps(msg).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        res = json.loads(data or b'{"ok": false, "error": "crashed"}')
        res["path"] = path
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
