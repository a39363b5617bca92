"""Registry commands (nnrag registry ...)."""

from __future__ import annotations


def register(sub) -> None:
    """Adds this module's subcommands (none yet)."""
