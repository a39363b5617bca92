"""Command line. Thin: every command calls the engine and turns engine errors into one line on
stderr and a non-zero exit code. Each module of this package registers its own subcommands
(``register(sub)``), so commands can be added without touching the others."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from nnrag_tui import __version__
from nnrag_tui.cli.common import EXIT_ERROR, add_common
from nnrag_tui.engine.errors import NnragError

COMMAND_MODULES = ("corpus", "extract", "validate", "registry", "dedup", "stats", "export")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="nnrag",
        description="Turn PyTorch repositories into a library of dependency-closed nn.Module "
                    "blocks. With no command, opens the terminal app.")
    parser.add_argument("--version", action="version", version=f"nnrag {__version__}")
    add_common(parser)
    parser.set_defaults(config=None, cache_dir=None, data_dir=None, json=False, func=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"nnrag_tui.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from nnrag_tui.engine.config import ConfigWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", ConfigWarning)
        warnings.showwarning = _show_warning  # type: ignore[assignment]
        try:
            if args.command is None:
                return _run_app(args)
            return args.func(args)
        except NnragError as exc:
            print(f"nnrag: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            print("nnrag: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"nnrag: warning: {message}", file=sys.stderr)


def _run_app(args) -> int:
    from nnrag_tui.tui.app import run_app

    return run_app(config=args.config, cache_dir=args.cache_dir, data_dir=args.data_dir)
