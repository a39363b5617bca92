"""Statistics, as in the paper's tables: blocks per repository and per category, extraction
success, validation pass rate with its Wilson 95% interval, failure causes, time and lines per
block, the index's cache hit rate.

Sources, each optional beyond the index: the index (blocks, files, upstream lines per block),
an extraction run over the blocks (``extract=True``: success, generated lines, definitions and
time per block, causes of failures and of unresolved names), validation results (passed in, or
read from the registry's ``provenance.json``: verdict, level, cause, seconds), and the index run
this process made (files re-parsed against files unchanged).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nnrag_tui.engine.errors import NnragError

Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (95% by default);
    (0, 1) when there were no trials."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k <= 0 else max(0.0, centre - half)
    hi = 1.0 if k >= n else min(1.0, centre + half)
    return (lo, hi)


@dataclass(frozen=True)
class Rate:
    """``k`` of ``n``, with its Wilson 95% interval."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def ci(self) -> tuple[float, float]:
        return wilson_interval(self.k, self.n)

    def as_dict(self) -> dict:
        lo, hi = self.ci
        return {"k": self.k, "n": self.n,
                "rate": round(self.rate, 4) if self.rate is not None else None,
                "ci95": [round(lo, 4), round(hi, 4)] if self.n else None}

    def text(self, ci: bool = True) -> str:
        if not self.n:
            return "-"
        lo, hi = self.ci
        out = f"{self.k}/{self.n} ({100 * self.k / self.n:.1f}%"
        return out + (f", 95% CI {100 * lo:.1f}-{100 * hi:.1f}%)" if ci else ")")


def summary(values: Iterable[float]) -> dict | None:
    """n, mean, median, p90, min, max (None for no values)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        return None
    p90 = vals[min(len(vals) - 1, math.ceil(0.9 * len(vals)) - 1)]
    return {"n": len(vals), "mean": round(statistics.fmean(vals), 4),
            "median": round(statistics.median(vals), 4), "p90": round(p90, 4),
            "min": round(vals[0], 4), "max": round(vals[-1], 4), "total": round(sum(vals), 4)}


# -- validation records ----------------------------------------------------------------------
@dataclass(frozen=True)
class ValidationRecord:
    """One block's latest validation verdict, from wherever it came."""

    key: str  # the block's module:qualname (or the saved name when unknown)
    repo: str | None
    category: str | None
    validated: bool
    level: str | None
    cause: str | None
    seconds: float | None
    name: str = ""


def validation_record(report: Any, *, key: str = "", repo: str | None = None,
                      category: str | None = None, name: str = "") -> ValidationRecord:
    """A record from a validator report (``.validated``, ``.level``, ``.cause``,
    ``.seconds``, or the same keys in a dict)."""
    def get(k: str, default=None):
        if isinstance(report, Mapping):
            return report.get(k, default)
        return getattr(report, k, default)

    seconds = get("seconds")
    if seconds is None and get("stages"):
        stages = get("stages") or ()
        secs = [(s.get("seconds") if isinstance(s, Mapping) else getattr(s, "seconds", None))
                for s in stages]
        seconds = sum(x for x in secs if isinstance(x, (int, float))) or None
    return ValidationRecord(key=key or get("key") or get("name") or name, repo=repo,
                            category=category, validated=bool(get("validated", False)),
                            level=get("level"), cause=get("cause"),
                            seconds=float(seconds) if isinstance(seconds, (int, float))
                            else None, name=name or get("name") or "")


def registry_validations(registry) -> tuple[list[ValidationRecord], int, list[str]]:
    """The latest validation of every saved block (duck-typed ``Registry``: ``list()`` rows,
    ``show(name).provenance``). Returns the records, how many blocks are saved, and notes."""
    records: list[ValidationRecord] = []
    notes: list[str] = []
    rows = registry.list()
    for row in rows:
        if getattr(row, "validated", None) is None:
            continue
        cause = seconds = None
        try:
            prov = registry.show(row.name).provenance or {}
            val = prov.get("validation") or {}
            runs = val.get("runs") or []
            report = (runs[-1].get("report") if runs else None) or {}
            cause = val.get("cause") or report.get("cause")
            seconds = report.get("seconds")
            if seconds is None and runs:
                secs = [s.get("seconds") for s in runs[-1].get("stages") or ()]
                seconds = sum(x for x in secs if isinstance(x, (int, float))) or None
        except (NnragError, OSError, AttributeError, TypeError) as exc:
            notes.append(f"{row.name}: provenance unreadable ({exc})")
        records.append(ValidationRecord(
            key=getattr(row, "key", "") or row.name, repo=getattr(row, "repo", None),
            category=getattr(row, "category", None), validated=bool(row.validated),
            level=getattr(row, "level", None), cause=cause,
            seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            name=row.name))
    return records, len(rows), notes


