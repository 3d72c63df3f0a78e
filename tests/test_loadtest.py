"""Load-test ingest and lambda_slo_max: generated runs with a known knee, a hand-made run worked out by hand, and
run.yaml files that break their contract."""

from __future__ import annotations

import gzip
import json
import math
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from tests.conftest import request, write_jsonl
from tokenledger.capacity.loadtest import loadtest_results, write_loadtest_steps
from tokenledger.config import load_config
from tokenledger.contracts import load_contract, sql_literal
from tokenledger.errors import LedgerError
from tokenledger.generate import (
    DEMO_BENCH_DEPLOYMENT,
    DEMO_BENCH_MODEL,
    DEMO_BENCH_RATES,
    DEMO_BENCH_STEP_MINUTES,
    capacity_rps,
    default_steps,
    generate_loadtest_run,
    generate_vllm_bench_run,
    initial_replicas,
    knee_index,
)
from tokenledger.generate.configs import write_configs
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.layout import HomeLayout

SEED = 7
SCENARIO_START = date(2026, 11, 16)
MODEL_70B, DEP_70B = "llama-3.1-70b-instruct", "llama70b-h100nvl-tp2"
MODEL_QWEN, DEP_QWEN = "qwen3-coder-30b-a3b-instruct", "qwen3coder30b-h100"
# run_id: (model, deployment, steps (None = default_steps), minutes per step, start)
RUNS: dict[str, tuple[str, str, list[float] | None, int, datetime]] = {
    # The coding model's policy asks for 10 stable minutes (an override below): 12-minute steps have a 2-minute
    # warm-up and a 10-minute segment, so its lambda_slo_max is verified.
    "lt-qwen": (MODEL_QWEN, DEP_QWEN, None, 12, datetime(2026, 11, 17, 2, tzinfo=UTC)),
    # 6-minute steps: warm-up 1, segment 5 < the default 30: the same knee, as a reference figure.
    "lt-70b-short": (MODEL_70B, DEP_70B, None, 6, datetime(2026, 11, 17, 8, tzinfo=UTC)),
    # One step well below the knee (0.75 req/s, about half of one replica's 1.55 req/s), at the default 30 stable
    # minutes: 35 minutes is warm-up 5 + 30, verified; 34 minutes is one short.
    "lt-70b-35min": (MODEL_70B, DEP_70B, [0.75], 35, datetime(2026, 11, 17, 12, tzinfo=UTC)),
    "lt-70b-34min": (MODEL_70B, DEP_70B, [0.75], 34, datetime(2026, 11, 17, 13, tzinfo=UTC)),
}
# The demo's run (`tokenledger generate --with-loadtest`): on the fleet a landing zone of this volume starts with.
VOLUME_RUN, VOLUME = "lt-70b-volume", 200_000


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], Path]:
    """The scenario's configs and the four runs above, measured once: (home, results, core.loadtest_steps file)."""
    home = tmp_path_factory.mktemp("loadtest") / "home"
    write_configs(home, SCENARIO_START, SEED, VOLUME)
    slo = home / "config" / "slo.yaml"
    text = slo.read_text()
    assert "    models:\n" in text
    slo.write_text(text.replace("    models:\n", f"    models:\n      {MODEL_QWEN}:\n        stable_window_min: 10\n"))
    for run_id, (model, dep, steps, minutes, start) in RUNS.items():
        generate_loadtest_run(home, run_id, model, dep, start, steps, minutes, SEED)
    generate_loadtest_run(home, VOLUME_RUN, MODEL_70B, DEP_70B, datetime(2026, 11, 17, 16, tzinfo=UTC), None, 6, SEED,
                          requests_per_day=VOLUME)
    layout = HomeLayout.of(home)
    target = home / "lake" / "core" / "loadtest_steps" / "data.parquet"
    with compute_connection(home / "tmp") as con:
        load_config(con, layout)
        results = write_loadtest_steps(con, layout, target)
    return home, results, target


def _by_run(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["run_id"]: r for r in results}


