"""vLLM `vllm bench serve --save-result --save-detailed` results as a load-test run: a two-rate sweep written by
hand from the shape vLLM's serve.py saves, measured by hand, and measured again as the same requests written as a
canonical (gateway) run: the two must give the same steps and the same lambda_slo_max."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import SLO_YAML, make_home, request, write_jsonl
from tokenledger.capacity.loadtest import loadtest_results
from tokenledger.config import load_config
from tokenledger.errors import LedgerError
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.layout import HomeLayout

# m70 in conftest's home: 16 H100s until noon of 2026-11-16; TTFT limits 1,000 ms under 4k input tokens and
# 2,500 ms from 4k. The sweep is small, so its model judges a bucket from 5 requests and is stable after 1 minute.
SMALL_SWEEP_SLO = SLO_YAML.replace("min_requests_per_bucket: 50", "min_requests_per_bucket: 5").replace(
    "stable_window_min: 30", "stable_window_min: 1").replace("step_min: 5", "step_min: 1")

BENCH_RUN = """\
run_id: bench
format: vllm-bench
model: m70
deployment_id: m70-h100
start: 2026-11-16T10:00:00Z
warmup_min: 0
"""
GAPS = [0.02] * 49  # 50 tokens streamed after the first: 49 gaps of 20 ms, 980 ms of decode
TRACEBACK = ("Traceback (most recent call last):\n  File \"endpoint_request_func.py\", line 210, in "
             "async_request_openai_completions\naiohttp.client_exceptions.ServerDisconnectedError: Server "
             "disconnected\n")
# vLLM 0.14 shape (no start_times, no latencies), at 0.1 req/s: 8 requests in 80 s, all successful. Request 7
# has a long prompt (5,000 tokens, the 4k+ bucket): its 2 s TTFT is within that bucket's 2,500 ms.
LOW = {
    "date": "20261116-100120", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "meta-llama/Llama-3.1-70B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-70B-Instruct",
    "num_prompts": 8, "request_rate": 0.1, "burstiness": 1.0, "max_concurrency": None, "duration": 80.0,
    "completed": 8, "failed": 0, "total_input_tokens": 12000, "total_output_tokens": 400,
    "request_throughput": 0.1, "request_goodput": None, "output_throughput": 5.0, "total_token_throughput": 155.0,
    "input_lens": [1000, 1000, 1000, 1000, 1000, 1000, 1000, 5000],
    "output_lens": [50] * 8,
    "ttfts": [0.25] * 7 + [2.0],
    "itls": [GAPS] * 8,
    "generated_texts": ["GENERATED-TEXT-NEVER-KEPT"] * 8,
    "errors": [""] * 8,
    "mean_ttft_ms": 468.75, "median_ttft_ms": 250.0, "std_ttft_ms": 578.8, "p99_ttft_ms": 1877.5,
}
# vLLM 0.31 shape (start_times on the client's perf_counter clock, latencies, queue_times), at 0.15 req/s: 9
# requests in 60 s. max_concurrency 8 held request 2 back 50 ms in the client; request 3 takes 1.5 s to its first
# token (over the 1,000 ms limit); request 4 failed (the server disconnected before the first token).
HIGH = {
    "date": "20261116-100220", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "meta-llama/Llama-3.1-70B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-70B-Instruct",
    "num_prompts": 9, "request_rate": 0.15, "burstiness": 1.0, "max_concurrency": 8, "duration": 60.0,
    "completed": 8, "failed": 1, "total_input_tokens": 9000, "total_output_tokens": 400,
    "request_throughput": 0.1333, "request_goodput": None, "output_throughput": 6.67,
    "total_token_throughput": 156.67,
    "input_lens": [1000, 2000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
    "output_lens": [50, 50, 50, 50, 0, 50, 50, 50, 50],
    "ttfts": [0.3, 0.3, 0.3, 1.5, 0.0, 0.3, 0.3, 0.3, 0.3],
    "itls": [GAPS, GAPS, GAPS, GAPS, [], GAPS, GAPS, GAPS, GAPS],
    "latencies": [1.28, 1.28, 1.28, 2.48, 0.0, 1.28, 1.28, 1.28, 1.28],
    "start_times": [5000.0, 5006.0, 5013.05, 5020.0, 5026.0, 5033.0, 5040.0, 5046.0, 5053.0],
    "queue_times": [0.0, 0.0, 0.05, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "generated_texts": ["GENERATED-TEXT-NEVER-KEPT"] * 4 + [""] + ["GENERATED-TEXT-NEVER-KEPT"] * 4,
    "errors": ["", "", "", "", TRACEBACK, "", "", "", ""],
    "max_output_tokens_per_s": 50.0, "max_concurrent_requests": 1,
    "mean_ttft_ms": 450.0, "median_ttft_ms": 300.0, "std_ttft_ms": 396.9, "p99_ttft_ms": 1416.0,
}
# vLLM's default names; by name the 0.15 file comes first ("0.15" < "0.1q"), by rate it is the second step.
LOW_FILE = "openai-0.1qps-Llama-3.1-70B-Instruct-20261116-100120.json"
HIGH_FILE = "openai-0.15qps-concurrency8-Llama-3.1-70B-Instruct-20261116-100220.json"

# The same 17 requests as a canonical run, converted by hand. Step 0 has no start_times: its 8 requests are spread
# evenly over its 80 s, one every 10 s from 10:00:00. Step 1 starts where step 0 ended, at 10:01:20; its requests
# arrive at their start_times minus their client queue, after the first: 0, 6, 13 (5013.05 - 0.05), 20, 26, 33,
# 40, 46 and 53 s. TTFT and e2e count from arrival: request 2 waited 50 ms, so 350 ms to its first token and
# 1,330 ms in all. e2e without latencies is ttft + the gaps: 250 + 980 = 1,230 ms (2,980 ms for request 7).
CANONICAL_RUN = """\
run_id: canonical
model: m70
deployment_id: m70-h100
start: 2026-11-16T10:00:00Z
warmup_min: 0
steps:
  - {arrival_rate: 0.1, start: 2026-11-16T10:00:00Z, end: 2026-11-16T10:01:20Z}
  - {arrival_rate: 0.15, start: 2026-11-16T10:01:20Z, end: 2026-11-16T10:02:20Z}
