"""Runs a command and measures it: wall time, peak memory of its whole process tree, and the
largest single process's peak RSS (from the kernel, via wait4). Linux only.

Peak memory of the tree is sampled every 100 ms from /proc: the sum over the process and all its
descendants of the proportional set size (PSS: pages shared between processes, as after a fork,
count once in total) and, for reference, of the resident set size (RSS, which counts shared
pages once per process).

Also: the machine's description, medians and percentiles shared by the benchmark scripts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

JSON_TAG = "BENCH-JSON "


def _ppids() -> dict[int, int]:
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                s = fh.read()
        except OSError:
            continue
        r = s.rindex(b")")
        out[int(d)] = int(s[r + 2:].split(b" ", 3)[1])
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def tree_mem(root: int) -> tuple[int, int]:
    """Current (RSS, PSS) of ``root`` and all its descendants, summed, in bytes."""
    ppid = _ppids()
    kids: dict[int, list[int]] = {}
    for pid, parent in ppid.items():
        kids.setdefault(parent, []).append(pid)
    rss = pss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        rss += _rss(pid)
        pss += _pss(pid)
        todo.extend(kids.get(pid, ()))
    return rss, pss


@dataclass
class Measured:
    returncode: int
    wall_s: float
    peak_tree_pss: int  # bytes, sampled: the figure reported as peak memory
    peak_tree_rss: int  # bytes, sampled
    max_rss: int  # bytes, largest single process (kernel figure)
    cpu_s: float  # user + system CPU time of the process and its waited-for descendants
    stdout: str
    stderr: str
    data: dict | None = field(default=None)  # the BENCH-JSON line, when printed


def run_measured(cmd: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
                 timeout: float | None = None, interval: float = 0.1) -> Measured:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak = [0, 0]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            rss, pss = tree_mem(proc.pid)
            peak[0] = max(peak[0], rss)
            peak[1] = max(peak[1], pss)
            done.wait(interval)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [threading.Thread(target=lambda s=s, c=c: c.append(s.read()), daemon=True)
               for s, c in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
    for r in readers:
        r.start()
    deadline = None if timeout is None else t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            proc.kill()
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    done.set()
    poller.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = "".join(out_chunks), "".join(err_chunks)
    data = None
    for line in stdout.splitlines():
        if line.startswith(JSON_TAG):
            data = json.loads(line[len(JSON_TAG):])
    return Measured(proc.returncode, wall, peak[1], peak[0], usage.ru_maxrss * 1024,
                    usage.ru_utime + usage.ru_stime, stdout, stderr, data)


def check(m: Measured, what: str) -> dict:
    """The BENCH-JSON payload of a run that must have succeeded."""
    if m.returncode != 0 or m.data is None:
        raise RuntimeError(f"{what} failed (exit {m.returncode}):\n{m.stderr[-3000:]}"
                           f"\n{m.stdout[-1500:]}")
    return m.data


def emit(data: dict) -> None:
    """Prints the payload line that ``run_measured`` picks up."""
    sys.stdout.flush()
    print(JSON_TAG + json.dumps(data), flush=True)


def median(xs):
    return statistics.median(xs) if xs else None


def pct(xs, q: float):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def mib(n: float | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


def cpu_speed(n: int = 5_000_000, repeat: int = 3) -> float:
    """Seconds for a fixed pure-Python loop, best of ``repeat``: how fast this (shared) machine
    runs right now, so that figures from runs at different times can be compared."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i
        best = min(best, time.perf_counter() - t)
    return round(best, 3)


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    torch_version = None
    try:
        from importlib.metadata import version

        torch_version = version("torch")
    except Exception:  # noqa: BLE001
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gib": round(mem / 2**30, 1),
            "python": platform.python_version(), "torch": torch_version,
            "platform": platform.platform(), "load_average_at_start": load}