@pytest.mark.parametrize("run_id", ["lt-qwen", "lt-70b-short"])
def test_lambda_slo_max_is_the_knee_step(generated, run_id: str) -> None:
    model, dep, _, _, _ = RUNS[run_id]
    run = _by_run(generated[1])[run_id]
    steps = default_steps(dep)
    knee = knee_index(dep, steps)
    assert knee == 3
    assert (run["model"], run["deployment_id"]) == (model, dep)
    assert [s["arrival_rate"] for s in run["steps"]] == steps
    assert run["lambda_slo_max"] == steps[knee]
    assert run["first_failing_step_rate"] == steps[knee + 1]
    assert [s["all_met"] for s in run["steps"]] == [i <= knee for i in range(len(steps))]
    assert [s["is_lambda_slo_max_step"] for s in run["steps"]] == [i == knee for i in range(len(steps))]
    # Past the knee the queue is what breaks first (docs/metrics.md, section 1), and raw throughput keeps rising.
    above = run["steps"][knee + 1]
    assert above["queue_p99_met"] is False and above["queue_p99_ms"] > 300
    assert above["raw_throughput"] > run["steps"][knee]["raw_throughput"]


def test_a_run_sized_to_a_landing_zone_keeps_its_knee(generated) -> None:
    """The fleet is sized to the volume, the speed per replica is fixed. 200,000 requests a day keep the 70B's
    replicas 0.63 busy on average (84,000 requests at 0.65 replica-seconds each), which one replica holds at the
    target 0.64: the run measures that one replica, the same machine as a run without a volume, and its knee is
    after the fourth step. Ten times the volume is ten replicas, and ten times the arrival rates."""
    run = _by_run(generated[1])[VOLUME_RUN]
    steps = default_steps(DEP_70B, VOLUME)
    assert initial_replicas(DEP_70B, VOLUME) == 1 and steps == default_steps(DEP_70B)
    assert knee_index(DEP_70B, steps, VOLUME) == 3
    assert [s["arrival_rate"] for s in run["steps"]] == steps
    assert (run["lambda_slo_max"], run["first_failing_step_rate"]) == (steps[3], steps[4])
    assert initial_replicas(DEP_70B, 10 * VOLUME) == 10
    assert default_steps(DEP_70B, 10 * VOLUME) == pytest.approx([10 * s for s in steps], abs=0.06)


@pytest.mark.parametrize(("run_id", "warmup", "segment", "verified"), [
    ("lt-qwen", 2, 10, True),
    ("lt-70b-short", 1, 5, False),
    ("lt-70b-35min", 5, 30, True),
    ("lt-70b-34min", 5, 29, False),
])
def test_verified_needs_the_stable_window_after_warmup(generated, run_id: str, warmup: int, segment: int,
                                                       verified: bool) -> None:
    home, results, _ = generated
    run = _by_run(results)[run_id]
    run_yaml = yaml.safe_load((home / "raw" / "loadtest" / run_id / "run.yaml").read_text())
    assert run_yaml["warmup_min"] == warmup
    assert {s["segment_minutes"] for s in run["steps"]} == {segment}
    assert run["verified"] is verified
    at_max = next(s for s in run["steps"] if s["is_lambda_slo_max_step"])
    assert at_max["stable"] is verified
    assert at_max["stable_windows"] == (1 if verified else 0)


@pytest.mark.parametrize("run_id", ["lt-70b-35min", "lt-70b-34min"])
def test_a_run_whose_every_step_holds(generated, run_id: str) -> None:
    run = _by_run(generated[1])[run_id]
    assert run["lambda_slo_max"] == 0.75 and run["first_failing_step_rate"] is None
    assert run["goodput_per_gpu_at_max"] > 0


