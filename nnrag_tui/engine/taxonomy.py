"""Failure taxonomy: one cause per failed stage, from a fixed list, like the paper's failure
table (native ops, circular or complex dependencies, dynamic metaprogramming, repo-specific
utilities) but finer and with the facts a user needs to act: which module and which
distribution provides it, which name and where, which signal.

Pure functions over plain data (the error dicts the sandbox worker reports), so they are easy
to test and never need torch.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from nnrag_tui.engine import treewalk
from nnrag_tui.engine.lines import source_lines

CAUSES = (
    "missing_external",   # an imported package is not installed (which, and its distribution)
    "not_standalone",     # imports a package of the corpus (blocked) instead of inlining it
    "native_op",          # C++/CUDA extension, torch.ops.*, undefined symbol, no CUDA
    "unresolved_name",    # a name the file uses is defined nowhere (which, where)
    "circular_import",    # import cycles, definitions used before they exist
    "dynamic_registry",   # string-to-class lookups: registries, getattr by name, eval
    "needs_arguments",    # the constructor needs arguments that could not be inferred
    "probe_shape",        # forward failed on every probe input
    "timeout",            # wall-clock or CPU limit
    "memory_limit",       # the address-space limit or the OOM killer
    "signal",             # crashed by a signal (SIGSEGV, SIGBUS, SIGABRT, ...)
    "syntax_newer",       # syntax of a newer Python than the one validating
    "other",
)

# Import name -> PyPI distribution, for packages whose names differ (or that are absent here,
# so importlib.metadata cannot tell).
KNOWN_DISTRIBUTIONS = {
    "PIL": "Pillow", "cv2": "opencv-python", "sklearn": "scikit-learn",
    "skimage": "scikit-image", "yaml": "PyYAML", "einops": "einops", "timm": "timm",
    "torchvision": "torchvision", "torchaudio": "torchaudio", "scipy": "scipy",
    "numpy": "numpy", "attr": "attrs", "bs4": "beautifulsoup4", "dateutil": "python-dateutil",
    "google.protobuf": "protobuf", "fvcore": "fvcore", "omegaconf": "omegaconf",
    "hydra": "hydra-core", "mmcv": "mmcv", "mmengine": "mmengine", "mmdet": "mmdet",
    "detectron2": "detectron2", "transformers": "transformers", "huggingface_hub":
    "huggingface_hub", "safetensors": "safetensors", "matplotlib": "matplotlib",
    "pandas": "pandas", "tqdm": "tqdm", "termcolor": "termcolor", "tensorboardX":
    "tensorboardX", "torch_geometric": "torch-geometric", "torch_scatter": "torch-scatter",
    "torch_sparse": "torch-sparse", "torch_cluster": "torch-cluster", "flash_attn":
    "flash-attn", "xformers": "xformers", "mamba_ssm": "mamba-ssm", "causal_conv1d":
    "causal-conv1d", "triton": "triton", "natten": "natten", "spconv": "spconv-cu120",
    "MinkowskiEngine": "MinkowskiEngine", "apex": "apex (NVIDIA, built from source)",
    "pointnet2_ops": "pointnet2_ops (built from source)", "kornia": "kornia",
    "lightning": "lightning", "pytorch_lightning": "pytorch-lightning", "Crypto":
    "pycryptodome", "jwt": "PyJWT", "zmq": "pyzmq", "sentencepiece": "sentencepiece",
    "tokenizers": "tokenizers", "thop": "thop", "ptflops": "ptflops", "torchmetrics":
    "torchmetrics", "opt_einsum": "opt-einsum", "lpips": "lpips", "clip": "clip (OpenAI, git)",
    "open_clip": "open_clip_torch", "segment_anything": "segment-anything",
}
# Packages that exist to ship compiled kernels: missing one means a native op is missing.
NATIVE_PACKAGES = frozenset({
    "flash_attn", "xformers", "mamba_ssm", "causal_conv1d", "selective_scan", "natten",
    "spconv", "MinkowskiEngine", "apex", "pointnet2_ops", "torch_scatter", "torch_sparse",
    "torch_cluster", "knn_cuda", "DCNv3", "DCNv4", "deform_conv", "dcn_v2", "triton",
    "pytorch3d", "cumm", "tinycudann", "nvdiffrast", "diff_gaussian_rasterization",
    "simple_knn", "chamfer", "emd", "torchsparse", "warpctc_pytorch", "correlation_cuda",
    "resample2d_cuda", "channelnorm_cuda", "roi_align", "nms", "ops_dcnv3",
    "MultiScaleDeformableAttention"})
_NATIVE_SUFFIXES = ("_C", "_ext", "_cuda", "_cpp", "_kernels", "_kernel", "_ops", "_cu",
                    "_cuda_ext", "_backend", "_cudnn", "_native")
_NATIVE_MSG = re.compile(
    r"undefined symbol|cannot open shared object file|\.so\b|DLL load failed|"
    r"Torch not compiled with CUDA|Found no NVIDIA driver|No CUDA GPUs are available|"
    r"CUDA driver|CUDA error|cuda runtime|CUDA is not available|no kernel image|"
    r"torch\.ops\.|No such operator|Could not run '[^']+' with arguments from the|"
    r"not compiled with|libcudart|libcuda|nvrtc|cudnn|Triton|_OpNamespace", re.IGNORECASE)
_MEMORY_MSG = re.compile(r"can't allocate memory|DefaultCPUAllocator|out of memory|"
                         r"std::bad_alloc|Cannot allocate memory|not enough memory",
                         re.IGNORECASE)
_REGISTRY_MSG = re.compile(r"registr|not registered|unknown (model|layer|type|block|"
                           r"activation|norm|module|op)|is not supported|not found in|"
                           r"no such (layer|model|type)|invalid (layer|model|block|"
                           r"activation|norm)", re.IGNORECASE)
_REGISTRY_CODE = re.compile(r"\bgetattr\(|\bimport_module\(|__import__\(|\beval\(|"
                            r"\bexec\(|REGISTRY|registry|_registry|\bbuild_\w+\(|"
                            r"\bcreate_\w+\(|\bget_\w+_layer\(|\.build\(|\bglobals\(\)\[|"
                            r"\blocals\(\)\[", re.IGNORECASE)
# sandbox_worker._Deny's wording for an import of a denied package (the worker runs alone, so
# the text is repeated there)
_BLOCKED_MSG = "(blocked in the sandbox)"
_CIRCULAR_MSG = re.compile(r"partially initialized module|circular import", re.IGNORECASE)
_ARGUMENT_MSG = re.compile(r"missing \d+ required|required (positional|keyword)|"
                           r"takes \d+ positional|unexpected keyword|takes no arguments",
                           re.IGNORECASE)


@dataclass(frozen=True)
class Cause:
    """One failure's cause: ``kind`` from CAUSES, a one-line ``summary`` and the facts."""

    kind: str
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "detail": dict(self.detail)}


