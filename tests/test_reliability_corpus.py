"""Broken corpora: real modules truncated, bit-flipped, re-encoded, nested 10,000 deep, plus
symlink loops, unreadable files and directories, FIFOs, a 50 MB file and files deleted while the
indexer runs. Indexing never crashes, every ``.py`` entry ends indexed or recorded with its
reason, and every block of the intact files is found. A hypothesis property test mutates real
modules at random and checks the same, plus that extracting every block of a mutated file
fails, if at all, as data.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_helpers import (
    ROOT,
    bom,
    bom_with_conflicting_cookie,
    check_database,
    cli_env,
    cr_only,
    crlf,
    deep_nesting,
    drop_file_caps,
    file_rows,
    flip_bytes,
    latin1,
    mixed_tabs,
    nnrag_cmd,
    nul_byte,
    python2,
    real_modules,
    truncate,
    unknown_cookie,
    utf16,
    write_package,
)

from nnrag_tui.engine.config import parse_config
from nnrag_tui.engine.extractor import INDEX_FILE, BlockExtractor

# Runs the indexer in a fresh process (so that the file capabilities can be dropped and
# ``chmod 000`` means unreadable even for root) and deletes files from the progress callback.
RUNNER = r'''
import json, os, sys
from nnrag_tui.engine.extractor import BlockExtractor

config, cache, out, workers, *vanish = sys.argv[1:]
try:
    open(os.path.join(os.path.dirname(config), "probe_unreadable.txt")).close()
    dac = True
except PermissionError:
    dac = False
deleted = []

def progress(p):
    if p.phase == "parse" and vanish and not deleted:
        for path in vanish:
            os.unlink(path)
            deleted.append(path)

with BlockExtractor(config, cache_dir=cache, workers=int(workers)) as ex:
    report = ex.index(progress=progress)
    blocks = sorted(b.key for b in ex.blocks())
with open(out, "w") as fh:
    json.dump({"report": report.as_dict(), "blocks": blocks, "deleted": deleted,
               "root_reads_anything": dac}, fh)
'''


def run_indexer(tmp: Path, config: Path, cache: Path, workers: int = 1,
                vanish: tuple[Path, ...] = ()) -> dict:
    out = tmp / "runner.json"
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(config), str(cache), str(out), str(workers),
         *map(str, vanish)], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env=cli_env(), preexec_fn=drop_file_caps, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def good_reference(tmp_path_factory, timm_source) -> tuple[dict[str, bytes], set[str]]:
    """The intact real modules, and the blocks an index of them alone finds."""
    files = real_modules(timm_source)
    tmp = tmp_path_factory.mktemp("reference")
    write_package(tmp / "src" / "good", files)
    cfg = parse_config({"corpus": {"path": str(tmp / "src")}})
    with BlockExtractor(cfg, cache_dir=tmp / "cache", workers=1) as ex:
        report = ex.index()
        keys = {b.key for b in ex.blocks()}
    assert report.failed == 0 and len(keys) >= 10, (report.failures, keys)
    return files, keys


def build_broken_corpus(root: Path, good: dict[str, bytes], outside: Path
                        ) -> tuple[dict[str, str | None], list[Path]]:
    """Writes the broken corpus under ``root``. Returns what each ``.py`` entry must end as
    (None: indexed; a string: recorded, with that text in the reason, "" for any reason;
    "*": either) and the files to delete during the run."""
    rng = random.Random(8)
    expect: dict[str, str | None] = {}
    write_package(root / "good", good)
    expect.update({f"good/{n}": None for n in good})
    expect["good/__init__.py"] = None
    broken = root / "broken"
    broken.mkdir()
    base = good["mlp.py"] if "mlp.py" in good else next(iter(good.values()))

    def put(rel: str, data: bytes, outcome: str | None) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        expect[rel] = outcome

    put("broken/__init__.py", b"", None)
    for i, (name, data) in enumerate(sorted(good.items())):
        stem = name[:-3]
        for frac in (0.0, 0.13, 0.5, 0.97):
            put(f"broken/trunc_{int(frac * 100)}_{stem}.py", truncate(data, frac), "*")
        for n in (1, 3, 30):
            put(f"broken/flip{n}_{stem}.py", flip_bytes(data, rng, n), "*")
    put("broken/py2.py", python2(base), "syntax error")
    put("broken/tabs.py", mixed_tabs(base), "inconsistent use of tabs")
    put("broken/latin1_cookie.py", latin1(base, cookie=True), None)
    put("broken/latin1_no_cookie.py", latin1(base, cookie=False), "undecodable")
    put("broken/bom.py", bom(base), None)
    put("broken/bom_latin1_cookie.py", bom_with_conflicting_cookie(base), "undecodable")
    put("broken/unknown_cookie.py", unknown_cookie(base), "unknown encoding")
    put("broken/utf16.py", utf16(base), "NUL")
    put("broken/nul.py", nul_byte(base), "NUL")
    put("broken/crlf.py", crlf(base), None)
    put("broken/cr_only.py", cr_only(base), None)
    put("broken/empty.py", b"", None)
    put("broken/long_line.py", b"X = [" + b"1, " * 100_000 + b"]\n", None)
    for name, data in deep_nesting().items():
        # refused by the parser (too deep) or by the analysis: recorded, whatever the reason
        put(f"broken/deep/{name}", data, None if name == "deep_class_bases.py" else "")
    # big files: 1 MB of real code is indexed, 50 MB is refused unread (limit 5 MB)
    put("broken/big_real.py", base * (1_000_000 // len(base)), None)
    with open(root / "broken" / "huge_50mb.py", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    expect["broken/huge_50mb.py"] = "too large"
    # file-system oddities
    (root / "broken" / "dir_named.py").mkdir()
    (root / "broken" / "dir_named.py" / "inner.py").write_bytes(base)
    expect["broken/dir_named.py/inner.py"] = None
    os.symlink("missing_target.py", root / "broken" / "dangling.py")
    expect["broken/dangling.py"] = "broken symbolic link"
    os.symlink("loop_b.py", root / "broken" / "loop_a.py")
    os.symlink("loop_a.py", root / "broken" / "loop_b.py")
    expect["broken/loop_a.py"] = expect["broken/loop_b.py"] = "symbolic links"
    (root / "broken" / "loopdir").mkdir()
    os.symlink("..", root / "broken" / "loopdir" / "up")  # a directory loop
    os.symlink(".", root / "broken" / "loopdir" / "self")
    os.symlink("../good", root / "alias")  # the same tree twice: indexed once, as good/
    os.mkfifo(root / "broken" / "fifo.py")
    expect["broken/fifo.py"] = "not a regular file"
    (root / "broken" / "unreadable.py").write_bytes(base)
    os.chmod(root / "broken" / "unreadable.py", 0)
    expect["broken/unreadable.py"] = "Permission denied"
    locked = root / "broken" / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_bytes(base)
    os.chmod(locked, 0)
    expect["broken/locked"] = "unreadable directory"
    outside.mkdir()
    (outside / "elsewhere.py").write_bytes(base)
    os.symlink(outside, root / "broken" / "outside_dir.py")
    expect["broken/outside_dir.py"] = "outside the source tree"
    os.symlink(outside, root / "datasets")  # a `data -> /mnt/...` link: never walked
    os.symlink(outside / "elsewhere.py", root / "broken" / "linked_file.py")
    expect["broken/linked_file.py"] = None  # a local path source may link files in
    # deleted by the progress callback after the listing, before they are read
    vanish = []
    for i in range(5):
        put(f"zz_vanish_{i}.py", base, "vanished")
        vanish.append(root / f"zz_vanish_{i}.py")
    return expect, vanish


def check_outcomes(rows: dict[str, str | None], expect: dict[str, str | None]) -> None:
    assert set(rows) == set(expect), (
        f"missing: {sorted(set(expect) - set(rows))}; unexpected: {sorted(set(rows) - set(expect))}")
    for rel, want in expect.items():
        got = rows[rel]
        if want is None:
            assert got is None, f"{rel} should be indexed, got {got!r}"
        elif want == "*":
            assert got is None or got.strip(), rel
        else:
            assert got is not None and want in got, f"{rel}: {want!r} not in {got!r}"


def test_broken_corpus_is_indexed_or_recorded_and_good_blocks_are_found(tmp_path,
                                                                          good_reference):
    good, reference = good_reference
    src = tmp_path / "src"
    expect, vanish = build_broken_corpus(src, good, tmp_path / "outside")
    (tmp_path / "probe_unreadable.txt").write_text("x")
    os.chmod(tmp_path / "probe_unreadable.txt", 0)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"corpus": {"path": str(src)}}))
    cache = tmp_path / "cache"
    try:
        first = run_indexer(tmp_path, config, cache, workers=1, vanish=tuple(vanish))
        if first["root_reads_anything"]:  # capabilities could not be dropped here
            expect["broken/unreadable.py"] = None
            expect.pop("broken/locked")
            expect["broken/locked/hidden.py"] = None
        assert len(first["deleted"]) == len(vanish)
        rows = file_rows(cache / INDEX_FILE)
        check_outcomes(rows, expect)
        check_database(cache / INDEX_FILE)
        report = first["report"]
        assert report["files"] == len(expect)
        assert report["failed"] == sum(1 for e in rows.values() if e)
        assert {f["path"] for f in report["failures"]} == {r for r, e in rows.items() if e}
        # every block of the intact modules is found, under good/ only (not alias/)
        blocks = set(first["blocks"])
        assert {k for k in blocks if k.startswith("good.")} == reference
        assert not any(k.startswith("alias.") for k in blocks)
        assert not any("elsewhere" in k or "hidden" in k for k in blocks)
        # the latin-1 file with its cookie, the BOM and CRLF files are indexed with blocks
        for mod in ("broken.latin1_cookie", "broken.bom", "broken.crlf"):
            assert any(k.startswith(mod + ":") for k in blocks), mod

        # the next run: the deleted files leave the index, nothing else is read again
        second = run_indexer(tmp_path, config, cache, workers=1)
        assert second["report"]["removed"] == len(vanish)
        assert second["report"]["parsed"] == 0, second["report"]
        assert set(second["blocks"]) == blocks
        for p in vanish:
            expect.pop(p.relative_to(src).as_posix())
        check_outcomes(file_rows(cache / INDEX_FILE), expect)

        # the real CLI, with a process pool, on a fresh cache: same outcomes, no traceback
        proc = subprocess.run(
            nnrag_cmd("index", "--json", "--workers", "2", "--config", str(config),
                      "--cache-dir", str(tmp_path / "cli-cache")),
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=cli_env(),
            preexec_fn=drop_file_caps, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        cli = json.loads(proc.stdout)
        assert {f["path"]: f["reason"] for f in cli["failures"]} == {
            r: e for r, e in file_rows(cache / INDEX_FILE).items() if e}
        assert cli["blocks"] == len(blocks)
    finally:
        os.chmod(src / "broken" / "locked", 0o755)

    # extracting every block of the broken files gives a file or an error, never an exception
    with BlockExtractor(str(config), cache_dir=cache) as ex:
        ex.warm_index_once()
        # (big_real's are left out: each takes seconds, see bench/soak.py for scale)
        broken_blocks = [b for b in ex.blocks() if b.module.startswith("broken.")
                         and b.module != "broken.big_real"]
        assert len(broken_blocks) > 20
        for b in broken_blocks:
            res = ex.extract_single_block(b.key)
            assert res.ok or res.error, b.key
            assert "internal error" not in (res.error or ""), (b.key, res.error)
            if res.ok:
                ast.parse(res.generated.code)


# -- property: random mutations of real modules ----------------------------------------------
MUTATION = st.one_of(
    # semantic damage that still parses: what the resolver and discovery must survive
    st.tuples(st.just("cut_at_top"), st.floats(0, 1)),
    st.tuples(st.just("drop_top"), st.integers(0, 2**32)),
    st.tuples(st.just("rename"), st.integers(0, 2**32),
              st.sampled_from(["Module", "forward", "self", "nn", "x", "torch", "super"])),
    st.tuples(st.just("dup_top"), st.integers(0, 2**32)),
    # byte-level damage
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.integers(0, 2**32), st.integers(1, 40)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=12)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 400)),
    st.tuples(st.just("swap_lines"), st.integers(0, 2**32)),
    st.tuples(st.just("dedent"), st.floats(0, 1)),
    st.tuples(st.just("encoding"), st.sampled_from(
        ["latin1", "latin1_cookie", "bom", "bom_conflict", "utf16", "crlf", "cr", "tabs",
         "py2", "nul"])),
)


def _top_spans(data: bytes) -> list[tuple[int, int]]:
    """(first, last) 0-based line spans of the top-level statements, when ``data`` parses."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [(min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) - 1,
             (n.end_lineno or n.lineno) - 1) for n in tree.body]


