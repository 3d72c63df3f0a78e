"""User mistakes give one clear message naming the file and the problem, never a bare traceback."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.conftest import failure_text, gateway_dir, materialize, request, write_jsonl
from tokenledger.cli import main

DAY = "2026-11-16"


def _cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


def test_missing_home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _cli_error(capsys, "run", "--home", str(tmp_path / "nowhere"), "--start", DAY)
    assert f"tokenledger home {tmp_path / 'nowhere'} does not exist" in err
    assert not (tmp_path / "nowhere").exists()


def test_missing_config(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "config" / "costs.yaml").unlink()
    err = _cli_error(capsys, "run", "--home", str(home), "--start", DAY)
    assert f"{home / 'config' / 'costs.yaml'} is missing" in err


def test_invalid_yaml_names_file_line_and_column(home: Path) -> None:
    path = home / "config" / "slo.yaml"
    path.write_text(path.read_text().replace("      itl_limit_ms: 100", "      itl_limit_ms: [100"))
    result = materialize(DAY, upto=["core/deployments_daily"])
    assert not result.success
    text = failure_text(result)
    assert f"{path} is not valid YAML at line 9, column 18: expected ',' or ']'" in text


def test_config_contract_violation_names_line_field_and_rule(home: Path) -> None:
    path = home / "config" / "deployments.yaml"
    path.write_text(path.read_text().replace("    gpus: 4\n", "    gpus: -4\n"))
    text = failure_text(materialize(DAY, upto=["core/deployments_daily"]))
    assert f"{path} line 25: gpus: -4 is below the minimum 1" in text


def test_misspelt_config_key(home: Path) -> None:
    path = home / "config" / "slo.yaml"
    path.write_text(path.read_text().replace("queue_p99_ms", "queue_p99_msec"))
    text = failure_text(materialize(DAY, upto=["core/deployments_daily"]))
    assert f"{path} line 11: unknown key 'queue_p99_msec' in an SLO policy" in text


def test_corrupt_gzip_fails_the_day_naming_the_file(home: Path) -> None:
    good = gzip.compress(("\n".join(f'{{"request_id": "r{i}"}}' for i in range(5000)) + "\n").encode())
    path = gateway_dir(home, DAY) / "part-0.jsonl.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(good[: len(good) // 2])
    result = materialize(DAY)
    assert not result.success
    text = failure_text(result)
    # The reader's own message, not DuckDB's wrapper of it (which held a Python traceback and no count).
    assert f"{path}: is not a readable gzip file" in text and "line(s) were read before the damage" in text
    assert "Replace it with a complete copy" in text and "Traceback" not in text
    assert not (home / "exports").exists()


def test_a_csv_named_jsonl_is_the_wrong_format(home: Path) -> None:
    path = gateway_dir(home, DAY) / "requests.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("request_id,model\nr1,m70\nr2,m70\n")
    text = failure_text(materialize(DAY, upto=["core/gateway_requests"]))
    assert f"{path}: none of its 3 lines is a JSON object, so it is not a JSON Lines gateway log" in text


def test_an_unknown_file_type_is_not_silently_skipped(home: Path) -> None:
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [request("r1")])
    (gateway_dir(home, DAY) / "export.xlsx").write_bytes(b"PK\x03\x04")
    (gateway_dir(home, DAY) / "_SUCCESS").write_text("")
    text = failure_text(materialize(DAY, upto=["core/gateway_requests"]))
    assert "export.xlsx: not a gateway log file tokenledger can read (expected .jsonl, .jsonl.gz, .parquet)" in text


def test_a_parquet_file_that_is_not_parquet(home: Path) -> None:
    path = gateway_dir(home, DAY) / "a.parquet"
    path.parent.mkdir(parents=True)
    path.write_text('{"request_id": "r1"}\n')
    text = failure_text(materialize(DAY, upto=["core/gateway_requests"]))
    assert f"{path}: cannot be read as Parquet" in text


def test_a_model_missing_from_the_deployments(home: Path) -> None:
    path = write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request("r1"), request("r2", model="llama-405b", deployment_id=...), request("r3", model="llama-405b",
                                                                                   deployment_id=...)])
    result = materialize(DAY, upto=["core/gateway_requests"])
    assert not result.success
    text = failure_text(result)
    assert "model 'llama-405b': 2 request(s), first at " + str(path) + " line 2" in text
    assert "Add them to" in text and "deployments.yaml" in text
    assert not (home / "lake" / "core" / "gateway_requests").exists()


def test_billing_without_focus_columns(home: Path) -> None:
    path = home / "raw" / "billing" / "invoice.csv"
    path.write_text("date,amount\n2026-11-16,10\n")
    text = failure_text(materialize(DAY, upto=["core/billing_charges"]))
    assert f"{path}: has no column ChargePeriodStart, ChargePeriodEnd, EffectiveCost, BilledCost" in text
    assert "not a FOCUS billing export" in text
