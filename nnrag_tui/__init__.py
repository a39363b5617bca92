"""nnrag: turn PyTorch repositories into a library of dependency-closed, validated nn.Module blocks."""

__version__ = "0.1.0"
