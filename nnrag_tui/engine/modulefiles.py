"""Files that upstream code finds beside its own module through ``__file__``.

whisper's ``mel_filters`` opens ``os.path.join(os.path.dirname(__file__), "assets",
"mel_filters.npz")``, torch_geometric's MessagePassing renders ``propagate.jinja`` from its own
directory, stylegan2-ada compiles ``bias_act.cpp`` from there. Inlined into a generated file,
``__file__`` is that file, and the files are not beside it. The generated file cannot carry
them, so its header says which definitions look files up this way and, where the statement
names them in string literals (whole, or as parts it joins: ``os.path.join(dcn_dir, 'src',
"deform_conv_cpu.cpp")``), which upstream files those are and where to put them. A C++ or
CUDA source among them brings the headers it includes from its folder, as compiling it needs.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.nodecache import per_node

MAX_DEPTH = 3  # directories below the module's own that are searched
MAX_FILES = 5000  # per directory tree, so that a huge data directory costs little
MAX_SHOWN = 4  # files the header names per statement (all of them go beside the file)
MAX_ABOVE = 50  # files above a module's directory that its literals name (``above``)
MAX_SEARCHED = 500  # files of a package that code searches recursively (``above``)


def is_plain_relative(rel: str) -> bool:
    """Whether ``rel`` is a path below a folder: relative, without ``..`` (where a file found
    beside a module may be written beside the generated file)."""
    parts = rel.replace("\\", "/").split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts \
        and not Path(rel).is_absolute()


@per_node
def uses_module_file(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__file__" for n in treewalk.walk(node))


class ModuleFiles:
    """The non-Python files under each module directory of a source tree, read once."""

    def __init__(self) -> None:
        self._trees: dict[str, list[str]] = {}
        self._hubs: dict[str, list[str] | None] = {}  # folder -> its files, if a hub repo

    def tree(self, directory: str) -> list[str]:
        hit = self._trees.get(directory)
        if hit is None:
            hit = self._trees[directory] = _data_files(directory)
        return hit

    def named(self, root: str, relpath: str, node: ast.stmt,
              elsewhere: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """(path from the source root, path from the module's directory) of each file under
        the module's directory that a string literal of ``node`` names, whole or as its tail
        (``"mel_filters.npz"`` names ``assets/mel_filters.npz``). Where a literal of ``node``
        names a directory instead (torchani's ``_RESOURCES = Path(__file__).resolve().parent /
        "resources"``), the files in it that a literal of ``elsewhere`` names (the other
        statements that come along: ``_resources_dir() / "atomic_constants.json"``). Where a
        literal of ``node`` is a file suffix (lightly-train's ``load_config(config_name)``
        opens ``Path(__file__).parent / (config_name + ".yaml")``), the files that a literal
        of ``elsewhere`` names with that suffix added (``load_config("ssl_default_config")``,
        ``config="eval/vitb14_pretrain"``)."""
        module_dir = os.path.dirname(relpath)
        files = self.tree(os.path.join(root, module_dir))
        if not files:
            return []
        wanted = literals(node)
        found = {f for f in files for w in wanted if f == w or f.endswith("/" + w)}
        folders = {w for w in wanted if any(f.startswith(w + "/") for f in files)}
        found |= {f for f in files for d in folders if f.startswith(d + "/")
                  for w in elsewhere if f.endswith("/" + w)}
        suffixes = {w for w in wanted if _SUFFIX.fullmatch(w)}
        found |= {f for f in files for x in suffixes if f.endswith(x)
                  for w in elsewhere if f == w + x or f.endswith(f"/{w}{x}")}
        if not found and not folders and not any(w.startswith("../") for w in wanted):
            # enformer's ``DIR = Path(__file__).parents[0]``, named by nothing but the
            # directory: the files the other statements name under it (``DIR / "precomputed"
            # / "tf_gammas.pt"``)
            found = {f for f in files for w in elsewhere if f == w or f.endswith("/" + w)}
        return [(Path(module_dir, f).as_posix(), f) for f in sorted(found)]

    def hub_repositories(self, root: str, relpath: str, node: ast.stmt
                         ) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """Each torch.hub repository, a folder with a ``hubconf.py``, that a string literal of
        ``node`` names beside the module (controlnet_aux's ``torch.hub.load(os.path.join(
        os.path.dirname(__file__), 'efficientnet_repo'), ..., source='local')``): (its path
        from the source root, from the module's directory, and the same two paths of each of
        its files). Hub imports its ``hubconf.py`` from there at run time, with the modules
        beside it, so the folder comes along whole, Python files included."""
        module_dir = os.path.dirname(relpath)
        out = []
        for w in sorted(literals(node)):
            if not is_plain_relative(w):
                continue
            folder = os.path.join(root, module_dir, w)
            if folder not in self._hubs:  # read once: the statement comes with every block
                self._hubs[folder] = _folder_files(folder) \
                    if os.path.isfile(os.path.join(folder, "hubconf.py")) else None
            files = self._hubs[folder]
            if files is not None:
                up = Path(module_dir, w).as_posix()
                out.append((up, w, [(f"{up}/{f}", f"{w}/{f}") for f in files]))
        return out

    @staticmethod
    def outside(root: str, relpath: str, node: ast.stmt) -> list[tuple[str, str]]:
        """(path from the source root, path as written) of each file a string literal of
        ``node`` names above the module's directory (facenet's ``os.path.join(
        os.path.dirname(__file__), "../data/pnet.pt")``, or from the module's own path as a
        folder: CrypTen's ``os.path.join(__file__, "../../../configs/default.yaml")``, a
        file of the source tree's ``configs/`` beside the ``crypten/`` package). At their
        path from the module's folder they would go outside the folder of the generated file:
        the module's ``__file__`` moves into a copy of upstream's tree instead, where they go
        (``_ClosureBuilder.relocations``)."""
        module_dir = os.path.dirname(relpath)
        out = []
        for w in sorted(literals(node)):
            if not w.startswith("../"):
                continue
            for base in (module_dir, relpath):
                up = os.path.normpath(os.path.join(base, w)).replace(os.sep, "/")
                if not up.startswith("../") and os.path.isfile(os.path.join(root, up)):
                    out.append((up, w))
                    break
        return out

    def above(self, root: str, relpath: str, wanted: frozenset[str],
              searched: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """(path from the source root, the literal) of each file of the module's top-level
        package, outside the module's own directory, that a literal of ``wanted`` names as a
        path (``"cfg/default.yaml"``, whole or as its tail): ultralytics' ``ROOT =
        Path(__file__).resolve().parents[1]`` and ``DEFAULT_CFG_PATH = ROOT /
        "cfg/default.yaml"`` in ``ultralytics/utils/__init__.py`` read
        ``ultralytics/cfg/default.yaml``; at most ``MAX_ABOVE``. Where code searches that
        package recursively for the file names of ``searched`` (``check_file("yolo26n.yaml")``
        globs ``ROOT / "**" / file`` for the name ``yaml_model_load`` made of it,
        ``yolo26.yaml``), every file of the package with one of their suffixes too, as the
        search may find any of them; at most ``MAX_SEARCHED``."""
        module_dir = os.path.dirname(relpath)
        top = relpath.split("/", 1)[0] if "/" in relpath else ""
        if not top or not module_dir:
            return []
        paths = {w for w in wanted if "/" in w and is_plain_relative(w)}
        suffixes = tuple(sorted({os.path.splitext(w)[1] for w in searched} - {""}))
        if not paths and not suffixes:
            return []
        out, found = [], 0
        for f in self.tree(os.path.join(root, top)):
            up = f"{top}/{f}"
            if up.startswith(module_dir + "/"):
                continue
            for w in sorted(paths):
                if f == w or f.endswith("/" + w):
                    if found < MAX_ABOVE:
                        out.append((up, w))
                        found += 1
                    break
            else:
                if suffixes and f.endswith(suffixes) and len(out) - found < MAX_SEARCHED:
                    out.append((up, f.rsplit("/", 1)[-1]))
        # deeper than the tree is read (``MAX_DEPTH``): a path from a folder the module's
        # statements climb to (easyocr's ``src/deform_conv_cpu.cpp`` from ``dcn_dir``, the
        # folder above ``easyocr/DBNet/assets/ops/dcn/functions``)
        taken = {w for _, w in out}
        folder = os.path.dirname(module_dir)
        while folder and (folder == top or folder.startswith(top + "/")) and found < MAX_ABOVE:
            for w in sorted(paths - taken):
                if os.path.isfile(os.path.join(root, folder, w)) and found < MAX_ABOVE:
                    out.append((f"{folder}/{w}", w))
                    taken.add(w)
                    found += 1
            folder = os.path.dirname(folder)
        return out


# a statement that climbs above its module's directory: ``Path(__file__).parents[1]``,
# ``.parent.parent``, ``os.path.dirname(os.path.dirname(...))``, ``"../data"``
CLIMBS = re.compile(r"\.parents\s*\[|\.parent\s*\.\s*parent\b|dirname\(\s*(?:os\.path\.)?"
                    r"dirname\(|[\"']\.\./")

# a literal that is a file suffix: ``".yaml"``, ``".tar.gz"``
_SUFFIX = re.compile(r"(?:\.[A-Za-z0-9_]{1,8}){1,2}")


def listed(files: list[tuple[str, str]]) -> str:
    """``up (as rel)`` for the first ``MAX_SHOWN`` files, and how many more there are."""
    return shortlist([f"{up} (as {rel})" for up, rel in files])


def shortlist(names: list[str]) -> str:
    """The first ``MAX_SHOWN`` of ``names``, and how many more there are."""
    more = len(names) - MAX_SHOWN
    return ", ".join(names[:MAX_SHOWN]) + (f" and {more} more" if more > 0 else "")


@per_node
def literals(node: ast.AST) -> frozenset[str]:
    """The short one-line string constants of a statement, as relative paths, and the paths
    that runs of them make where the statement joins them (``joined_literals``)."""
    out = {c.value.strip("/").replace("\\", "/") for c in treewalk.nodes(node)
           if isinstance(c, ast.Constant) and isinstance(c.value, str)
           and 0 < len(c.value) <= 200 and "\n" not in c.value}
    out |= joined_literals(node)
    out.discard("")
    return frozenset(out)


def joined_literals(node: ast.AST) -> set[str]:
    """The paths that runs of two or more string literals make where a statement joins them:
    easyocr's ``dcn_dir = os.path.dirname(os.path.dirname(__file__))`` and
    ``os.path.join(dcn_dir, 'src', "deform_conv_cpu.cpp")`` name ``src/deform_conv_cpu.cpp``
    of the folder above its module's, which the file name alone does not place;
    ``ROOT / "cfg" / "default.yaml"`` and ``ROOT.joinpath("cfg", "default.yaml")`` name
    ``cfg/default.yaml``, and ``os.path.join(HERE, "..", "data", "x.pt")`` names
    ``../data/x.pt``."""
    out: set[str] = set()
    inner: set[int] = set()  # the left operands of a chain of ``/``, read with the chain
    for n in treewalk.nodes(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("join", "joinpath") and \
                not isinstance(n.func.value, ast.Constant):
            # os.path.join(a, "b", "c"), osp.join(...), Path(a).joinpath("b", "c")
            parts = [n.func.value, *n.args] if n.func.attr == "joinpath" else list(n.args)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and id(n) not in inner:
            parts, left = [n.right], n.left  # ROOT / "b" / "c", left-associated
            while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Div):
                inner.add(id(left))
                parts.append(left.right)
                left = left.left
            parts = [left, *reversed(parts)]
        else:
            continue
        run: list[str] = []
        for part in [*parts, None]:
            if isinstance(part, ast.Constant) and isinstance(part.value, str) and \
                    0 < len(part.value) <= 200 and "\n" not in part.value:
                run.append(part.value.strip("/").replace("\\", "/"))
                continue
            if len(run) > 1 and all(run):
                out.add("/".join(run))
            run = []
    return out


# ``#include "name"``: a header looked up from the including file's folder first
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
_C_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl")
MAX_INCLUDED = 200  # headers followed from one source file


def included_files(path: str) -> tuple[str, ...]:
    """The files a C, C++ or CUDA source's quoted ``#include``s name beside it, and those
    their own includes name, as paths relative to its folder: easyocr's
    ``deform_conv_cpu.cpp`` includes ``"deform_conv_cpu_kernel.h"``, which compiling it
    needs beside it though no Python statement names it. A name found nowhere there (one
    the compiler finds on its include path, ``"cuda_runtime.h"``) is left out; at most
    ``MAX_INCLUDED``."""
    if not path.endswith(_C_SOURCES):
        return ()
    base = os.path.dirname(path)
    out: list[str] = []
    todo = [path]
    while todo and len(out) < MAX_INCLUDED:
        current = todo.pop()
        try:
            with open(current, "rb") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        for m in _INCLUDE.finditer(text):
            found = os.path.normpath(os.path.join(os.path.dirname(current),
                                                  m.group(1).decode("utf-8", "replace")))
            rel = os.path.relpath(found, base).replace(os.sep, "/")
            if rel not in out and found != path and os.path.isfile(found):
                out.append(rel)
                todo.append(found)
    return tuple(sorted(out))


def _data_files(directory: str) -> list[str]:
    return _folder_files(directory, (".py", ".pyc", ".pyi"), MAX_DEPTH)


def _folder_files(directory: str, skip: tuple[str, ...] = (".pyc",),
                  max_depth: int | None = None) -> list[str]:
    """The files under ``directory`` by their path from it, sorted, without those ending in
    ``skip``, hidden folders and ``__pycache__``; at most ``MAX_FILES``."""
    out: list[str] = []
    base = directory.rstrip(os.sep)
    for cur, dirs, files in os.walk(directory):
        depth = cur[len(base):].count(os.sep)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        if max_depth is not None and depth >= max_depth:
            dirs[:] = []
        rel = os.path.relpath(cur, directory).replace(os.sep, "/")
        for f in sorted(files):
            if f.endswith(skip):
                continue
            out.append(f if rel == "." else f"{rel}/{f}")
            if len(out) >= MAX_FILES:
                return out
    return out