# -- distributions ---------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _installed() -> dict[str, list[str]]:
    from importlib import metadata

    try:
        return dict(metadata.packages_distributions())
    except Exception:  # noqa: BLE001  (a broken dist-info must not break validation)
        return {}


def distribution_for(module: str) -> str | None:
    """The distribution that provides (or would provide) top-level module ``module``."""
    if not module:
        return None
    top = module.split(".")[0]
    if module in KNOWN_DISTRIBUTIONS:
        return KNOWN_DISTRIBUTIONS[module]
    dists = _installed().get(top)
    if dists:
        return dists[0]
    return KNOWN_DISTRIBUTIONS.get(top)


def is_native_module(module: str) -> bool:
    parts = module.split(".")
    return (parts[0] in NATIVE_PACKAGES or any(p in NATIVE_PACKAGES for p in parts)
            or any(p.endswith(_NATIVE_SUFFIXES) or p in ("_C", "_ext") for p in parts)
            or "cuda" in module.lower())


# -- static ----------------------------------------------------------------------------------
def from_static(undefined: list[dict]) -> Cause:
    """Undefined names found by the static check (name, line, scope)."""
    names = sorted({u["name"] for u in undefined})
    where = ", ".join(f"{u['name']} ({u['scope']}, line {u['line']})" for u in undefined[:5])
    more = f" and {len(undefined) - 5} more" if len(undefined) > 5 else ""
    return Cause("unresolved_name", f"undefined: {where}{more}",
                 {"names": names, "where": undefined[:50]})


