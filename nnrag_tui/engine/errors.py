"""Exception types raised by the engine. Front ends turn them into one line each."""


class NnragError(Exception):
    """Base class: every error a user can act on."""


class ConfigError(NnragError):
    """The corpus configuration is wrong; the message names the field."""


class SourceError(NnragError):
    """A source (git URL, local path, installed distribution) could not be materialised."""


class StoreError(NnragError):
    """The index database could not be opened or written."""


class BlockNotFound(NnragError):
    """No block (or several with no way to choose) matches a requested name."""


class ResolutionError(NnragError):
    """A block's dependency closure could not be computed."""
