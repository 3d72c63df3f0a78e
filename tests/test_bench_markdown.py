"""The bench's results as Markdown, from bench.json: the figures of a small fixed bench.json exactly, and the
rewrite of docs/performance.md's results section that leaves the rest of the document as it was."""

from __future__ import annotations

import json

import pytest

from benchmarks.bench import (
    RESULTS_BEGIN,
    RESULTS_END,
    fanout_ratios,
    fanout_variant,
    main,
    replace_results,
    results_markdown,
    verdicts,
)


def _process(wall, cpu, rss, code=0):
    return {"exit_code": code, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss, "log": "x.log"}


def _bench() -> dict:
    """A 1M day, two small days and a two-day backfill, with figures chosen so that each cell can be read."""
    day = {"requests": 997_837, "requests_per_day_asked": 1_000_000,
           "generate": {"process": _process(17.1, 16.0, 2300.0)},
           "run": _process(48.0, 76.1, 1464.0), "run_ok": True, "dagster_run_s": 41.5, "steps": 27,
           "steps_seconds": 40.25, "slowest_steps": [{"step": "infra/cache_whatif_daily", "seconds": 16.7},
                                                     {"step": "core/gateway_requests", "seconds": 12.1}],
           "bare_read": {"seconds": 2.84}, "ratio_e2e_to_bare": 16.9,
           "pandas": {"seconds": 15.5, "process": _process(15.9, 15.2, 327.0)}, "e2e_us_per_request": 48.1}
    fixed = {"days": 2, "requests_per_day_asked": 1000, "generate": {"process": _process(1.2, 1.1, 200.0)},
             "run": _process(12.4, 11.0, 459.0), "wall_s_per_day": 6.2, "seconds_per_day_in_run": 4.58,
             "marginal_s_per_day": 2.85, "run_ok": True}
    backfill = {"days": 2, "requests_per_day_asked": 2000, "ok": False,
                "generate": {"process": _process(1.75, 1.7, 210.0)}, "tokenledger_run": _process(20.75, 20.22, 455.0),
                "dagster_materialize": _process(11.21, 10.69, 355.0, 1)}
    result = {"started": "2026-12-03T12:29:05+00:00", "commit": "46269d8", "args": "--home .bench --sizes 1000000",
              "seconds": 1320.5, "machine": {"cpus": 2, "python": "3.11.7", "calibration_s_at_start": 3.3,
                                             "calibration_s_at_end": 3.7},
              "days": [day], "fixed": fixed, "backfill": backfill, "peak_rss_mb": 2300.0,
              "peak_rss_child": "1,000,000 generate"}
    result["verdicts"] = verdicts(result)
    return result


EXPECTED = """\
The bench started 2026-12-03 12:29 UTC at 46269d8 (`python -m benchmarks.bench --home .bench --sizes 1000000`), \
1,320.5 s in all; 2 CPUs, Python 3.11.7.

| day | generate | end to end (`tokenledger run`, its CPU time) | Dagster run | peak RSS | DuckDB bare typed read \
| ratio | pandas peer | pandas RSS | us per request |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| 997,837 requests | 17.1 s | 48.0 s (CPU 76.1 s) | 41.5 s | 1.43 GB | 2.84 s | 16.9x | 15.5 s | 327 MB | 48.1 |
| 2 days of ~1,000 (`run --start --end`) | 1.2 s | 12.4 s (6.2 s a day) | 4.58 s a day (2.85 s each day past the \
first) | 459 MB | | | | | |
| 2 days of ~2,000 (`run --start --end`) | 1.75 s | 20.75 s (CPU 20.22 s) | | 455 MB | | | | | |
| 2 days of ~2,000 (`dagster asset materialize`) | 1.75 s | 11.21 s (CPU 10.69 s) (FAILED) | | 355 MB | | | | | |

Slowest steps of the 997,837-request day (27 steps, 40.25 s together): `infra/cache_whatif_daily` 16.7 s, \
`core/gateway_requests` 12.1 s.

Peak RSS of the whole bench: 2.25 GB (the largest child: 1,000,000 generate).

host speed: 20,000,000 Python multiply-adds took 3.3 s at the start, 3.7 s at the end (the development machine \
idle: 2.2-2.35 s; slower means every time above is too).

| target | measured | verdict |
|---|---|---|
| the 10M-day targets (ratio, pandas, 2 GB, cost per row) | no 10M day in this run | not measured |
| ingest <= 2.5x the bare read (1,000,000-request day, core/gateway_requests) | 4.3x (12.1 s) | NOT met |
| a 1,000-request day <= 3 s inside a ranged run | 4.58 s a day (Dagster run), 6.2 s a day (whole command); each day \
past the first added 2.85 s | NOT met |
"""


def test_the_results_table_carries_bench_json_s_figures_exactly():
    assert results_markdown(_bench()) == EXPECTED


def test_markdown_prints_the_table_of_a_bench_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_bench()))
    assert main(["--markdown", str(path)]) == 0
    assert capsys.readouterr().out == EXPECTED