"""


def _canonical_requests() -> list[dict[str, Any]]:
    def at(seconds: float) -> str:
        minute, second = divmod(seconds, 60)
        return f"2026-11-16T10:{int(minute):02d}:{second:06.3f}Z"

    common = {"tenant_id": "loadtest", "cached_input_tokens": 0, "output_tokens": 50, "itl_max_ms": 20.0}
    low = [request(f"low-{i}", received_at=at(10 * i), input_tokens=1000, ttft_ms=250.0, e2e_ms=1230.0,
                   queue_ms=..., **common) for i in range(7)]
    low.append(request("low-7", received_at=at(70), input_tokens=5000, ttft_ms=2000.0, e2e_ms=2980.0, queue_ms=...,
                       **common))
    high = []
    for i, offset in enumerate([0, 6, 13, 20, 26, 33, 40, 46, 53]):
        fields = {**common, "received_at": at(80 + offset), "input_tokens": 2000 if i == 1 else 1000,
                  "ttft_ms": 300.0, "e2e_ms": 1280.0, "queue_ms": 0.0}
        if i == 2:
            fields.update(ttft_ms=350.0, e2e_ms=1330.0, queue_ms=50.0)
        if i == 3:
            fields.update(ttft_ms=1500.0, e2e_ms=2480.0)
        if i == 4:
            fields.update(status="error", output_tokens=0, ttft_ms=..., e2e_ms=0.0, itl_max_ms=...,
                          error_type="ServerDisconnectedError")
        high.append(request(f"high-{i}", **fields))
    return low + high


def _write_bench(home: Path, low: dict[str, Any] = LOW, high: dict[str, Any] = HIGH,
                 run_yaml: str = BENCH_RUN) -> Path:
    folder = home / "raw" / "loadtest" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.yaml").write_text(run_yaml)
    (folder / LOW_FILE).write_text(json.dumps(low))
    (folder / HIGH_FILE).write_text(json.dumps(high))
    return folder


def _measure(home: Path, scratch: Path | None = None) -> dict[str, dict[str, Any]]:
    (home / "config" / "slo.yaml").write_text(SMALL_SWEEP_SLO)
    layout = HomeLayout.of(home)
    with compute_connection(home / "tmp") as con:
        load_config(con, layout)
        return {r["run_id"]: r for r in loadtest_results(con, layout, scratch)}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, Any]], Path]:
    """The vLLM sweep and its canonical twin in one home, measured once for the module (its tests only read the
    figures and the staged files); and the scratch folder they were staged in."""
    tmp_path = tmp_path_factory.mktemp("measured")
    home = make_home(tmp_path / "home")
    _write_bench(home)
    canonical = home / "raw" / "loadtest" / "canonical"
    write_jsonl(canonical / "requests.jsonl", _canonical_requests())
    (canonical / "run.yaml").write_text(CANONICAL_RUN)
    scratch = tmp_path / "scratch"
    return _measure(home, scratch), scratch


def test_a_vllm_sweep_by_hand(measured) -> None:
    run = measured[0]["bench"]
    assert (run["rows_read"], run["rows_accepted"], run["rows_quarantined"], run["duplicates_merged"]) == (17, 17, 0, 0)
    low, high = run["steps"]

    # Ranked by request_rate, each step as long as its file's duration, the second starting where the first ended.
    assert [(s["arrival_rate"], s["step_start"].isoformat(), s["step_end"].isoformat()) for s in run["steps"]] == [
        (0.1, "2026-11-16T10:00:00+00:00", "2026-11-16T10:01:20+00:00"),
        (0.15, "2026-11-16T10:01:20+00:00", "2026-11-16T10:02:20+00:00")]

    # 0.1 req/s: 8 requests in 80 s, all successful and within their bucket's TTFT limit.
    assert (low["requests"], low["arrival_rate_measured"]) == (8, 0.1)
    assert (low["successful_requests"], low["compliant_requests"], low["attainment"]) == (8, 8, 1.0)
    # 7 requests under 4k judged (>= 5); the one 4k+ request is compliant but its bucket is not judged.
    assert [(b["isl_bucket"], b["effective_requests"], b["judged"]) for b in low["buckets"]] == [
        ("0-4k", 7, True), ("4k+", 1, False)]
    # P99 of [250 x 7, 2000]: 250 + 0.93 x 1750 = 1,877.5 ms (vLLM's own p99_ttft_ms above); ITL 20 ms; TPOT
    # (1230 - 250) / 49 = 20 ms; no queue recorded, so not judged.
    assert low["ttft_p99_ms"] == pytest.approx(1877.5)
    assert (low["itl_p99_ms"], low["tpot_p99_ms"], low["queue_p99_ms"]) == (20.0, pytest.approx(20.0), None)
    # Wall time: first received 10:00:00, last finished 10:01:10 + 2.98 s; 400 tokens, all compliant, 16 GPUs.
    assert low["wall_time_s"] == pytest.approx(72.98)
    assert low["slo_goodput"] == pytest.approx(400 / 72.98)
    assert low["all_met"] and low["stable"] and (low["stable_windows"], low["stable_windows_met"]) == (1, 1)

    # 0.15 req/s: 9 requests in 60 s; one failed, one over the TTFT limit: 8 of 9 successful, 7 of 9 compliant.
    assert (high["requests"], high["arrival_rate_measured"]) == (9, 0.15)
    assert (high["successful_requests"], high["failed_requests"], high["compliant_requests"]) == (8, 1, 7)
    assert high["success_rate"] == pytest.approx(8 / 9) and high["attainment"] == pytest.approx(7 / 9)
    assert high["buckets_failed"] == ["0-4k"] and high["success_rate_met"] is False
    # TTFT from arrival over the 8 successes, [300 x 6, 350, 1500]: 350 + 0.93 x 1150 = 1,419.5 ms; the client
    # queue, [0 x 7, 50]: 0.93 x 50 = 46.5 ms.
    assert high["ttft_p99_ms"] == pytest.approx(1419.5)
    assert high["queue_p99_ms"] == pytest.approx(46.5)
    assert high["all_met"] is False

    assert run["lambda_slo_max"] == 0.1 and run["first_failing_step_rate"] == 0.15
    assert run["verified"] is True
    assert run["goodput_per_gpu_at_max"] == pytest.approx(400 / 72.98 / 16)


def test_a_vllm_sweep_measures_as_its_canonical_twin(measured) -> None:
    """The point: the benchmark's files and the same requests written by hand give the same steps, figure for figure."""
    bench, canonical = measured[0]["bench"], measured[0]["canonical"]
    assert bench["lambda_slo_max"] == canonical["lambda_slo_max"] == 0.1
    assert bench["verified"] is canonical["verified"] is True
    assert bench["goodput_per_gpu_at_max"] == canonical["goodput_per_gpu_at_max"]
    for from_vllm, by_hand in zip(bench["steps"], canonical["steps"], strict=True):
        assert {k: v for k, v in from_vllm.items() if k != "run_id"} == {
            k: v for k, v in by_hand.items() if k != "run_id"}