def test_goodput_per_gpu_at_max(generated) -> None:
    for run in generated[1]:
        gpus = {DEP_70B: 2, DEP_QWEN: 1}[run["deployment_id"]]  # the initial replica: 1 x 2 and 1 x 1
        assert run["gpus"] == gpus
        at_max = next(s for s in run["steps"] if s["is_lambda_slo_max_step"])
        wall = (at_max["last_finished_at"] - at_max["first_received_at"]).total_seconds()
        assert at_max["wall_time_s"] == pytest.approx(wall)
        assert 0 < wall - at_max["segment_minutes"] * 60 < 120  # the last requests finish shortly after the end
        assert run["goodput_per_gpu_at_max"] == pytest.approx(at_max["compliant_output_tokens"] / wall / gpus)
        assert at_max["raw_throughput"] >= at_max["slo_goodput"] > 0
        # Poisson arrivals: the measured rate is within 4 standard deviations (sqrt(n) of n expected), or 5%.
        expected = at_max["arrival_rate"] * at_max["segment_minutes"] * 60
        rel = max(0.05, 4 / math.sqrt(expected))
        assert at_max["arrival_rate_measured"] == pytest.approx(at_max["arrival_rate"], rel=rel)


def test_every_request_row_is_accounted_for(generated) -> None:
    home, results, _ = generated
    for run in results:
        with gzip.open(home / "raw" / "loadtest" / run["run_id"] / "requests.jsonl.gz", "rt") as f:
            lines = sum(1 for line in f if line.strip())
        assert run["rows_read"] == lines
        assert run["rows_read"] == run["rows_accepted"] + run["rows_quarantined"] + run["duplicates_merged"]
        assert run["rows_quarantined"] == 0 and run["quarantine_sample"] == []


def test_steps_table_matches_its_contract(generated) -> None:
    _, results, target = generated
    table = load_contract("core_loadtest_steps").table()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE TABLE {table.name} AS SELECT * FROM read_parquet({sql_literal(str(target))})")
    described = con.execute(f"DESCRIBE {table.name}").fetchall()
    # DuckDB spells types its own way (TIMESTAMPTZ is TIMESTAMP WITH TIME ZONE): compare as DuckDB reads them.
    spelled = [con.execute(f"DESCRIBE SELECT NULL::{c.physical_type} AS x").fetchone()[1] for c in table.columns]
    assert [(c[0], c[1]) for c in described] == list(zip(table.column_names, spelled, strict=True))
    assert table.primary_key == ["run_id", "step_index"]
    assert con.execute(f"SELECT count(*), count(DISTINCT (run_id, step_index)) FROM {table.name}").fetchone() == (
        sum(len(r["steps"]) for r in results),) * 2
    for col in table.columns:
        nulls, values = con.execute(f"SELECT count(*) FILTER (WHERE {col.name} IS NULL), count({col.name}) "
                                    f"FROM {table.name}").fetchone()
        assert values > 0, f"{col.name} is never filled"
        if col.required:
            assert nulls == 0, f"{col.name} is required"
        for bound, op in ((col.minimum, "<"), (col.maximum, ">"), (col.exclusive_minimum, "<="),
                          (col.exclusive_maximum, ">=")):
            if bound is not None:
                broken = con.execute(f"SELECT count(*) FROM {table.name} WHERE {col.name} {op} {bound}").fetchone()
                assert broken == (0,), f"{col.name} {op} {bound}"
    for rule in table.row_rules:
        assert con.execute(f"SELECT count(*) FROM {table.name} WHERE {rule.violation}").fetchone() == (0,)
    for rule in table.set_rules:
        assert con.execute(rule.query).fetchone() == (0,), rule.name


# --- a hand-made run on the hand-made home of conftest.py (m70 on 16 GPUs until noon of 2026-11-16) -----------

HAND_RUN = """\
run_id: hand
model: m70
deployment_id: m70-h100
start: 2026-11-16T10:00:00Z
warmup_min: 1
steps:
  - {arrival_rate: 0.03, start: 2026-11-16T10:00:00Z, end: 2026-11-16T10:31:00Z}
  - {arrival_rate: 0.1, start: 2026-11-16T10:31:00Z, end: 2026-11-16T10:41:00Z}
"""


