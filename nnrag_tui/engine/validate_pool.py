"""Validating many blocks at once: several sandboxes, one validation per sandbox at a time.

``with ValidationPool(jobs=2) as pool: fut = pool.submit(code, "Name", deny=("timm",))``;
``fut.result()`` is the :class:`~nnrag_tui.engine.validate.ValidationReport`. Each sandbox is a
pre-warmed worker (importing torch takes seconds), so :meth:`ValidationPool.start` can be
called early, e.g. while the index is being brought up to date; workers start in background
threads and a validation that needs one before it is ready simply waits for it.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from nnrag_tui.engine.sandbox import Sandbox, SandboxLimits
from nnrag_tui.engine.validate import ValidationReport, Validator


class ValidationPool:
    def __init__(self, jobs: int = 1, *, limits: SandboxLimits | None = None,
                 deepest: str = "forward") -> None:
        self.jobs = max(1, int(jobs))
        self._idle: queue.SimpleQueue[tuple[Sandbox, Validator]] = queue.SimpleQueue()
        self._pairs: list[tuple[Sandbox, Validator]] = []
        for _ in range(self.jobs):
            sb = Sandbox(limits=limits)
            pair = (sb, Validator(sb, deepest=deepest))
            self._pairs.append(pair)
            self._idle.put(pair)
        self._executor = ThreadPoolExecutor(max_workers=self.jobs,
                                            thread_name_prefix="nnrag-validate")
        self._starters: list[threading.Thread] = []

    def start(self) -> None:
        """Starts every sandbox worker in the background (errors surface on first use)."""
        if self._starters:
            return
        self._starters = [start_in_background(sb) for sb, _ in self._pairs]

    def submit(self, code: str, name: str | None = None, spec: dict | None = None, *,
               filename: str | None = None, deny: tuple[str, ...] = (), call_sites=None,
               files: dict[str, bytes] | None = None) -> Future[ValidationReport]:
        """Validates ``code`` on the next free sandbox. ``deny``: packages the file may not
        import (see :func:`~nnrag_tui.engine.validate.standalone_denylist`); ``call_sites``:
        as for :meth:`Validator.validate` (a callable is called in the pool's thread), and
        ``files``."""
        return self._executor.submit(self._validate, code, name, spec, filename, tuple(deny),
                                     call_sites, files)

    def _validate(self, code, name, spec, filename, deny, call_sites, files=None
                  ) -> ValidationReport:
        sb, validator = self._idle.get()
        try:
            sb.deny_imports = deny
            return validator.validate(code, name, spec, filename=filename,
                                      call_sites=call_sites, files=files)
        finally:
            self._idle.put((sb, validator))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        for sb, validator in self._pairs:
            validator.close()
            sb.close()

    def __enter__(self) -> ValidationPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_in_background(sandbox: Sandbox) -> threading.Thread:
    """Starts ``sandbox``'s worker in a daemon thread; a failure is left for the first job,
    which starts it again and reports the error."""
    t = threading.Thread(target=_start_quietly, args=(sandbox,), daemon=True,
                         name="nnrag-sandbox-start")
    t.start()
    return t


def _start_quietly(sandbox: Sandbox) -> None:
    try:
        sandbox.start()
    except Exception:  # noqa: BLE001  (the first job starts it again and reports the error)
        pass