# -- extraction run --------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtractionRecord:
    key: str
    repo: str
    category: str
    ok: bool
    seconds: float
    lines: int | None = None
    definitions: int | None = None
    unresolved: tuple[str, ...] = ()
    cause: str | None = None


def extraction_cause(exc: BaseException) -> str:
    """A short cause for a failed extraction: the exception type, and for the engine's own
    errors the first words of the message."""
    name = type(exc).__name__
    msg = str(exc)
    if "changed since it was indexed" in msg:
        return f"{name}: source changed since indexing"
    if "cannot read" in msg:
        return f"{name}: source unreadable"
    if "no statement defines" in msg:
        return f"{name}: definition not found"
    if "not indexed" in msg:
        return f"{name}: module not indexed"
    return name


ProgressFn = Callable[[str, int, int], None]


def run_extraction(extractor, blocks, *, progress: ProgressFn | None = None,
                   cancel: Callable[[], bool] | None = None) -> tuple[list[ExtractionRecord],
                                                                      float]:
    """Extracts every block (closure + generated file, nothing written) and times each one.
    Returns the records and the seconds spent building the resolver."""
    from nnrag_tui.engine.generate import regenerate

    t = time.perf_counter()
    resolver = extractor.resolver()
    setup = time.perf_counter() - t
    roots = extractor.store.source_roots()
    out: list[ExtractionRecord] = []
    for n, b in enumerate(blocks):
        if cancel is not None and cancel():
            break
        t = time.perf_counter()
        try:
            _, g = regenerate(resolver, b, roots)
        except (NnragError, SyntaxError, RecursionError, ValueError, OSError) as exc:
            out.append(ExtractionRecord(b.key, b.source, b.category, False,
                                        time.perf_counter() - t, cause=extraction_cause(exc)))
        else:
            out.append(ExtractionRecord(
                b.key, b.source, b.category, True, time.perf_counter() - t, g.lines,
                len(g.definitions), tuple(sorted({n for n, _ in g.unresolved}))))
        if progress is not None:
            progress("extract", n + 1, len(blocks))
    return out, setup


