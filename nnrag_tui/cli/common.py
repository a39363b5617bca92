"""What every command shares: the common options, the extractor, progress on stderr."""

from __future__ import annotations

import argparse
import sys

EXIT_ERROR = 2
EXIT_NOT_VALIDATED = 1  # validation ran and a block did not pass
# the validation stages, in order (engine.validate.STAGES, without importing the validator)
STAGE_CHOICES = ("parse", "compile", "static", "import", "instantiate", "forward")


def add_common(p: argparse.ArgumentParser) -> None:
    # Accepted before and after the command. The defaults live on the top-level parser only
    # (SUPPRESS here): a subparser default would overwrite `nnrag --config F index`'s value.
    sup = argparse.SUPPRESS
    p.add_argument("--config", metavar="FILE", default=sup, help="corpus configuration (JSON); "
                   "default: the built-in corpus (installed torch.nn, plus timm/torchvision if "
                   "installed)")
    p.add_argument("--cache-dir", metavar="DIR", default=sup,
                   help="clones and index (env NNRAG_CACHE_DIR)")
    p.add_argument("--data-dir", metavar="DIR", default=sup,
                   help="saved blocks (env NNRAG_DATA_DIR)")
    p.add_argument("--json", action="store_true", default=sup,
                   help="machine-readable output on stdout")


def positive_int(text: str) -> int:
    """argparse ``type`` for counts: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def extractor(args):
    from nnrag_tui.engine.extractor import BlockExtractor

    return BlockExtractor(args.config, cache_dir=args.cache_dir, data_dir=args.data_dir,
                          workers=getattr(args, "workers", None))


class StderrProgress:
    """Progress on stderr: one rewritten line on a terminal, sparse lines otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, p) -> None:
        if p.phase == "wait":  # another process holds the index lock: say so, then wait
            if self.tty:
                sys.stderr.write("\r\033[K")
            print("nnrag: waiting for another nnrag process that is indexing this cache",
                  file=sys.stderr, flush=True)
            return
        if p.phase == "fetch":
            msg = f"{p.source}: preparing {p.current}"
        elif p.phase == "parse":
            msg = f"{p.source}: parsed {p.done}/{p.total} {p.current}"
        elif p.phase == "discover":
            msg = "discovering blocks"
        else:
            msg = ""
        if self.tty:
            sys.stderr.write("\r\033[K" + msg[:150])
            if p.phase == "done":
                sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        elif p.phase in ("fetch", "discover") or (p.phase == "parse" and p.done == p.total):
            print(msg, file=sys.stderr)


def source_errors(report) -> bool:
    """One ``nnrag: error:`` line on stderr per source that could not be indexed; True when
    no source could be."""
    errors = [s for s in report.sources if s.get("error")]
    for s in errors:
        print(f"nnrag: error: {named(s['name'], s['error'])}", file=sys.stderr)
    return bool(errors) and len(errors) == len(report.sources)


def named(name: str, msg: str) -> str:
    """``name: msg``, unless the engine's message already starts with the name."""
    return msg if msg.startswith(f"{name}:") else f"{name}: {msg}"
