"""BlockDiscovery: nn.Module subclasses through the whole class hierarchy of the corpus.

Bases are resolved through each module's imports (never by bare name), through any chain of
corpus and torch classes, and through modules of the source's own tree that its ``paths`` leave
out (read on demand, see ``unindexed``). A block is concrete (no unimplemented abstract method,
a ``forward`` that does more than raise NotImplementedError) and has a ``forward``, its own or
inherited, or a ``__call__`` of its own (or inherited from the corpus) that does the work itself
(timm's JsdCrossEntropy).
Each block gets one of the paper's eight categories and the rule that decided it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nnrag_tui.engine.bindings import ModuleEntry, ModuleIndex, Target
from nnrag_tui.engine.config import SymbolPatterns
from nnrag_tui.engine.facts import Block, Symbol

if TYPE_CHECKING:  # the app loads discovery's categories at start, never the parser
    from nnrag_tui.engine.unindexed import UnindexedModules

CATEGORIES = (
    "attention",
    "convolution",
    "transformer_block",
    "pooling",
    "normalization",
    "loss",
    "architecture",
    "utility",
)

# The root of every module, in the installed torch and as a corpus class when torch/nn is indexed.
MODULE_ROOTS = frozenset({
    "torch.nn.Module",
    "torch.nn.modules.Module",
    "torch.nn.modules.module.Module",
    "torch.jit.ScriptModule",
    "torch.jit._script.ScriptModule",
})
TORCH_MODULE_PREFIXES = ("torch.nn.", "torch.ao.nn.")
NOT_MODULES = frozenset({"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer",
                         "ParameterList", "ParameterDict", "UninitializedTensorMixin"})
# bases whose metaclass is ABCMeta (typing.Protocol's is derived from it)
ABC_BASES = frozenset({"abc.ABC", "typing.Protocol", "typing_extensions.Protocol"})
WITHOUT_FORWARD = frozenset({"Module", "ModuleList", "ModuleDict", "Container", "ScriptModule",
                             "LazyModuleMixin"})
# nn.Module subclasses of frameworks, made to be subclassed, as they are named where a
# repository imports them without the framework being a source: a research repository's own
# model is often one (enformer-pytorch's ``Enformer(PreTrainedModel)``, a ``LightningModule``,
# an OpenMMLab ``BaseModule``). None of them has a forward that does a subclass's work, so only
# a subclass with a forward of its own is a block. Where the framework's tree is on disk (a
# source indexed by some of its paths, engine.unindexed), its own class is read instead.
FRAMEWORK_MODULES = frozenset({
    "transformers.PreTrainedModel",
    "transformers.modeling_utils.PreTrainedModel",
    "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.module.LightningModule",
    "pytorch_lightning.core.lightning.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule",
    "lightning.pytorch.core.module.LightningModule",
    "diffusers.ModelMixin",
    "diffusers.models.ModelMixin",
    "diffusers.models.modeling_utils.ModelMixin",
    "mmengine.model.BaseModule",
    "mmengine.model.base_module.BaseModule",
    "mmengine.model.BaseModel",
    "mmengine.model.base_model.BaseModel",
    "mmengine.model.base_model.base_model.BaseModel",
    "mmcv.runner.BaseModule",
    "mmcv.runner.base_module.BaseModule",
    "torch_geometric.nn.MessagePassing",
    "torch_geometric.nn.conv.MessagePassing",
    "torch_geometric.nn.conv.message_passing.MessagePassing",
})


@dataclass(frozen=True)
class _ClassInfo:
    is_module: bool
    has_forward: bool
    abstract: frozenset[str]  # @abstractmethod (or a raising forward) not overridden
    abc: bool  # ABCMeta is its metaclass: only then does @abstractmethod stop instantiation
    bases: tuple[str, ...]
    base_categories: tuple[tuple[str, str], ...]  # (qualified base, its category)
    # the framework class of a whole model (``_WHOLE_MODEL_BASES``) it derives from, if any
    model_base: str | None = None


def external_is_module(name: str) -> bool:
    """Whether an external dotted name is a torch module class (decided without importing
    torch: torch.nn's public classes are CamelCase, its functions and submodules are not)."""
    if name in MODULE_ROOTS:
        return True
    if not name.startswith(TORCH_MODULE_PREFIXES):
        return False
    parts = name.split(".")
    if any(p in ("functional", "init", "utils", "parameter", "grad") for p in parts[2:-1]):
        return False
    last = parts[-1]
    core = last.lstrip("_")
    return bool(core) and core[0].isupper() and last not in NOT_MODULES


def external_has_forward(name: str) -> bool:
    return name.rsplit(".", 1)[-1] not in WITHOUT_FORWARD


def framework_module(name: str) -> bool:
    """Whether an external dotted name is a framework's module class made to be subclassed
    (``FRAMEWORK_MODULES``, and the ``XPreTrainedModel`` classes of transformers' models but
    for their TensorFlow and Flax twins), which has no forward of its own."""
    if name in FRAMEWORK_MODULES:
        return True
    last = name.rsplit(".", 1)[-1]
    return name.startswith("transformers.") and last.endswith("PreTrainedModel") \
        and not last.startswith(("TF", "Flax"))


class BlockDiscovery:
    def __init__(self, index: ModuleIndex, patterns: dict[str, SymbolPatterns] | None = None,
                 unindexed: UnindexedModules | None = None):
        self.index = index
        self.patterns = patterns or {}
        # bases in the source's own tree but outside its indexed paths
        self.unindexed = unindexed
        self._info: dict[tuple[tuple[str, str], str], _ClassInfo] = {}

    def discover(self) -> list[tuple[int, Block]]:
        out: list[tuple[int, Block]] = []
        for entry in self.index.entries.values():
            pats = self.patterns.get(entry.source)
            for qual, sym in entry.classes.items():
                if pats is not None and not pats.allows(entry.module, qual):
                    continue
                if sym.guard.kind == "type_checking":
                    continue  # exists only for type checkers (peft's ``_LoraPeftModel``)
                info = self.class_info(entry, sym)
                if not info.is_module or not info.has_forward or (info.abc and info.abstract):
                    continue
                if f"{entry.module}.{qual}" in MODULE_ROOTS:
                    continue
                category, rule = categorize(entry, sym, info)
                out.append((entry.file_id, Block(
                    source=entry.source,
                    module=entry.module,
                    qualname=qual,
                    relpath=entry.facts.relpath,
                    line=sym.line,
                    end_line=sym.end_line,
                    category=category,
                    rule=rule,
                    bases=info.bases,
                    doc=sym.doc,
                    guard=sym.guard.kind,
                )))
        return out

    def resolve_base(self, entry: ModuleEntry, expr: str) -> Target:
        m = re.match(r"[A-Za-z_][\w.]*", expr)
        if not m:
            return Target("unresolved", expr, note="base is not a name")
        return self.index.resolve_dotted(entry, m.group(0).rstrip("."))

    def class_info(self, entry: ModuleEntry, sym: Symbol) -> _ClassInfo:
        key = (entry.key, sym.qualname)
        hit = self._info.get(key)
        if hit is not None:
            return hit
        # Cycle guard: a class that (through broken code) inherits from itself is no module.
        self._info[key] = _ClassInfo(False, False, frozenset(), False, (), ())
        qualified = f"{entry.module}.{sym.qualname}"
        own = set(sym.methods)
        is_module = qualified in MODULE_ROOTS
        # a forward marked @abstractmethod is an interface (guided-diffusion's TimestepBlock),
        # with or without ABCMeta
        # an own ``__call__`` doing the work is called in forward's stead (``parse.call_runs``)
        has_forward = not is_module and (sym.call_runs or (
            "forward" in own and not sym.forward_raises
            and "forward" not in sym.abstract_methods))
        abstract: set[str] = set(sym.abstract_methods)
        inherited_abstract: set[str] = set()
        # torch_geometric's MessagePassing(torch.nn.Module) marks message_and_aggregate
        # @abstractmethod, but without ABCMeta that stops nothing: GCNConv and the other
        # subclasses that leave it out are blocks
        is_abc = any(k.startswith("metaclass=") and self.is_abcmeta(entry, k[len("metaclass="):])
                     for k in sym.keywords)
        bases: list[str] = []
        base_cats: list[tuple[str, str]] = []
        model_base: str | None = None
        for expr, t in self.base_targets(entry, sym):
            found = self.index.class_symbol(t)
            if (found is None and t.kind == "external" and self.unindexed is not None
                    and not external_is_module(t.name)):
                found = self.unindexed.class_symbol(entry.source, t.name)
            if found is not None:
                b_entry, b_sym = found
                b = self.class_info(b_entry, b_sym)
                bq = f"{b_entry.module}.{b_sym.qualname}"
                bases.append(bq)
                is_module |= b.is_module
                if "forward" not in own:
                    has_forward |= b.has_forward
                inherited_abstract |= b.abstract
                is_abc |= b.abc
                model_base = model_base or b.model_base
                if b.is_module and b.has_forward:
                    base_cats.append((bq, _name_category(b_sym.name) or (
                        "architecture" if _arch_name(b_sym.name) else "")))
            elif t.kind == "external":
                bases.append(t.name)
                is_abc |= t.name in ABC_BASES
                if external_is_module(t.name):
                    is_module = True
                    if "forward" not in own and external_has_forward(t.name):
                        has_forward = True
                    base_cats.append((t.name, _name_category(t.name.rsplit(".", 1)[-1]) or ""))
                elif framework_module(t.name):
                    is_module = True  # (its forward, if any, is the subclass's own)
                    if t.name.endswith(_WHOLE_MODEL_BASES):
                        model_base = model_base or t.name
            else:
                bases.append(t.qualified if t.kind == "def" else expr)
        if "forward" in own and sym.forward_raises:
            abstract.add("forward")
        abstract |= inherited_abstract - (own - set(sym.abstract_methods))
        info = _ClassInfo(is_module, has_forward, frozenset(abstract), is_abc, tuple(bases),
                          tuple(base_cats), model_base)
        self._info[key] = info
        return info

    def base_targets(self, entry: ModuleEntry, sym: Symbol) -> list[tuple[str, Target]]:
        """(as written, what it names) for the bases of a class, each base that is a
        module-level alias of a name (``MyModule = torch.jit.ScriptModule``, or
        ``torch.nn.Module`` in the other arm of an ``if``: rwkv, ``brevitas.jit.ScriptModule``)
        followed to every name it can stand for."""
        out: list[tuple[str, Target]] = []
        for expr in sym.bases:
            t = self.resolve_base(entry, expr)
            if not self.stands_for(t):
                out.append((expr, t))
                continue
            todo, seen = [t], set()
            while todo:
                t = todo.pop(0)
                alts = self.stands_for(t)
                if not alts or len(seen) > 8:
                    if all(t.qualified != o.qualified for _, o in out):
                        out.append((t.qualified, t))
                    continue
                for alt in alts:
                    if alt.qualified not in seen:
                        seen.add(alt.qualified)
                        todo.append(alt)
        return out

    def stands_for(self, t: Target) -> list[Target]:
        """What a ``def`` target can name, if every module-level statement that assigns it is
        an alias ``X = a.b.C``: those names and those of the imports that bind it too, in source
        order (pennylane's ``try: from torch.nn import Module`` / ``except ImportError: Module
        = Mock``); empty for anything else (a class, a function, a value computed by a call)."""
        if t.kind != "def" or t.entry is None or t.attr or t.name in t.entry.classes:
            return []
        syms = t.entry.defs.get(t.name, [])
        if not syms or any(s.kind != "assign" or not s.alias for s in syms):
            return []
        found = ([(s.line, self.index.resolve_dotted(t.entry, s.alias)) for s in syms]
                 + [(rec.line, self.index.follow_import(t.entry, rec))
                    for rec in t.entry.imports.get(t.name, [])])
        return [alt for _, alt in sorted(found, key=lambda f: f[0])]

    def is_abcmeta(self, entry: ModuleEntry, expr: str, depth: int = 0) -> bool:
        """Whether a metaclass expression is ``abc.ABCMeta`` or a corpus class derived from it."""
        t = self.resolve_base(entry, expr)
        if t.kind == "external":
            return t.name == "abc.ABCMeta"
        found = self.index.class_symbol(t)
        if found is None or depth > 8:
            return False
        b_entry, b_sym = found
        return any(self.is_abcmeta(b_entry, b, depth + 1) for b in b_sym.bases)


# -- categories ----------------------------------------------------------------------------
_NAME_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("loss", re.compile(r"Loss|Criterion|CrossEntropy")),
    ("attention", re.compile(
        r"Attention|Attn|MultiHead|MHSA|MHA\b|^SE(?:Module|Layer|Block)?\d*$|SEModule|SqueezeExcit"
        r"|^Eca|EcaModule|CecaModule|Cbam|GatherExcite|GlobalContext|SelectiveKernel|SplitAttn"
        r"|NonLocal|Excite")),
    ("pooling", re.compile(r"Pool")),
    ("normalization", re.compile(r"Norm(?!al)|^BN|FrozenBatch|Standardiz")),
    ("transformer_block", re.compile(
        r"Transformer(?:Encoder|Decoder)?(?:Layer|Block)|EncoderLayer|DecoderLayer"
        r"|(?:ViT|Vit|Swin|Mixer|Former|Transformer)Block|^Block$|ParallelBlock|ResPostBlock"
        r"|ParallelScalingBlock|^(?:Transformer)?(?:Encoder|Decoder)$")),
    ("convolution", re.compile(r"Conv|Bottleneck|BasicBlock|InvertedResidual|DepthwiseSeparable"
                               r"|ResBlock|ResidualBlock|DenseLayer|EdgeResidual")),
)
_ARCH_METHODS = frozenset({"forward_features", "forward_head", "reset_classifier",
                           "get_classifier"})
