"""Validation as the app runs it: the engine's ``Validator`` with one sandbox for the app's
lifetime, reporting stage by stage, and the queue of blocks waiting for it.

Stages 1-3 (parse, compile, static) run in the app's worker thread and never execute the
block; the engine's validator returns only when all stages are done, so ``SandboxValidation``
runs them once on their own first (milliseconds) to report them before the sandbox's stages
(import, instantiate, forward: seconds, the first run also starts the sandbox, which imports
torch in its own process). The app process never imports torch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from nnrag_tui.engine.facts import Block

if TYPE_CHECKING:
    from nnrag_tui.engine.sandbox import Sandbox

StageFn = Callable[[Any], object]  # receives a StageVerdict
NoteFn = Callable[[str], object]


class Validation(Protocol):
    """What the app needs from a validator; tests pass their own."""

    def validate(self, code: str, name: str, spec: dict | None, *, block: Block,
                 on_stage: StageFn, on_note: NoteFn,
                 call_sites: Callable[[], list[dict]] | None = None,
                 files: dict[str, bytes] | None = None,
                 imported: frozenset[str] = frozenset({"torch"})) -> Any: ...

    def close(self) -> None: ...


class SandboxValidation:
    """The engine's validator. ``deepest``: the last stage to run (forward by default)."""

    def __init__(self, deepest: str = "forward") -> None:
        self.deepest = deepest
        self._sandbox: Sandbox | None = None

    def validate(self, code: str, name: str, spec: dict | None, *, block: Block,
                 on_stage: StageFn, on_note: NoteFn,
                 call_sites: Callable[[], list[dict]] | None = None,
                 files: dict[str, bytes] | None = None,
                 imported: frozenset[str] = frozenset({"torch"})) -> Any:
        """Raises ``NnragError`` (``SandboxError``) when the sandbox cannot start.
        ``call_sites``: the corpus's constructor calls, asked for only when guessed
        arguments cannot build the block (``BlockExtractor.call_sites``); ``files``: what
        goes beside the block file (``GeneratedBlock.files``); ``imported``: the packages
        the file imports by configuration (``GeneratedBlock.imported_packages``)."""
        from nnrag_tui.engine.validate import STAGES, Validator, standalone_denylist

        filename = f"{name}.py"
        quick = Validator(deepest="static").validate(code, name, spec, filename=filename)
        done = set()
        for verdict in quick.stages:
            on_stage(verdict)
            done.add(verdict.stage)
        broken = any(not v.ok for v in quick.stages if v.stage in ("parse", "compile"))
        if broken or STAGES.index(self.deepest) <= STAGES.index("static"):
            return quick
        sandbox = self._get_sandbox(on_note)
        # as `nnrag validate NAME`
        sandbox.deny_imports = standalone_denylist(block.module, imported)
        report = Validator(sandbox, deepest=self.deepest).validate(
            code, name, spec, filename=filename, call_sites=call_sites, files=files)
        for verdict in report.stages:
            if verdict.stage not in done:
                on_stage(verdict)
        return report

    def _get_sandbox(self, on_note: NoteFn) -> Sandbox:
        from nnrag_tui.engine.sandbox import Sandbox

        sandbox = self._sandbox
        if sandbox is None:
            sandbox = self._sandbox = Sandbox()
        if sandbox.worker_pid is None:
            on_note("starting the sandbox (it imports torch in its own process: a few "
                    "seconds the first time)…")
            sandbox.start()
        return sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


@dataclass(frozen=True)
class Job:
    """One block waiting for (or going through) validation."""

    number: int
    block: Block


class ValidationQueue:
    """Blocks waiting for validation, in order, each at most once. The app adds and clears
    on its thread; the validation worker takes jobs on its own."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        self._count = 0
        self._lock = threading.Lock()
        self.current: Job | None = None

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, blocks: Iterable[Block]) -> list[Job]:
        with self._lock:
            return self._add(blocks)

    def _add(self, blocks: Iterable[Block]) -> list[Job]:
        waiting = {(j.block.source, j.block.key) for j in self._jobs}
        if self.current is not None:
            waiting.add((self.current.block.source, self.current.block.key))
        added = []
        for b in blocks:
            if (b.source, b.key) in waiting:
                continue
            waiting.add((b.source, b.key))
            self._count += 1
            job = Job(self._count, b)
            self._jobs.append(job)
            added.append(job)
        return added

    def next(self) -> Job | None:
        with self._lock:
            self.current = self._jobs.popleft() if self._jobs else None
            return self.current

    def done(self) -> None:
        with self._lock:
            self.current = None

    def clear(self) -> list[Job]:
        with self._lock:
            dropped = list(self._jobs)
            self._jobs.clear()
            return dropped

    def waiting(self) -> list[Job]:
        with self._lock:
            return list(self._jobs)