DOC = f"""\
# Performance

How it measures, by hand; the bench rewrites what lies between {RESULTS_BEGIN} and {RESULTS_END}, each alone on
its line.

{RESULTS_BEGIN}
an older table
| 1 | 2 |
{RESULTS_END}

## History

| date | commit |
|---|---|
| 2026-12-01 | def6a52 |
"""


def test_the_results_section_alone_is_rewritten(tmp_path, capsys):
    doc = tmp_path / "performance.md"
    doc.write_text(DOC)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_bench()))
    assert main(["--markdown", str(path), "--docs", str(doc)]) == 0
    before, after = DOC.split(f"\n{RESULTS_BEGIN}\n")[0], DOC.split(f"\n{RESULTS_END}\n")[1]
    expected = f"{before}\n{RESULTS_BEGIN}\n{EXPECTED}{RESULTS_END}\n{after}"
    assert doc.read_text() == expected
    assert "an older table" not in expected and "| 2026-12-01 | def6a52 |" in expected
    # Again from its own output: the same document, nothing added.
    main(["--markdown", str(path), "--docs", str(doc)])
    assert doc.read_text() == expected
    capsys.readouterr()


def test_a_document_without_the_markers_is_refused_and_left_alone(tmp_path, capsys):
    with pytest.raises(ValueError, match="bench:results"):
        replace_results("# Performance\n", "table\n")
    with pytest.raises(ValueError, match="bench:results"):  # named in prose only: no section
        replace_results(f"between {RESULTS_BEGIN} and {RESULTS_END}\n", "table\n")
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_bench()))
    with pytest.raises(SystemExit):
        main(["--markdown", str(path), "--docs", str(doc)])
    assert doc.read_text() == "# Performance\n"
    assert "has no <!-- bench:results -->" in capsys.readouterr().err


def _fanout_bench() -> dict:
    """The fan-out alone: 8 days as two runs of 4, through 1 worker (120 s) and 2 (80 s), from process samples and run
    timestamps chosen so that each figure can be worked out by hand."""
    def process(wall, start):
        return {**_process(wall, 4.9, 230.0), "started_at": start, "ended_at": start + wall}

    def run(created, starting, started, ended, steps, pid):
        return {"status": "SUCCESS", "created": created, "starting": starting, "started": started, "ended": ended,
                "seconds": round(ended - started, 2), "steps_seconds": steps, "pid": pid}

    # Samples: (time, the command's CPU s, its RSS MB, the host's busy CPU s, the host's total CPU s).
    one = fanout_variant(1, 8, process(120.0, 1000.0),
                         [(1000.0, 0.0, 300.0, 0.0, 0.0), (1010.0, 5.0, 900.0, 10.0, 20.0),
                          (1110.0, 125.0, 1200.0, 140.0, 220.0), (1120.0, 127.0, 400.0, 150.0, 240.0)],
                         [run(1010.0, 1014.0, 1016.0, 1060.0, 42.0, 11),
                          run(1060.5, 1064.5, 1066.5, 1110.0, 41.0, 12)], 2, 2, {11: 55.0, 12: 54.6, 5: 9.0})
    many = fanout_variant(2, 8, process(80.0, 2000.0),
                          [(2000.0, 0.0, 300.0, 0.0, 0.0), (2010.0, 5.0, 1500.0, 10.0, 20.0),
                           (2070.0, 120.0, 2400.0, 125.0, 140.0), (2080.0, 122.0, 500.0, 135.0, 160.0)],
                          [run(2010.0, 2014.0, 2017.0, 2068.0, 49.5, 21),
                           run(2010.2, 2014.2, 2017.6, 2070.0, 50.5, 22)], 2, 2, {21: 57.0, 22: 53.6, 6: 9.0})
    fanout = {"days": 8, "requests_per_day_asked": 200_000, "requests": 1_439_873, "workers": 2, "days_per_run": 4,
              "cpus": 2, "executor": "in_process", "generate": {"process": _process(41.3, 40.0, 900.0)},
              "variants": [one, many], **fanout_ratios(one, many),
              "published": {"tables": {"infra.slo_daily": {}, "finance.cost_per_mtok_daily": {}}, "rows": 1234,
                            "differing": [], "same": True}, "ok": True}
    result = {"days": [], "fanout": fanout, "peak_rss_mb": 2400.0,
              "peak_rss_child": "fan-out through 2 worker(s), its processes together",
              "machine": {"calibration_s_at_start": 2.3, "calibration_s_at_end": 2.4}}
    result["verdicts"] = verdicts(result)
    return result


