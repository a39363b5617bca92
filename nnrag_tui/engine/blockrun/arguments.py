"""Constructor arguments for a block nobody told us how to build: guessed from each required
parameter's name and annotation (``in_chs`` a channel count, ``num_heads`` 4, ``norm_layer``
``nn.Identity``, ``config`` a config object), or taken from the argument sets the corpus itself
passes (``engine.callsites``), evaluated in the block's module; a refused build is amended
where its error says how (``amend_arguments``). Runs in the sandbox: the standard library and
torch only."""

from __future__ import annotations

import ast
import inspect
import linecache
import re
import sys
import types
import typing

from .errors import safe_str, short

SIZES = (64, 96, 32)  # the channel counts tried, in order


class NoGuess(Exception):
    pass


def call_site_candidates(sets: list[dict], params, required, namespace: dict):
    """(args, kwargs, shown, hints) for each argument set whose expressions evaluate in the
    block's module; an argument that does not is left out (the positional ones after it are
    passed by keyword), and required parameters still missing get the usual guesses."""
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out = []
    for cs in sets[:16]:
        args: list = []
        shown: dict = {}
        kwargs: dict = {}
        gap = False  # an argument left out: the later ones go by keyword
        for p, text in zip(positional, cs.get("args") or []):
            try:
                value = eval(text, dict(namespace))  # noqa: S307  (sandboxed corpus code)
            except Exception:  # noqa: BLE001
                gap = True
                continue
            if not gap:
                args.append(value)
            elif p.kind == p.POSITIONAL_OR_KEYWORD:
                kwargs[p.name] = value
            else:
                continue
            shown[p.name] = short(text)
        for k, text in (cs.get("kwargs") or {}).items():
            if k in shown:
                continue
            try:
                kwargs[k] = eval(text, dict(namespace))  # noqa: S307
            except Exception:  # noqa: BLE001
                continue
            shown[k] = short(text)
        if not shown:
            continue
        missing = [p for p in required if p.name not in shown]
        try:
            more_args, more_kwargs, more_shown = guess_arguments(missing, SIZES[0])
        except NoGuess:
            continue
        if more_args:  # a positional-only parameter the call site did not fill
            continue
        kwargs.update(more_kwargs)
        shown.update(more_shown)
        out.append((tuple(args), kwargs, shown, {"C": None, "call_site": cs.get("where")}))
    return out


_CHANNEL_TOKENS = frozenset({
    "channels", "channel", "chans", "chan", "chs", "ch", "dim", "dims", "features", "feature",
    "feat", "feats", "planes", "plane", "width", "hidden", "embed", "emb", "inp", "oup",
    "units", "filters", "model", "c", "d", "nc", "inplanes", "outplanes", "ni", "nf", "nin",
    "nout", "channels1", "channels2", "c1", "c2", "hid", "latent"})
_TOKEN_COUNTS = frozenset({"seq_len", "max_len", "num_tokens", "num_patches", "max_seq_len",
                           "n_tokens", "length", "seq_length", "num_positions",
                           "max_position_embeddings", "n_ctx", "context_length", "n"})
_SUBMODULE_NAMES = frozenset({
    "block", "module", "fn", "layer", "net", "model", "m", "submodule", "body", "sublayer",
    "func", "function", "backbone", "encoder", "decoder", "inner", "wrapped", "base",
    "residual", "branch", "op", "operation", "transform", "main"})
_UNGUESSABLE = frozenset({"params", "name", "mode", "type", "kind", "block_args", "arch",
                          "path", "file", "filename", "url"})


_SEQ_WANTED = re.compile(r"not subscriptable|not iterable|has no len|cannot unpack|"
                         r"must be a tuple|must be a list")
_SEQ_ASKED = re.compile(r"\b(tuple|list|sequence)\b", re.IGNORECASE)
_SCALAR_NAMES = frozenset({"kernel_size", "stride", "padding", "dilation", "groups",
                           "num_classes", "eps", "p", "drop", "dropout"})


