"""Load tests as the capacity source: generated runs with a known knee (tokenledger.generate) next to a generated
production day, through the whole daily pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.conftest import failure_text, materialize, rows
from tokenledger.generate import default_steps, generate_landing_zone, generate_loadtest_run, knee_index

DAY = "2026-11-16"
MODEL_70B, DEP_70B = "llama-3.1-70b-instruct", "llama70b-h100nvl-tp2"
MODEL_QWEN, DEP_QWEN = "qwen3-coder-30b-a3b-instruct", "qwen3coder30b-h100"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A generated Monday at 1,000 requests, and two load tests run that morning: the coding model's with
    12-minute steps against a 10-minute stable window (verified, as in tests/test_loadtest.py), the 70B's with
    6-minute steps (a 5-minute segment, under the default 30 stable minutes: a reference figure)."""
    root = tmp_path_factory.mktemp("capacity_loadtest") / "home"
    generate_landing_zone(root, date(2026, 11, 16), 1, 1_000, seed=7, bad_rows_per_day=0)
    slo = root / "config" / "slo.yaml"
    slo.write_text(slo.read_text().replace("    models:\n",
                                           f"    models:\n      {MODEL_QWEN}:\n        stable_window_min: 10\n"))
    generate_loadtest_run(root, "lt-qwen", MODEL_QWEN, DEP_QWEN, datetime(2026, 11, 16, 2, tzinfo=UTC), None, 12, 7)
    generate_loadtest_run(root, "lt-70b", MODEL_70B, DEP_70B, datetime(2026, 11, 16, 8, tzinfo=UTC), None, 6, 7)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(root))
        result = materialize(DAY)
        assert result.success, failure_text(result)
        yield root


def _run(home: Path, run_id: str) -> dict:
    steps = rows(home, "core", "loadtest_steps", DAY, where=f"run_id = '{run_id}'", order="step_index")
    return {"steps": steps, **{k: steps[0][k] for k in ("lambda_slo_max", "goodput_per_gpu_at_max", "verified")}}


def _capacity(home: Path, deployment_id: str) -> dict:
    return rows(home, "infra", "capacity_daily", DAY, where=f"deployment_id = '{deployment_id}'")[0]


def test_the_runs_of_the_day_are_ingested_with_their_knee(home: Path) -> None:
    for run_id, dep in (("lt-qwen", DEP_QWEN), ("lt-70b", DEP_70B)):
        run = _run(home, run_id)
        steps = default_steps(dep)
        assert [s["arrival_rate"] for s in run["steps"]] == steps
        assert run["lambda_slo_max"] == steps[knee_index(dep, steps)]
    assert (_run(home, "lt-qwen")["verified"], _run(home, "lt-70b")["verified"]) == (True, False)


def test_a_verified_knee_is_the_capacity(home: Path) -> None:
    run, cap = _run(home, "lt-qwen"), _capacity(home, DEP_QWEN)
    assert (cap["capacity_source"], cap["capacity_verified"], cap["loadtest_run_id"]) == ("loadtest", True, "lt-qwen")
    assert cap["capacity_goodput_per_gpu"] == run["goodput_per_gpu_at_max"]
    assert cap["lambda_slo_max"] == run["lambda_slo_max"]
    # One H100 all day.
    assert cap["daily_capacity_tokens"] == pytest.approx(run["goodput_per_gpu_at_max"] * 1 * 86_400)
    assert cap["capacity_note"].startswith(f"load test lt-qwen verified at {run['lambda_slo_max']:g} req/s")


def test_an_unverified_knee_is_a_flagged_reference_figure(home: Path) -> None:
    run, cap = _run(home, "lt-70b"), _capacity(home, DEP_70B)
    # At 1,000 requests a day no 30-minute production window has 50 requests in an ISL bucket to judge, so there
    # is no demonstrated figure to prefer, and the unverified run is published as a reference, flagged.
    windows = rows(home, "core", "capacity_windows", DAY, where=f"deployment_id = '{DEP_70B}'")
    assert len(windows) == 283 and not any(w["buckets_judged"] for w in windows)
    assert (cap["capacity_source"], cap["capacity_verified"], cap["loadtest_run_id"]) == ("loadtest", False, "lt-70b")
    assert cap["capacity_goodput_per_gpu"] == run["goodput_per_gpu_at_max"]
    assert cap["capacity_note"].startswith(
        f"reference figure, not verified: load test lt-70b held {run['lambda_slo_max']:g} req/s but is not verified: "
        "its step was measured for 5 min, under the 30 stable minutes needed; no demonstrated capacity: no 30-min "
        "window had 50 effective requests in an ISL bucket to judge")


def test_a_deployment_without_a_load_test_says_so(home: Path) -> None:
    cap = _capacity(home, "llama8b-l40s-onprem")
    assert cap["loadtest_run_id"] is None and cap["capacity_verified"] is False
    assert cap["capacity_note"].endswith("no load test of this configuration")
