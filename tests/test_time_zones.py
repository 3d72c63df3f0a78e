"""A time written without a zone is read as UTC only where its format says so; elsewhere it is read as UTC, counted
per file in the reconciliation's notes and warned about once per source (docs/inputs.md, "Times without a zone").

The canonical gateway log defines received_at as UTC (docs/inputs.md), and LiteLLM's spend logs table stores every
time in UTC, so their zone-less times pass without a word. A logged Anthropic Message's timestamp has no defined
zone: the logging code writes whatever time it was handed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gateway_dir, materialize, request, rows, write_jsonl

DAY = "2026-11-16"


def _spend(rid: str, start: str, end: str) -> dict:
    return {"request_id": rid, "call_type": "acompletion", "startTime": start, "endTime": end,
            "completionStartTime": end, "model": "hosted_vllm/m70", "model_group": "m70", "prompt_tokens": 100,
            "completion_tokens": 10, "total_tokens": 110, "spend": 0.0, "status": "success"}


def _message(mid: str, at: str) -> dict:
    return {"id": mid, "type": "message", "role": "assistant", "model": "m8", "stop_reason": "end_turn",
            "usage": {"input_tokens": 30, "output_tokens": 3}, "timestamp": at}


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from tests.conftest import make_home

    home = make_home(tmp_path_factory.mktemp("zones") / "home")
    # the canonical log: UTC by definition, zone-less or not
    write_jsonl(gateway_dir(home, DAY) / "gw.jsonl",
                [request("g1", received_at="2026-11-16 08:00:00"), request("g2")])
    litellm = home / "raw" / "litellm" / f"dt={DAY}"
    write_jsonl(litellm / "a.jsonl", [_spend("L1", "2026-11-16T12:00:00.120", "2026-11-16T12:00:01.000"),
                                      _spend("L2", "2026-11-16T12:01:00Z", "2026-11-16T12:01:01Z"),
                                      _spend("L3", "2026-11-16T12:02:00+00:00", "2026-11-16 12:02:01")])
    write_jsonl(litellm / "b.jsonl", [_spend("L4", "2026-11-16T13:00:00Z", "2026-11-16T13:00:01Z")])
    anthropic = home / "raw" / "anthropic" / f"dt={DAY}"
    write_jsonl(anthropic / "m.jsonl", [_message("msg_Z1", "2026-11-16 09:00:00"),
                                        _message("msg_Z2", "2026-11-16T09:30:00Z"), _message("msg_Z3", 1794819600)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY, upto=["quality/ingest_reconciliation_daily"])
    checks = {e.event_specific_data.asset_check_key.name: e.event_specific_data
              for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    return home, checks


def _notes(home: Path) -> dict[str, str | None]:
    return {r["source"]: r["notes"] for r in rows(home, "quality", "ingest_reconciliation_daily", DAY)}


def test_zone_less_times_are_read_as_utc_and_counted_per_file_where_the_format_leaves_the_zone_open(day) -> None:
    home, _ = day
    msgs = f"raw/anthropic/dt={DAY}/m.jsonl"  # by its place in the home, never the machine's path
    tail = ("read as UTC; if the source writes local time, its figures are shifted: write times with their offset "
            "(e.g. 2026-11-16T10:00:00Z)")
    # The message log: one record without a zone (msg_Z2 has Z, msg_Z3 is Unix seconds). The gateway's received_at
    # and LiteLLM's times (L1, L3) are UTC by their formats' definition: no note.
    assert _notes(home) == {
        "gateway": None, "billing": None, "deployments": None, "gpu": None, "litellm": None,
        "anthropic": f"{msgs}: 1 record(s) with a time written without a zone (timestamp), {tail}",
    }
    got = {r["request_id"]: r["received_at"].isoformat() for r in rows(home, "core", "gateway_requests", DAY)}
    assert (got["g1"], got["L1"], got["msg_Z1"], got["msg_Z3"]) == (
        "2026-11-16T08:00:00+00:00", "2026-11-16T12:00:00.120000+00:00", "2026-11-16T09:00:00+00:00",
        "2026-11-16T09:00:00+00:00")
    assert all(r["balanced"] for r in rows(home, "quality", "ingest_reconciliation_daily", DAY))


def test_the_warning_names_each_source_once(day) -> None:
    home, checks = day
    warning = checks["source_notes_empty"]
    assert not warning.passed and warning.severity.value == "WARN"
    assert warning.description.count(f"{DAY} anthropic: ") == 1
    assert "gateway" not in warning.description and "litellm" not in warning.description
