"""Inputs for a block's forward: the layout and channel count its first parameterised layer
expects (an image, tokens, indices), at a few sizes, and the values of its other parameters
(``H``/``W``, a mask, a target). Runs in the sandbox: the standard library and torch only."""

from __future__ import annotations

import ast
import inspect
import math
import re
import textwrap

from .arguments import annotation_text
from .errors import safe_str


def _first_layer(module, nn):
    """(kind, channels) of the first parameterised layer, the usual entry point."""
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.conv import _ConvNd

    for m in module.modules():
        if isinstance(m, _ConvNd):
            nd = len(m.kernel_size)
            if m.in_channels:
                return ({1: "ncl", 2: "nchw", 3: "ncdhw"}.get(nd, "nchw"), m.in_channels)
        elif isinstance(m, nn.Linear) and m.in_features:
            return ("tokens", m.in_features)
        elif isinstance(m, nn.LayerNorm) and m.normalized_shape:
            return ("tokens", int(m.normalized_shape[-1]))
        elif isinstance(m, nn.Embedding):
            return ("index", m.num_embeddings)
        elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)) and m.num_features:
            return ("nchw", m.num_features)
        elif isinstance(m, nn.BatchNorm1d) and m.num_features:
            return ("nc", m.num_features)
        elif isinstance(m, (nn.BatchNorm3d, nn.InstanceNorm3d)) and m.num_features:
            return ("ncdhw", m.num_features)
        elif isinstance(m, _BatchNorm) and m.num_features:
            return ("nchw", m.num_features)
        elif isinstance(m, nn.GroupNorm):
            return ("nchw", m.num_channels)
    return None


def _shapes(kind: str, c: int, h: int) -> list[tuple]:
    n = 16
    return {
        "nchw": [(2, c, h, h)],
        "tokens": [(2, n, c)],
        "nc": [(2, c), (2, c, n)],
        "ncl": [(2, c, n)],
        "ncdhw": [(2, c, 4, h, h)],
        "nhwc": [(2, h, h, c)],
        "index": [(2, n)],
    }[kind]


MAX_PROBES = 12
_FIRST_PROBE_MAX_PIXELS = 384 * 384
_IMAGE_SIZE_ATTRS = ("img_size", "image_size", "input_size", "pretrain_img_size")


def _declared_image_size(module) -> tuple[int, int] | None:
    """(H, W) a network declares it was built for (timm's ``img_size``, a patch embedding's
    ``img_size``), looked up on the module itself, then on its direct children in definition
    order (deeper layers' sizes are feature sizes); None when nothing declares one."""
    for m in (module, *module.children()):
        for attr in _IMAGE_SIZE_ATTRS:
            value = m.__dict__.get(attr)
            if isinstance(value, int) and not isinstance(value, bool):
                value = (value, value)
            if isinstance(value, (tuple, list)) and len(value) == 3:
                value = tuple(value)[1:]  # (C, H, W)
            if (isinstance(value, (tuple, list)) and len(value) == 2
                    and all(type(v) is int and 8 <= v <= 1024 for v in value)):
                return int(value[0]), int(value[1])
    return None


def probe_inputs(state: dict, module, nn) -> list[tuple[str, tuple, int]]:
    """Plausible inputs (kind, shape, channels), most likely first, no duplicates: one image of
    the size the network declares (a ViT built for 224 px asserts it; a large one is tried
    late), then the first
    parameterised layer's expectation at several sizes (odd ones for Inception-style blocks,
    224 px last for whole networks), then the sizes used at construction in other layouts,
    then the usual 3-channel image and 64-channel feature shapes."""
    out: list[tuple[str, tuple, int]] = []

    def add(kind, c, h=32):
        if not c or c <= 0:
            return
        for s in _shapes(kind, int(c), h):
            if all(sh != s or (k == "index") != (kind == "index") for k, sh, _ in out):
                out.append((kind, s, int(c)))

    first = _first_layer(module, nn) if isinstance(module, nn.Module) else None
    c_used = state.get("hints", {}).get("C")
    declared = _declared_image_size(module) if first and first[0] == "nchw" else None
    if declared and declared[0] * declared[1] <= _FIRST_PROBE_MAX_PIXELS:
        out.append(("nchw", (1, first[1], *declared), first[1]))
    if first:
        kind, c = first
        if kind == "nchw":
            for h in (32, 16, 35, 17, 8):
                add("nchw", c, h)
        elif kind == "tokens":
            add("tokens", c)
            add("nc", c)
            add("nhwc", c, 8)
            add("nchw", c, 8)
        else:
            add(kind, c, 32)
    for c in [x for x in (c_used, first[1] if first and first[0] != "index" else None, 3, 64)
              if x]:
        for kind in ("nchw", "tokens", "nc", "ncl", "nhwc"):
            add(kind, c, 32)
    if first and first[0] == "nchw":
        add("nchw", first[1], 224)
    elif not first:
        add("nchw", 3, 224)
    if declared and declared[0] * declared[1] > _FIRST_PROBE_MAX_PIXELS:
        # a large input (SAM's 1024 px) can take longer than the forward timeout: the small
        # sizes first, then this one while it is still among the inputs tried
        out.insert(min(len(out), MAX_PROBES - 1), ("nchw", (1, first[1], *declared), first[1]))
    return out


