"""The prefix-cache what-if (issue 16): block hashes in the gateway contract, the simulation's formulas on
hand-worked traces, and the daily table through Dagster."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.conftest import request, write_jsonl
from tokenledger.ingest import stage_gateway_files
from tokenledger.landing import LandingFile


def _staged(tmp_path: Path, path: Path, fmt: str) -> dict[str, tuple]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    [staged] = stage_gateway_files(con, [LandingFile(path, fmt)], tmp_path / "stage")
    return {r[0]: (r[1], r[2]) for r in con.execute(
        "SELECT request_id, prefix_block_hashes, reason FROM read_parquet($p)", {"p": str(staged)}).fetchall()}


def test_block_hashes_are_read_exactly_or_quarantined_with_the_rule(tmp_path: Path) -> None:
    records = [
        request("plain", prefix_block_hashes=[7, 8, -9]),
        request("none"),
        request("empty", prefix_block_hashes=[]),
        request("fraction", prefix_block_hashes=[1, 2.5]),
        request("text", prefix_block_hashes=["prompt text"]),
        request("scalar", prefix_block_hashes=12),
        request("beyond", prefix_block_hashes=[2**63]),
        request("largest", prefix_block_hashes=[2**63 - 1]),
    ]
    got = _staged(tmp_path, write_jsonl(tmp_path / "a.jsonl", records), "jsonl")
    assert got["plain"] == ([7, 8, -9], None)
    assert got["none"] == (None, None)
    assert got["empty"] == ([], None)
    assert got["largest"] == ([2**63 - 1], None)
    assert got["fraction"] == (None, "prefix_block_hashes: [1,2.5] is not a JSON array of integers (each within "
                                     "signed 64 bits)")
    # a string inside the array could be prompt text: it is never repeated in the reason
    assert got["text"] == (None, "prefix_block_hashes: [a JSON array was here, not kept] is not a JSON array of "
                                 "integers (each within signed 64 bits)")
    assert got["scalar"] == (None, "prefix_block_hashes: a value of type integer is not a valid array")
    assert got["beyond"][0] is None and "9223372036854775808" in got["beyond"][1]

    # Parquet: a list column is read through its JSON text, so the same rules hold
    base = ", ".join(f"{v!r} AS {k}" for k, v in request("x").items() if k != "request_id")
    got = {}
    for name, values in (("signed", "('pq-1', [5, -6]::BIGINT[]), ('pq-2', NULL)"),
                         ("unsigned", "('pq-3', [1]::UBIGINT[]), ('pq-4', [18446744073709551615]::UBIGINT[])")):
        parquet = tmp_path / f"{name}.parquet"
        duckdb.connect().execute(f"COPY (SELECT *, {base} FROM (VALUES {values}) t(request_id, prefix_block_hashes)) "
                                 "TO $p (FORMAT PARQUET)", {"p": str(parquet)})
        got.update(_staged(tmp_path / name, parquet, "parquet"))
    assert got["pq-1"] == ([5, -6], None)
    assert got["pq-2"] == (None, None)
    assert got["pq-3"] == ([1], None)
    assert got["pq-4"] == (None, "prefix_block_hashes: [18446744073709551615] is not a JSON array of integers "
                                 "(each within signed 64 bits)")