def mutate(data: bytes, ops) -> bytes:
    for op in ops:
        kind = op[0]
        lines = data.split(b"\n")
        if kind == "cut_at_top":
            spans = _top_spans(data)
            if spans:
                data = b"\n".join(lines[: spans[int(op[1] * (len(spans) - 1))][0]])
        elif kind in ("drop_top", "dup_top"):
            spans = _top_spans(data)
            if spans:
                a, b = spans[random.Random(op[1]).randrange(len(spans))]
                chunk = lines[a: b + 1]
                data = b"\n".join(lines[:a] + (chunk * 2 if kind == "dup_top" else [])
                                  + lines[b + 1:])
        elif kind == "rename":
            words = sorted(set(re.findall(rb"\b%s\b" % op[2].encode(), data)))
            if words:
                data = re.sub(rb"\b%s\b" % op[2].encode(), op[2].encode()[:-1] or b"_", data,
                              count=1 + op[1] % 3)
        elif kind == "truncate":
            data = truncate(data, op[1])
        elif kind == "flip":
            data = flip_bytes(data, random.Random(op[1]), op[2])
        elif kind == "insert":
            i = int(len(data) * op[1])
            data = data[:i] + op[2] + data[i:]
        elif kind == "delete":
            i = int(len(data) * op[1])
            data = data[:i] + data[i + op[2]:]
        elif kind == "swap_lines":
            lines = data.split(b"\n")
            if len(lines) > 2:
                r = random.Random(op[1])
                a, b = r.randrange(len(lines)), r.randrange(len(lines))
                lines[a], lines[b] = lines[b], lines[a]
            data = b"\n".join(lines)
        elif kind == "dedent":
            lines = data.split(b"\n")
            i = int(len(lines) * op[1]) % max(1, len(lines))
            lines[i] = lines[i].lstrip()
            data = b"\n".join(lines)
        else:
            try:
                data = {"latin1": lambda d: latin1(d, False),
                        "latin1_cookie": lambda d: latin1(d, True),
                        "bom": bom, "bom_conflict": bom_with_conflicting_cookie,
                        "utf16": utf16, "crlf": crlf, "cr": cr_only, "tabs": mixed_tabs,
                        "py2": python2, "nul": nul_byte}[op[1]](data)
            except UnicodeError:
                pass  # already not UTF-8: leave it
    return data