# -- the report ------------------------------------------------------------------------------
@dataclass
class StatsReport:
    blocks: list  # the Blocks counted
    sources: list[dict]  # the index's source rows
    index: dict  # index figures (files, failed, cache hits of this process's run)
    extraction: list[ExtractionRecord] | None = None
    extraction_setup: float = 0.0
    validations: list[ValidationRecord] = field(default_factory=list)
    registry_blocks: int | None = None  # None: no registry read
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    # -- derived ---------------------------------------------------------------------------
    def repositories(self) -> list[str]:
        names = [s["name"] for s in self.sources]
        extra = sorted({b.source for b in self.blocks} - set(names))
        return [n for n in names if any(b.source == n for b in self.blocks)] + extra

    def categories(self) -> list[str]:
        counts = Counter(b.category for b in self.blocks)
        extra = sorted({v.category for v in self.validations if v.category} - set(counts))
        return sorted(counts, key=lambda c: (-counts[c], c)) + extra

    def extraction_rate(self, repo: str | None = None, category: str | None = None) -> Rate:
        recs = [r for r in self.extraction or () if (repo is None or r.repo == repo)
                and (category is None or r.category == category)]
        return Rate(sum(r.ok for r in recs), len(recs))

    def complete_rate(self) -> Rate:
        recs = self.extraction or []
        return Rate(sum(r.ok and not r.unresolved for r in recs), len(recs))

    def validation_rate(self, repo: str | None = None, category: str | None = None) -> Rate:
        recs = [v for v in self.validations if (repo is None or v.repo == repo)
                and (category is None or v.category == category)]
        return Rate(sum(v.validated for v in recs), len(recs))

    def extraction_causes(self) -> Counter:
        c: Counter = Counter()
        for r in self.extraction or ():
            if not r.ok:
                c[r.cause or "unknown"] += 1
            elif r.unresolved:
                c["extracted with unresolved names"] += 1
        return c

    def unresolved_names(self) -> Counter:
        return Counter(n for r in self.extraction or () for n in r.unresolved)

    def validation_causes(self) -> Counter:
        return Counter(v.cause or "unknown" for v in self.validations if not v.validated)

    def as_dict(self) -> dict:
        repos = self.repositories()
        cats = self.categories()
        by_rc: dict[str, Counter] = defaultdict(Counter)
        for b in self.blocks:
            by_rc[b.source][b.category] += 1
        d: dict[str, Any] = {
            "blocks": len(self.blocks),
            "repositories": [{
                "name": r, "files": _source(self.sources, r).get("files"),
                "failed_files": _source(self.sources, r).get("failed"),
                "commit": _source(self.sources, r).get("commit"),
                "blocks": sum(by_rc[r].values()),
                "categories": dict(sorted(by_rc[r].items())),
                "upstream_lines": summary(b.lines for b in self.blocks if b.source == r),
                **({"extraction": self.extraction_rate(repo=r).as_dict()}
                   if self.extraction is not None else {}),
                **({"validation": self.validation_rate(repo=r).as_dict()}
                   if self.validations else {}),
            } for r in repos],
            "categories": [{
                "name": c, "blocks": sum(by_rc[r][c] for r in repos),
                "share": round(sum(by_rc[r][c] for r in repos) / len(self.blocks), 4)
                if self.blocks else None,
                "by_repository": {r: by_rc[r][c] for r in repos if by_rc[r][c]},
                **({"extraction": self.extraction_rate(category=c).as_dict()}
                   if self.extraction is not None else {}),
                **({"validation": self.validation_rate(category=c).as_dict()}
                   if self.validations else {}),
            } for c in cats],
            "upstream_lines_per_block": summary(b.lines for b in self.blocks),
            "index": self.index,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }
        if self.extraction is not None:
            ok = [r for r in self.extraction if r.ok]
            d["extraction"] = {
                "rate": self.extraction_rate().as_dict(),
                "complete": self.complete_rate().as_dict(),
                "seconds_per_block": summary(r.seconds for r in self.extraction),
                "resolver_setup_seconds": round(self.extraction_setup, 4),
                "lines_per_block": summary(r.lines for r in ok if r.lines is not None),
                "definitions_per_block": summary(r.definitions for r in ok
                                                 if r.definitions is not None),
                "causes": dict(self.extraction_causes().most_common()),
                "unresolved_names": dict(self.unresolved_names().most_common(20)),
            }
        if self.validations or self.registry_blocks is not None:
            d["validation"] = {
                "rate": self.validation_rate().as_dict(),
                "registry_blocks": self.registry_blocks,
                "levels": dict(Counter(v.level or "unknown" for v in self.validations)
                               .most_common()),
                "causes": dict(self.validation_causes().most_common()),
                "seconds_per_block": summary(v.seconds for v in self.validations
                                             if v.seconds is not None),
            }
        return d

    # -- rendering -------------------------------------------------------------------------
    def tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        """(title, header, rows) for every table; the text and Markdown renderings share
        them."""
        d = self.as_dict()
        out = []
        rows = [["blocks", str(d["blocks"])]]
        rows.append(["repositories", str(len(d["repositories"]))])
        idx = d["index"]
        if idx.get("files") is not None:
            rows.append(["files indexed", f"{idx['files']} ({idx.get('failed', 0)} failed)"])
        if idx.get("cache_hit_rate") is not None:
            rows.append(["index cache hits (this run)",
                         (f"{idx['cached']}/{idx['files']} "
                         f"({100 * idx['cache_hit_rate']:.1f}%) in {idx['seconds']:.2f} s")])
        ul = d["upstream_lines_per_block"]
        if ul:
            rows.append(["upstream lines per block", _dist(ul)])
        if "extraction" in d:
            e = d["extraction"]
            rows.append(["extracted", self.extraction_rate().text()])
            rows.append(["extracted, no unresolved name", self.complete_rate().text()])
            if e["seconds_per_block"]:
                s = e["seconds_per_block"]
                rows.append(["time per block (extraction)",
                             (f"mean {s['mean']:.3f} s, median {s['median']:.3f} s, "
                             f"p90 {s['p90']:.3f} s (+{e['resolver_setup_seconds']:.2f} s "
                             f"setup)")])
            if e["lines_per_block"]:
                rows.append(["generated lines per block", _dist(e["lines_per_block"])])
        if "validation" in d:
            v = d["validation"]
            rows.append(["validated", self.validation_rate().text()])
            if v["seconds_per_block"]:
                s = v["seconds_per_block"]
                rows.append(["time per block (validation)",
                             f"mean {s['mean']:.2f} s, median {s['median']:.2f} s"])
        out.append(("Summary", ["metric", "value"], rows))

        repos = d["repositories"]
        header = ["repository", "files", "blocks", "lines/block (median)"]
        if "extraction" in d:
            header.append("extracted")
        if self.validations:
            header.append("validated")
        rows = []
        for r in repos:
            row = [r["name"], str(r["files"] if r["files"] is not None else "-"),
                   str(r["blocks"]),
                   f"{r['upstream_lines']['median']:g}" if r["upstream_lines"] else "-"]
            if "extraction" in d:
                row.append(self.extraction_rate(repo=r["name"]).text(ci=False))
            if self.validations:
                row.append(self.validation_rate(repo=r["name"]).text())
            rows.append(row)
        out.append(("Blocks per repository", header, rows))

        names = [r["name"] for r in repos]
        header = ["category", "blocks", "share", *names]
        if "extraction" in d:
            header.append("extracted")
        if self.validations:
            header.append("validated")
        rows = []
        for c in d["categories"]:
            row = [c["name"], str(c["blocks"]),
                   f"{100 * c['share']:.1f}%" if c["share"] is not None else "-",
                   *[str(c["by_repository"].get(n, 0)) for n in names]]
            if "extraction" in d:
                row.append(self.extraction_rate(category=c["name"]).text(ci=False))
            if self.validations:
                row.append(self.validation_rate(category=c["name"]).text())
            rows.append(row)
        out.append(("Blocks per category", header, rows))

        causes = self.extraction_causes()
        if causes:
            total = sum(causes.values())
            out.append(("Extraction failures and gaps", ["cause", "blocks", "share"],
                        [[k, str(n), f"{100 * n / total:.1f}%"]
                         for k, n in causes.most_common()]))
            unresolved = self.unresolved_names()
            if unresolved:
                out.append(("Most frequent unresolved names", ["name", "blocks"],
                            [[k, str(n)] for k, n in unresolved.most_common(10)]))
        vcauses = self.validation_causes()
        if vcauses:
            total = sum(vcauses.values())
            out.append(("Validation failure causes", ["cause", "blocks", "share"],
                        [[k, str(n), f"{100 * n / total:.1f}%"]
                         for k, n in vcauses.most_common()]))
        return out

    def markdown(self) -> str:
        parts = []
        for title, header, rows in self.tables():
            parts.append(f"### {title}\n")
            parts.append("| " + " | ".join(header) + " |")
            parts.append("|" + "|".join("---" if i == 0 else "---:"
                                        for i in range(len(header))) + "|")
            for r in rows:
                parts.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
            parts.append("")
        for note in self.notes:
            parts.append(f"- note: {note}")
        return "\n".join(parts).rstrip() + "\n"

    def text(self) -> str:
        parts = []
        for title, header, rows in self.tables():
            parts.append(title)
            table = [header] + rows
            widths = [max(len(r[i]) for r in table) for i in range(len(header))]
            for r in table:
                parts.append("  " + "  ".join(c.ljust(widths[i]) if i == 0 else
                                              c.rjust(widths[i]) for i, c in enumerate(r))
                             .rstrip())
            parts.append("")
        for note in self.notes:
            parts.append(f"note: {note}")
        return "\n".join(parts).rstrip() + "\n"