# 120 / 80 = 1.5x; the runs' span 100 / 60; 1 worker's runs used 120 CPU s of 200 (60%), so at most 1 / 0.6 = 1.67x;
# 2 workers' 115 of 120 (96%), their steps 100 / 83 = 1.2x as long; 10 s before and 10 s after either way; 1 worker's
# span 100 s less its runs' 44 + 43.5 s executing; 2 workers' 60 s less 2017 -> 2070; a worker's CPU over its launch to
# its end: 55 / 46 and 54.6 / 45.5 (1.2 both), 57 / 54 and 53.6 / 55.8 (1.06, 0.96).
FANOUT_EXPECTED = """\
| day | generate | end to end (`tokenledger run`, its CPU time) | Dagster run | peak RSS | DuckDB bare typed read | \
ratio | pandas peer | pandas RSS | us per request |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| 8 days of ~200,000 (`run --parallel 1`, 2 runs) | 41.3 s | 120.0 s (15.0 s a day, CPU 127.0 s) | 100.0 s (the \
runs' span) | 1.17 GB | | | | | |
| 8 days of ~200,000 (`run --parallel 2`, 2 runs) | 41.3 s | 80.0 s (10.0 s a day, CPU 122.0 s) | 60.0 s (the runs' \
span) | 2.34 GB | | | | | |

The fan-out: 8 days of ~200,000 requests (1,439,873 in all) as runs of 4 days through `tokenledger run --parallel`, \
each run in a run worker process of its own, its steps in that process: 1 worker 120.0 s (15.0 s a day), 2 workers \
80.0 s (10.0 s a day), **1.5x** on 2 CPUs (1.67x from the first run's creation to the last's end); both published \
the same 2 tables, row for row (1,234 rows).

| the fan-out's time | 1 worker | 2 workers |
|---|---:|---:|
| the whole command | 120.0 s | 80.0 s |
| before the first run was created (imports, the daemon's start, the code location's load) | 10.0 s | 10.0 s |
| from the first run's creation to the last's end | 100.0 s | 60.0 s |
| of which no run was executing | 12.5 s | 7.0 s |
| after the last run ended (the summary, the daemon's stop) | 10.0 s | 10.0 s |
| a run's wait in the queue (the daemon looks every 5 s), mean | 4.0 s | 4.0 s |
| a run worker's start (its process, its imports), mean | 2.0 s | 3.2 s |
| each run, started to ended | 44.0 s, 43.5 s | 51.0 s, 52.4 s |
| the runs' steps together | 83.0 s | 100.0 s |
| CPU of the command's processes | 127.0 s | 122.0 s |
| of which the run workers' | 109.6 s | 110.6 s |
| of which the rest's (the command, the daemon, code servers) | 17.4 s | 11.4 s |
| CPUs a run worker kept busy from its launch to its end, mean (of 2) | 1.2 | 1.01 |
| the command's processes' share of the 2 CPUs while the runs ran | 60% | 96% |
| the host's CPUs busy meanwhile (every process's) | 65% | 96% |
| peak RSS of the command's processes together | 1.17 GB | 2.34 GB |

What limits it: a run worker alone kept 1.2 CPUs busy (more than one: DuckDB runs a step on several threads), and \
with the command's other processes 1 worker kept 60% of the 2 CPUs busy while its runs ran, so with the same CPU \
work on every CPU its runs could go at most 1.67x faster; 2 workers kept 96% busy, and their steps took 1.2x as \
long together as 1 worker's. Outside the steps, what no worker shares: 20.0 s (1 worker) and 20.0 s (2) before the \
first run was created and after the last ended, and 12.5 s and 7.0 s of the runs' span in which no run was \
executing (each run's wait for the daemon and for its run worker's start).

Peak RSS of the whole bench: 2.34 GB (the largest child: fan-out through 2 worker(s), its processes together).

host speed: 20,000,000 Python multiply-adds took 2.3 s at the start, 2.4 s at the end (the development machine \
idle: 2.2-2.35 s; slower means every time above is too).

| target | measured | verdict |
|---|---|---|
| the 10M-day targets (ratio, pandas, 2 GB, cost per row) | no 10M day in this run | not measured |
| 8 days of 200k on 2 workers close to 2x the speed of 1 (>= 1.8x) | 1.5x | NOT met |
"""


def test_the_fan_out_prints_its_speed_up_where_the_time_went_and_what_limits_it():
    assert results_markdown(_fanout_bench()) == FANOUT_EXPECTED


def test_the_fan_out_is_judged_only_at_the_issue_s_size_and_when_both_ways_published_the_same():
    result = _fanout_bench()
    fanout = result["fanout"]
    judged = [v for v in verdicts({**result, "fanout": {**fanout, "speedup": 1.85}}) if "8 days" in v["target"]]
    assert [(v["verdict"], v["measured"]) for v in judged] == [("met", "1.85x")]
    differing = {**fanout, "speedup": 1.85, "ok": False}
    assert [v["verdict"] for v in verdicts({**result, "fanout": differing}) if "8 days" in v["target"]] == ["NOT met"]
    smaller = {**fanout, "days": 4, "requests_per_day_asked": 2000}
    assert not [v for v in verdicts({**result, "fanout": smaller}) if "8 days" in v["target"]]