def from_syntax(exc: SyntaxError, code: str, stage: str = "parse") -> Cause:
    """A SyntaxError at parse or compile time; ``syntax_newer`` when the failing text uses
    grammar newer than this interpreter."""
    feature = newer_syntax(code, exc.lineno)
    msg = f"{exc.msg} (line {exc.lineno})"
    detail = {"line": exc.lineno, "offset": exc.offset, "message": exc.msg, "stage": stage}
    if feature:
        detail["feature"] = feature
        detail["python"] = ".".join(map(str, sys.version_info[:2]))
        return Cause("syntax_newer", f"{feature} needs a newer Python than "
                     f"{detail['python']}: {msg}", detail)
    return Cause("other", f"syntax error: {msg}", detail)


_NEWER = (
    (re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*="), "the type statement (3.12)",
     (3, 12)),
    (re.compile(r"^\s*(async\s+)?def\s+\w+\s*\["), "generic functions, PEP 695 (3.12)",
     (3, 12)),
    (re.compile(r"^\s*class\s+\w+\s*\["), "generic classes, PEP 695 (3.12)", (3, 12)),
    (re.compile(r"""f(["'])[^"'\n]*\{[^}\n]*\1"""),
     "f-strings reusing their quotes, PEP 701 (3.12)", (3, 12)),
    (re.compile(r"^\s*except\s*\*"), "except* (3.11)", (3, 11)),
    (re.compile(r"^\s*match\s+.+:\s*$"), "the match statement (3.10)", (3, 10)),
)


def newer_syntax(code: str, lineno: int | None) -> str | None:
    """Names the newer-grammar feature on (or near) the failing line, if any."""
    lines = source_lines(code)
    if not lineno or lineno < 1 or lineno > len(lines) + 1:
        candidates = lines
    else:
        candidates = lines[max(0, lineno - 2): lineno + 1]
    for text in candidates:
        for pattern, feature, version in _NEWER:
            if sys.version_info[:2] < version and pattern.search(text):
                return feature
    return None


# -- runtime ---------------------------------------------------------------------------------
def classify(stage: str, error: dict | None, *, killed: dict | None = None,
             exit: dict | None = None, code: str | None = None,
             detail: dict | None = None) -> Cause:
    """The cause of a failed sandbox stage (import, instantiate, forward).

    ``error`` is the worker's description of the exception (type, message, module, name,
    frames, traceback); ``killed`` says the worker killed the child (timeout); ``exit`` how the
    child ended when it ended without reporting."""
    if killed:
        after = killed.get("after")
        return Cause("timeout", f"{killed.get('stage', stage)} did not finish in "
                     f"{after:g} s" if isinstance(after, (int, float)) else "timed out",
                     {"stage": killed.get("stage", stage), "seconds": after})
    if error is None:
        return _from_exit(stage, exit or {})
    etype = str(error.get("type", ""))
    short = etype.rsplit(".", 1)[-1]
    msg = str(error.get("message", ""))
    bases = set(error.get("bases", ())) | {short}
    frames = error.get("frames") or []
    text = f"{short}: {msg}"
    base = {"stage": stage, "error": text[:500]}
    if stage in ("instantiate", "forward") and frames:
        base["where"] = _where(frames)

    if short == "SystemExit":
        return Cause("other", f"the block called sys.exit({error.get('code')})",
                     {**base, "exit_code": error.get("code")})
    if short == "MemoryError" or (_MEMORY_MSG.search(msg) and short in ("RuntimeError",
                                                                         "OSError",
                                                                         "MemoryError")):
        return Cause("memory_limit", f"out of memory in {stage}: {msg[:200]}", base)
    if short == "RecursionError":
        return Cause("other", f"recursion too deep in {stage}", base)
    if short == "SyntaxError":
        feature = newer_syntax(str(error.get("text") or ""), 1)
        if feature:
            return Cause("syntax_newer", f"{feature}: {msg[:200]}", {**base, "feature": feature})
    if "ImportError" in bases or short == "ModuleNotFoundError":
        return _from_import_error(stage, error, msg, base, frames)
    if _NATIVE_MSG.search(msg) or any("torch.ops." in str(f.get("code", ""))
                                      for f in frames[-2:]):
        return Cause("native_op", f"native op unavailable: {msg[:200]}", base)
    if "NameError" in bases:
        return _from_name_error(stage, error, msg, base, frames, code)
    if _CIRCULAR_MSG.search(msg):
        return Cause("circular_import", f"circular import: {msg[:200]}", base)
    registry = _registry_lookup(short, msg, frames, error)
    if registry and stage in ("import", "instantiate"):
        return Cause("dynamic_registry", f"string lookup failed: {text[:200]}",
                     {**base, **registry})
    if stage == "instantiate":
        required = error.get("required")
        if short == "NeedsArguments" or (required and short in (
                "TypeError", "ValueError", "AssertionError", "RuntimeError", "IndexError",
                "AttributeError", "ZeroDivisionError", "KeyError", "NotImplementedError")):
            return Cause("needs_arguments", f"could not construct it: {text[:200]}",
                         {**base, "required": required or [error.get("param")]})
        if short == "TypeError" and _ARGUMENT_MSG.search(msg):
            return Cause("needs_arguments", f"could not construct it: {text[:200]}", base)
    if stage == "forward":
        if short == "NotCallable":
            return Cause("other", msg[:200], base)
        if short == "NotImplementedError" and "forward" in msg:
            return Cause("other", f"forward not implemented: {msg[:200]}", base)
        return Cause("probe_shape", f"forward failed on every probe input; on the first: "
                     f"{text[:200]}", {**base, "probes": (detail or {}).get("probes")})
    return Cause("other", text[:300], base)


