"""GPU telemetry held to the standard of every input (issue 56): one unit and range per measure whatever form it
arrives in (data_contracts/inputs/gpu_measures.odcs.yaml), and a Prometheus response bounded by its decompressed size
before it is read, never a blow-up."""

from __future__ import annotations

import gzip
import json
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.conftest import make_home
from tokenledger.config import load_config
from tokenledger.errors import InputFileError
from tokenledger.ingest.gpu import DOCUMENT_SHARE, ingest_gpu_day
from tokenledger.ingest.sources import ingest_deployments_day
from tokenledger.storage import lake
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

DAY = "2026-11-17"
T0 = 1794873600  # 2026-11-17T00:00:00Z
MEMORY = "64MB"  # the test's memory limit: a document is read up to 1/8 of it, 8 MB (DuckDB's MB: 10^6 bytes)


def _series(name: str, values: list[str]) -> dict:
    labels = {"__name__": name, "Hostname": "node-a", "gpu": "0", "UUID": "GPU-a0"}
    return {"metric": labels, "values": [[T0 + 60 * i, v] for i, v in enumerate(values)]}


def _prometheus(*series: dict) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(series)}})


def _day(tmp_path: Path, files: dict[str, bytes]) -> tuple[HomeLayout, object]:
    home = make_home(tmp_path / "home")
    folder = home / "raw" / "gpu" / f"dt={DAY}"
    folder.mkdir(parents=True)
    for name, body in files.items():
        (folder / name).write_bytes(body)
    layout = HomeLayout.of(home)
    window = DayWindow(date.fromisoformat(DAY))
    with compute_connection(home / "tmp" / "spill", memory_limit=MEMORY) as con:
        load_config(con, layout)
        ingest_deployments_day(con, layout, window)
        counts = ingest_gpu_day(con, layout, window, home / "tmp" / "stage")
    return layout, counts


def _quarantined(layout: HomeLayout) -> dict[tuple[str, int], str]:
    part = lake.day_file(layout.lake, "quality_parts", "quarantine_gpu", date.fromisoformat(DAY))
    return {(Path(f).name, line): reason for f, line, reason in duckdb.sql(
        f"SELECT file, line, reason FROM read_parquet('{part}')").fetchall()}


def test_a_value_in_another_unit_is_quarantined_in_either_form_naming_its_own_field(tmp_path: Path) -> None:
    dcgm = _prometheus(
        # power in milliwatts (250,330 mW = 250.33 W): above the 2,000 W no board draws
        _series("DCGM_FI_DEV_POWER_USAGE", ["250.5", "250330"]),
        # SM activity as a percentage, where DCGM gives a fraction
        _series("DCGM_FI_PROF_SM_ACTIVE", ["0.42", "42"]),
        # frame buffer in bytes (80 GB), where DCGM gives MiB
        _series("DCGM_FI_DEV_FB_USED", ["61440", "80000000000"]),
    )
    smi = ("timestamp, uuid, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"
           "2026/11/17 00:00:00.000, GPU-z0, 0, 250.00 W, 87 %, 1234 MiB\n"
           "2026/11/17 00:01:00.000, GPU-z0, 0, 2600.00 W, 87 %, 1234 MiB\n"  # 2.6 kW: a unit mistake
           "2026/11/17 00:02:00.000, GPU-z0, 0, 250.00 W, 870 %, 1234 MiB\n")  # 870 %: above 100
    layout, counts = _day(tmp_path, {"dcgm.json": dcgm.encode(), "node-z.csv": smi.encode()})
    assert _quarantined(layout) == {
        ("dcgm.json", 2): "result[0].values[1]: DCGM_FI_DEV_POWER_USAGE value: 250330 is above the maximum 2000",
        ("dcgm.json", 4): "result[1].values[1]: DCGM_FI_PROF_SM_ACTIVE value: 42 is above the maximum 1",
        ("dcgm.json", 6): "result[2].values[1]: DCGM_FI_DEV_FB_USED value: 80000000000 is above the maximum "
                          "2097152",
        ("node-z.csv", 3): "power.draw [W]: 2600 is above the maximum 2000",
        ("node-z.csv", 4): "utilization.gpu [%]: 870 is above the maximum 100",
    }
    # 6 samples + 3 lines read: 4 accepted, 5 quarantined, balanced
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined, counts.balanced) == (9, 4, 5, True)
    # nvidia-smi's times carry no zone (its host's local time): each of the 3 lines counted, in one note for the file;
    # the Prometheus samples are Unix seconds
    csv = layout.source_day_dir("gpu", date.fromisoformat(DAY)) / "node-z.csv"
    assert counts.notes == (f"{csv}: 3 line(s) with a time written without a zone (timestamp), read as UTC; "
                            "nvidia-smi writes its host's local time, so this is right only where the host runs in "
                            "UTC (TZ=UTC)")


def test_a_response_larger_than_its_share_of_memory_is_refused_before_it_is_read(tmp_path: Path) -> None:
    limit = 64 * 10**6 // DOCUMENT_SHARE  # 8,000,000 bytes
    big = _prometheus(_series("DCGM_FI_DEV_POWER_USAGE", ["300"] * (limit // 20)))
    assert len(big) > limit
    with pytest.raises(InputFileError) as err:
        _day(tmp_path, {"big.json": big.encode()})
    message = str(err.value)
    assert "\n" not in message and "big.json: a Prometheus response of more than 8 MiB: it is read as one JSON " \
        "document held in memory" in message and "smaller pieces" in message


def test_a_compressed_response_that_inflates_past_the_bound_is_refused_saying_so(tmp_path: Path) -> None:
    # 1 GB of spaces compresses to about 1 MB: counted only until it passes the 8 MB bound, never inflated whole
    bomb = gzip.compress(b"{" + b" " * 10**9 + b"}", compresslevel=1)
    with pytest.raises(InputFileError) as err:
        _day(tmp_path, {"bomb.json.gz": bomb})
    assert "bomb.json.gz: a Prometheus response of more than 8 MiB once decompressed" in str(err.value)