FUZZED = {"files": 0, "indexed": 0, "recorded": 0, "blocks_extracted": 0}


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, 10**6), st.lists(MUTATION, min_size=1,
                                                                  max_size=4)),
                      min_size=1, max_size=3))
def test_mutated_real_modules_never_crash_the_indexer(good_reference, picks):
    good, reference = good_reference
    names = sorted(good)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        write_package(src / "good", good)
        mutated = {}
        for i, (which, ops) in enumerate(picks):
            name = names[which % len(names)]
            mutated[f"m{i}_{name}"] = mutate(good[name], ops)
        write_package(src / "mut", mutated)
        cfg = parse_config({"corpus": {"path": str(src)}})
        with BlockExtractor(cfg, cache_dir=Path(tmp) / "cache", workers=1) as ex:
            report = ex.index()
            rows = file_rows(ex.cache_dir / INDEX_FILE)
            expected = {f"good/{n}" for n in good} | {f"mut/{n}" for n in mutated} | {
                "good/__init__.py", "mut/__init__.py"}
            assert set(rows) == expected
            assert all(e is None or e.strip() for e in rows.values())
            assert report.files == len(expected)
            blocks = ex.blocks()
            assert {b.key for b in blocks if b.module.startswith("good.")} == reference
            for b in [b for b in blocks if b.module.startswith("mut.")][:4]:
                res = ex.extract_single_block(b.key)
                assert res.ok or res.error
                assert "internal error" not in (res.error or ""), (b.key, res.error)
                if res.ok:
                    ast.parse(res.generated.code)
                    FUZZED["blocks_extracted"] += 1
        FUZZED["files"] += len(mutated)
        FUZZED["indexed"] += sum(1 for n in mutated if rows[f"mut/{n}"] is None)
        FUZZED["recorded"] += sum(1 for n in mutated if rows[f"mut/{n}"] is not None)


def test_fuzzing_reached_both_outcomes():
    """The property test above exercised both paths (mutants that still index and mutants
    recorded as failures) and extraction; prints its figures (-s)."""
    if not FUZZED["files"]:
        pytest.skip("run together with test_mutated_real_modules_never_crash_the_indexer")
    print(f"\nfuzz: {FUZZED['files']} mutated real modules: {FUZZED['indexed']} indexed, "
          f"{FUZZED['recorded']} recorded with a reason; {FUZZED['blocks_extracted']} of "
          f"their blocks extracted")
    assert FUZZED["files"] >= 60
    assert FUZZED["indexed"] > 0 and FUZZED["recorded"] > 0
    assert FUZZED["blocks_extracted"] > 0