def _from_exit(stage: str, exit: dict) -> Cause:
    sig = exit.get("signal")
    if sig in ("SIGXCPU",):
        return Cause("timeout", f"CPU time limit reached in {stage}", {"stage": stage,
                                                                        "signal": sig})
    if sig == "SIGKILL":
        # not ours (ours is reported as a timeout): the kernel's OOM killer, in practice
        return Cause("memory_limit", f"killed (SIGKILL, out of memory?) in {stage}",
                     {"stage": stage, "signal": sig})
    if sig:
        return Cause("signal", f"crashed by {sig} in {stage}", {"stage": stage, "signal": sig})
    code = exit.get("code")
    if code is not None:
        return Cause("other", f"the process exited with code {code} during {stage} "
                     f"(os._exit?) without reporting", {"stage": stage, "exit_code": code})
    return Cause("other", f"{stage} ended without a report", {"stage": stage})


def _from_import_error(stage, error, msg, base, frames) -> Cause:
    module = error.get("module") or ""
    m = re.search(r"No module named '([^']+)'", msg)
    if m and not module:
        module = m.group(1)
    if _BLOCKED_MSG in msg:
        return Cause("not_standalone",
                     f"imports {module}, a package of the corpus that the file does not "
                     f"inline (blocked: a validated block stands alone); the file's header "
                     f"says why it stays an import", {**base, "module": module})
    if _CIRCULAR_MSG.search(msg):
        return Cause("circular_import", f"circular import: {msg[:200]}", {**base,
                                                                          "module": module})
    if _NATIVE_MSG.search(msg) or (module and is_native_module(module)):
        return Cause("native_op", f"native extension unavailable: {module or msg[:200]}",
                     {**base, "module": module, "distribution": distribution_for(module)})
    if _registry_code(frames) and stage != "import":
        return Cause("dynamic_registry", f"import by name failed: {msg[:200]}",
                     {**base, "module": module})
    m2 = re.search(r"cannot import name '([^']+)' from '([^']+)'", msg)
    if m2:
        name, mod = m2.groups()
        dist = distribution_for(mod)
        version = _version(dist)
        return Cause("missing_external", f"{mod} has no {name}"
                     + (f" (installed {dist} {version})" if version else ""),
                     {**base, "module": mod, "name": name, "distribution": dist,
                      "installed": version})
    top = module.split(".")[0] if module else ""
    dist = distribution_for(module) if module else None
    installed = _version(dist) if dist and top in _installed() else None
    if installed and module == top:
        # installed where nnrag runs, yet the package itself is not found where the block ran
        summary = (f"{module} cannot be imported where the block runs, though {dist} "
                   f"{installed} is installed here (the sandbox's interpreter does not see it)")
    elif installed:
        summary = f"{module} is not in the installed {dist} {installed}"
    else:
        summary = f"missing package: {module or msg[:200]}" + (f" (pip install {dist})"
                                                               if dist else "")
    return Cause("missing_external", summary, {**base, "module": module, "distribution": dist,
                                               "installed": installed})


