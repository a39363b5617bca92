"""Differential check of generated blocks against the upstream classes they came from.

One interpreter imports torch and the upstream package once (from its *sources*, put on
``sys.path``), then forks a child per block. The child builds the upstream class and the
generated file's class with the same arguments under the same seed and compares what a user
would see: the constructor signature, the module tree (``repr``), the state_dict (names,
shapes and the initial values: the same code consumes the random generator the same way), and,
with the upstream weights loaded into the generated block, the outputs of one input in eval
mode and in train mode (dropout and drop-path draw from the same seed).

Arguments are the validator's own guesses (``engine.blockrun``), then the argument sets
the corpus passes to the constructor (``engine.callsites``), evaluated in each module's own
namespace; the first set the upstream class accepts is used.

Packages the upstream sources import but this machine cannot (torchvision beside the CPU
torch) can be replaced by permissive stand-ins (``--stub torchvision``): any attribute is a
placeholder class, so module-level imports succeed; a block that really calls into the stub
fails on both sides alike and is reported as not comparable. A module of an upstream package
that only registers compiled kernels can be replaced by an empty one (``--blank
torchvision._meta_registrations``: torchvision's sources then import beside the CPU torch; its
compiled operators are absent, so a block that calls them is not comparable).

Usage: python -I bench/differential.py --path SRC [--stub PKG] [--stub-installed PKG]
                                      [--blank MODULE] < jobs.jsonl
A job: {"key": "pkg.mod:Name", "file": "/x/Name.py", "call_sites": [...], "renamed": {...},
"relocated": {folder of files beside the file: upstream folder they come from}, "beside":
[folders above the module that no package encloses, innermost first]}; prints one JSON line
per job: {"key", "verdict", "reason" or what was checked}. Verdicts: same, differs,
not_comparable, timeout.

A generated file that raises as it imports, where upstream's module imports, is imported
again alone, in a fresh interpreter set up the same way: the child shares its process with every
upstream module imported so far, and some refuse company (NeMo's nv-one-logger, a process-wide
singleton, raises when the generated file configures it a second time). Raising alone too, the
file differs from upstream (audiotools' module object without a spec raised TypeError in
``importlib_resources.files()``); importing alone, it is not comparable here.

torch's operators are global to a process, so a generated file that reads operators of the
corpus (``torch.ops.sj_lif.forward``) finds upstream's registrations in the child, whether it
defines them itself or not. Such a file, found the same, is run again alone
(``_outputs_alone``): in a fresh interpreter without the sources on the path, built with the
same arguments, given upstream's weights and the first probe, it must give upstream's eval
output ("eval alone" among what was checked); raising or computing otherwise there, it
differs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "bench"))  # run as a script with -I: its own folder is not on the path

from forked import run_forked  # noqa: E402


# -- stand-ins for packages that cannot be imported here ---------------------------------------
class _AnyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name)

    def __repr__(cls):
        return f"<stand-in {cls.__qualname__}>"

    def __call__(cls, *args, **kwargs):
        """An inert instance, so that a module can import that makes one as it loads
        (zetascale's ``def gif_to_tensor(path, transform=T.ToTensor())``); any use of it
        raises, as a call of the stand-in did."""
        return _Inert(cls.__qualname__)


def _holds_stand_in(block: object) -> bool:
    """Whether a built block, or a module of its tree, keeps a stand-in or what calling one
    gave as an attribute (a plain attribute, which its ``repr`` does not print)."""
    from torch import nn

    mods = block.modules() if isinstance(block, nn.Module) else [block]
    for mod in mods:
        for value in getattr(mod, "__dict__", {}).values():
            if isinstance(value, (_Inert, _AnyMeta)):
                return True
    return False


def _placeholder(name: str) -> type:
    return _AnyMeta(name, (), {"__qualname__": name})


class _Inert:
    """What calling a stand-in gives: every use but keeping it raises."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, *args, **kwargs):
        raise RuntimeError(f"{object.__getattribute__(self, '_name')} is a stand-in for a "
                           "package that cannot be imported here")

    def __getattr__(self, name):
        self._refuse()

    def __repr__(self) -> str:
        return f"<stand-in {object.__getattribute__(self, '_name')}()>"

    __call__ = __setattr__ = __bool__ = __len__ = __iter__ = __getitem__ = __setitem__ = _refuse
    __contains__ = __eq__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __matmul__ = _refuse
    __rmatmul__ = __truediv__ = __rtruediv__ = __neg__ = __float__ = __int__ = _refuse
    __index__ = __enter__ = __exit__ = _refuse


class _StubModule(types.ModuleType):
    __version__ = "0.0"  # read at import time by version checks (timm: PIL.__version__)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{self.__name__}.{name}")


def _top_level_names(folder: str) -> set[str]:
    """The names a folder on ``sys.path`` gives to ``import``: its modules and folders."""
    here = Path(folder)
    return {p.stem if p.suffix == ".py" else p.name for p in here.iterdir()
            if p.is_dir() or p.suffix == ".py"} if here.is_dir() else set()


class _OwnRoot(importlib.abc.MetaPathFinder):
    """The measured repository's own top-level modules and folders come from its root, not
    from another configured repository, as they do where upstream runs from it alone. Python
    takes a regular package from anywhere on ``sys.path`` over a folder without
    ``__init__.py`` before it: ddim's and KAIR's ``models/`` lost to another configured
    repository's ``models`` package, and their blocks were not comparable. A package
    installed here still wins over such a folder, as it would upstream. Where no other
    configured root has a regular package of the name, the folders of the same name in the
    other roots are portions of one namespace package, as Python makes them: apple's ml-aim
    ships ``aim/v1`` and ``aim/v2`` in two roots, and ``aim.v2`` imports ``aim.v1``."""

    def __init__(self, root: str, roots: list[str]) -> None:
        self.root, self.roots = root, set(roots)
        # (less what the harness runs on)
        self.names = _top_level_names(root) - {"torch", *sys.stdlib_module_names}

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [self.root])
        if spec is not None and spec.origin is None:  # a folder without __init__.py
            installed = importlib.machinery.PathFinder.find_spec(
                name, [p for p in sys.path if p not in self.roots])
            if installed is not None and installed.origin is not None:
                return None
            others = [p for p in sys.path if p in self.roots and p != self.root]
            merged = importlib.machinery.PathFinder.find_spec(name, [self.root, *others])
            if merged is not None and merged.origin is None:
                return merged
        return spec


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, packages, installed=()):
        self.packages = set(packages) | set(installed)
        self.installed = set(installed)

    def find_spec(self, name, path=None, target=None):
        """A stand-in for each package given and everything under it; a dotted name stands
        in for that module alone (``mmcv._ext``, the compiled extension of a real ``mmcv``)."""
        parts = name.split(".")
        if not any(".".join(parts[:i]) in self.packages for i in range(1, len(parts) + 1)):
            return None
        if parts[0] not in self.installed and _asked_by_availability_check():
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        """An installed distribution for each stand-in of a package every deployment has
        (``--stub-installed``), as ``importlib.metadata.version`` asks of it (ultralytics
        reads torchvision's version when it imports). Other stand-ins have none, so that an
        availability check sees them missing, as they are (torchmetrics decorates with
        ``matplotlib.pyplot.style.context`` where lightning_utilities finds matplotlib), nor
        does ``importlib.util.find_spec`` find them (``_asked_by_availability_check``)."""
        if context.name in self.installed:
            yield _StubDistribution(context.name)


