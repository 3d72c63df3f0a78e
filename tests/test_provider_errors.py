"""A provider's error is a request it refused or failed, never a bad row (docs/inputs.md, "Failed calls").

The log is tests/data/anthropic/sdk-messages.jsonl, written by the official Anthropic Python SDK through a logging
wrapper (tools/record_anthropic_log.py): four Messages as the SDK serializes them, two `429 rate_limit_error`
bodies logged with the model asked for, and one `400 invalid_request_error` body logged without it. Every figure
below is worked by hand from that file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import COSTS_YAML, SLO_YAML, materialize, rows

DAY = "2026-11-16"
LOG = Path(__file__).parent / "data" / "anthropic" / "sdk-messages.jsonl"
MODEL = "claude-sonnet-4-5-20250929"
DEPLOYMENTS_YAML = f"""\
deployments:
  - {{deployment_id: sonnet-api, model: {MODEL}, kind: api, provider: anthropic, valid_from: 2026-11-01}}
"""


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("provider-errors") / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML)
    (home / "raw" / "billing").mkdir(parents=True)
    folder = home / "raw" / "anthropic" / f"dt={DAY}"
    folder.mkdir(parents=True)
    shutil.copy(LOG, folder / LOG.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY, upto=["infra/slo_daily", "quality/ingest_reconciliation_daily"])
    assert result.success
    yield home


def _recon(home: Path) -> dict[str, Any]:
    return rows(home, "quality", "ingest_reconciliation_daily", DAY, where="source = 'anthropic'")[0]


def test_the_sdk_log_runs_its_day_with_the_errors_counted_as_failed_requests(day: Path) -> None:
    got = {r["request_id"]: r for r in rows(day, "core", "gateway_requests", DAY)}
    replies = [r for r in got.values() if r["status"] == "ok"]
    # The four Messages: input = input_tokens + cache reads + cache writes.
    #   msg_01SDK1 14 + 0 + 2048 = 2062; msg_01SDK2 9 + 2048 + 0 = 2057; msg_01SDK3 1200; msg_01SDK4 3 + 2048 + 516
    #   = 2567: 7886 in all, 4096 of it cached; output 310 + 122 + 64 + 1024 = 1520.
    assert (len(replies), sum(r["input_tokens"] for r in replies), sum(r["cached_input_tokens"] for r in replies),
            sum(r["output_tokens"] for r in replies)) == (4, 7886, 4096, 1520)
    # The two 429s name their model: two rejected requests of it, by the API's request id, with no tokens.
    failed = {rid: (r["model"], r["status"], r["http_status"], r["error_type"], r["input_tokens"],
                    r["output_tokens"], r["received_at"].isoformat())
              for rid, r in got.items() if r["status"] != "ok"}
    assert failed == {
        "req_011SDK429a": (MODEL, "rejected", 429, "rate_limit_error", 0, 0, "2026-11-16T09:00:10.113000+00:00"),
        "req_011SDK429b": (MODEL, "rejected", 429, "rate_limit_error", 0, 0, "2026-11-16T09:00:10.540000+00:00"),
    }
    # Nothing quarantined; the 400 names no model: a failure of no model, with its kind in the notes.
    assert rows(day, "quality", "quarantine", DAY) == []
    recon = _recon(day)
    assert (recon["rows_read"], recon["rows_accepted"], recon["rows_quarantined"], recon["duplicates_merged"],
            recon["skipped_not_request"], recon["failures_no_model"], recon["balanced"]) == (7, 6, 0, 0, 0, 1, True)
    assert recon["notes"] == "failures that name no model: rejected 1 (HTTP 400 invalid_request_error)"


def test_the_model_s_success_rate_counts_the_rejected_requests(day: Path) -> None:
    slo = rows(day, "infra", "slo_daily", DAY, where=f"model = '{MODEL}' AND isl_bucket = 'all'")[0]
    # 6 effective requests: 4 succeeded, 2 rejected (both failures): a success rate of 4/6.
    assert (slo["effective_requests"], slo["successful_requests"], slo["failed_requests"],
            slo["rejected_requests"], slo["error_requests"]) == (6, 4, 2, 2, 0)
    assert slo["success_rate"] == pytest.approx(4 / 6)
    assert slo["success_rate_met"] is False