def _source(sources: list[dict], name: str) -> dict:
    return next((s for s in sources if s["name"] == name), {})


def _dist(s: dict) -> str:
    return f"mean {s['mean']:.1f}, median {s['median']:g}, p90 {s['p90']:g}, max {s['max']:g}"


# -- the front door --------------------------------------------------------------------------
def collect(extractor, *, extract: bool = False, limit: int | None = None,
            category: str | None = None, repo: str | None = None, registry: Any = None,
            validations: Mapping[str, Any] | Iterable[Any] | None = None,
            index_report: Any = None, progress: ProgressFn | None = None,
            cancel: Callable[[], bool] | None = None) -> StatsReport:
    """Statistics over the extractor's index (which must be up to date: call ``index()`` or
    ``warm_index_once()`` first and pass its report as ``index_report`` for the cache figures).

    ``registry``: a ``Registry`` whose saved blocks' validation results are counted.
    ``validations``: results from elsewhere: a mapping from block key (``module:Qual``, or
    ``repo:module:Qual``) to a validator report, or an iterable of reports carrying ``key``
    or ``name``. ``extract``: extract every (filtered) block now, at most ``limit``."""
    t0 = time.perf_counter()
    blocks = extractor.blocks(category=category, repo=repo)
    sources = extractor.sources()
    counts = extractor.store.counts()
    index: dict[str, Any] = {"files": counts["files"], "failed": counts["failed"]}
    if index_report is not None:
        files = getattr(index_report, "files", 0)
        cached = getattr(index_report, "cached", 0)
        index.update(parsed=getattr(index_report, "parsed", None), cached=cached,
                     seconds=round(getattr(index_report, "seconds", 0.0), 4),
                     cache_hit_rate=round(cached / files, 4) if files else None)
    rep = StatsReport(blocks, sources, index)
    if extract:
        todo = blocks[:limit] if limit is not None else blocks
        rep.extraction, rep.extraction_setup = run_extraction(extractor, todo,
                                                              progress=progress, cancel=cancel)
        if limit is not None and limit < len(blocks):
            rep.notes.append(f"extraction run over the first {len(todo)} of {len(blocks)} "
                             "blocks (--limit)")
    add_validations(rep, registry=registry, validations=validations, category=category,
                    repo=repo)
    rep.seconds = time.perf_counter() - t0
    return rep