# what an error says of the rank its forward wants: the axes by letter (spikingjelly's
# "expected x with shape [T, N, C, H, W]"), the rank itself ("expected 5D input"), an index
# one past the last axis ("expected to be in range of [-4, 3], but got 4"), or a shape
# unpacked into one more name than it has ("T, B, C, H, W = x.shape")
_AXES_BY_LETTER = re.compile(r"\[([A-Z]\w*(?:, ?[A-Z]\w*)+)\]")
_RANK = re.compile(r"expected (\d)D input")
_INDEX_PAST = re.compile(r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], "
                         r"but got (\d+)\)")
_UNPACKED = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)")
STEPS = 2  # the leading axis added: time steps (spikingjelly's multi-step mode), kept small
STEP_PROBES_PER_RANK = 2
MAX_STEP_PROBES = 6
_STEP = "steps+"  # a probe's kind with that axis added: "steps+nchw"


def wanted_ranks(exc: BaseException, rank: int) -> set[int]:
    """The ranks ``exc`` says the forward wants, given an input of rank ``rank``."""
    msg = safe_str(exc, 500)
    ranks = {len(m.split(",")) for m in _AXES_BY_LETTER.findall(msg)}
    ranks |= {int(m) for m in _RANK.findall(msg)}
    if any(int(n) == rank and int(got) == rank for n, got in _INDEX_PAST.findall(msg)):
        ranks.add(rank + 1)
    ranks |= {int(want) for want, got in _UNPACKED.findall(msg) if int(got) == rank}
    return ranks


def add_step_probes(probes: list[tuple[str, tuple, int]], probe: tuple[str, tuple, int],
                    exc: BaseException) -> None:
    """Append to ``probes`` inputs with a leading axis of ``STEPS`` when ``probe``'s error says
    the forward wants one more axis than some probe has (a multi-step spiking block's
    ``[T, N, C, H, W]``): the first ``STEP_PROBES_PER_RANK`` probes of that rank, ``probe``
    first, each given the axis. They go after the listed probes, which they cannot displace,
    and at most ``MAX_STEP_PROBES`` of them."""
    ranks = wanted_ranks(exc, len(probe[1]))
    if probe[0] == "none" or not ranks:
        return
    listed = [p for p in (probe, *probes) if p[0] != "none" and not p[0].startswith(_STEP)]
    for rank in sorted(ranks):
        fitting = dict.fromkeys(p for p in listed if len(p[1]) + 1 == rank)
        for kind, shape, c in list(fitting)[:STEP_PROBES_PER_RANK]:
            stepped = (_STEP + kind, (STEPS, *shape), c)
            if stepped in probes:
                continue
            if sum(k.startswith(_STEP) for k, _, _ in probes) >= MAX_STEP_PROBES:
                return
            probes.append(stepped)


def probe_tensor(kind: str, shape: tuple, c: int, torch):
    """The input a probe describes: indices below ``c`` for an embedding, else normal noise."""
    if kind.removeprefix(_STEP) == "index":
        return torch.randint(0, max(1, c), shape)
    return torch.randn(*shape)


_SPATIAL_INT = {"h", "w", "height", "width", "H", "W"}
_SPATIAL_TUPLE = {"hw_shape", "feat_size", "size", "shape", "input_size", "hw", "x_size",
                  "spatial_shape", "resolution", "hw_size", "feat_shape", "image_size"}
TARGET_NAMES = {"target", "targets", "label", "labels", "y", "gt", "y_true"}


def forward_args(sig_params, x, kind, torch):
    """Arguments for forward given the probe tensor; None when a parameter has no guess."""
    args = []
    shape = x.shape
    if kind.startswith(_STEP):  # the sizes are those of one step
        kind, shape = kind.removeprefix(_STEP), shape[1:]
    for p in sig_params:
        n = p.name
        if n in _SPATIAL_INT or n.lower() in _SPATIAL_INT:
            args.append(shape[2] if kind == "nchw" else math.isqrt(shape[1]))
        elif n in _SPATIAL_TUPLE:
            if kind == "nchw":
                args.append((shape[2], shape[3]))
            else:
                s = math.isqrt(shape[1])
                args.append((s, s))
        elif n.lower() in ("mask", "attn_mask", "attention_mask", "key_padding_mask"):
            args.append(None)
        elif n.lower() in TARGET_NAMES:
            args.append(torch.rand_like(x) if x.is_floating_point() else x)
        else:
            args.append(x)
    return args


# a parameter that takes several tensors: torchvision's detection heads' ``forward(self, x:
# List[Tensor])``, timm's ``DlaRoot.forward(self, x_children: List[torch.Tensor])``, an FPN's
# ``Dict[str, Tensor]``
_TENSORS = re.compile(r"(?:Optional\[)?(?:List|Sequence|Tuple|Iterable|list|tuple)\[(?:torch\.)?"
                      r"Tensor\b")
