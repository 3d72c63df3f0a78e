"""GPU telemetry (raw/gpu/): Prometheus range queries of the DCGM exporter and nvidia-smi logs, mapped to
deployments, published as infra.gpu_usage_hourly and infra.gpu_usage_daily (docs/metrics.md, section 2).

One hand-made day, 2026-11-17, run once for the module: m70-h100 (24 H100s of 700 W nominal) claims the GPUs of
host node-a; two of them are sampled in hour 0 by a DCGM file with a gap and a NaN sample; host node-z's nvidia-smi
log (one GPU, one broken line) is claimed by no deployment; m8-onprem (4 L40S of 350 W) has no samples at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import (
    COSTS_YAML,
    DEPLOYMENTS_YAML,
    failure_text,
    gateway_dir,
    lenient,
    make_home,
    materialize,
    request,
    rows,
    write_jsonl,
)

DAY = "2026-11-17"
T0 = 1794873600  # 2026-11-17T00:00:00Z in Unix seconds


def _series(name: str, uuid: str, values: list[tuple[int, str]]) -> dict:
    labels = {"__name__": name, "Hostname": "node-a", "gpu": uuid[-1], "UUID": uuid,
              "modelName": "NVIDIA H100 80GB HBM3", "namespace": "llm", "pod": "m70-0"}
    return {"metric": labels, "values": [[T0 + dt, v] for dt, v in values]}


DCGM = {"status": "success", "data": {"resultType": "matrix", "result": [
    # lines 1-3: GPU-a0's power, a NaN at 00:01 (skipped) and a gap at 00:02 (no sample): mean (300 + 500) / 2 = 400 W
    _series("DCGM_FI_DEV_POWER_USAGE", "GPU-a0", [(0, "300"), (60, "NaN"), (180, "500")]),
    # lines 4-7: GPU-a1's power, mean (600 + 700 + 800) / 3 = 700 W; "abc" at line 7 is quarantined
    _series("DCGM_FI_DEV_POWER_USAGE", "GPU-a1", [(0, "600"), (60, "700"), (120, "800"), (180, "abc")]),
    # lines 8-10: GPU-a0's utilization 80 and 2 (1 of 2 above the 5% floor); the next day's 00:00 is skipped
    _series("DCGM_FI_DEV_GPU_UTIL", "GPU-a0", [(0, "80"), (180, "2"), (86_400, "50")]),
    # lines 11-13: GPU-a1's utilization 90, 60 and 0 (2 of 3 active)
    _series("DCGM_FI_DEV_GPU_UTIL", "GPU-a1", [(0, "90"), (60, "60"), (120, "0")]),
]}}

SMI = ("timestamp, uuid, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"
       "2026/11/17 00:00:00.000, GPU-z0, 0, 250.00 W, 87 %, 1234 MiB\n"
       "2026/11/17 00:01:00.000, GPU-z0, 0, 260.00 W\n"  # line 3: broken (3 of the header's 6 fields)
       "2026/11/17 00:02:00.000, GPU-z0, 0, 270.00 W, 3 %, 1234 MiB\n")


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = make_home(tmp_path_factory.mktemp("gpu") / "home")
    config = home / "config" / "deployments.yaml"
    config.write_text(DEPLOYMENTS_YAML.replace('    resource_ids: ["i-m70-*"]\n',
                                               '    resource_ids: ["i-m70-*"]\n    gpu_hosts: ["node-a"]\n', 1))
    folder = home / "raw" / "gpu" / f"dt={DAY}"
    folder.mkdir(parents=True)
    (folder / "dcgm-node-a.json").write_text(json.dumps(DCGM))
    (folder / "node-z.csv").write_text(SMI)
    # A day of m70's 24 H100s at 1 USD a GPU-hour on the bill (576 USD, category gpu), and energy at 0.10 USD/kWh.
    (home / "raw" / "billing" / "focus.csv").write_text(
        "ChargePeriodStart,ChargePeriodEnd,EffectiveCost,BilledCost,BillingCurrency,ChargeCategory,ServiceCategory,"
        "SkuId,Tags\n"
        f'{DAY} 00:00:00,2026-11-18 00:00:00,576.00,576.00,USD,Usage,Compute,p5.48xlarge,'
        '"{""tokenledger:deployment"": ""m70-h100""}"\n')
    priced = COSTS_YAML.replace("    currency: USD\n", "    currency: USD\n    energy_price_per_kwh: 0.10\n")
    (home / "config" / "costs.yaml").write_text(priced)
    # One compliant request of m70 in hour 0 with 3,960 output tokens: SLO goodput 3,960 / 3,600 s = 1.1 tokens/s.
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl",
                [request(1, received_at=f"{DAY}T00:10:00Z", output_tokens=3960)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY, upto=["infra/gpu_usage_daily", "quality/ingest_reconciliation_daily",
                                        "quality/quarantine", "finance/cost_per_mtok_daily",
                                        "finance/cost_reconciliation_daily"], run_config=lenient())
        assert result.success, failure_text(result)
    return home


def _hour(home: Path, where: str) -> dict:
    (row,) = rows(home, "infra", "gpu_usage_hourly", DAY, where)
    return row


def test_two_gpu_hour_from_known_samples(day: Path) -> None:
    row = _hour(day, "deployment_id = 'm70-h100' AND hour = 0")
    assert row["power_basis"] == "measured" and row["gpus_measured"] == 2 and row["gpu_uuids"] == ["GPU-a0", "GPU-a1"]
    assert row["power_samples"] == 5  # 2 of GPU-a0 (its NaN is no sample), 3 of GPU-a1 ("abc" quarantined)
    # Mean total power: 400 W (GPU-a0) + 700 W (GPU-a1) = 1,100 W, over the hour 1.1 kWh; 550 W a GPU.
    assert row["power_mean_w"] == pytest.approx(1100.0) and row["power_w"] == pytest.approx(1100.0)
    assert row["energy_kwh"] == pytest.approx(1.1) and row["power_per_gpu_mean_w"] == pytest.approx(550.0)
    # P95 of 300, 500, 600, 700, 800: position 0.95 x 4 = 3.8 -> 700 + 0.8 x 100 = 780 W.
    assert row["power_per_gpu_p95_w"] == pytest.approx(780.0)
    # Active: GPU-a0 1 of 2 utilization samples above 5%, GPU-a1 2 of 3: 1/2 + 2/3 = 7/6 GPU-hours of 24 allocated.
    assert row["active_gpu_hours"] == pytest.approx(7 / 6) and row["allocated_gpu_hours"] == pytest.approx(24.0)
    # Mean utilization: the mean of each GPU's mean, (41 + 50) / 2 = 45.5%.
    assert row["util_mean_pct"] == pytest.approx(45.5)
    # Goodput per watt: 1.1 tokens/s / 1,100 W = 0.001 tokens per joule; nominal 1.1 / (24 x 700 W) = 6.5476e-5.
    assert row["slo_goodput"] == pytest.approx(1.1)
    assert row["goodput_per_watt"] == pytest.approx(0.001)
    assert row["goodput_per_watt_nominal"] == pytest.approx(1.1 / 16_800)


def test_unmapped_gpu_is_reported(day: Path) -> None:
    row = _hour(day, "NOT mapped AND hour = 0")
    assert (row["model"], row["deployment_id"], row["gpu_uuids"]) == (None, None, ["GPU-z0"])
    # nvidia-smi's two good lines, 250 W and 270 W: mean 260 W, 0.26 kWh; 1 of 2 above the 5% floor.
    assert row["power_mean_w"] == pytest.approx(260.0) and row["energy_kwh"] == pytest.approx(0.26)
    assert row["active_gpu_hours"] == pytest.approx(0.5)
    (daily,) = rows(day, "infra", "gpu_usage_daily", DAY, "NOT mapped")
    assert daily["gpu_uuids"] == ["GPU-z0"] and daily["power_basis"] == "measured"
    assert daily["energy_kwh"] == pytest.approx(0.26)


def test_deployment_without_samples_keeps_nominal_power(day: Path) -> None:
    row = _hour(day, "deployment_id = 'm8-onprem' AND hour = 5")
    # 4 L40S x 350 W = 1,400 W nominal, labelled as such: 1.4 kWh in the hour; no active hours can be known.
    assert (row["power_basis"], row["gpus_measured"], row["power_mean_w"]) == ("nominal", 0, None)
    assert row["power_w"] == pytest.approx(1400.0) and row["energy_kwh"] == pytest.approx(1.4)
    assert row["active_gpu_hours"] is None
    by_id = {r["deployment_id"]: r for r in rows(day, "infra", "gpu_usage_daily", DAY, "mapped")}
    assert by_id["m8-onprem"]["power_basis"] == "nominal"
    assert by_id["m8-onprem"]["energy_kwh"] == pytest.approx(24 * 1.4)  # 33.6 kWh
    m70 = by_id["m70-h100"]
    # Hour 0 measured (1.1 kWh), hours 1-23 at 24 x 700 W = 16.8 kWh each: 1.1 + 23 x 16.8 = 387.5 kWh, 'mixed'.
    assert m70["power_basis"] == "mixed" and m70["measured_hours"] == 1
    assert m70["energy_kwh"] == pytest.approx(387.5)
    # The day's goodput per watt: 3,960 compliant tokens / (387.5 kWh x 3.6e6 J) = 2.8387e-6 tokens per joule.
    assert m70["goodput_per_watt"] == pytest.approx(3960 / 387.5 / 3.6e6)
    assert m70["active_gpu_hours"] == pytest.approx(7 / 6) and m70["allocated_gpu_hours"] == pytest.approx(576.0)


def test_prometheus_gap_nan_and_smi_broken_line_reconcile(day: Path) -> None:
    quarantined = rows(day, "quality", "quarantine", DAY, "source = 'gpu'", order="file, line")
    assert [(Path(q["file"]).name, q["line"]) for q in quarantined] == [("dcgm-node-a.json", 7), ("node-z.csv", 3)]
    assert quarantined[0]["reason"] == "result[1].values[3]: value: abc is not a valid number"
    assert quarantined[1]["reason"] == "line has fewer fields than the header's 6"
    (rec,) = rows(day, "quality", "ingest_reconciliation_daily", DAY, "source = 'gpu'")
    # Read: 13 samples of the DCGM file + 3 lines of the log = 16 = 12 accepted + 2 quarantined + 2 skipped (the
    # NaN sample and the next day's 00:00 sample).
    assert (rec["rows_read"], rec["rows_accepted"], rec["rows_quarantined"], rec["duplicates_merged"],
            rec["skipped_not_request"], rec["balanced"]) == (16, 12, 2, 0, 2, True)
    samples = rows(day, "core", "gpu_samples", DAY, "metric = 'power_w'", order="gpu_uuid, sampled_at")
    assert [(s["gpu_uuid"], s["value"], s["deployment_id"]) for s in samples] == [
        ("GPU-a0", 300.0, "m70-h100"), ("GPU-a0", 500.0, "m70-h100"), ("GPU-a1", 600.0, "m70-h100"),
        ("GPU-a1", 700.0, "m70-h100"), ("GPU-a1", 800.0, "m70-h100"), ("GPU-z0", 250.0, None),
        ("GPU-z0", 270.0, None)]


def test_cost_on_the_usage_basis_beside_the_allocation_basis(day: Path) -> None:
    (m70,) = rows(day, "finance", "cost_per_mtok_daily", DAY, "deployment_id = 'm70-h100'")
    # Allocation basis, unchanged: 576 USD / 3,960 compliant tokens x 1e6 = 145,454.55 $/MTok.
    assert float(m70["cost_total"]) == 576.0
    assert m70["cost_per_mtok_goodput"] == pytest.approx(576 / 3960 * 1e6)
    # Usage basis: 7/6 of the 576 allocated GPU-hours were active, so 576 x (1 - (7/6) / 576) = 574.8333 USD paid
    # for idle GPUs, and (576 - 574.8333) / 3,960 x 1e6 = 294.61 $/MTok under SLO for the active ones.
    assert (m70["allocated_gpu_hours"], m70["active_gpu_hours"]) == pytest.approx((576.0, 7 / 6))
    assert float(m70["cost_idle"]) == pytest.approx(576 - 7 / 6)
    assert m70["cost_per_mtok_goodput_active"] == pytest.approx(7 / 6 / 3960 * 1e6)
    # Energy, a line of its own: 387.5 kWh (mixed basis) x 0.10 USD = 38.75 USD, 9,785.35 $/MTok under SLO.
    assert (m70["energy_kwh"], m70["power_basis"]) == (pytest.approx(387.5), "mixed")
    assert float(m70["cost_energy"]) == pytest.approx(38.75)
    assert m70["cost_energy_per_mtok_goodput"] == pytest.approx(38.75 / 3960 * 1e6)
    # The bill still reconciles: energy is not a bill line and not in any cost_total.
    (rec,) = rows(day, "finance", "cost_reconciliation_daily", DAY)
    assert (float(rec["billed_effective_cost"]), float(rec["allocated_cost"]), rec["balanced"]) == (576.0, 576.0, True)


def test_review_baseline_shows_measured_goodput_per_watt_and_flags_power_bought_throughput() -> None:
    from datetime import date

    from tokenledger.report.review import Review, power_text, power_warning

    def usage(day: int, per_watt: float, raw: float) -> dict:
        return {"day": date(2026, 11, day), "deployment_id": "m70-h100", "gpus": 24.0, "gpus_measured": 22,
                "power_w": 9_600.0, "power_basis": "measured", "raw_throughput": raw, "slo_goodput": 0.0,
                "goodput_per_watt": per_watt, "goodput_per_watt_nominal": 0.25}

    # 16th -> 17th: raw throughput 100 -> 120 tok/s, goodput per watt 0.5 -> 0.4: flagged.
    history = [usage(16, 0.5, 100.0), usage(17, 0.4, 120.0)]
    review = Review(day=date(2026, 11, 17), capacity=[], plan=[], load=[], slo=[], cost_history=[], policy={},
                    gpu_usage_history=history)
    text = power_text(review, {"deployment_id": "m70-h100", "goodput_per_gpu": 160.0})
    assert text.startswith("; goodput 160 tok/s per GPU and 0.4 tok/s per measured watt (measured power 9,600 W "
                           "mean, 22 of 24.00 GPUs sampled; nominal 0.25)")
    assert ("goodput per watt fell from 0.5 to 0.4 while raw throughput rose from 100 to 120 tok/s against "
            "2026-11-16") in text
    # Goodput per watt down by 4% (0.5 -> 0.48), within the day-to-day noise of 5%; up with the throughput; or the
    # throughput down: no warning.
    assert power_warning(usage(16, 0.5, 100.0), usage(17, 0.48, 120.0)) is None
    assert power_warning(usage(16, 0.4, 100.0), usage(17, 0.5, 120.0)) is None
    assert power_warning(usage(16, 0.5, 120.0), usage(17, 0.4, 100.0)) is None
    assert power_warning(None, usage(17, 0.4, 120.0)) is None


def test_a_gpu_two_deployments_claim_stops_the_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = make_home(tmp_path / "home")
    # m70-h100 claims host node-a, m8-onprem the UUIDs GPU-a*: both claim GPU-a0 and GPU-a1 all day.
    claimed = DEPLOYMENTS_YAML.replace('    resource_ids: ["i-m70-*"]\n',
                                       '    resource_ids: ["i-m70-*"]\n    gpu_hosts: ["node-a"]\n', 1)
    claimed = claimed.replace("    rate_card: onprem-l40s\n",
                              '    rate_card: onprem-l40s\n    gpu_uuids: ["GPU-a*"]\n', 1)
    (home / "config" / "deployments.yaml").write_text(claimed)
    folder = home / "raw" / "gpu" / f"dt={DAY}"
    folder.mkdir(parents=True)
    (folder / "dcgm-node-a.json").write_text(json.dumps(DCGM))
    monkeypatch.setenv("TOKENLEDGER_HOME", str(home))
    result = materialize(DAY, selection=["core/deployments_daily", "core/gpu_samples"])
    assert not result.success
    assert ("GPU GPU-a0 (host node-a, index 0, pod llm/m70-0): m70-h100 and m8-onprem" in failure_text(result))


def test_copies_of_a_sample_merge_when_equal_and_are_all_quarantined_when_they_differ(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One GPU reported by two hosts' nvidia-smi logs (issue 56: differing copies kept one value silently): the
    00:00 sample is the same in both (merged into the first), the 00:02 one is 270 W in a.csv and 275 W in b.csv,
    so which is right cannot be told and both are quarantined, each naming the first copy."""
    home = make_home(tmp_path / "home")
    folder = home / "raw" / "gpu" / f"dt={DAY}"
    folder.mkdir(parents=True)
    header = "timestamp, uuid, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"
    same = "2026/11/17 00:00:00.000, GPU-z0, 0, 250.00 W, 87 %, 1234 MiB\n"
    (folder / "a.csv").write_text(header + same + "2026/11/17 00:02:00.000, GPU-z0, 0, 270.00 W, 3 %, 1234 MiB\n")
    (folder / "b.csv").write_text(header + same + "2026/11/17 00:02:00.000, GPU-z0, 0, 275.00 W, 3 %, 1234 MiB\n")
    monkeypatch.setenv("TOKENLEDGER_HOME", str(home))
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")
    result = materialize(DAY, run_config=lenient(), upto=["quality/ingest_reconciliation_daily", "quality/quarantine"])
    assert result.success, failure_text(result)
    (rec,) = rows(home, "quality", "ingest_reconciliation_daily", DAY, "source = 'gpu'")
    # 4 samples read = 1 accepted (a.csv's 00:00) + 2 quarantined (both 00:02) + 1 merged (b.csv's 00:00)
    assert (rec["rows_read"], rec["rows_accepted"], rec["rows_quarantined"], rec["duplicates_merged"],
            rec["balanced"]) == (4, 1, 2, 1, True)
    first = f"{folder / 'a.csv'} line 3"
    assert [(Path(q["file"]).name, q["line"], q["reason"]) for q in rows(home, "quality", "quarantine", DAY)] == [
        (name, 3, f"gpu_uuid GPU-z0 at 2026-11-17T00:02:00Z: its copies have other values (the first: {first}); "
                  "conflicting samples are all quarantined, none is kept") for name in ("a.csv", "b.csv")]
    assert {s["sampled_at"].isoformat() for s in rows(home, "core", "gpu_samples", DAY)} == {
        "2026-11-17T00:00:00+00:00"}
