"""Batching in the configuration identity and the load-test sweep (docs/adr/0122-batching-and-the-sweep.md).

A load test run at another max_num_seqs than the deployment's does not set its capacity, whether run.yaml declares
the setting or the inventory version in force at the run's start gives it, and the capacity note names the
difference; the same run at equal settings does set it. infra.loadtest_sweep_daily publishes the chosen run's steps
with Little's-law concurrency and the knee, worked by hand on the hand-made run of tests/test_loadtest.py."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.conftest import failure_text, materialize, rows, write_jsonl
from tests.test_capacity_identity import BEFORE, UPGRADE, _choice, _step
from tests.test_loadtest import HAND_RUN, _hand_requests, _measure
from tokenledger.errors import LedgerError
from tokenledger.report.review import Review, shown, sweep_parts

DAY = "2026-11-16"
DEP = "m70-h100"
# The hand-made home's m70-h100 runs 16 GPUs (2 replicas of 8) until noon, 24 after; the run starts at 10:00.
NOW_256 = ("    gpus: 24\n", "    gpus: 24\n    max_num_seqs: 256\n")
AT_START_128 = ("    slots_per_replica: 48\n", "    slots_per_replica: 48\n    max_num_seqs: 128\n")


def test_a_run_at_another_max_num_seqs_is_another_configuration() -> None:
    # On hand-made tables: the run measured max_num_seqs 128, the version in force at the end of the day has 256.
    got = _choice([_step("old", BEFORE["valid_from"], max_num_seqs=128)],
                  [BEFORE, {"valid_from": UPGRADE, "valid_to": None}])
    assert (got["loadtest_run_id"], got["runs_other_configuration"], got["other_configuration_run_id"]) == (
        None, 1, "old")
    assert got["other_configuration_differences"] == "max_num_seqs 128 → 256"
    # Every batching setting is named, in order (the run's value, then the one in force now).
    got = _choice([_step("old", BEFORE["valid_from"], max_num_seqs=None, max_num_batched_tokens=2048,
                         chunked_prefill=False)], [BEFORE, {"valid_from": UPGRADE, "valid_to": None}])
    assert got["other_configuration_differences"] == (
        "max_num_seqs not declared → 256, max_num_batched_tokens 2048 → 8192, chunked_prefill false → true")
    # Equal settings: the run speaks.
    got = _choice([_step("old", BEFORE["valid_from"])], [BEFORE, {"valid_from": UPGRADE, "valid_to": None}])
    assert (got["loadtest_run_id"], got["runs_other_configuration"]) == ("old", 0)


def _home_with_run(home: Path, inventory_edits: list[tuple[str, str]], run_yaml: str) -> None:
    deployments = home / "config" / "deployments.yaml"
    text = deployments.read_text()
    for old, new in inventory_edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    deployments.write_text(text)
    folder = home / "raw" / "loadtest" / "hand"
    write_jsonl(folder / "requests.jsonl", _hand_requests())
    (folder / "run.yaml").write_text(run_yaml)
    result = materialize(DAY, upto=["infra/capacity_daily", "infra/loadtest_sweep_daily"])
    assert result.success, failure_text(result)


@pytest.mark.parametrize(("inventory_edits", "run_yaml"), [
    # The inventory at the run's start says 128 and run.yaml says nothing.
    ([AT_START_128, NOW_256], HAND_RUN),
    # The inventory says nothing at the run's start; run.yaml declares the 128 the test ran at.
    ([NOW_256], HAND_RUN.replace("warmup_min: 1\n", "warmup_min: 1\nmax_num_seqs: 128\n")),
], ids=["inventory-at-start", "run-yaml"])
def test_a_load_test_at_another_max_num_seqs_does_not_set_capacity(
        home: Path, inventory_edits: list[tuple[str, str]], run_yaml: str) -> None:
    _home_with_run(home, inventory_edits, run_yaml)
    (steps_run,) = {(r["run_id"], r["max_num_seqs"]) for r in rows(home, "core", "loadtest_steps", DAY)}
    assert steps_run == ("hand", 128)
    (cap,) = rows(home, "infra", "capacity_daily", DAY, where=f"deployment_id = '{DEP}'")
    # No request on the day, so no demonstrated figure either: no capacity at all, and the note says why.
    assert (cap["capacity_source"], cap["capacity_goodput_per_gpu"], cap["loadtest_run_id"]) == (None, None, None)
    assert (cap["other_configuration_run_id"], cap["other_configuration_differences"]) == (
        "hand", "max_num_seqs 128 → 256")
    assert cap["capacity_note"].endswith(
        "no load test of this configuration: load test hand (2026-11-16 10:00 UTC) measured another configuration "
        "(max_num_seqs 128 → 256) and is not carried over")
    assert rows(home, "infra", "loadtest_sweep_daily", DAY) == []  # no run speaks for it: no sweep


def test_the_same_run_at_equal_settings_sets_capacity_and_its_sweep_by_hand(home: Path) -> None:
    # The inventory at the start says 128, but run.yaml declares the 256 the test actually ran at: it overrides.
    _home_with_run(home, [AT_START_128, NOW_256],
                   HAND_RUN.replace("warmup_min: 1\n", "warmup_min: 1\nmax_num_seqs: 256\n"))
    (cap,) = rows(home, "infra", "capacity_daily", DAY, where=f"deployment_id = '{DEP}'")
    # Step 0 (tests/test_loadtest.py): 60 compliant requests of 50 tokens over a 1,771.5 s wall time on 16 GPUs.
    assert (cap["capacity_source"], cap["capacity_verified"], cap["loadtest_run_id"]) == ("loadtest", True, "hand")
    assert cap["capacity_goodput_per_gpu"] == pytest.approx(3000 / 1771.5 / 16)
    assert cap["other_configuration_run_id"] is None

    sweep = rows(home, "infra", "loadtest_sweep_daily", DAY, order="step_index")
    assert [(r["deployment_id"], r["loadtest_run_id"], r["step_index"], r["max_num_seqs"]) for r in sweep] == [
        (DEP, "hand", 0, 256), (DEP, "hand", 1, 256)]
    first, second = sweep
    # Replicas under test: 16 GPUs / 8 per replica = 2.
    assert (first["gpus"], first["replicas_under_test"]) == (16, 2.0)
    # Step 0: 60 requests over its 30-minute segment = 1/30 req/s, each 1,500 ms end to end:
    # Little's law 1/30 x 1.5 s = 0.05 in flight, 0.025 per replica.
    assert first["arrival_rate_measured"] == pytest.approx(60 / 1800)
    assert first["concurrency"] == pytest.approx(0.05)
    assert first["concurrency_per_replica"] == pytest.approx(0.025)
    assert first["goodput_per_gpu"] == pytest.approx(3000 / 1771.5 / 16)
    assert (first["attainment"], first["ttft_p99_ms"], first["e2e_p99_ms"]) == (1.0, 300.0, 1500.0)
    # Step 1: 60 requests over its 9-minute segment = 1/9 req/s at 1,500 ms: 1/6 in flight, 1/12 per replica; every
    # first token over the 1,000 ms limit, so attainment 0 and no goodput.
    assert second["concurrency"] == pytest.approx(60 / 540 * 1.5)
    assert second["concurrency_per_replica"] == pytest.approx(60 / 540 * 1.5 / 2)
    assert (second["attainment"], second["goodput_per_gpu"], second["ttft_p99_ms"]) == (0.0, 0.0, 1200.0)
    # The knee is the lambda_slo_max step (0.03 req/s): the last before a commitment broke.
    assert [(r["all_met"], r["is_knee"]) for r in sweep] == [(True, True), (False, False)]
    # Its concurrency per replica is the slots one replica held within SLO that the plan may use.
    assert cap["loadtest_slots_per_replica"] == pytest.approx(first["concurrency_per_replica"])

    # The review's line and table: every figure is the cell it names, as the review formats it.
    review = Review(day=date(2026, 11, 16), capacity=[cap], plan=[], load=[], slo=[], cost_history=[], policy={},
                    sweep=sweep)
    line, table = sweep_parts(review, cap)
    assert str(line) == ("Knee at 0.025 concurrent requests per replica (0.03 req/s): 0.1058 tok/s per GPU, "
                         "P99 TTFT 300 ms, P99 E2E 1,500 ms; load test hand (max_num_seqs 256, verified: yes).")
    assert table.text_rows() == [
        ["0", "0.03", "0.03333", "0.025", "0.1058", "1.0000", "300 ms", "1,500 ms", "yes", "yes"],
        ["1", "0.1", "0.1111", "0.08333", "0", "0.0000", "1,200 ms", "1,500 ms", "no", "no"]]
    figs = line.figs() + [c for r in table.rows for c in r]
    for f in figs:
        key = dict(f.key)
        (row,) = [r for r in sweep if r["step_index"] == key["step_index"]]
        assert (f.table, key["deployment_id"]) == ("infra.loadtest_sweep_daily", DEP)
        assert f.text == shown(row[f.column], f.kind)
    # Without a run of its configuration, one line says so.
    empty = Review(day=date(2026, 11, 16), capacity=[cap], plan=[], load=[], slo=[], cost_history=[], policy={})
    assert sweep_parts(empty, cap) == [f"Load-test sweep of {DEP}: no load test of the configuration in force."]


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t + "max_num_seqs: 0\n", "line 9: max_num_seqs: 0 is below the minimum 1"),
    (lambda t: t + "chunked_prefill: maybe\n", "line 9: chunked_prefill: maybe is not a valid boolean"),
    (lambda t: t + "max_num_seq: 128\n", "line 9: unknown key 'max_num_seq'"),
])
def test_a_wrong_batching_setting_names_the_file_line_and_field(home: Path, edit, expected: str) -> None:
    folder = home / "raw" / "loadtest" / "hand"
    write_jsonl(folder / "requests.jsonl", _hand_requests())
    (folder / "run.yaml").write_text(edit(HAND_RUN))
    with pytest.raises(LedgerError) as err:
        _measure(home)
    assert str(folder / "run.yaml") in str(err.value) and expected in str(err.value)