def _asked_by_availability_check() -> bool:
    """Whether ``importlib.util.find_spec`` asks, and not an ``import``: a stand-in of a
    package this machine lacks is missing to it, as the package is (lightning_utilities 0.15
    falls back on it where a distribution's metadata is missing, and torchmetrics then
    decorates with matplotlib's ``pyplot.style.context``: litgpt's and sgm's upstream
    modules could not import). Called by ``_StubFinder.find_spec``, which
    ``importlib._bootstrap._find_spec`` calls for either: its caller tells them apart."""
    caller = sys._getframe(3)
    return caller.f_code.co_name == "find_spec" and \
        caller.f_code.co_filename in ("<frozen importlib.util>", importlib.util.__file__)


class _StubDistribution(importlib.metadata.Distribution):
    def __init__(self, name: str) -> None:
        self.name_ = name

    def read_text(self, filename):
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {self.name_}\nVersion: 0.0\n"
        return None

    def locate_file(self, path):
        return Path(path)


# -- one comparison ----------------------------------------------------------------------------
class _Differs(Exception):
    """The generated block behaves differently from upstream: ``args[0]`` says how."""


class _GeneratedImport(Exception):
    """Upstream's module imported; the generated file raised as it imported: ``args[0]``."""


class _NotComparable(Exception):
    """The upstream class itself cannot be built or run with any argument set tried."""


def _load_weights(module, state_dict) -> None:
    """``load_state_dict(..., strict=True)``, or without ``strict`` where the class's own
    ``load_state_dict`` takes none (opacus' DPMultiheadAttention); ``nn.Module``'s own where
    the class's wants a checkpoint of its own shape (Cellpose's ``CPnetBioImageIO`` looks up
    ``output.2.weight``, which its ``state_dict()`` does not have)."""
    from torch import nn

    try:
        if "strict" in inspect.signature(module.load_state_dict).parameters:
            module.load_state_dict(state_dict, strict=True)
        else:
            module.load_state_dict(state_dict)
    except Exception:  # noqa: BLE001
        if type(module).load_state_dict is nn.Module.load_state_dict:
            raise
        nn.Module.load_state_dict(module, state_dict, strict=True)


def _load_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _candidates(blockrun, params, required, call_sites, namespace):
    arguments = blockrun.arguments
    out = []
    seen = set()
    for seq in arguments.SEQ_LEVELS:  # the validator's own guesses, in its order
        for c in arguments.SIZES:
            for real in (True, False):
                try:
                    # each side's own config class (the name as its module binds it)
                    args, kwargs, shown = arguments.guess_arguments(required, c, seq,
                                                                    namespace, real)
                except arguments.NoGuess:
                    continue
                except Exception:  # noqa: BLE001  (a config class refused its guesses)
                    continue
                if repr(shown) not in seen:
                    seen.add(repr(shown))
                    out.append((args, kwargs, shown, {"C": c}))
    if call_sites:
        out += arguments.call_site_candidates(call_sites, params, required, namespace)
    return out


def _config_names_of(upstream: dict, generated: dict) -> dict:
    """The generated module's namespace with the ``...Config`` names of upstream's, so that
    both sides pick the same config class for an unannotated ``config``: one only upstream
    binds (modeling_bert imports BertConfig, BertLayer's file has no use for it) is
    upstream's; one only the file binds (an inlined base's annotation) is left out. So is a
    dataclass only the file binds, which an annotation names: fairchem's escaip blocks take
    ``global_cfg: GlobalConfigs``, which upstream imports under ``if TYPE_CHECKING:`` only
    (for its string annotations) and the file defines, so only the file could build one."""
    ns = {k: v for k, v in generated.items() if k in upstream or not (
        k.endswith("Config") or isinstance(v, type) and dataclasses.is_dataclass(v))}
    added = {k: v for k, v in upstream.items() if k.endswith("Config") and k not in ns}
    ns.update(added)
    # a base of such a class that both bind is upstream's too: deepspeed's
    # ``DeepSpeedMoEInferenceConfig`` (upstream's only) derives from ``DeepSpeedInferenceConfig``
    # (the file's own as well), and with the file's base there were two most derived config
    # classes, so no guess used one
    for k, v in upstream.items():
        if k.endswith("Config") and k not in added and isinstance(v, type) and any(
                isinstance(a, type) and a is not v and issubclass(a, v) for a in added.values()):
            ns[k] = v
    return ns


def _same(a, b, torch, path="output") -> None:
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            raise _Differs(f"{path}: a tensor upstream, a {type(b).__name__} here")
        if type(a) is not type(b):  # upstream's tensor subclass and the file's own copy of it
            if type(a).__qualname__ != type(b).__qualname__:
                raise _Differs(f"{path}: a {type(a).__qualname__} upstream, a "
                               f"{type(b).__qualname__} here")
            a, b = a.as_subclass(torch.Tensor), b.as_subclass(torch.Tensor)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise _Differs(f"{path}: {tuple(a.shape)} {a.dtype} upstream, {tuple(b.shape)} "
                           f"{b.dtype} here")
        if not torch.equal(a, b):
            if a.is_floating_point() and torch.allclose(a, b, rtol=1e-5, atol=1e-6,
                                                        equal_nan=True):
                return
            if a.is_floating_point() and torch.isnan(a).any() and torch.equal(
                    torch.isnan(a), torch.isnan(b)):
                return
            raise _Differs(f"{path}: values differ (max abs diff "
                           f"{(a.double() - b.double()).abs().max().item():.3g})")
        return
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            raise _Differs(f"{path}: a {type(a).__name__} of {len(a)} upstream")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, torch, f"{path}[{i}]")
        return
    if isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            raise _Differs(f"{path}: keys {list(a)[:5]} upstream")
        for k in a:
            _same(a[k], b[k], torch, f"{path}[{k!r}]")
        return
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    if (a is None or isinstance(a, (int, float, str, bool))) and a != b and not both_nan:
        raise _Differs(f"{path}: {a!r} upstream, {b!r} here")