def report_for(blocks, sources, *, validations: Mapping[str, Any] | Iterable[Any] | None = None,
               registry: Any = None, index: dict | None = None) -> StatsReport:
    """Statistics from blocks already in memory (no index access, no extraction): what a
    front end that holds the corpus shows, e.g. with its own validation results."""
    rep = StatsReport(list(blocks), list(sources), dict(index or {}))
    add_validations(rep, registry=registry, validations=validations)
    return rep


def add_validations(rep: StatsReport, *, registry: Any = None,
                    validations: Mapping[str, Any] | Iterable[Any] | None = None,
                    category: str | None = None, repo: str | None = None) -> None:
    blocks = rep.blocks
    by_key = {b.key: b for b in blocks}
    if registry is not None:
        recs, saved, notes = registry_validations(registry)
        rep.registry_blocks = saved
        rep.notes.extend(notes)
        if not recs:
            rep.notes.append("no validation results: the registry has no validated blocks"
                             if saved else "no validation results: the registry is empty")
        rep.validations.extend(_filter(recs, category, repo))
    if validations is not None:
        items = validations.items() if isinstance(validations, Mapping) else (
            (None, v) for v in validations)
        for key, report in items:
            rec = _record_for(key, report, by_key, blocks)
            rep.validations.extend(_filter([rec], category, repo))


def _record_for(key: str | None, report: Any, by_key: dict, blocks: list) -> ValidationRecord:
    raw = key or (report.get("key") if isinstance(report, Mapping) else
                  getattr(report, "key", None)) or (
        report.get("name") if isinstance(report, Mapping) else getattr(report, "name", ""))
    block = by_key.get(raw)
    if block is None and raw and raw.count(":") >= 2:
        repo, _, k = raw.partition(":")
        block = next((b for b in blocks if b.source == repo and b.key == k), None)
    if block is None and raw:
        block = next((b for b in blocks if b.name == raw or b.full_name == raw), None)
    if block is None:
        return validation_record(report, key=raw or "", name=raw or "")
    return validation_record(report, key=block.key, repo=block.source,
                             category=block.category, name=block.name)


def _filter(recs: list[ValidationRecord], category: str | None, repo: str | None
            ) -> list[ValidationRecord]:
    return [r for r in recs if (category is None or r.category == category)
            and (repo is None or r.repo == repo)]


def load_registry(data_dir) -> tuple[Any, str | None]:
    """The registry at ``data_dir``, or None and why (the module may not exist yet)."""
    try:
        from nnrag_tui.engine.registry import Registry
    except ImportError:
        return None, "the registry is not available in this installation"
    try:
        return Registry(data_dir), None
    except (NnragError, OSError) as exc:
        return None, f"registry unreadable: {exc}"
