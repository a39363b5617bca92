"""Runs a function in a forked child of a warm interpreter (torch already imported) and gets its
JSON answer back through a pipe: how the benchmarks check one generated file after another
without paying the torch import per file, and without one file's crash ending the run.

The child's address space is capped (8 GiB by default): some blocks' defaults build tens of
gigabytes of weights (timm's ConVit() asks for about 40 GiB), and on a shared machine the
kernel's OOM killer must not be what stops them. Past the cap an allocation fails inside the
child, which answers with the error like any other."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time

MEMORY = 8 << 30


def run_forked(fn, timeout: float | None = None, memory: int | None = MEMORY
               ) -> tuple[dict | None, str]:
    """(answer, status): ``fn()``'s dict from the child, or None with ``"timeout"`` (the child
    was killed after ``timeout`` seconds) or ``"died (status N)"``. ``memory``: the child's
    address-space limit in bytes (None: the parent's)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if memory is not None:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            msg = fn()
        except BaseException as exc:  # noqa: BLE001  (anything the child raises is the answer)
            msg = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        os.write(w, json.dumps(msg, default=str).encode())
        os._exit(0)
    os.close(w)
    data = b""
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            os.kill(pid, signal.SIGKILL)
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return None, "timeout"
    if not data:
        return None, f"died (status {status})"
    return json.loads(data), "ok"