def _clone(args, torch):
    """A copy of the argument list for one call: each tensor cloned, also inside a list,
    tuple or dict (``[x]`` for a ``List[Tensor]`` parameter), so that a forward changing its
    input in place leaves the other side's alone."""
    def one(a):
        if isinstance(a, torch.Tensor):
            return a.clone()
        if type(a) in (list, tuple):
            return type(a)(one(v) for v in a)
        if type(a) is dict:
            return {k: one(v) for k, v in a.items()}
        return a

    return [one(a) for a in args]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _repr(module, renamed: dict[str, str] | None = None) -> str:
    """The module tree as printed, without object addresses (a lambda in a defaultdict, as
    audiocraft's AttributeDropout shows, has a new one in every build); ``renamed`` ({name
    here: name upstream}) puts back the upstream names of classes renamed for a clash."""
    try:
        text = _ADDRESS.sub(" at 0x…", repr(module))
    except Exception as exc:  # noqa: BLE001
        # Poutyne's metrics override ``nn.Module._get_name`` with a parameter: upstream's own
        # repr raises, and the same raise is the same tree as far as a repr can tell
        text = f"repr raised {type(exc).__name__}: {_ADDRESS.sub(' at 0x…', str(exc))}"
    for new, old in (renamed or {}).items():
        text = re.sub(rf"\b{re.escape(new)}\(", f"{old}(", text)
    return text


def _unrenamed(text: str, renamed: dict[str, str]) -> str:
    """``text`` with the classes and functions renamed for a clash ({name here: name
    upstream}) under their upstream names again, wherever they are named."""
    for new, old in renamed.items():
        text = re.sub(rf"\b{re.escape(new)}\b", old, text)
    return text


# a dotted module path; a folder of a research repository may have a hyphen in its name
# (EVA's ``EVA-CLIP-18B``), which Python imports as a module name all the same
_MODULE_PATH = re.compile(r"(?<![\w-])(?:[A-Za-z_][\w-]*\.)+(?=[A-Za-z_]\w*\()")


def _without_module_paths(text: str) -> str:
    """A repr with the module paths of ``pkg.mod.Class(`` dropped: a repr that prints
    ``__module__`` (gluonts' ``@validated`` prints ``fqname_for(self.__class__)``) names the
    generated file's module, not upstream's."""
    return _MODULE_PATH.sub("", text)