def test_generated_texts_are_never_kept(measured) -> None:
    _, scratch = measured
    staged = sorted(scratch.rglob("*.parquet"))
    assert staged
    con = duckdb.connect()
    for path in staged:
        rows = con.execute("SELECT count(*) FROM read_parquet($p) AS t WHERE t::VARCHAR LIKE '%GENERATED-TEXT%'",
                           {"p": str(path)}).fetchone()
        assert rows == (0,), path


def test_an_entry_that_cannot_be_a_request_is_quarantined_by_index(home: Path) -> None:
    high = {**HIGH, "output_lens": [*HIGH["output_lens"][:5], -50, *HIGH["output_lens"][6:]],
            "itls": [*HIGH["itls"][:6], [0.02, "slow"], *HIGH["itls"][7:]]}
    folder = _write_bench(home, high=high)
    run = _measure(home)["bench"]
    assert (run["rows_read"], run["rows_accepted"], run["rows_quarantined"]) == (17, 15, 2)
    assert run["quarantine_sample"] == [
        {"file": str(folder / HIGH_FILE), "line": 5, "reason": "output_lens: -50 is below the minimum 0"},
        {"file": str(folder / HIGH_FILE), "line": 6,
         "reason": "itls: entry 6 holds a value that is not a gap in seconds (a number >= 0)"}]


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: {**d, "ttfts": d["ttfts"][:-1]},
     "ttfts: 8 entries, but input_lens has 9: the per-request lists must be parallel"),
    (lambda d: {k: v for k, v in d.items() if k not in ("input_lens", "output_lens", "ttfts", "itls", "errors",
                                                         "generated_texts", "start_times")},
     "input_lens: required but missing (vllm bench serve writes the per-request lists only with --save-detailed)"),
    (lambda d: {**d, "request_rate": "inf"}, "request_rate: inf (every request sent at once) is not an arrival rate"),
    (lambda d: {k: v for k, v in d.items() if k != "queue_times"},
     "max_concurrency: 8 held requests back in the client, and the file has no queue_times"),
    (lambda d: {**d, "completed": 9}, "completed: 9, but 8 of its 9 requests succeeded by vLLM's own rule"),
    (lambda d: {**d, "request_rate": 0.1}, "request_rate: both are 0.1 req/s"),
])
def test_a_malformed_result_file_names_the_file_field_and_rule(home: Path, edit, expected: str) -> None:
    folder = _write_bench(home, high=edit(HIGH))
    with pytest.raises(LedgerError) as err:
        _measure(home)
    assert str(folder / HIGH_FILE) in str(err.value)
    assert expected in str(err.value)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace("format: vllm-bench", "format: vllm"),
     "line 2: format: 'vllm' is not a load-test run format: gateway (request files in the gateway_request "
     "contract) or vllm-bench (vllm bench serve --save-result --save-detailed result files)"),
    (lambda t: t.replace("deployment_id: m70-h100\n", ""),
     "line 1: deployment_id: required but missing; a vllm-bench run.yaml needs run_id, format, model, deployment_id, "
     "start, warmup_min"),
    (lambda t: t + "steps: []\n", "line 7: steps: a vllm-bench run takes its steps from its result files"),
    # the 0.15 file's 60 s are all warm-up
    (lambda t: t.replace("warmup_min: 0", "warmup_min: 1"),
     "line 6: warmup_min: 1 minutes leave nothing of step 1 ("),
])
def test_a_malformed_vllm_bench_run_yaml_is_one_line(home: Path, edit, expected: str) -> None:
    folder = _write_bench(home, run_yaml=edit(BENCH_RUN))
    with pytest.raises(LedgerError) as err:
        _measure(home)
    assert str(folder / "run.yaml") in str(err.value)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_result_files_in_a_gateway_run_ask_for_the_format(home: Path) -> None:
    _write_bench(home, run_yaml=CANONICAL_RUN.replace("run_id: canonical", "run_id: bench"))
    with pytest.raises(LedgerError, match="write format: vllm-bench in run.yaml"):
        _measure(home)