_ARCH_NAME = re.compile(
    r"(?:Net|NeXt|Former|ViT|Vit|Transformer|Mixer|Inception|VGG|AlexNet|DarkNet|GoogLeNet"
    r"|SqueezeNet|Hiera|Levit|Xcit|Eva|Beit|Deit|Cait|Swin|Generator|Discriminator|AutoEncoder"
    r"|Autoencoder|VAE|Unet|Model)(?:V\d+)?[\d_]*(?:Model)?$")
# generators that make no images or sounds but anchors, masks, maps: helpers, not networks
_HELPER_GENERATOR = re.compile(
    r"(?:Anchor|Box|Mask|Map|Patch|Activation|Sequence|Noise|Prior|Proposal|Grid|Point|Anomaly)"
    r"Generator")
_OP_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"scaled_dot_product_attention|(?:^|\.)softmax$")),
    ("pooling", re.compile(r"pool\dd$|Pool\dd$|adaptive_\w+pool|(?:^|\.)(?:avg|max)_pool")),
    ("normalization", re.compile(r"(?:batch|layer|group|instance|rms)_norm$|Norm\dd?$")),
    ("convolution", re.compile(r"conv\dd$|Conv\dd$|conv_transpose")),
)


def _name_category(name: str) -> str | None:
    for cat, rx in _NAME_RULES:
        if rx.search(name):
            return cat
    return None