def wants_sequence(exc: BaseException) -> bool:
    """Whether a refused guess asked for a sequence: "'int' object is not iterable", or a
    check of the block's own ("depth needs to be tuple if integers ...", MaxViT)."""
    text = safe_str(exc, 300)
    if isinstance(exc, TypeError):
        return _SEQ_WANTED.search(text) is not None
    return isinstance(exc, (AssertionError, ValueError)) and _SEQ_ASKED.search(text) is not None


# which of the guessed integers become sequences: none; sizes alone, as pairs; the per-stage
# counts alone (depth=(1, 1, 1, 1) beside dim=64); every integer
SEQ_LEVELS = (False, "sizes", "counts", True)
_SIZE_WORDS = ("size", "shape", "resolution")
_COUNT_NAMES = frozenset({"depth", "depths", "layers", "num_layers", "n_layers", "num_blocks",
                          "n_blocks", "blocks", "repeats", "num_repeats", "layer_nums",
                          "stage_blocks", "block_nums"})


def guess_arguments(required, c: int, seq: bool | str = False, namespace: dict | None = None,
                    real_config: bool = False):
    """Guessed values for the required parameters, with channel count ``c``; ``seq`` is one of
    SEQ_LEVELS: which integers are passed as sequences (a size as a pair, a count as four).
    ``real_config``: a parameter annotated with a config class that ``namespace`` (the
    block's module) binds gets an instance of it (see _config_instance); otherwise config
    parameters get a GuessedConfig."""
    from torch import nn

    args: list = []
    kwargs: dict = {}
    shown: dict = {}
    for p in required:
        cls = None
        if real_config:
            cls = _config_class(p.annotation, namespace, nn)
            if cls is None and p.annotation is inspect.Parameter.empty and _is_config_name(p.name):
                cls = _module_config_class(namespace, nn)
        wanted = _annotated_module_class(p.annotation, namespace, nn)
        if cls is not None:
            value, text = _config_instance(cls, c, nn)
        elif wanted is not None:
            value, text = wanted, wanted.__name__
        elif (made := _annotated_instance(p.annotation, namespace, c, nn)) is not None:
            value, text = made
        else:
            value, text = _guess(p.name, p.annotation, c, nn)
        is_size = any(w in p.name for w in _SIZE_WORDS)
        is_count = p.name in _COUNT_NAMES
        if (seq is True or (seq == "sizes" and is_size) or (seq == "counts" and is_count)) \
                and type(value) is int \
                and p.name not in _SCALAR_NAMES:
            n = 2 if is_size else 4
            value, text = (value,) * n, repr((value,) * n)
        shown[p.name] = text
        if p.kind == p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return tuple(args), kwargs, shown


# a parameter's type in a Sphinx docstring field, ":type mean_range: tuple"
_DOC_TYPE = re.compile(r"^\s*:type\s+(\w+)\s*:\s*(\S.*?)\s*$", re.MULTILINE)