def _hand_requests() -> list[dict[str, Any] | str]:
    def at(minute: int, second: float) -> str:
        return f"2026-11-16T10:{minute:02d}:{second:06.3f}Z"

    rows: list[dict[str, Any] | str] = [request("warm-0", received_at=at(0, 30))]  # in step 0's warm-up
    # Step 0's segment [10:01, 10:31): one request every 30 s from 10:01:00, each 50 tokens in 1.5 s, compliant.
    rows += [request(f"a{k}", received_at=at(1 + k // 2, 30.0 * (k % 2))) for k in range(60)]
    rows.append(request("warm-1", received_at=at(31, 30)))  # in step 1's warm-up
    # Step 1's segment [10:32, 10:41): one request every 9 s, each over the 1,000 ms TTFT limit of its bucket.
    rows += [request(f"b{k}", received_at=at(32 + (9 * k) // 60, float((9 * k) % 60)), ttft_ms=1200.0)
             for k in range(60)]
    rows += [
        "not json at all",
        request("other-model", model="m8", deployment_id="m8-onprem", received_at=at(5, 0)),
        request("too-early", received_at="2026-11-16T09:59:00Z"),
        request("negative", input_tokens=-1, received_at=at(6, 0)),
        request("a0", received_at=at(1, 0)),  # a second copy of a0: merged into it
    ]
    return rows


def _measure(home: Path) -> list[dict[str, Any]]:
    layout = HomeLayout.of(home)
    with compute_connection(home / "tmp") as con:
        load_config(con, layout)
        return loadtest_results(con, layout)


def test_hand_made_run_by_hand(home: Path) -> None:
    folder = home / "raw" / "loadtest" / "hand"
    write_jsonl(folder / "requests.jsonl", _hand_requests())
    (folder / "run.yaml").write_text(HAND_RUN)
    [run] = _measure(home)

    # 1 + 60 + 1 + 60 valid rows and 5 others: 4 quarantined (not JSON, another model, before the run, a negative
    # token count) and 1 duplicate merged.
    assert (run["rows_read"], run["rows_accepted"], run["rows_quarantined"], run["duplicates_merged"]) == (
        127, 122, 4, 1)
    reasons = [q["reason"] for q in run["quarantine_sample"]]
    assert reasons[0] == "line is not valid JSON"
    assert reasons[1] == "model: m8 is not the run's model m70"
    assert reasons[2].startswith("received_at: 2026-11-16T09:59:00") and "outside the run" in reasons[2]
    assert reasons[3].startswith("input_tokens: -1 is below the minimum 0")
    assert run["gpus"] == 16 and run["day"] == date(2026, 11, 16) and run["slo_version"] == "v1"

    first, second = run["steps"]
    assert first["segment_minutes"] == 30 and first["requests"] == 60
    assert first["arrival_rate_measured"] == pytest.approx(60 / 1800)
    # Wall time: first received 10:01:00, last received 10:30:30 and finished 1.5 s later: 1,771.5 s.
    assert first["wall_time_s"] == pytest.approx(1771.5)
    assert first["output_tokens"] == first["compliant_output_tokens"] == 60 * 50
    assert first["slo_goodput"] == pytest.approx(3000 / 1771.5)
    assert first["goodput_per_gpu"] == pytest.approx(3000 / 1771.5 / 16)
    assert first["tpot_p99_ms"] == pytest.approx((1500 - 300) / 49)
    assert first["queue_p99_ms"] == 20.0 and first["success_rate"] == 1.0
    assert first["buckets_judged"] == 1  # 4k+ had no request: not judged
    assert [(b["isl_bucket"], b["effective_requests"], b["judged"]) for b in first["buckets"]] == [
        ("0-4k", 60, True), ("4k+", 0, False)]
    assert first["all_met"] and first["stable"] and first["stable_windows"] == 1

    assert second["requests"] == 60 and second["segment_minutes"] == 9
    assert second["compliant_output_tokens"] == 0 and second["attainment"] == 0.0
    assert second["buckets_failed"] == ["0-4k"] and second["all_met"] is False
    assert second["slo_goodput"] == 0.0 and second["raw_throughput"] > 0

    assert run["lambda_slo_max"] == 0.03 and run["first_failing_step_rate"] == 0.1
    assert run["verified"] is True
    assert run["goodput_per_gpu_at_max"] == pytest.approx(3000 / 1771.5 / 16)


def test_no_runs_gives_an_empty_table(home: Path, tmp_path: Path) -> None:
    layout = HomeLayout.of(home)
    target = tmp_path / "steps.parquet"
    with compute_connection(home / "tmp") as con:
        load_config(con, layout)
        assert write_loadtest_steps(con, layout, target) == []
    columns = duckdb.connect().execute(f"DESCRIBE SELECT * FROM read_parquet({sql_literal(str(target))})").fetchall()
    assert [c[0] for c in columns] == load_contract("core_loadtest_steps").table().column_names


# --- run.yaml files that break their contract --------------------------------------------------------------------

@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace("deployment_id: m70-h100\n", ""), "line 1: deployment_id: required but missing"),
    (lambda t: t.replace("end: 2026-11-16T10:41:00Z", "end: soon"),
     "line 8: step_end: soon is not a valid timestamp (ISO 8601, with its offset, e.g. 2026-11-16T10:00:00Z)"),
    (lambda t: t.replace("arrival_rate: 0.1,", "arrival_rate: -2,"),
     "line 8: arrival_rate: -2 is not above 0"),
    (lambda t: t.replace("warmup_min: 1", "warmup: 1"), "line 5: unknown key 'warmup'"),
    (lambda t: t.replace("run_id: hand", "run_id: other"), "line 1: run_id: 'other' is not the name of its folder"),
    (lambda t: t.replace("start: 2026-11-16T10:31:00Z", "start: 2026-11-16T10:30:00Z"), "steps_do_not_overlap"),
    (lambda t: t.replace("arrival_rate: 0.1,", "arrival_rate: 0.03,"), "arrival_rates_differ"),
    (lambda t: t.replace("warmup_min: 1", "warmup_min: 10"), "line 8: warmup_min: 10 minutes leave nothing of step 1"),
    (lambda t: t.replace("model: m70", "model: m8"), "line 2: model: 'm8' is not the model of deployment 'm70-h100'"),
    (lambda t: t.replace("start: 2026-11-16T10:00:00Z\nwarmup", "start: 2026-10-01T10:00:00Z\nwarmup"),
     "line 3: deployment_id: 'm70-h100' has no version in force at the run's start 2026-10-01"),
    (lambda t: t.replace("steps:\n", "steps: [\n"), "is not valid YAML"),
    (lambda t: t.split("steps:")[0] + "steps: []\n", "steps: a run needs at least one step"),
    (lambda t: "", "the file must be a mapping"),
])
def test_malformed_run_yaml_names_the_file_and_field(home: Path, edit, expected: str) -> None:
    folder = home / "raw" / "loadtest" / "hand"
    write_jsonl(folder / "requests.jsonl", [request("r1", received_at="2026-11-16T10:05:00Z")])
    (folder / "run.yaml").write_text(edit(HAND_RUN))
    with pytest.raises(LedgerError) as err:
        _measure(home)
    assert str(folder / "run.yaml") in str(err.value)
    assert expected in str(err.value)


def test_a_run_folder_without_run_yaml(home: Path) -> None:
    folder = home / "raw" / "loadtest" / "hand"
    write_jsonl(folder / "requests.jsonl", [request("r1")])
    with pytest.raises(LedgerError, match=r"hand: a load-test run folder needs a run\.yaml"):
        _measure(home)


def test_a_run_without_request_files(home: Path) -> None:
    folder = home / "raw" / "loadtest" / "hand"
    folder.mkdir(parents=True)
    (folder / "run.yaml").write_text(HAND_RUN)
    with pytest.raises(LedgerError, match="the run has no request files"):
        _measure(home)


def test_generate_with_loadtest_writes_the_demo_run(tmp_path: Path) -> None:
    """`tokenledger generate --with-loadtest` (the demo) adds the 70B run sized to the landing zone, at 01:00 UTC of
    the first day, before that deployment's scale-up, with 36-minute steps: 5 of warm-up and 31 >= the 30 stable."""
    from tokenledger.cli import main

    home = tmp_path / "home"
    assert main(["generate", "--home", str(home), "--start", "2026-11-16", "--days", "1",
                 "--requests-per-day", "200000", "--seed", "7", "--with-loadtest"]) == 0
    folder = home / "raw" / "loadtest" / "lt-2026-11-16-llama70b"
    run = yaml.safe_load((folder / "run.yaml").read_text())
    assert (run["model"], run["deployment_id"]) == (MODEL_70B, DEP_70B)
    assert [s["arrival_rate"] for s in run["steps"]] == default_steps(DEP_70B, VOLUME)
    assert run["warmup_min"] == 5
    starts = [datetime.fromisoformat(str(s["start"]).replace("Z", "+00:00")) for s in run["steps"]]
    ends = [datetime.fromisoformat(str(s["end"]).replace("Z", "+00:00")) for s in run["steps"]]
    assert starts[0] == datetime(2026, 11, 16, 1, tzinfo=UTC)
    assert all((e - s).total_seconds() == 36 * 60 for s, e in zip(starts, ends, strict=True))
    # and, at 05:00 on the 8B, the vllm bench sweep below
    bench = yaml.safe_load((home / "raw" / "loadtest" / "bench-2026-11-16-llama8b" / "run.yaml").read_text())
    assert (bench["format"], bench["deployment_id"], bench["start"]) == (
        "vllm-bench", DEMO_BENCH_DEPLOYMENT, datetime(2026, 11, 16, 5, tzinfo=UTC))


def test_the_demo_vllm_bench_sweep_measures_its_knee(tmp_path: Path) -> None:
    """`tokenledger generate --with-loadtest` also writes a `vllm bench serve` sweep of the 8B on its one L40S at 1,
    2 and 2.5 req/s, 5 minutes each, in vLLM 0.10's shape (no start_times: each step's requests are spread evenly
    over its duration). One replica completes 3.08 req/s at full utilization, so the steps run at 0.32, 0.65 and
    0.81 of it; the 8B's policy holds TPOT P99 within 30 ms, which its decode step (17 ms x (1 + 0.6 rho^2),
    P99 x 1.32) crosses at about 0.75: the third step breaks it, lambda_slo_max is 2 req/s, and 4-minute segments
    are too short to verify it."""
    home = tmp_path / "home"
    write_configs(home, SCENARIO_START, SEED, VOLUME)
    folder = generate_vllm_bench_run(home, "bench-8b", DEMO_BENCH_MODEL, DEMO_BENCH_DEPLOYMENT,
                                     datetime(2026, 11, 16, 5, tzinfo=UTC), list(DEMO_BENCH_RATES),
                                     DEMO_BENCH_STEP_MINUTES, SEED, requests_per_day=VOLUME)
    assert yaml.safe_load((folder / "run.yaml").read_text())["format"] == "vllm-bench"
    assert [round(r / capacity_rps(DEMO_BENCH_DEPLOYMENT), 2) for r in DEMO_BENCH_RATES] == [0.32, 0.65, 0.81]
    files = {json.loads(p.read_text())["request_rate"]: json.loads(p.read_text()) for p in folder.glob("*.json")}
    assert sorted(files) == [1.0, 2.0, 2.5]
    for rate, result in files.items():
        n = result["num_prompts"]
        assert abs(n - rate * 300) < 4 * math.sqrt(rate * 300)  # Poisson arrivals over 5 minutes
        assert {len(result[k]) for k in ("input_lens", "output_lens", "ttfts", "itls", "errors")} == {n}
        assert result["completed"] == result["errors"].count("")
        assert all(len(gaps) == max(out - 1, 0) for gaps, out in zip(result["itls"], result["output_lens"],
                                                                       strict=True))
    (run,) = _measure(home)
    assert run["rows_read"] == run["rows_accepted"] == sum(f["num_prompts"] for f in files.values())
    assert (run["lambda_slo_max"], run["first_failing_step_rate"], run["verified"]) == (2.0, 2.5, False)
    broken = run["steps"][2]
    assert (broken["tpot_p99_met"], broken["attainment_met"], broken["queue_p99_ms"]) == (False, True, None)
    assert broken["tpot_p99_ms"] > 30 > run["steps"][1]["tpot_p99_ms"]
