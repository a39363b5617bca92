#!/usr/bin/env bash
# Installs nnrag into the current Python environment (a virtualenv is recommended).
# Usage: scripts/install.sh [EXTRAS]   e.g. scripts/install.sh test
# torch is only needed by the default corpus (its torch/nn sources) and by the validation
# sandbox. Where torch is missing we install the CPU build: an unpinned `torch`, or PyPI's
# `torch==2.13.0` on Linux, is a multi-GB CUDA build. PyTorch's CPU index is an extra index:
# its `+cpu` build sorts above PyPI's, and where it cannot be reached (or a local wheel
# directory has the CPU build) pip goes on without it.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_SPEC=${NNRAG_TORCH:-torch==2.13.0}
if ! "$PY" -c "import importlib.metadata as m; m.distribution('torch')" 2>/dev/null; then
  echo "installing the CPU build of torch ($TORCH_SPEC)" >&2
  "$PY" -m pip install -q "$TORCH_SPEC" --retries 0 --timeout 15 \
      --extra-index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || "$PY" -m pip install -q "$TORCH_SPEC"
fi
extras=${1:-}
if [ -n "$extras" ]; then target=".[$extras]"; else target="."; fi
"$PY" -m pip install -q -e "$target"