def _plain(sig, relocated: dict[str, str] | None = None) -> str:
    """A signature's text with module paths dropped from class names: a default of
    ``<class 'timm.layers.norm.LayerNorm2d'>`` upstream is ``LayerNorm2d`` from the generated
    file's own module. A set default's items are in sorted order: megatron's
    ``sub_modules_to_wrap={TransformerLayer, ...}`` holds classes, whose order in a set
    follows their ids. So are a ``Union``'s members (engine-independent: typing caches
    ``Optional[Union[dict, ConfigDict]]`` by equality, which ignores order, so which order is
    printed depends on which module made it first in the process)."""
    if isinstance(sig, inspect.Signature):
        sig = sig.replace(parameters=[
            p.replace(default=_Unordered(p.default)
                      if isinstance(p.default, (set, frozenset)) and p.default else p.default,
                      annotation=_UnionsSorted.of(p.annotation))
            for p in sig.parameters.values()])
    text = str(sig)
    for here, up in sorted((relocated or {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(here, up)  # (``relocated``: generated folder -> upstream one)
    return _unqualified(text)


class _UnionsSorted:
    """An annotation printed with the members of each ``Union`` in it in sorted order."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @classmethod
    def of(cls, annotation):
        return cls(cls._text(annotation)) if cls._has_union(annotation) else annotation

    @classmethod
    def _has_union(cls, a) -> bool:
        import typing

        return typing.get_origin(a) in (typing.Union, types.UnionType) or any(
            cls._has_union(x) for x in typing.get_args(a) if not isinstance(x, (list, tuple)))

    @classmethod
    def _text(cls, a) -> str:
        import typing

        args = typing.get_args(a)
        if typing.get_origin(a) in (typing.Union, types.UnionType):
            return "Union[" + ", ".join(sorted(_unqualified(cls._text(x)) for x in args)) + "]"
        if not args or not cls._has_union(a):
            return inspect.formatannotation(a)
        inner = ", ".join(
            "[" + ", ".join(cls._text(y) for y in x) + "]" if isinstance(x, (list, tuple))
            else cls._text(x) for x in args)
        return f"{inspect.formatannotation(typing.get_origin(a))}[{inner}]"


def _unqualified(text: str) -> str:
    text = re.sub(r" at 0x[0-9a-f]+>", ">", text)
    return re.sub(r"(?<![\w-])(?:[A-Za-z_][\w-]*\.)+(?=[A-Za-z_])", "", text)


class _Unordered:
    def __init__(self, items) -> None:
        self.text = "{" + ", ".join(sorted(_unqualified(repr(i)) for i in items)) + "}"

    def __repr__(self) -> str:
        return self.text


def _seed(n: int) -> None:
    """The same random state on both sides: torch, and Python's own ``random``
    (x-transformers scales initial weights by ``random.uniform``), and numpy's if loaded."""
    import random

    import torch

    torch.manual_seed(n)
    random.seed(n)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(n)


def _evaluated(cls) -> str | None:
    """The constructor signature with string annotations evaluated, as text (None when they
    cannot be evaluated)."""
    try:
        return _plain(inspect.signature(cls, eval_str=True))
    except Exception:  # noqa: BLE001
        return None


def compare(job: dict, blockrun) -> dict:
    import torch
    from torch import nn

    mod_name, _, qualname = job["key"].partition(":")
    name = qualname.rsplit(".", 1)[-1]  # a nested class's file binds its own name
    upstream_mod = importlib.import_module(mod_name)
    up_cls = functools.reduce(getattr, qualname.split("."), upstream_mod)
    if isinstance(upstream_mod, _StubModule) or isinstance(up_cls, _AnyMeta):
        raise _NotComparable(f"upstream {mod_name} is a stand-in here (--stub): there is no "
                             "upstream class to compare with")
    try:
        gen_mod = _load_file(job["file"], _generated_module_name(job))
    except Exception as exc:  # noqa: BLE001
        raise _GeneratedImport(f"{type(exc).__name__}: {exc}") from None
    gen_cls = getattr(gen_mod, name)
    try:
        up_sig, gen_sig = inspect.signature(up_cls), inspect.signature(gen_cls)
    except (TypeError, ValueError):
        up_sig = gen_sig = None
    notes = []
    if _plain(up_sig) != _plain(gen_sig) and _evaluated(up_cls) == _evaluated(gen_cls) \
            is not None:
        # the generated file's ``from __future__ import annotations`` (from another inlined
        # module) leaves this class's annotations as strings; evaluated, they are the same
        notes.append("annotations are strings here (the file's from __future__ import "
                     "annotations), the same once evaluated")
        up_sig = gen_sig
    renamed = job.get("renamed") or {}
    if _plain(up_sig) != _plain(gen_sig) and renamed and \
            _plain(up_sig) == _unrenamed(_plain(gen_sig), renamed):
        # brevitas' ``alpha_quant=qnn.QuantIdentity(...)``: a default built at import time
        # prints its module tree, with the classes renamed for a clash; deepspeed's
        # ``activation_checkpoint_func=checkpoint`` prints a function renamed so
        notes.append("the constructor's defaults differ only in the names of definitions the "
                     "header lists as renamed")
        up_sig = gen_sig
    relocated = job.get("relocated") or {}
    if _plain(up_sig) != _plain(gen_sig) and relocated and _plain(up_sig) == _plain(
            gen_sig, relocated):
        # tortoise's ``mel_norm_file=DEFAULT_MEL_NORM_FILE``, a path from ``__file__``: the
        # file nnrag wrote beside the generated one, where upstream's is beside its module
        notes.append("the constructor's defaults differ only in the paths of the files nnrag "
                     "puts beside the file, which they name")
        up_sig = gen_sig
    if _plain(up_sig) != _plain(gen_sig):
        ups = [_plain(p) for p in up_sig.parameters.values()] if up_sig else [_plain(up_sig)]
        gens = [_plain(p) for p in gen_sig.parameters.values()] if gen_sig else [
            _plain(gen_sig)]
        diff = [(a, b) for a, b in zip(ups, gens) if a != b] or [(ups, gens)]
        raise _Differs(f"constructor signature: {diff[0][0]} upstream, {diff[0][1]} here")
    params = blockrun.arguments.with_documented_types(
        up_cls, list(up_sig.parameters.values())) if up_sig else []
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    # a call site's arguments may build modules themselves (x-transformers' ``attn_layers=
    # Decoder(dim=512, ...)``): both sides evaluate them from the same seed
    _seed(0)
    up_cands = _candidates(blockrun, params, required, job.get("call_sites"), vars(upstream_mod))
    _seed(0)
    gen_names = _config_names_of(vars(upstream_mod), vars(gen_mod))
    # a call site's text names definitions as upstream does: one the file renames for a clash
    # (PyTorch Frame's ``stype=stype.categorical``, whose class the file calls
    # ``stype__stype``) is read as the file's
    gen_names.update({old: gen_names[new] for new, old in renamed.items() if new in gen_names})
    gen_cands = _candidates(blockrun, params, required, job.get("call_sites"), gen_names)
    if [c[2] for c in up_cands] != [c[2] for c in gen_cands]:
        raise _Differs("the corpus's argument sets evaluate differently in the two modules")
    up = None
    last_exc = None
    i = 0
    while i < len(up_cands):
        (ua, uk, shown, hints), (ga, gk, _, _) = up_cands[i], gen_cands[i]
        i += 1
        _seed(0)
        try:
            up = up_cls(*ua, **uk)
        except Exception as exc:  # noqa: BLE001
            last_exc = exc
            # as the validator: keywords passed on that miss some get them guessed, next
            c = hints.get("C") or blockrun.arguments.SIZES[0]
            more = blockrun.arguments.amend_arguments(exc, up_cls, params, ua, uk, shown, c)
            if more is not None:
                up_cands.insert(i, (*more, hints))
                gen_cands.insert(i, (*blockrun.arguments.amend_arguments(
                    exc, gen_cls, params, ga, gk, shown, c), hints))
            continue
        _seed(0)
        try:
            gen = gen_cls(*ga, **gk)
        except Exception as exc:  # noqa: BLE001
            if _out_of_memory(exc):
                raise _NotComparable("the two builds do not fit the memory cap together "
                                     f"(upstream built with {shown})") from None
            if _holds_stand_in(up):
                # (timm's GraphExtractNet: upstream's ``create_feature_extractor`` was a
                # stand-in, which accepts what the file's real one refuses)
                raise _NotComparable("the upstream block holds a stand-in for a package that "
                                     "cannot be imported here, which built it with "
                                     f"{shown}") from None
            raise _Differs(f"upstream builds with {shown}, the generated class raises "
                           f"{type(exc).__name__}: {exc}") from None
        break
    if up is None:
        last = f"; the last raised {type(last_exc).__name__}: {str(last_exc)[:200]}" \
            if last_exc is not None else ""
        raise _NotComparable(f"no argument set builds the upstream class ({len(up_cands)} "
                             f"tried{last})")
    result = {"args": {k: str(v)[:80] for k, v in shown.items()}}
    if notes:
        result["notes"] = notes
    if not isinstance(up, nn.Module):
        return result | {"checked": ["signature"]}
    if _repr(up) != _repr(gen):
        if "<stand-in " in repr(up) or _holds_stand_in(up):
            raise _NotComparable("the upstream block holds a stand-in for a package that "
                                 "cannot be imported here")
        if _repr(up) == _repr(gen, renamed):
            result.setdefault("notes", []).append(
                "the module tree differs only in the names of classes the header lists "
                "as renamed: " + ", ".join(f"{new} (upstream {old})"
                                           for new, old in sorted(renamed.items())))
        elif _without_module_paths(_repr(up)) == _without_module_paths(_repr(gen, renamed)):
            result.setdefault("notes", []).append(
                "the module tree differs only in the module paths it prints for classes "
                "(their __module__ is the generated file's)")
        elif _repr(up) == _repr(_built_again(up_cls, ua, uk, up)):
            raise _Differs("module tree (repr) differs")
        else:
            # neuromancer's ``Variable`` prints ``str(id(self))``, its ``Constraint`` the ids
            # of its arguments: a repr upstream's own second build does not reproduce says
            # nothing of the generated one
            result.setdefault("notes", []).append(
                "module tree (repr) not compared: upstream's changes from one build to the "
                "next")
    up_sd, gen_sd = up.state_dict(), gen.state_dict()
    if list(up_sd) != list(gen_sd):
        raise _Differs(f"state_dict names differ: {sorted(set(up_sd) ^ set(gen_sd))[:5]}")
    for k in up_sd:
        if up_sd[k].shape != gen_sd[k].shape:
            raise _Differs(f"state_dict {k}: {tuple(up_sd[k].shape)} upstream, "
                           f"{tuple(gen_sd[k].shape)} here")
    init_differ = [k for k in up_sd if not torch.equal(up_sd[k], gen_sd[k])]
    # memory a constructor leaves uninitialised holds NaN here on both sides (``_run_one``)
    nan = [k for k in init_differ if up_sd[k].is_floating_point() and up_sd[k].isnan().any()]
    if nan:
        init_differ = [k for k in init_differ if k not in nan]
        result.setdefault("notes", []).append(
            f"initial weights not compared for {len(nan)} tensor(s) holding NaN, as memory "
            f"a constructor leaves uninitialised does here, e.g. {nan[0]}")
    if init_differ:
        # a tensor upstream leaves uninitialised (``nn.Parameter(torch.empty(...))`` that an
        # ``init_parameters`` the constructor never calls would fill) is not reproducible:
        # upstream built again from the same seed tells those apart
        _seed(0)
        try:
            again = up_cls(*ua, **uk).state_dict()
        except Exception:  # noqa: BLE001  (a memory cap): every difference stands
            again = up_sd
        # pretrainedmodels' ``self.features = resnext101_32x4d_features``: a module its file
        # builds as it is imported, which every instance shares, took its weights from the
        # random state of that moment, which no seed before the build reaches
        shared = [k for k in init_differ if again is not up_sd
                  and again[k].data_ptr() == up_sd[k].data_ptr()]
        if shared:
            init_differ = [k for k in init_differ if k not in shared]
            result.setdefault("notes", []).append(
                f"initial weights not compared for {len(shared)} tensor(s) of a module upstream "
                f"builds when its file is imported, which every instance shares, e.g. "
                f"{shared[0]}")
        unstable = [k for k in init_differ if not torch.equal(up_sd[k], again[k])]
        if unstable:
            init_differ = [k for k in init_differ if k not in unstable]
            result.setdefault("notes", []).append(
                f"initial weights not compared for {len(unstable)} tensor(s) upstream does not "
                f"reproduce under the same seed (uninitialised memory), e.g. {unstable[0]}")
        # a least-squares fit at init (pytorch-forecasting's KAN layers) rounds differently
        # from one build to the next: equal within the tolerance outputs are compared at
        rounded = [k for k in init_differ if up_sd[k].is_floating_point()
                   and torch.allclose(up_sd[k], gen_sd[k], rtol=1e-5, atol=1e-6)]
        if rounded:
            init_differ = [k for k in init_differ if k not in rounded]
            result.setdefault("notes", []).append(
                f"initial weights of {len(rounded)} tensor(s) equal only within float rounding "
                f"(as outputs are compared), e.g. {rounded[0]}")
    _load_weights(gen, up_sd)
    try:
        weights = {k: v.clone() for k, v in up_sd.items()}
    except Exception as exc:  # noqa: BLE001
        if not _out_of_memory(exc):
            raise
        # torchvision's MultiscaleAttention holds 1 GiB of weights per build: a third copy
        # passes the memory cap; without it a difference in outputs simply stands
        weights = None

    def upstream_again():
        """Upstream built again from the same seed and given the same weights."""
        _seed(0)
        again = up_cls(*ua, **uk)
        _load_weights(again, weights)
        return again

    checked = ["signature", "repr", "state_dict", "init"]
    record: dict = {}
    out = _compare_outputs(up, gen, hints, blockrun, torch, nn, result, checked,
                           upstream_again if weights is not None else None, record)
    if job.get("payload") and "want" in record and weights is not None:
        try:
            # (the weights as the outputs were compared with, before train mode ran)
            torch.save({"name": name, "args": ga, "kwargs": gk, "state_dict": weights,
                        **record},
                       job["payload"])
        except Exception as exc:  # noqa: BLE001  (an argument no pickle takes)
            # what was written before the failure is no payload: an empty file runs nothing
            # alone (a half-written one failed to load there, and the file "differed")
            with open(job["payload"], "wb"):
                pass
            out.setdefault("notes", []).append(
                f"not run alone: its arguments or outputs do not pickle ({type(exc).__name__})")
    if init_differ:
        # still a difference; the outputs say whether it is only the initialisation
        # (transformers initialises classes outside its own package as "custom code")
        ran = [c for c in out.get("checked", ()) if c in ("eval", "train")]
        raise _Differs(f"initial weights differ under the same seed ({len(init_differ)} of "
                       f"{len(up_sd)} tensors, e.g. {init_differ[0]})"
                       + (f"; the {' and '.join(ran)} outputs are the same once given "
                          "upstream's weights" if ran else ""))
    return out


def _compare_outputs(up, gen, hints, blockrun, torch, nn, result: dict, checked: list,
                     upstream_again=None, record: dict | None = None) -> dict:
    """Eval and train outputs of the two blocks on the validator's probe inputs (the
    generated one holding upstream's weights). Where they differ, upstream built again runs
    the same calls: if it does not give its own output again, the block is not comparable
    (tsai's MiniRocketFeatures reseeds numpy from the clock, ``np.random.seed(None)``, as it
    draws its biases from the first batch). ``record``: gets the inputs and upstream's eval
    output of the first probe compared (for ``_outputs_alone``)."""
    calls: list[tuple[bool, int, tuple]] = []  # (train mode, seed, args) run on upstream

    def same(want, got, what: str) -> None:
        try:
            _same(want, got, torch, what)
        except _Differs:
            if upstream_again is not None and not _reproduces(upstream_again, calls, want,
                                                              torch):
                raise _NotComparable(
                    f"upstream itself gives another {what} when built again from the same "
                    "seed and weights and given the same inputs (it draws from a source no "
                    "seed fixes)") from None
            raise

    inputs = blockrun.inputs
    freq = inputs.forward_required(up)
    probes = [("none", (), 0)] if not freq else inputs.probe_inputs(
        {"hints": hints}, up, nn)[:inputs.MAX_PROBES]
    if not freq:  # all optional: as the validator, the probes go to the first parameter
        freq = inputs.optional_input(up)
        if freq:
            probes += inputs.probe_inputs({"hints": hints}, up, nn)[:inputs.MAX_PROBES]
    up.eval()
    gen.eval()
    for kind, shape, c, args in _probe_calls(probes, freq, inputs, torch):
        calls.append((False, 3, args))
        try:
            _seed(3)  # a forward may draw even in eval mode (a VAE's sampling)
            with torch.no_grad():
                want = up(*_clone(args, torch))
        except Exception as exc:  # noqa: BLE001
            inputs.add_step_probes(probes, (kind, shape, c), exc)
            # what upstream did before it raised (an ActNorm's first batch sets its weights,
            # as in gluonts' PICNN) the generated block must see too, or the next probe
            # compares two blocks in different states
            _seed(3)
            try:
                with torch.no_grad():
                    gen(*_clone(args, torch))
            except Exception:  # noqa: BLE001
                pass
            continue
        _seed(3)
        with torch.no_grad():
            try:
                got = gen(*_clone(args, torch))
            except Exception as exc:  # noqa: BLE001
                raise _Differs(f"forward of {list(shape)}: upstream runs, the generated "
                               f"block raises {type(exc).__name__}: {exc}") from None
        same(want, got, "eval output")
        if record is not None:
            record.update(inputs=args, want=want)
        up.train()
        gen.train()
        calls.append((True, 2, args))
        try:
            _seed(2)
            want = up(*_clone(args, torch))
        except Exception:  # noqa: BLE001
            return result | {"checked": checked + ["eval"], "input": list(shape)}
        _seed(2)
        got = gen(*_clone(args, torch))
        same(want, got, "train output")
        return result | {"checked": checked + ["eval", "train"], "input": list(shape)}
    return result | {"checked": checked, "note": "no probe input runs the upstream forward"}


def _probe_calls(probes, freq, inputs, torch):
    """(kind, shape, channels, arguments) for each probe and each of its argument lists
    (``forward_variants``), as the validator tries them; ``probes`` may grow meanwhile
    (``add_step_probes``). Each probe's tensor is drawn after seeding the generator alike."""
    for kind, shape, c in probes:
        _seed(1)
        if kind == "none":
            yield kind, shape, c, []
            continue
        variants = inputs.forward_variants(freq, inputs.probe_tensor(kind, shape, c, torch),
                                           kind, torch)
        for args in variants:
            yield kind, shape, c, args


def _built_again(cls, args, kwargs, first):
    """``cls`` built again from the same seed, with copies of the same arguments, as the
    generated class is given arguments equal to upstream's but not the same objects
    (neuromancer's ``Constraint(left, right, ...)`` prints ``id(left)``); ``first`` where that
    fails."""
    try:  # a pickled copy: ``copy.deepcopy`` keeps a tuple of numbers the same object
        args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))  # noqa: S301  (our own)
    except Exception:  # noqa: BLE001
        try:
            args, kwargs = copy.deepcopy((args, kwargs))
        except Exception:  # noqa: BLE001, S110  (an argument that cannot be copied is reused)
            pass
    _seed(0)
    try:
        return cls(*args, **kwargs)
    except Exception:  # noqa: BLE001  (a memory cap)
        return first


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation the child's memory cap refused (bench.forked)."""
    return isinstance(exc, MemoryError) or "can't allocate memory" in str(exc)


def _reproduces(upstream_again, calls, want, torch) -> bool:
    """Whether upstream built again gives ``want`` for the last of ``calls`` after the
    others (a call that raises is replayed too, for what it changed before raising)."""
    try:
        again = upstream_again()
    except Exception:  # noqa: BLE001  (a memory cap): no evidence against upstream
        return True
    out = None
    for train, seed, args in calls:
        again.train(train)
        _seed(seed)
        try:
            if train:
                out = again(*_clone(args, torch))
            else:
                with torch.no_grad():
                    out = again(*_clone(args, torch))
        except Exception:  # noqa: BLE001
            out = None
    try:
        _same(want, out, torch)
    except Exception:  # noqa: BLE001  (_Differs, or an output of another kind)
        return False
    return True


# -- driver ------------------------------------------------------------------------------------
def _run_one(job: dict, blockrun, timeout: float, setup: list[str]) -> dict:
    def child() -> dict:
        import torch

        torch.set_num_threads(1)
        # both sides import with the command line of a fresh ``python -c "import NAME"``:
        # PyTorch-GAN's scripts run ``opt = parser.parse_args()`` as they load, which this
        # script's own options would fail
        sys.argv = ["-c"]
        # memory a constructor leaves uninitialised (blitz's ``torch.Tensor(shape)`` buffers)
        # is filled the same on both sides, NaN or the largest integer, not with whatever the
        # allocator hands out: a build and a second build from the same seed could agree by
        # chance and the generated class's differ (torch's switch for it)
        torch.use_deterministic_algorithms(True, warn_only=True)
        warnings.filterwarnings("ignore", message=".*deterministic.*")
        try:
            return {"verdict": "same"} | compare(job, blockrun)
        except _Differs as exc:
            return {"verdict": "differs", "reason": str(exc)[:400]}
        except _NotComparable as exc:
            return {"verdict": "not_comparable", "reason": str(exc)[:400]}
        except _GeneratedImport as exc:
            return {"verdict": "generated_import", "reason": str(exc)[:400]}
        except BaseException as exc:  # noqa: BLE001
            return {"verdict": "not_comparable", "reason": f"{type(exc).__name__}: {exc}"[:400]}

    msg, status = run_forked(child, timeout)
    if msg is None:
        if status == "timeout":
            return {"verdict": "timeout", "reason": f"over {timeout:.0f} s"}
        return {"verdict": "not_comparable", "reason": f"the child {status}"}
    if msg.get("verdict") == "generated_import":
        alone = _import_alone(job["file"], setup, timeout)
        if alone is None:
            return {"verdict": "not_comparable", "reason": (
                "the generated file imports alone, not beside upstream's modules: "
                f"{msg['reason']}")[:400]}
        if _missing_here(alone):
            # a package missing here, which upstream's module needs as well where it imports
            # its own modules rather than stand-ins (MobileSAM's copy of ultralytics, stood in
            # for, imports pkg_resources): the same gap that makes an upstream class not
            # comparable, never a difference
            return {"verdict": "not_comparable", "reason": (
                f"the generated file needs a package missing here: {alone}")[:400]}
        return {"verdict": "differs",
                "reason": f"upstream's module imports, the generated file raises {alone}"[:400]}
    return msg


def _missing_here(error: str) -> bool:
    """Whether ``error`` (``"Type: message"``) says a package is missing that this machine
    does not have: a gap of the machine, never a difference."""
    missing = re.match(r"ModuleNotFoundError: No module named '([\w.]+)'", error)
    return bool(missing) and importlib.util.find_spec(missing.group(1).split(".")[0]) is None


def _reads_corpus_operators(path: str) -> bool:
    """Whether the generated file at ``path`` reads torch operators of a namespace that is not
    torch's own (``torch.ops.sj_lif.forward``): upstream's import in this process may have
    registered them, where the file alone does not (engine.torchops)."""
    from nnrag_tui.engine.torchops import op_reads

    try:
        text = Path(path).read_text(encoding="utf-8")
        return "torch.ops." in text and bool(op_reads(ast.parse(text)))
    except (OSError, SyntaxError, ValueError):
        return False


def _generated_module_name(job: dict) -> str:
    """The name the generated file is imported under, here and alone."""
    return f"_nnrag_generated_{job['key'].partition(':')[2].replace('.', '_')}"


def _outputs_alone(job: dict, payload: str) -> dict:
    """In a fresh interpreter where none of the sources is on the path: the generated file
    imported, its class built with the arguments the comparison built it with (``payload``,
    from ``compare``), given upstream's weights, run on the first probe in eval mode; {}
    where it gives upstream's output, else {"error": what it raised} or {"differs": how}.
    torch's operators are global to a process, so the comparison, which imports upstream's
    module first, cannot tell a file that defines the operators it reads from one that only
    finds upstream's: spikingjelly's neurons, whose files lacked ``sj_lif::forward``,
    compared the same."""
    import torch

    try:
        # first, so that the arguments' classes of the file unpickle
        _load_file(job["file"], _generated_module_name(job))
        data = torch.load(payload, weights_only=False, map_location="cpu")
        gen_cls = getattr(sys.modules[_generated_module_name(job)], data["name"])
        _seed(0)
        gen = gen_cls(*data["args"], **data["kwargs"])
        _load_weights(gen, data["state_dict"])
        gen.eval()
        _seed(3)
        with torch.no_grad():
            got = gen(*_clone(data["inputs"], torch))
        _same(data["want"], got, torch, "eval output")
    except _Differs as exc:
        return {"differs": str(exc)[:300]}
    except BaseException as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {}


def _checked_alone(res: dict, job: dict, payload: str, setup: list[str], timeout: float
                   ) -> dict:
    """A "same" verdict for a file that reads torch operators of the corpus, checked again by
    ``_outputs_alone`` in a fresh interpreter without the sources or upstream's modules
    (``setup`` less its ``--path``: stand-ins and blanks stay)."""
    bare = [a for i, a in enumerate(setup) if a != "--path"
            and (i == 0 or setup[i - 1] != "--path")]
    got = _fresh([*bare, "--outputs-alone", payload], json.dumps(job) + "\n", timeout + 60)
    if got == {}:
        return res | {"checked": [*res.get("checked", []), "eval alone"]}
    if isinstance(got, str):
        return {"verdict": "not_comparable", "reason": (
            f"the file reads torch operators of the corpus, and its run alone ended with "
            f"{got}")[:400]}
    if "differs" in got:
        return {"verdict": "differs", "reason": (
            "the same beside upstream's modules; alone, without them: " + got["differs"])[:400]}
    if _missing_here(got["error"]):
        return {"verdict": "not_comparable", "reason": (
            f"alone, the generated file needs a package missing here: {got['error']}")[:400]}
    return {"verdict": "differs", "reason": (
        "the same beside upstream's modules, which registered the torch operators it reads; "
        f"alone it raises {got['error']}")[:400]}


def _fresh(args: list[str], stdin: str | None, timeout: float) -> dict | str:
    """The last JSON line this script prints when run with ``args`` in a fresh interpreter
    (``stdin``: its input, else none), or why there is none: ``"timeout"`` or ``"status N"``."""
    cmd = [sys.executable, "-I", __file__, *args]
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return f"status {proc.returncode}"
    return json.loads(lines[-1])


def _verdict_alone(job: dict, setup: list[str], timeout: float) -> dict | None:
    """``job`` measured again in a fresh interpreter set up as this one (``setup``), where
    upstream's module is the only one of the sources imported; None where that run gave no
    answer. The run here imports every job's module into one process, and what an earlier
    module left there can change upstream's class: PyTorch3D's implicitron registry held the
    classes of every module imported before, and ``OverfitModel``'s repr with it."""
    got = _fresh([*setup, "--timeout", str(timeout), "--alone"], json.dumps(job) + "\n",
                 2 * timeout + 120)
    return got if isinstance(got, dict) else None


def _import_alone(path: str, setup: list[str], timeout: float) -> str | None:
    """None where the file at ``path`` imports in a fresh interpreter set up as this one
    (``setup``: the command line's sources, stand-ins and blanks), else what it raised."""
    got = _fresh([*setup, "--import-alone", path], None, timeout)
    if got == "timeout":
        return f"nothing: its import alone took over {timeout:.0f} s"
    if isinstance(got, str):
        return f"nothing: its import alone ended with {got}"
    return got.get("error")


@contextlib.contextmanager
def _beside_scripts(folders: list[str], at: int, keep: frozenset[str]):
    """``folders`` (above the block's module, no package enclosing them: the folders its
    repository's scripts run from) on ``sys.path`` after the measured repository's root, as
    the engine looks there for what the module imports (``ModuleIndex.script_folder_module``)
    and Python finds it as a script runs: FasterViT's ``downstream/object_detection/dino/``
    keeps the ``util`` its models import, which another configured repository's ``util``
    hid. Afterwards the path is as it was, and no module found through those folders stays
    for the next block, which may run from other folders. ``keep``: the top-level modules the
    harness itself runs on (torch), never taken out of ``sys.modules``."""
    if not folders:
        yield
        return
    saved = list(sys.path)
    sys.path[at:at] = folders
    # a module of such a name that an earlier block found elsewhere (motrv2's ``util``, taken
    # from another repository's root for a block whose folders have none) is found again
    names = set().union(*map(_top_level_names, folders)) - keep
    for name in [m for m in sys.modules if m.split(".")[0] in names]:
        del sys.modules[name]
    before = set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = saved
        for name in set(sys.modules) - before:
            where = getattr(sys.modules.get(name), "__file__", None) or ""
            # found through a folder: named from it (``util.misc``), not from a root
            if any(where.startswith(os.path.join(f, name.split(".")[0], ""))
                   or where == os.path.join(f, name.split(".")[0] + ".py") for f in folders):
                del sys.modules[name]
        importlib.invalidate_caches()


def _forget_stand_ins() -> None:
    """Takes the stand-ins that the jobs before imported out of ``sys.modules``, where
    ``importlib.util.find_spec`` finds a module without asking any finder: ControlNet's
    annotators import ``matplotlib.pyplot``, and for the ``ldm`` blocks measured after them
    torchmetrics found matplotlib and decorated with ``plt.style.context`` (13 blocks not
    comparable, each the same when measured alone). A module that holds one keeps it."""
    for name in [n for n, m in sys.modules.items() if isinstance(m, _StubModule)]:
        del sys.modules[name]


def _forget_failed_import(before: set[str], own: set[str]) -> None:
    """Takes out of ``sys.modules`` what an import that failed left of the sources' own
    packages (top-level names ``own``): the modules it finished, whose packages around them
    Python removed as they failed. A namespace package among them (ControlNet's
    ``annotator/uniformer/mmseg/``) recomputes its path from its parent's, and the child's
    import stopped at ``KeyError: 'annotator.uniformer'`` rather than at the missing package;
    the child imports them as a fresh interpreter would. Installed packages it imported stay:
    an extension module may refuse a second import (pybind11's types register once)."""
    for name in set(sys.modules) - before:
        if name.split(".")[0] in own:
            del sys.modules[name]
    importlib.invalidate_caches()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", action="append", default=[],
                    help="a source root for sys.path; the first is the measured repository's")
    ap.add_argument("--stub", action="append", default=[], help="a package to stand in for")
    ap.add_argument("--stub-installed", action="append", default=[],
                    help="a package to stand in for that reports itself installed "
                    "(importlib.metadata)")
    ap.add_argument("--blank", action="append", default=[],
                    help="a module to replace by an empty one")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--import-alone", metavar="FILE",
                    help="only import FILE and say whether it raised (see _import_alone)")
    ap.add_argument("--outputs-alone", metavar="PAYLOAD",
                    help="only run the job on stdin's generated file alone against the "
                    "outputs in PAYLOAD (see _outputs_alone)")
    ap.add_argument("--alone", action="store_true",
                    help="measure each verdict only here, never again in a fresh interpreter "
                    "(see _verdict_alone)")
    args = ap.parse_args()
    setup = [*(a for p in args.path for a in ("--path", p)),
             *(a for p in args.stub for a in ("--stub", p)),
             *(a for p in args.stub_installed for a in ("--stub-installed", p)),
             *(a for m in args.blank for a in ("--blank", m))]
    # results go to the real stdout; whatever the corpus prints while it imports or runs
    # (detr, Swin) goes to stderr and cannot break the JSON lines
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # jobs come on a private copy of stdin: code that asks the user (kornia's lazy loader
    # prompts "Please enter 'Y', 'N', or 'A'" on import) reads /dev/null and cannot eat them
    jobs = os.fdopen(os.dup(0), "r")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)  # noqa: SIM115  (for the whole run)
    if args.stub or args.stub_installed:
        sys.meta_path.insert(0, _StubFinder(args.stub, args.stub_installed))
    for name in args.blank:
        sys.modules[name] = types.ModuleType(name)
    for p in reversed(args.path):
        sys.path.insert(0, p)
    if args.path:  # (the first is the measured repository's root)
        sys.meta_path.insert(0, _OwnRoot(args.path[0], args.path))
    sys.path.append(str(ROOT))
    import torch  # noqa: F401  (once, before forking)

    if args.import_alone:
        try:
            _load_file(args.import_alone, "_nnrag_generated_alone")
            print(json.dumps({}), file=results, flush=True)
        except BaseException as exc:  # noqa: BLE001
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}), file=results,
                  flush=True)
        return

    if args.outputs_alone:
        print(json.dumps(_outputs_alone(json.loads(jobs.readline()), args.outputs_alone)),
              file=results, flush=True)
        return

    from nnrag_tui.engine import blockrun

    harness = frozenset(m.split(".")[0] for m in sys.modules)
    own = set().union(*map(_top_level_names, args.path)) - harness
    for line in jobs:
        if not line.strip():
            continue
        job = json.loads(line)
        t = time.perf_counter()
        with _beside_scripts(job.get("beside", []), 1 if args.path else 0, harness):
            _forget_stand_ins()
            before = set(sys.modules)
            try:  # imported once here, not in every child
                importlib.import_module(job["key"].partition(":")[0])
            except BaseException:  # noqa: BLE001  (the child reports it)
                _forget_failed_import(before, own | set().union(
                    *map(_top_level_names, job.get("beside", []))))
            payload = None
            if _reads_corpus_operators(job["file"]):
                fd, payload = tempfile.mkstemp(suffix=".pt", prefix="nnrag_alone_")
                os.close(fd)
                job = job | {"payload": payload}
            try:
                res = _run_one(job, blockrun, args.timeout, setup)
                if payload and res["verdict"] == "same" and os.path.getsize(payload):
                    res = _checked_alone(res, job, payload, setup, args.timeout)
            finally:
                if payload:
                    os.unlink(payload)
        if res["verdict"] == "differs" and not args.alone:
            # a difference counts where a fresh interpreter, in which a user imports upstream's
            # module, shows it as well; the run here gives the verdict where it does not
            alone = _verdict_alone(job, setup, args.timeout)
            if alone is not None and alone["verdict"] != "differs":
                res = {k: v for k, v in alone.items() if k not in ("key", "s")} | {
                    "differs_after_other_jobs": res["reason"]}
        res["key"] = job["key"]
        res["s"] = round(time.perf_counter() - t, 3)
        print(json.dumps(res), file=results, flush=True)


if __name__ == "__main__":
    main()