# framework classes (FRAMEWORK_MODULES) whose subclasses are whole models, not layers
_WHOLE_MODEL_BASES = ("PreTrainedModel", "LightningModule", "ModelMixin", ".BaseModel")


def _arch_name(name: str) -> str | None:
    """The part of the name that makes it a whole network's (``Net`` of ``ResNet``,
    ``Generator``, Time-Series-Library's ``Model``, the ``Model`` of segmentation_models'
    ``SegmentationModel``, from which a subclass such as ``FPN`` is one too), if any."""
    m = _ARCH_NAME.search(name)
    return m.group(0) if m and not _HELPER_GENERATOR.search(name) else None


def _size_variant(entry: ModuleEntry, name: str) -> str | None:
    """A module-level function of ``entry`` that builds the class ``name`` with fixed sizes, as
    a model-size variant does (DiT's and SiT's ``SiT_XL_2``, MAR's ``mar_base``, PixArt's
    ``PixArt_XL_2``): whole networks whose names are acronyms."""
    for syms in entry.defs.values():
        for s in syms:
            if s.kind == "function" and name in s.builds:
                return s.name
    return None


def categorize(entry: ModuleEntry, sym: Symbol, info: _ClassInfo) -> tuple[str, str]:
    name = sym.name
    if _ARCH_METHODS & set(sym.methods):
        return "architecture", "method:" + sorted(_ARCH_METHODS & set(sym.methods))[0]
    for cat, rx in _NAME_RULES:
        if rx.search(name):
            return cat, f"name:{rx.search(name).group(0)}"  # type: ignore[union-attr]
    arch = _arch_name(name)
    if arch:
        return "architecture", f"name:{arch}"
    if info.model_base:  # (solo-learn's methods, through its BaseMethod(LightningModule))
        return "architecture", f"base:{info.model_base}"
    variant = _size_variant(entry, name)
    if variant:
        return "architecture", f"variant:{variant}"
    for base, cat in info.base_categories:
        if cat:
            return cat, f"base:{base}"
    calls = sym.calls
    for cat, rx in _OP_RULES:
        for c in calls:
            if rx.search(c):
                return cat, f"op:{c}"
    return "utility", "default"