_TENSORS_BY_NAME = re.compile(r"(?:Optional\[)?(?:Dict|OrderedDict|Mapping|dict)\[str, ?"
                              r"(?:torch\.)?Tensor\]")


def forward_variants(sig_params, x, kind, torch) -> list[list]:
    """The argument lists to try with the probe ``x``, most plausible first: ``forward_args``;
    then, where a parameter is a target and ``x`` is (N, C), class indices for it; then, where
    a parameter is annotated as a list or dict of tensors, ``[x]`` or ``{"0": x}`` for it
    (after the plain call, so a block that takes the tensor itself keeps its input)."""
    args = forward_args(sig_params, x, kind, torch)
    out = [args]
    targets = [i for i, p in enumerate(sig_params) if p.name.lower() in TARGET_NAMES]
    if targets and x is not None and x.dim() == 2:
        alt = list(args)
        for i in targets:
            alt[i] = torch.randint(0, x.shape[1], (x.shape[0],))
        out.append(alt)
    wrapped = list(args)
    for i, p in enumerate(sig_params):
        text = annotation_text(p.annotation)
        if wrapped[i] is x and _TENSORS.match(text):
            wrapped[i] = [x]
        elif wrapped[i] is x and _TENSORS_BY_NAME.match(text):
            wrapped[i] = {"0": x}
    if any(a is not b for a, b in zip(wrapped, args)):
        out.append(wrapped)
    return out


def entry_point(module):
    """Whose parameters calling ``module`` takes: its class's own ``__call__`` where that
    overrides the ``forward`` (timm's JsdCrossEntropy has ``__call__(output, target)`` and
    only ``nn.Module``'s unimplemented ``forward``; torchvision's RandomCropVideo has
    ``__call__(clip)`` over RandomCrop's), unless it only passes ``*args, **kwargs`` on
    (a ``__call__`` kept for type hints); otherwise its ``forward``."""
    mro = type(module).__mro__

    def owner(attr: str) -> int | None:
        return next((i for i, c in enumerate(mro) if attr in vars(c)), None)

    call, fwd = owner("__call__"), owner("forward")
    if call is not None and fwd is not None and call < fwd:
        try:
            params = inspect.signature(module.__call__).parameters.values()
        except (TypeError, ValueError):
            params = None
        unimplemented = getattr(vars(mro[fwd])["forward"], "__name__",
                                "") == "_forward_unimplemented"
        if unimplemented or (params is not None and any(
                p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)):
            return module.__call__
    return getattr(module, "forward", module)


def entry_signature(module) -> inspect.Signature:
    """The signature of ``entry_point(module)``, a parameter without an annotation taking the
    one its function's type comment gives (torchvision's RetinaNet heads: ``def forward(self,
    x):`` then ``# type: (list[Tensor]) -> Tensor``). Raises as ``inspect.signature`` does."""
    fn = entry_point(module)
    sig = inspect.signature(fn)
    commented = _comment_types(fn)
    params = list(sig.parameters.values())
    if commented is None or len(commented) != len(params):
        return sig
    return sig.replace(parameters=[
        p.replace(annotation=t) if p.annotation is p.empty else p
        for p, t in zip(params, commented)])


def _comment_types(fn) -> list[str] | None:
    """The parameter types a function's PEP 484 type comment gives, as written (``self``
    left out, as the comment leaves it out); None without one or without its source."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source, type_comments=True)
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    node = tree.body[0] if tree.body else None
    comment = getattr(node, "type_comment", None)
    if not comment:
        return None
    try:
        func_type = ast.parse(comment, mode="func_type")
    except SyntaxError:
        return None
    return [ast.unparse(t) for t in func_type.argtypes]


def forward_required(module) -> list[inspect.Parameter]:
    """The positional parameters ``module``'s forward needs (``*args`` alone counts as one)."""
    try:
        params = list(entry_signature(module).parameters.values())
    except (TypeError, ValueError):
        params = []
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not required and any(p.kind == p.VAR_POSITIONAL for p in params):
        required = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)]
    return required


def optional_input(module) -> list[inspect.Parameter]:
    """The first positional parameter of a forward whose parameters are all optional
    (transformers' ``forward(self, input_ids=None, attention_mask=None, ...)``), as the one
    to feed when a call without arguments fails."""
    try:
        params = list(entry_signature(module).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:1]


def not_about_shapes(exc: BaseException) -> bool:
    """Errors that another input shape cannot fix: stop probing."""
    if isinstance(exc, (NameError, ImportError, NotImplementedError, SyntaxError,
                        RecursionError, UnboundLocalError)):
        return True
    msg = safe_str(exc, 500)
    return any(w in msg for w in ("CUDA", "cuda", "NVIDIA", "torch.ops", "No such operator",
                                  "can't allocate memory"))