def _version(dist: str | None) -> str | None:
    if not dist:
        return None
    from importlib import metadata

    try:
        return metadata.version(dist)
    except Exception:  # noqa: BLE001
        return None


def _from_name_error(stage, error, msg, base, frames, code) -> Cause:
    name = error.get("name")
    if not name:
        m = re.search(r"name '([^']+)' is not defined", msg)
        name = m.group(1) if m else None
    where = _where(frames)
    detail = {**base, "names": [name] if name else [], "where": where}
    if name and code and stage == "import" and _defined_at_top(code, name):
        return Cause("circular_import", f"{name} is used before its definition "
                     f"(definition order cycle) at {where}", detail)
    if _registry_code(frames[-1:]) and "eval(" in str(frames[-1].get("code", "")):
        return Cause("dynamic_registry", f"eval of a name failed: {msg[:200]}", detail)
    return Cause("unresolved_name", f"{name or msg} is not defined ({where})", detail)


def _where(frames: list[dict]) -> str:
    mine = [f for f in frames if str(f.get("file", "")).endswith("block.py")]
    f = (mine or frames or [{}])[-1]
    if not f:
        return "?"
    func = f.get("func") or "?"
    return f"{'module level' if func == '<module>' else func}, line {f.get('line')}"


def _registry_code(frames: list[dict]) -> bool:
    return any(_REGISTRY_CODE.search(str(f.get("code", ""))) for f in frames[-4:])


def _registry_lookup(short: str, msg: str, frames: list[dict], error: dict) -> dict | None:
    """A failed string-to-object lookup: KeyError with a string key, getattr by name on a
    module, a registry's own 'unknown/not registered' error."""
    if short == "KeyError":
        key = error.get("key") or msg
        return {"key": str(key).strip("'\"")[:100]}
    if short == "AttributeError" and "has no attribute" in msg and _registry_code(frames):
        return {"lookup": msg[:200]}
    if short in ("ValueError", "NotImplementedError", "AssertionError", "RuntimeError",
                 "LookupError") and _REGISTRY_MSG.search(msg) and _registry_code(frames):
        return {"lookup": msg[:200]}
    return None


def _defined_at_top(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return False
    for st in treewalk.walk(tree):
        if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and st.name == name:
            return True
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                              for t in st.targets):
            return True
    return False


# -- tables ----------------------------------------------------------------------------------
def failure_table(reports, *, validated: bool | None = None) -> dict[str, int]:
    """Counts per cause over ``reports`` (ValidationReports or their dicts), most frequent
    first; reports without a cause are not counted. ``validated=False`` counts only the
    reports that missed the validated bar, ``True`` only deeper-level failures."""
    counts: Counter[str] = Counter()
    for r in reports:
        d = r if isinstance(r, dict) else r.as_dict()
        if validated is not None and bool(d.get("validated")) != validated:
            continue
        cause = d.get("cause")
        if cause:
            counts[cause if isinstance(cause, str) else cause.get("kind", "other")] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], CAUSES.index(kv[0])
                                                       if kv[0] in CAUSES else 99)))


def format_failure_table(table: dict[str, int], total: int | None = None) -> str:
    """A plain-text table: cause, count, share."""
    n = total if total is not None else sum(table.values())
    lines = [f"{'cause':<18} {'count':>6} {'share':>7}"]
    for kind, c in table.items():
        share = f"{100 * c / n:.1f}%" if n else "-"
        lines.append(f"{kind:<18} {c:>6} {share:>7}")
    return "\n".join(lines)
