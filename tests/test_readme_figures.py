"""Figures in one place (issue 57 item 6): every performance figure the README states is the one the committed
benchmarks/bench.json holds (each pointed at its key), docs/performance.md's results and fan-out sections are that
file's rendered by the bench, and a smoke or partial run writes neither. No timing is measured here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.bench import (
    COMMITTED_JSON,
    FANOUT_BEGIN,
    FANOUT_END,
    NO_RESULTS,
    PERFORMANCE_DOC,
    PROJECT,
    RESULTS_BEGIN,
    RESULTS_END,
    committed_sections,
    not_full,
    record_full_bench,
)

README = PROJECT / "README.md"

# Each figure the README's Performance section states: what it is, where it stands (the figure as group 1) and the
# key of bench.json that holds it. A figure stated without an entry here is reported as unbacked.
FIGURES = [
    ("the large day's requests", r"a day of ([\d,]+) requests ran end to end", ("results", "days", 1,
                                                                                "requests_per_day_asked")),
    ("the large day end to end", r"publication included\) in\s+([\d.]+) s", ("results", "days", 1, "run", "wall_s")),
    ("the large day against the bare read", r"([\d.]+)x DuckDB's bare", ("results", "days", 1, "ratio_e2e_to_bare")),
    ("the bare read", r"same files \(([\d.]+) s\)", ("results", "days", 1, "bare_read", "seconds")),
    ("the large day against pandas", r"and ([\d.]+)x the time of a pandas", ("results", "days", 1, "e2e_vs_pandas")),
    ("the pandas script", r"per model \(([\d.]+) s\)", ("results", "days", 1, "pandas", "seconds")),
    ("the large day's memory", r"peak memory was ([\d.]+) MB", ("results", "days", 1, "run", "peak_rss_mb")),
    ("the backfill's days", r"(\d+) days of ~[\d,]+ requests backfilled", ("results", "backfill", "days")),
    ("the backfill's requests a day", r"\d+ days of ~([\d,]+) requests backfilled",
     ("results", "backfill", "requests_per_day_asked")),
    ("the backfill's time", r"backfilled through one `tokenledger run` in ([\d.]+) s",
     ("results", "backfill", "tokenledger_run", "wall_s")),
    ("the fan-out's days", r"(\d+) days of ~[\d,]+ requests ran", ("fanout", "fanout", "days")),
    ("the fan-out's requests a day", r"\d+ days of ~([\d,]+) requests ran",
     ("fanout", "fanout", "requests_per_day_asked")),
    ("the fan-out's speed-up", r"ran ([\d.]+)x as\s+fast", ("fanout", "fanout", "speedup")),
    ("the fan-out's workers side by side", r"fast\s+through (\d+) workers", ("fanout", "fanout", "workers")),
    ("the fan-out's one worker", r"as\s+through (\d+) worker\b", ("fanout", "fanout", "variants", 0, "workers")),
]
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# A measured figure: a number (or a range) with a unit of time, memory or a ratio, or a percentage.
MEASURED = re.compile(rf"(?<![\w.\-/~])~?{NUMBER}(?:-{NUMBER})?(?:x|\s?(?:ms|s|seconds?|minutes?|min|hours?|h|GB|MB|%))"
                      r"(?![\w-])")
# A timing or a speed-up anywhere else in the README (a cache's size or a hit ratio there is no bench's figure).
TIMING = re.compile(rf"(?<![\w.\-/~])~?{NUMBER}(?:-{NUMBER})?(?:x|\s?(?:ms|s|seconds?|minutes?|min|hours?))(?![\w-])")


def _section(text: str, title: str = "## Performance") -> tuple[int, int]:
    start = text.index(f"\n{title}\n") + 1
    end = text.find("\n## ", start + len(title))
    return start, len(text) if end < 0 else end + 1


def _key(path: tuple) -> str:
    return ".".join(str(part) if isinstance(part, str) else f"[{part}]" for part in path).replace(".[", "[")


def _held(committed: dict, path: tuple) -> object:
    value: object = committed
    for part in path:
        value = value[part]  # type: ignore[index]
    return value


def disagreements(readme: str, committed: dict) -> list[str]:
    """Each figure of the README's Performance section that is not the one bench.json holds, named with its key;
    each measured figure there that no key backs; each timing stated elsewhere in the README. Empty when they agree."""
    start, end = _section(readme)
    section = readme[start:end]
    out, backed = [], []
    for what, pattern, path in FIGURES:
        found = list(re.finditer(pattern, section))
        if len(found) != 1:
            out.append(f"{what}: the README states it {len(found)} times, not once (pattern {pattern!r})")
            continue
        stated = found[0].group(1)
        backed.append(found[0].span(1))
        try:
            held = _held(committed, path)
        except (KeyError, IndexError, TypeError):
            out.append(f"{what}: the README states {stated}, bench.json holds no {_key(path)}")
            continue
        if held is None or float(stated.replace(",", "")) != float(held):
            out.append(f"{what}: the README states {stated}, bench.json's {_key(path)} holds {held}")
    for match in MEASURED.finditer(section):
        if not any(a <= match.start() < b or match.start() <= a < match.end() for a, b in backed):
            out.append(f"the README states {match.group(0)!r} (…{section[max(match.start() - 40, 0):match.end()]}) "
                       "and no key of bench.json backs it: take it from bench.json (FIGURES) or link to "
                       "docs/performance.md")
    for match in TIMING.finditer(readme[:start] + "\n" * (end - start) + readme[end:]):
        out.append(f"the README states {match.group(0)!r} outside its Performance section: performance figures go "
                   "there, from bench.json")
    return out


def _committed() -> dict:
    return json.loads(COMMITTED_JSON.read_text())


def test_every_figure_the_readme_states_is_the_one_bench_json_holds():
    assert disagreements(README.read_text(), _committed()) == []


def test_a_changed_figure_fails_naming_it_and_its_key():
    readme, committed = README.read_text(), _committed()
    speedup = committed["fanout"]["fanout"]["speedup"]
    stated = f"{speedup}x"
    assert stated in readme
    # The README changed: the figure and its key named.
    assert disagreements(readme.replace(stated, "1.95x"), committed) == [
        f"the fan-out's speed-up: the README states 1.95, bench.json's fanout.fanout.speedup holds {speedup}"]
    # bench.json changed (a new bench) and the README not refreshed.
    newer = json.loads(json.dumps(committed))
    newer["fanout"]["fanout"]["speedup"], newer["fanout"]["fanout"]["variants"][0]["workers"] = 1.9, 3
    assert disagreements(readme, newer) == [
        f"the fan-out's speed-up: the README states {speedup}, bench.json's fanout.fanout.speedup holds 1.9",
        "the fan-out's one worker: the README states 1, bench.json's fanout.fanout.variants[0].workers holds 3"]
    # A part bench.json no longer holds.
    assert disagreements(readme, {**committed, "fanout": None})[0].startswith(
        "the fan-out's days: the README states 8, bench.json holds no fanout.fanout.days")


def test_a_figure_no_key_backs_or_a_timing_elsewhere_fails():
    readme, committed = README.read_text(), _committed()
    start, _ = _section(readme)
    stated = readme.replace("## Performance\n\n", "## Performance\n\nA 10M-request day took 341-393 s, 12.9x the bare "
                                                  "read, within 1.7 GB.\n\n", 1)
    found = disagreements(stated, committed)
    assert [f.split(" (…")[0] for f in found] == [f"the README states {figure!r}"
                                                   for figure in ("341-393 s", "12.9x", "1.7 GB")]
    elsewhere = readme.replace("make test    # validate", "make test    # 3-4 minutes: validate", 1)
    assert disagreements(elsewhere, committed) == [
        "the README states '3-4 minutes' outside its Performance section: performance figures go there, from "
        "bench.json"]
    assert start > 0


def _doc_section(text: str, begin: str, end: str) -> str:
    return text.split(f"\n{begin}\n", 1)[1].split(f"\n{end}\n", 1)[0] + "\n"


def test_docs_performance_sections_are_bench_json_rendered():
    text = PERFORMANCE_DOC.read_text()
    results, fanout = committed_sections(_committed())
    assert _doc_section(text, RESULTS_BEGIN, RESULTS_END) == results
    assert _doc_section(text, FANOUT_BEGIN, FANOUT_END) == fanout


def test_bench_json_holds_full_benches_only_and_no_local_path():
    committed = _committed()
    assert set(committed) == {"results", "fanout"}
    for part, entry in committed.items():
        if entry is not None:
            assert not_full(entry, part) == [], part
    text = COMMITTED_JSON.read_text()
    assert str(PROJECT) not in text
    assert not re.search(r"(?<![\w.])/(?:work|home|tmp|root|Users|var|mnt)/", text)
    assert "(FAILED)" not in PERFORMANCE_DOC.read_text().split(f"\n{RESULTS_BEGIN}\n")[1].split(f"\n{FANOUT_END}\n")[0]


def _smoke(fanout: dict) -> dict:
    """A smoke run: a 2,000-request day and two small days, a backfill run FAILED, the fan-out of `fanout`."""
    return {**fanout, "days": [{"requests_per_day_asked": 2000, "run_ok": True}],
            "fixed": {"days": 2, "requests_per_day_asked": 1000, "run_ok": True},
            "backfill": {"days": 2, "requests_per_day_asked": 2000, "ok": False}}


def test_a_smoke_run_writes_neither_the_document_nor_bench_json(tmp_path):
    doc, path = tmp_path / "performance.md", tmp_path / "bench.json"
    original = f"# Performance\n\n{RESULTS_BEGIN}\nkept\n{RESULTS_END}\n\n{FANOUT_BEGIN}\nkept too\n{FANOUT_END}\n"
    doc.write_text(original)
    fanout = _committed()["fanout"]
    small = {**fanout, "fanout": {**fanout["fanout"], "days": 2, "requests_per_day_asked": 2000}}
    said = record_full_bench(_smoke(small), tmp_path / "bench", doc, path)
    assert doc.read_text() == original and not path.exists()
    assert said[0].startswith("not a full bench of the results (days of 2,000 requests, not 1,000,000 and 10,000,000;")
    assert "a backfill run FAILED" not in said[0] and "the backfill not measured on 30 days of 20,000" in said[0]
    assert said[1].startswith("not a full bench of the fanout (the fan-out was 2 days of ~2,000 through 2 workers")
    # The same smoke run with a full fan-out: the fan-out alone is kept, its local paths named as the command line
    # names them; the results section says none is recorded rather than show the smoke's.
    root = tmp_path / "bench"
    local = json.loads(json.dumps(fanout).replace('"--home .bench', f'"--home {root}')
                       .replace('".bench/logs', f'"{root}/logs'))
    said = record_full_bench(_smoke(local), root, doc, path)
    assert said[-1] == f"fanout of {path} and {doc} rewritten"
    kept = json.loads(path.read_text())
    assert kept["results"] is None and str(tmp_path) not in path.read_text()
    assert kept["fanout"]["args"] == "--home <home> --only fanout"
    text = doc.read_text()
    assert _doc_section(text, RESULTS_BEGIN, RESULTS_END) == NO_RESULTS
    assert _doc_section(text, FANOUT_BEGIN, FANOUT_END) == committed_sections(kept)[1]


def test_not_full_names_each_part_missing_or_failed():
    full = {"days": [{"requests_per_day_asked": s, "run_ok": True} for s in (1_000_000, 10_000_000)],
            "fixed": {"days": 5, "requests_per_day_asked": 1000, "run_ok": True},
            "backfill": {"days": 30, "requests_per_day_asked": 20_000, "ok": True}}
    assert not_full(full, "results") == []
    failed = {**full, "days": [full["days"][0], {**full["days"][1], "run_ok": False}]}
    assert not_full(failed, "results") == ["a day's run FAILED"]
    assert not_full({**full, "fixed": None}, "results") == ["the fixed cost not measured on 5 days of 1,000"]
    assert not_full(full, "fanout") == ["no fan-out"]
    assert Path(COMMITTED_JSON).name == "bench.json"