def with_documented_types(cls, params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """``params`` of ``cls``'s constructor, each that has no annotation given the type its
    docstring's ``:type name: T`` field says (spikingjelly documents every parameter so:
    ``PopEncoder(obs_dim, pop_dim, spike_ts, mean_range, std)`` with ``:type mean_range:
    tuple``, ``:type std: float``). A documented ``str`` or ``Callable`` is left out: the
    guesses have no value for those, where the name may still tell one."""
    docs = "\n".join(d for d in (getattr(getattr(cls, "__init__", None), "__doc__", None),
                                 getattr(cls, "__doc__", None)) if isinstance(d, str))
    documented: dict[str, str] = {}
    for name, text in _DOC_TYPE.findall(docs):
        documented.setdefault(name, text)
    return [p.replace(annotation=documented[p.name])
            if p.annotation is p.empty and p.name in documented
            and not re.search(r"\b(str|Callable)\b", documented[p.name]) else p
            for p in params]


def _annotated_module_class(annotation, namespace: dict | None, nn):
    """The module class a parameter annotated ``Type[X]`` asks for (torchvision's ``ResNet(
    block: Type[Union[BasicBlock, Bottleneck]], ...)``): the first X that is a subclass of
    ``nn.Module`` other than ``nn.Module`` itself, as the annotation or the block's module
    (for a string annotation) binds it. None for any other annotation."""
    if isinstance(annotation, str):
        m = re.fullmatch(r"\s*(?:typing\.)?(?:Type|type)\[(.*)\]\s*", annotation)
        if m is None:
            return None
        found = [(namespace or {}).get(n) for n in re.findall(r"[A-Za-z_]\w*", m.group(1))]
    elif typing.get_origin(annotation) is type:
        found = []
        todo = list(typing.get_args(annotation))
        while todo:
            a = todo.pop(0)
            if typing.get_origin(a) in (typing.Union, types.UnionType):
                todo[:0] = typing.get_args(a)
            else:
                found.append(a)
    else:
        return None
    for cls in found:
        if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module:
            return cls
    return None


def _annotated_instance(annotation, namespace: dict | None, c: int, nn):
    """(value, text) for a parameter annotated with a layer class of ``torch.nn`` (spikingjelly's
    ``SpikeZIPLinear(linear: nn.Linear, ...)``, which copies the layer it wraps: that layer
    built with ``c`` channels) or with a tensor (``PeriodicEncoder(spike: torch.Tensor)``:
    ``c`` values in [0, 1)), also inside ``Optional[...]``; None for any other annotation."""
    import torch

    target = annotation
    if isinstance(annotation, str):
        m = re.fullmatch(r"\s*(?:Optional\[)?([\w.]+)\]?\s*", annotation)
        target = None
        if m is not None:
            head, *rest = m.group(1).split(".")
            target = (namespace or {}).get(head)
            for attr in rest:
                target = getattr(target, attr, None)
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        target = members[0] if len(members) == 1 else None
    if target is torch.Tensor:
        return torch.rand(c), f"torch.rand({c})"
    if not (isinstance(target, type) and issubclass(target, nn.Module)
            and target.__module__.startswith("torch.nn.") and target is not nn.Module):
        return None
    from torch.nn.modules.batchnorm import _NormBase
    from torch.nn.modules.conv import _ConvNd

    args: tuple = ()
    kwargs: dict = {}
    if issubclass(target, nn.Linear):
        args = (c, c)
    elif issubclass(target, _ConvNd):
        args, kwargs = (c, c, 3), {"padding": 1}
    elif issubclass(target, (nn.LayerNorm, _NormBase)):  # batch and instance norms
        args = (c,)
    elif issubclass(target, nn.GroupNorm):
        args = (1, c)
    elif issubclass(target, nn.Embedding):
        args = (100, c)
    elif issubclass(target, nn.MultiheadAttention):
        args = (c, 4)
    try:
        value = target(*args, **kwargs)
    except Exception:  # noqa: BLE001  (a layer these arguments do not build: no guess)
        return None
    shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    return value, f"nn.{target.__name__}({shown})"


_MISSING = re.compile(r"missing \d+ required (?:positional|keyword-only) arguments?: (.+)")


def amend_arguments(exc: BaseException, cls, params, args: tuple, kwargs: dict, shown: dict,
                    c: int):
    """(args, kwargs, shown) to try after a refused build, or None when the error says
    nothing to amend:

    - ``'NoneType' object is not callable``: each layer parameter left at its default None
      (timm's ``ConvNeXtStage(..., norm_layer=None)``) or passed None by the call site tried,
      and each one annotated as a callable or a class (spikingjelly's ``CIFAR10Net(channels=
      128, spiking_neuron: callable = None)``), gets ``nn.Identity``;
    - ``'int' object is not callable`` (or another guess's type): each argument given that
      the raising line calls (masnn's unannotated ``cell_factory``, guessed 64) gets
      ``nn.Identity``;
    - ``missing ... required argument(s)``, when the class passes its keywords on
      (``QuantizableBasicBlock(*args, **kwargs)``; googlenet's ``BasicConv2d(in_channels,
      out_channels, **kwargs)``, whose ``nn.Conv2d`` misses ``kernel_size``): each missing
      argument gets a guess, from the parameter a base class's ``__init__`` declares where
      there is one (its annotation read in the base's module: ``QuantizableResNet`` gets
      ``ResNet``'s ``block: Type[...]``), else from its name."""
    from torch import nn

    if not isinstance(exc, TypeError):
        return None
    text = safe_str(exc, 500)
    given = dict(zip((p.name for p in params), args), **kwargs)
    if "'NoneType' object is not callable" in text:
        unset = [p.name for p in params if given.get(p.name, p.default) is None
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                 and (_is_layer_name(p.name) or _names_a_callable(p.annotation))]
        return _with_identity(unset, params, args, kwargs, shown)
    if _NOT_CALLABLE.search(text):
        return _with_identity(_called_guesses(exc, given), params, args, kwargs, shown)
    m = _MISSING.search(text)
    if m is None or not any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    names = [n for n in re.findall(r"'(\w+)'", m.group(1)) if n not in kwargs]
    if not names:
        return None
    declared: dict = {}  # name -> (parameter, the module of the base declaring it)
    for base in getattr(cls, "__mro__", ())[1:]:
        init = vars(base).get("__init__")
        try:
            sig = inspect.signature(init) if init is not None else None
        except (TypeError, ValueError):
            sig = None
        namespace = getattr(sys.modules.get(base.__module__), "__dict__", {})
        for p in sig.parameters.values() if sig else ():
            declared.setdefault(p.name, (p, namespace))
    kwargs, shown = dict(kwargs), dict(shown)
    for name in names:
        try:
            if name in declared:
                p, namespace = declared[name]
                _, more, more_shown = guess_arguments(
                    [p.replace(kind=p.KEYWORD_ONLY)], c, namespace=namespace, real_config=True)
                kwargs.update(more)
                shown.update(more_shown)
            else:
                kwargs[name], shown[name] = _guess(name, inspect.Parameter.empty, c, nn)
        except NoGuess:
            return None
        except Exception:  # noqa: BLE001  (a config class refused its guesses)
            return None
    return args, kwargs, shown


# a guess (64, 'same', (64, 64)) the constructor called as a factory: masnn's unannotated
# ``_MaFcBlock(..., cell_factory)`` runs ``self.cell = cell_factory()``
_NOT_CALLABLE = re.compile(r"'(int|float|str|bool|tuple|list|dict)' object is not callable")


def _called_guesses(exc: BaseException, given: dict) -> list[str]:
    """The given arguments the line that raised ``exc`` calls (``name(``) and that are no
    callables, read from the innermost frame holding one of them."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    for frame, line in reversed(frames):
        text = linecache.getline(frame.f_code.co_filename, line)
        called = [n for n in re.findall(r"\b(\w+)\s*\(", text)
                  if n in given and n in frame.f_locals and frame.f_locals[n] is given[n]
                  and not callable(given[n])]
        if called:
            return called
    return []


def _with_identity(names: list[str], params, args: tuple, kwargs: dict, shown: dict):
    """(args, kwargs, shown) with ``nn.Identity`` for the parameters ``names``, passed where
    they were (positionally or by keyword), or None when there are none."""
    from torch import nn

    if not names:
        return None
    passed = {p.name for p in params[:len(args)]}  # (positionally)
    return (tuple(nn.Identity if p.name in names else a for p, a in zip(params, args)),
            dict(kwargs, **{n: nn.Identity for n in names if n not in passed}),
            dict(shown, **dict.fromkeys(names, "nn.Identity")))


def _names_a_callable(annotation) -> bool:
    """An annotation saying the parameter takes a callable or a class: ``callable``,
    ``Callable[...]``, ``Type[...]``, ``type``, also inside ``Optional[...]``."""
    text = annotation_text(annotation)
    return bool(re.fullmatch(r"(Optional\[)?(callable|Callable|Type|type)\b.*", text))


def annotation_text(annotation) -> str:
    """The annotation as written: a class by its name, a generic in full (``Optional[
    Callable[..., Node]]``, not its ``__name__`` "Optional"), ``typing.`` left out."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        text = annotation
    elif isinstance(annotation, type) or typing.get_origin(annotation) is None:
        text = getattr(annotation, "__name__", None) or str(annotation)
    else:
        text = str(annotation)
    return text.replace("typing.", "").replace("collections.abc.", "")


# a config object: these names, and any name with a word cfg or config (model_cfg, ...)
_CONFIG_NAMES = frozenset({"cfg", "config", "conf", "hparams", "hp", "opt", "opts", "args",
                           "settings"})


class GuessedConfig:
    """A stand-in for a config object (nanoGPT's ``Block(config)``, ``cfg["dim"]``): every
    field read gets the guess its name would get as a parameter (``config.n_embd`` 64,
    ``config.n_head`` 4, ``config.dropout`` 0.0), and a field no name can tell is missing
    (``getattr(config, "mode", default)`` gives the default). Its repr lists what was read."""

    def __init__(self, c: int) -> None:
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_fields", {})

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_c", "_fields"):
            raise AttributeError(name)
        fields = self._fields
        if name not in fields:
            from torch import nn

            try:
                fields[name] = _guess(name, inspect.Parameter.empty, self._c, nn)[0]
            except NoGuess:
                raise AttributeError(f"the guessed config has no field {name!r}") from None
        return fields[name]

    def __setattr__(self, name: str, value) -> None:
        self._fields[name] = value

    def __getitem__(self, name):
        try:
            return self.__getattr__(name)
        except AttributeError:
            raise KeyError(name) from None

    def get(self, name, default=None):
        return self._fields[name] if name in self._fields else getattr(self, name, default)

    def __repr__(self) -> str:
        return "config(" + ", ".join(f"{k}={short(repr(v), 40)}"
                                     for k, v in self._fields.items()) + ")"


_CONFIG_CLASS_NAME = re.compile(r"(Config|Cfg|Args|Params|Options|Settings|Hparams)$")
# integer fields of a config class made small when a name tells what they are; the others
# (token ids, channel counts of the input) keep their defaults
_SHRINK_WORDS = _CHANNEL_TOKENS | {"size", "layers", "layer", "heads", "head", "depth",
                                   "vocab", "embeddings", "positions", "intermediate", "blocks",
                                   "embd", "ctx"}


def _config_class(annotation, namespace: dict | None, nn):
    """The config class a parameter is annotated with (``config: LlamaConfig``, ``args:
    ModelArgs``, a string under ``from __future__ import annotations``), as the block's own
    module binds that name: a dataclass or a class named ``...Config``/``...Args``, not a
    module. None when there is none."""
    if annotation is inspect.Parameter.empty:
        return None
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    cls = (namespace or {}).get(name) if isinstance(name, str) and name.isidentifier() else None
    if cls is None and isinstance(annotation, type):
        cls = annotation
    if not isinstance(cls, type) or issubclass(cls, nn.Module) \
            or cls.__module__ in ("builtins", "typing", "collections"):
        return None
    import dataclasses

    if dataclasses.is_dataclass(cls) or _CONFIG_CLASS_NAME.search(cls.__name__):
        return cls
    return None


def _module_config_class(namespace: dict | None, nn):
    """The one config class the block's module binds, for an unannotated ``config``
    parameter (transformers' ``GPT2Block(config, layer_idx=None)`` beside ``GPT2Config``):
    the most derived of the classes named ``...Config`` (not their base
    ``PreTrainedConfig``). None when there is not exactly one."""
    found = list({id(v): v for k, v in (namespace or {}).items()  # aliases are one class
                  if isinstance(v, type) and k.endswith("Config")
                  and _config_class(v, None, nn)}.values())
    leaves = [a for a in found if not any(b is not a and issubclass(b, a) for b in found)]
    return leaves[0] if len(leaves) == 1 else None


def _is_config_name(name: str) -> bool:
    n = name.lower()
    return n in _CONFIG_NAMES or bool({"cfg", "config"} & set(n.split("_")))


def _config_instance(cls, c: int, nn):
    """An instance of a config class with its own defaults, where each integer field a name
    can tell is made small (transformers' ``LlamaConfig(hidden_size=64, num_hidden_layers=1,
    num_attention_heads=4, ...)`` instead of a 4096-wide, 32-layer model) and each required
    field guessed. Raises NoGuess when a required field cannot be guessed."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        params = []
    kwargs: dict = {}
    # a vocabulary keeps room for the token ids the config names (GPT-2's eos 50256)
    ids = [p.default for p in params if p.name.endswith("token_id") and type(p.default) is int]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        if p.default is inspect.Parameter.empty:
            kwargs[p.name] = _guess(p.name, p.annotation, c, nn)[0]
        elif type(p.default) is int and _SHRINK_WORDS & set(p.name.lower().split("_")):
            try:
                value = _guess_scalar(p.name, p.annotation, c, nn)[0]
            except NoGuess:
                continue
            if "vocab" in p.name.lower() and ids:
                value = max(value, max(ids) + 1)
            if type(value) is int and 0 < value < p.default:
                kwargs[p.name] = value
    text = f"{cls.__name__}(" + ", ".join(f"{k}={short(repr(v), 40)}"
                                          for k, v in kwargs.items()) + ")"
    return cls(**kwargs), text


_COUNT_WORDS = frozenset({"num", "nums", "count", "per"})
_LAYER_NAMES = frozenset({"act", "activation", "norm", "act_fn", "norm_fn", "act_type",
                          "norm_type"})


def _is_layer_name(name: str) -> bool:
    """A parameter that takes a layer class or factory (``norm_layer``, ``act``,
    ``block_cls``), not a count of layers (``layer_num``)."""
    n = name.lower()
    tokens = set(n.split("_"))
    return bool(tokens & {"layer", "cls", "class"} or n in _LAYER_NAMES) \
        and not tokens & _COUNT_WORDS


def _guess(name: str, annotation, c: int, nn):
    """A value for a required constructor parameter, from its name and annotation (a
    sequence where the annotation asks for one); a config gets a GuessedConfig. Raises
    NoGuess for parameters no name can tell (paths, modes)."""
    if _is_config_name(name):
        return GuessedConfig(c), "config()"
    value, text = _guess_scalar(name, annotation, c, nn)
    ann = annotation_text(annotation)
    if type(value) is int and re.match(r"(Tuple|List|Sequence|tuple|list)\b", ann):
        # a size or a range (``mean_range``: min, max) is a pair, a per-stage list four long
        n = 2 if "size" in name or "range" in name or re.match(r"(Tuple|tuple)\[int, ?int\]$",
                                                                 ann) else 4
        return (value,) * n, repr((value,) * n)
    return value, text


def _guess_scalar(name: str, annotation, c: int, nn):
    n = name.lower()
    tokens = set(n.split("_"))
    ann = annotation_text(annotation)
    # one of the values a Literal lists (spikingjelly's ``mode: Literal["colwise",
    # "rowwise"]``): the first
    if typing.get_origin(annotation) is typing.Literal and typing.get_args(annotation):
        value = typing.get_args(annotation)[0]
        return value, repr(value)
    if ann.startswith("Literal["):  # a string annotation
        try:
            listed = ast.parse(ann, mode="eval").body.slice
            value = ast.literal_eval(listed.elts[0] if isinstance(listed, ast.Tuple) else listed)
        except (ValueError, SyntaxError, AttributeError, IndexError):
            value = None
        if isinstance(value, (str, int, float, bool)):
            return value, repr(value)
    if n in _UNGUESSABLE:
        raise NoGuess(name)
    # keywords passed on (spikingjelly's ``neuron_kwargs: Dict[str, Any]``): none
    if n.endswith("kwargs") or re.match(r"(Dict|dict|Mapping|MutableMapping)\b", ann):
        return {}, "{}"
    # a factory that may be None (``spiking_neuron: Optional[Callable[..., BaseNode]]``):
    # None, the block's own choice (spikingjelly builds its LIFNode); one the block calls
    # gets nn.Identity next (amend_arguments)
    if re.match(r"Optional\[(Callable|callable|Type|type)\b", ann):
        return None, "None"
    # a sequence of classes or callables (torchvision's ``Compose(transforms: Sequence[
    # Callable])``, timm's ``NextStage(..., block_types: List[Type[nn.Module]])``), also as
    # the first of a Union (``RandomApply(transforms: Union[Sequence[Callable], ModuleList])``)
    m = re.match(r"(?:Union\[)?(?:Sequence|List|Iterable|Tuple|list|tuple)\[(.*)\]", ann)
    if m is not None and re.match(r"(Type|type)\b", m.group(1)):
        return [nn.Identity], "[nn.Identity]"
    if m is not None and (re.match(r"(Callable|callable)\b", m.group(1))
                          or "Module" in m.group(1)):
        return [nn.Identity()], "[nn.Identity()]"
    # a compound name is what its last word says: cls_depth and cross_attn_depth are counts,
    # cross_attn_heads a head count, image_patch_size a patch size
    last = n.rsplit("_", 1)[-1]
    if n.endswith("patch_size"):
        return 4, "4"
    if last in ("idx", "index") and last != n:  # layer_idx: a position, not a layer
        return 0, "0"
    if last != n and last in ("depth", "layers"):
        return 1, "1"
    if last != n and last == "heads":
        return 4, "4"
    if n in ("num_heads", "heads", "n_heads", "nhead", "n_head", "num_attention_heads",
             "attn_heads", "num_head", "nheads"):
        return 4, "4"
    if n in ("head_dim", "dim_head", "head_size", "d_head", "d_k", "d_v", "head_channels"):
        return c // 4, str(c // 4)
    if n in ("num_classes", "n_classes", "classes", "num_class", "n_class", "nclass",
             "num_labels", "out_classes"):
        return 10, "10"
    if n in ("kernel_size", "kernel", "k", "ksize", "kernel_sizes", "filter_size"):
        return 3, "3"
    if n in ("stride", "s", "dilation", "groups", "g", "num_layers", "depth", "depths", "n_layers",
             "layers", "num_blocks", "n_blocks", "upscale_factor", "factor", "repeats",
             "num_repeats", "n_layer"):
        return 1, "1"
    if n in ("padding", "pad"):
        return 1, "1"
    if n in ("num_groups", "n_groups", "reduction", "reduction_ratio", "rd_ratio", "r",
             "ratio", "expansion", "expand_ratio", "mlp_ratio", "window_size", "patch_size",
             "pool_size", "scale_factor", "downsample_factor", "scale", "rd_divisor"):
        if "ratio" in tokens and "float" in ann:
            return 4.0, "4.0"
        return (2.0, "2.0") if n == "scale_factor" else (4, "4")
    if n in ("img_size", "image_size", "input_size", "resolution", "input_resolution",
             "size", "feat_size", "grid_size", "output_size", "img_shape"):
        return 16, "16"
    if n in _TOKEN_COUNTS:
        return 16, "16"
    if n in ("num_embeddings", "vocab_size", "n_vocab", "vocab"):
        return 100, "100"
    if n in ("eps", "epsilon", "norm_eps", "layer_norm_eps"):
        return 1e-5, "1e-05"
    if tokens & {"drop", "dropout", "prob", "pdrop"} or n in ("p", "attn_drop", "proj_drop"):
        return 0.0, "0.0"
    if n in ("normalized_shape", "num_features", "embedding_dim", "in_features",
             "out_features"):
        return c, str(c)
    if ann == "float" or (last == "scale" and last != n):  # layer_scale: not a layer
        return 1.0, "1.0"
    if n == "dtype" or ann in ("dtype", "torch.dtype"):
        import torch

        return torch.float32, "torch.float32"
    if tokens & {"layer", "layers"} and tokens & _COUNT_WORDS:  # layer_num, layers_per_block
        return 1, "1"
    if _is_layer_name(n):
        return nn.Identity, "nn.Identity"  # accepts and ignores any arguments
    if n in _SUBMODULE_NAMES or "Module" in ann:
        return nn.Identity(), "nn.Identity()"
    if n in ("bias", "affine", "elementwise_affine", "batch_first"):
        return True, "True"
    if ann == "bool" or n.startswith(("use_", "is_", "has_", "with_", "enable", "return_")):
        return False, "False"
    if tokens & _CHANNEL_TOKENS or n.startswith(("in_", "out_", "num_", "n_")):
        return c, str(c)
    if ann == "str" or "Callable" in ann:
        raise NoGuess(name)
    return c, str(c)
