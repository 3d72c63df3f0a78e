"""Fault injection, input side: every kind of bad input a hostile or unlucky user can land.

One real day holds every row-level kind (gateway lines, encodings, fields, names, Parquet files and datasets,
billing lines), each in a known file at a known line with the outcome it must have; the day is materialized once
through Dagster and every line's fate is checked: accepted, quarantined with its reason, or merged into a
duplicate, and `quality.ingest_reconciliation_daily` must count exactly the physical lines written. Inputs that
must stop a day (an unreadable entry, a wrong encoding, a broken configuration) are tested one by one, each for a
message that names the file and says what to do. The environment (read-only home, full disk, bad settings) is
in tests/test_faults_operations.py with killed, concurrent and blocked runs.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import COSTS_YAML, DEPLOYMENTS_YAML, SLO_YAML, failure_text, gateway_dir, lenient, request
from tokenledger.config import MAX_CONFIG_BYTES, MAX_EXPANDED_NODES, load_config
from tokenledger.errors import ConfigError, InputFileError
from tokenledger.ingest.landing import landing_files
from tokenledger.ingest.lines import MAX_LINE_BYTES
from tokenledger.ingest.sources import GATEWAY_FORMATS, ingest_billing_day, ingest_gateway_day
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

DAY = "2026-11-16"
SECRET = "SECRET-PROMPT-TEXT"
OPENAI_KEY = "sk-proj-4f9Qx2LmZt7Rk1VbN8cYp3WdE6aHs0Jg"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
BIG = 2**53 + 1  # 9,007,199,254,740,993: not a double, must stay exact


@dataclass
class Case:
    """One physical line (or Parquet row) and what must become of it."""

    kind: str
    line: bytes
    outcome: str  # accepted | merged | quarantined
    reason: str = ""  # a substring of the quarantine reason
    check: dict[str, Any] = field(default_factory=dict)  # columns of the accepted row


def rec(rid: str, **fields: Any) -> bytes:
    return json.dumps(request(rid, **fields)).encode()


def ok(kind: str, line: bytes, **check: Any) -> Case:
    return Case(kind, line, "accepted", check=check)


def bad(kind: str, line: bytes, reason: str) -> Case:
    return Case(kind, line, "quarantined", reason)


# --- gateway lines, one file per theme -------------------------------------------------------------------------

LINES: dict[str, list[Case]] = {
    "lines.jsonl": [
        Case("utf-8 byte-order mark before the first line", b"\xef\xbb\xbf" + rec("bom"), "accepted"),
        bad("empty line", b"", "empty line"),
        bad("whitespace-only line", b"  \t ", "empty line"),
        bad("line starting with NUL bytes", b"\x00\x00" + rec("nul-start"), "NUL bytes"),
        bad("NUL inside a line", rec("nul-in")[:-1] + b"\x00}", "NUL bytes"),
        bad("invalid UTF-8 byte", b'{"request_id": "\xff"}', "not UTF-8"),
        bad("overlong UTF-8 encoding", b'{"request_id": "\xc0\xaf"}', "not UTF-8"),
        bad("UTF-16 surrogate in UTF-8", b'{"request_id": "\xed\xa0\x80"}', "not UTF-8"),
        ok("CRLF line ending", rec("crlf") + b"\r"),
        bad("raw carriage return inside a string", rec("cr").replace(b'"team-a"', b'"team\ra"'), "not valid JSON"),
        bad("truncated JSON", rec("trunc")[:40], "not valid JSON"),
        bad("two objects on one line", rec("two-a") + rec("two-b"), "not valid JSON"),
        bad("JSON array", b"[1, 2, 3]", "a JSON array, not an object"),
        bad("JSON number", b"42", "a JSON number, not an object"),
        bad("JSON string", b'"a request"', "a JSON string, not an object"),
        bad("JSON null", b"null", "a JSON null, not an object"),
        bad("comment after the object", rec("comment") + b" // note", "not valid JSON"),
        bad("line longer than 16 MiB", b'{"request_id": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}',
            "longer than 16 MiB"),
        ok("unicode labels", rec("unicode", tenant_id="équipe-日本-🚀"), tenant_id="équipe-日本-🚀"),
        ok("unknown fields with prompt text", rec("extra", prompt=SECRET, messages=[{"content": SECRET}])),
        ok("last line without a newline", rec("no-newline")),  # written last, without its newline
    ],
    "fields.jsonl": [
        bad("object in a text field", rec("obj", tenant_id={"prompt": SECRET}),
            "tenant_id: a value of type object is not a valid string"),
        bad("array in a text field", rec("arr", tenant_id=[SECRET]), "tenant_id: a value of type array"),
        bad("boolean in a text field", rec("bool", tenant_id=True), "tenant_id: a value of type boolean"),
        ok("number in an id field that accepts numbers", rec("num-tenant", tenant_id=12345), tenant_id="12345"),
        bad("number in a text field that does not", rec("num-model", model=70),
            "model: the number 70 is not text"),
        bad("OpenAI key as tenant", rec("key-openai", tenant_id=OPENAI_KEY), "tenant_id: looks like a raw API key"),
        bad("AWS key as session", rec("key-aws", session_id=AWS_KEY), "session_id: looks like a raw API key"),
        bad("bearer token as error_type", rec("key-bearer", status="error", output_tokens=0, ttft_ms=...,
                                              queue_ms=..., error_type="Bearer " + OPENAI_KEY[3:]),
            "error_type: looks like a raw API key"),
        bad("key as model", rec("key-model", model=OPENAI_KEY), "model: looks like a raw API key"),
        bad("label longer than 256 characters", rec("long", tenant_id="t" * 300),
            "tenant_id: 300 characters, above the maximum length 256"),
        ok("integer above 2^53 stays exact", rec("big", input_tokens=BIG, cached_input_tokens=0),
           input_tokens=BIG),
        bad("integer beyond 64 bits", rec("huge", input_tokens=2**64),
            "input_tokens: 18446744073709551616 is beyond the integers"),
        bad("huge integer written with an exponent", rec("exp-big").replace(b'"input_tokens": 1000',
                                                                             b'"input_tokens": 1e20'),
            "input_tokens: 100000000000000000000.0 is beyond the integers"),
        ok("integer written as a string with an exponent", rec("exp-str", input_tokens="1e3",
                                                               cached_input_tokens=0), input_tokens=1000),
        ok("whole number written with a fraction", rec("frac-whole").replace(b'"output_tokens": 50',
                                                                             b'"output_tokens": 50.0'),
           output_tokens=50),
        bad("fractional token count", rec("frac", output_tokens=12.5), "output_tokens: 12.5 is not a valid integer"),
        bad("hexadecimal string", rec("hex", input_tokens="0x10"), "input_tokens: 0x10 is not a valid integer"),
        bad("digits with underscores", rec("underscore", input_tokens="1_000"), "input_tokens: 1_000 is not a valid"),
        bad("negative token count", rec("neg", input_tokens=-5, cached_input_tokens=0), "below the minimum 0"),
        bad("null required field", rec("null-input", input_tokens=None), "input_tokens: required but missing"),
        bad("object in a number field", rec("obj-num", input_tokens={"n": 1}), "input_tokens: a value of type object"),
        bad("NaN literal", rec("nan").replace(b'"ttft_ms": 300.0', b'"ttft_ms": NaN'), "ttft_ms: "),
        bad("number beyond a double", rec("inf").replace(b'"ttft_ms": 300.0', b'"ttft_ms": 1e400'),
            "ttft_ms: 1e400 is not a valid number"),
        ok("timestamp with an offset", rec("offset", received_at="2026-11-16T08:00:00+08:00")),
        ok("timestamp without a zone is UTC", rec("naive", received_at="2026-11-16 10:00:00")),
        bad("epoch number as timestamp", rec("epoch", received_at=1763287200), "received_at: "),
        bad("timestamp of another day", rec("other-day", received_at="2026-11-17T00:00:00Z"),
            "falls on 2026-11-17, not on the folder's day 2026-11-16"),
        bad("unknown status", rec("status", status="okay"), "status: okay is not one of"),
        bad("status in another case", rec("status-case", status="OK"), "status: OK is not one of"),
        bad("missing request_id", rec(...), "request_id: required but missing"),
        bad("empty request_id", rec(""), "request_id: required but missing"),
        bad("cached above input", rec("cached", cached_input_tokens=1200), "cached_within_input"),
        bad("e2e before ttft", rec("e2e", e2e_ms=100.0), "e2e_after_ttft"),
        bad("queue longer than ttft", rec("queue", queue_ms=400.0), "queue_within_ttft"),
        bad("http status below 100", rec("http", status="error", output_tokens=0, ttft_ms=..., queue_ms=...,
                                         http_status=99), "http_status: 99 is below the minimum 100"),
        bad("missing deployment of a two-deployment model", rec("moe", model="moe", deployment_id=...),
            "model moe has 2 deployments in force"),
        bad("duplicate keys: neither is read", b'{"request_id": "dupkey", "tenant_id": "first", "tenant_id": '
            b'"second"' + rec("x")[rec("x").index(b", "):], 'duplicate key "tenant_id" in the object at $'),
    ],
    "dups.jsonl": [
        ok("duplicate that finished last is kept", rec("d1", e2e_ms=9000.0), e2e_ms=9000.0),
        Case("earlier copy of a duplicate is merged", rec("d1", e2e_ms=1000.0), "merged"),
        Case("identical copy is merged", rec("d2"), "merged"),
        ok("identical copy read last is kept", rec("d2")),
        bad("invalid copy of a valid request is quarantined, not merged", rec("d3", status="okay"),
            "status: okay"),
        ok("valid copy beside an invalid one is accepted", rec("d3")),
    ],
}
# Names DuckDB would read as patterns, and a name SQL must quote: each holds one line of its own.
NAMES = {
    "zz-*.jsonl": ok("file named with *", rec("glob-star")),
    "q?.jsonl": ok("file named with ?", rec("glob-question")),
    "b[1].jsonl": ok("file named with [", rec("glob-bracket")),
    "it's a file.jsonl": ok("file named with a quote and spaces", rec("quote-name")),
}
GZIP = {"zipped.jsonl.gz": [ok("gzip line", rec("gz-1")), bad("gzip NUL line", b"\x00" + rec("gz-nul"), "NUL")]}


def _write_lines(folder: Path) -> dict[tuple[str, int], Case]:
    """Write every line case; returns (file name, line number) -> case."""
    placed: dict[tuple[str, int], Case] = {}
    files = {**LINES, **{name: [case] for name, case in NAMES.items()}, **GZIP}
    for name, cases in files.items():
        body = b"\n".join(c.line for c in cases) + (b"" if name == "lines.jsonl" else b"\n")
        path = folder / name
        path.write_bytes(gzip.compress(body) if name.endswith(".gz") else body)
        placed.update({(name, i): c for i, c in enumerate(cases, start=1)})
    (folder / "empty.jsonl").write_bytes(b"")  # an empty file: no line, nothing to count
    (folder / "_SUCCESS").write_bytes(b"")  # a marker, skipped
    (folder / ".DS_Store").write_bytes(b"\x00\x01binary")  # a hidden file, skipped
    (folder / "linked.jsonl").symlink_to(folder / "q?.jsonl")  # a symlink to a file is read like the file
    placed[("linked.jsonl", 1)] = Case("symlink to a file", NAMES["q?.jsonl"].line, "merged")
    return placed


def _parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _write_parquet(folder: Path) -> dict[tuple[str, int], Case]:
    placed: dict[tuple[str, int], Case] = {}
    base = {k: v for k, v in request("x").items() if k != "request_id"}
    # A Parquet file whose tenant_id is a struct: every row is quarantined, none keeps the struct.
    struct_type = pa.struct([("prompt", pa.string())])
    schema = pa.schema([("request_id", pa.string()), ("tenant_id", struct_type)] +
                       [(k, pa.string() if isinstance(v, str) else pa.float64()) for k, v in base.items()
                        if k != "tenant_id"])
    _parquet(folder / "struct.parquet", [{**base, "request_id": "pq-struct", "tenant_id": {"prompt": SECRET}}],
             schema)
    placed[("struct.parquet", 1)] = bad("Parquet struct in a text field", b"", "tenant_id: a value of type object")
    # Integer ids and float token counts, typed by Parquet: 12.0 is 12, 12.5 is not an integer.
    typed = [{**base, "request_id": 777, "input_tokens": 1000.0}, {**base, "request_id": 778, "input_tokens": 12.5}]
    _parquet(folder / "typed.parquet", typed)
    placed[("typed.parquet", 1)] = ok("Parquet integer id and whole float count", b"", request_id="777",
                                      input_tokens=1000)
    placed[("typed.parquet", 2)] = bad("Parquet fractional count", b"", "input_tokens: 12.5 is not a valid integer")
    # A dataset folder as Spark writes one: parts, a _SUCCESS marker, .crc files, a Hive partition by tenant.
    dataset = folder / "spark.parquet"
    _parquet(dataset / "part-00000-a.snappy.parquet", [{**base, "request_id": "ds-1"}])
    _parquet(dataset / "part-00001-a.snappy.parquet", [{**base, "request_id": "ds-2"}, {**base, "request_id": "ds-3",
                                                                                        "status": "okay"}])
    without_tenant = {k: v for k, v in base.items() if k != "tenant_id"}
    _parquet(dataset / "tenant_id=team-hive" / "part-00002-a.snappy.parquet", [{**without_tenant,
                                                                                 "request_id": "ds-4"}])
    (dataset / "_SUCCESS").write_bytes(b"")
    (dataset / ".part-00000-a.snappy.parquet.crc").write_bytes(b"crc")
    parts = {"spark.parquet/part-00000-a.snappy.parquet": [ok("dataset part", b"")],
             "spark.parquet/part-00001-a.snappy.parquet": [ok("dataset second part", b""),
                                                          bad("dataset bad row", b"", "status: okay")],
             "spark.parquet/tenant_id=team-hive/part-00002-a.snappy.parquet": [
                 ok("Hive partition value fills a missing column", b"", tenant_id="team-hive")]}
    for name, cases in parts.items():
        placed.update({(name, i): c for i, c in enumerate(cases, start=1)})
    return placed


# --- billing lines -------------------------------------------------------------------------------------------------

BILLING_HEADER = ("ChargePeriodStart,ChargePeriodEnd,BillingPeriodStart,EffectiveCost,BilledCost,BillingCurrency,"
                  "ChargeCategory,ServiceCategory,ServiceName,ResourceId,SkuId,Tags")
GOOD = "2026-11-16 10:00:00,2026-11-16 11:00:00,2026-11-01,5.5,5.5,USD,Usage,Compute,EC2,i-m70-1,p5,"
BILLING = [
    ok("billing row", GOOD.encode()),
    ok("quoted field with a comma and JSON tags",
       b'2026-11-16 10:00:00,2026-11-16 11:00:00,2026-11-01,1.25,1.25,USD,Usage,Compute,"EC2, spot",i-m70-2,p5,'
       b'"{""tokenledger:deployment"": ""m70-h100""}"'),
    ok("NULL strings are missing values", b"2026-11-16 10:00:00,2026-11-16 11:00:00,NULL,2,2,USD,Usage,NULL,NULL,"
                                          b"NULL,NULL,NULL"),
    ok("credit (negative cost)", GOOD.replace("5.5,5.5", "-3,-3").encode()),
    bad("short row", b"2026-11-16 10:00:00,2026-11-16 11:00:00,2026-11-01,5.5",
        "line has fewer fields than the header's 12"),
    bad("long row", (GOOD + ",extra").encode(), "line has more fields than the header's 12"),
    bad("line that is not UTF-8", GOOD.replace("EC2", "EC\xff").encode("latin-1"), "not UTF-8"),
    bad("cost that is not a number", GOOD.replace("5.5,5.5", "abc,5.5").encode(),
        "EffectiveCost: abc is not a valid number"),
    bad("currency in lower case", GOOD.replace("USD", "usd").encode(), "BillingCurrency: usd does not match"),
    bad("charge period that ends before it starts", GOOD.replace("11:00:00", "09:00:00").encode(), ""),
]


def _write_billing(folder: Path) -> dict[tuple[str, int], Case]:
    folder.mkdir(parents=True, exist_ok=True)
    body = b"\xef\xbb\xbf" + BILLING_HEADER.encode() + b"\n" + b"\n".join(c.line for c in BILLING) + b"\n"
    (folder / "focus.csv").write_bytes(body)
    placed = {("focus.csv", i + 2): c for i, c in enumerate(BILLING)}
    # The first good row delivered again in a second export: one charge, merged.
    (folder / "zz-focus-again.csv").write_bytes(BILLING_HEADER.encode() + b"\n" + GOOD.encode() + b"\n")
    placed[("zz-focus-again.csv", 2)] = Case("billing row delivered twice", GOOD.encode(), "merged")
    return placed


# --- the day ---

def _config_home(parent: Path) -> tuple[Path, Path]:
    """A home with conftest's hand-made config and an empty gateway folder for the day."""
    home = parent / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML)
    folder = gateway_dir(home, DAY)
    folder.mkdir(parents=True)
    return home, folder


@pytest.fixture(scope="module")
def faulty_day(tmp_path_factory: pytest.TempPathFactory):
    """A home whose day holds every row-level kind, materialized once (ingest and quality assets)."""
    from tests.conftest import materialize

    home, folder = _config_home(tmp_path_factory.mktemp("faults"))
    gateway = {**_write_lines(folder), **_write_parquet(folder)}
    billing = _write_billing(home / "raw" / "billing")
    previous = os.environ.get("TOKENLEDGER_HOME")
    os.environ["TOKENLEDGER_HOME"] = str(home)
    try:
        result = materialize(DAY, selection=["core/deployments_daily", "core/gateway_requests",
                                             "core/billing_charges", "quality/quarantine",
                                             "quality/ingest_reconciliation_daily"], run_config=lenient())
    finally:
        if previous is None:
            os.environ.pop("TOKENLEDGER_HOME")
        else:
            os.environ["TOKENLEDGER_HOME"] = previous
    assert result.success, failure_text(result)
    return home, gateway, billing


def _fates(home: Path, source: str, table: str, day_dir: Path) -> tuple[dict, dict, dict]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    lake = home / "lake"
    q = con.execute("SELECT file, line, reason, raw FROM read_parquet($f) WHERE source = $s",
                    {"f": str(lake / "quality" / "quarantine" / f"day={DAY}" / "data.parquet"), "s": source}).fetchall()
    quarantined = {(str(Path(f).relative_to(day_dir)), line): (reason, raw) for f, line, reason, raw in q}
    cur = con.execute("SELECT * FROM read_parquet($f)", {"f": str(lake / "core" / table / f"day={DAY}" /
                                                                  "data.parquet")})
    names = [d[0] for d in cur.description]
    accepted = {}
    for values in cur.fetchall():
        row = dict(zip(names, values, strict=True))
        accepted[(str(Path(row["source_file"]).relative_to(day_dir)), row["source_line"])] = row
    recon = con.execute("SELECT rows_read, rows_accepted, rows_quarantined, duplicates_merged, balanced "
                        "FROM read_parquet($f) WHERE source = $s",
                        {"f": str(lake / "quality" / "ingest_reconciliation_daily" / f"day={DAY}" / "data.parquet"),
                         "s": source}).fetchone()
    return accepted, quarantined, {"recon": recon}


def _assert_fates(cases: dict[tuple[str, int], Case], accepted: dict, quarantined: dict, recon: tuple) -> None:
    problems = []
    for where, case in cases.items():
        if case.outcome == "accepted":
            row = accepted.get(where)
            if row is None:
                problems.append(f"{case.kind} {where}: not accepted ({quarantined.get(where, ('merged?',))[0]})")
                continue
            problems += [f"{case.kind} {where}: {k}={row[k]!r}, expected {v!r}" for k, v in case.check.items()
                         if row[k] != v]
        elif case.outcome == "quarantined":
            reason = quarantined.get(where, ("",))[0]
            if where not in quarantined or case.reason not in reason:
                problems.append(f"{case.kind} {where}: expected quarantine '{case.reason}', got "
                                f"{'accepted' if where in accepted else reason or 'nothing'}")
        elif where in accepted or where in quarantined:
            problems.append(f"{case.kind} {where}: expected merged, was "
                            f"{'accepted' if where in accepted else 'quarantined'}")
    assert not problems, "\n".join(problems)
    # Nothing else was accepted or quarantined: every row came from a case.
    assert set(accepted) | set(quarantined) <= set(cases)
    counts = {o: sum(c.outcome == o for c in cases.values()) for o in ("accepted", "quarantined", "merged")}
    # rows read = every physical line written (and every Parquet row), which is every case.
    assert recon == (len(cases), counts["accepted"], counts["quarantined"], counts["merged"], True)


def test_every_gateway_line_is_accepted_quarantined_or_merged(faulty_day) -> None:
    home, cases, _ = faulty_day
    folder = gateway_dir(home, DAY)
    accepted, quarantined, extra = _fates(home, "gateway", "gateway_requests", folder)
    _assert_fates(cases, accepted, quarantined, extra["recon"])
    kinds = {c.kind for c in cases.values()}
    assert len(kinds) >= 75, len(kinds)


def test_every_billing_line_is_accepted_quarantined_or_merged(faulty_day) -> None:
    home, _, cases = faulty_day
    accepted, quarantined, extra = _fates(home, "billing", "billing_charges", home / "raw" / "billing")
    _assert_fates(cases, accepted, quarantined, extra["recon"])


def test_the_quarantine_keeps_no_prompt_text_object_or_key(faulty_day) -> None:
    """Objects, keys and overlong labels are quarantined, and the quarantine keeps a placeholder instead."""
    home, _, _ = faulty_day
    con = duckdb.connect()
    found = []
    for path in sorted((home / "lake").rglob("*.parquet")):
        for needle in (SECRET, OPENAI_KEY, OPENAI_KEY[3:], AWS_KEY, "t" * 257):
            hits = con.execute("SELECT count(*) FROM read_parquet($p) t WHERE contains(t::VARCHAR, $n)",
                               {"p": str(path), "n": needle}).fetchone()[0]
            if hits:
                found.append(f"{path.relative_to(home)} holds {needle[:20]}")
    assert not found, found
    _, quarantined, _ = _fates(home, "gateway", "gateway_requests", gateway_dir(home, DAY))
    raw = {where[1]: json.loads(r) for where, (_, r) in quarantined.items() if where[0] == "fields.jsonl" and r}
    assert raw[1]["tenant_id"] == "[a JSON object was here, not kept]"
    assert raw[6]["tenant_id"] == "[looks like an API key, not kept]"
    assert raw[10]["tenant_id"].endswith("... [300 characters, not kept]") and len(raw[10]["tenant_id"]) < 120


def test_the_big_integer_is_stored_exactly(faulty_day) -> None:
    home, _, _ = faulty_day
    value = duckdb.connect().execute(
        "SELECT input_tokens FROM read_parquet($f) WHERE request_id = 'big'",
        {"f": str(home / "lake" / "core" / "gateway_requests" / f"day={DAY}" / "data.parquet")}).fetchone()[0]
    assert value == 9_007_199_254_740_993 and float(value) != value


# --- entries that stop a day ---------------------------------------------------------------------------------------

def _fatal_home(tmp_path: Path) -> tuple[HomeLayout, Path]:
    home, folder = _config_home(tmp_path)
    (folder / "good.jsonl").write_bytes(rec("good") + b"\n")
    return HomeLayout.of(home), folder


def _ingest(layout: HomeLayout, source: str) -> None:
    """One day's ingest of a source, as its asset runs it (config loaded, deployments resolved first)."""
    from tokenledger.ingest.sources import ingest_deployments_day

    window = DayWindow(date.fromisoformat(DAY))
    with compute_connection(layout.home / "tmp" / "spill") as con:
        load_config(con, layout)
        ingest_deployments_day(con, layout, window)
        fn = ingest_gateway_day if source == "gateway" else ingest_billing_day
        fn(con, layout, window, layout.home / "tmp" / "stage")


def _corrupt_gzip(folder: Path) -> Path:
    path = folder / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(rec(f"z{i}") for i in range(200)))[:-20])
    return path


FATAL_GATEWAY = {
    # kind: (make the entry, a phrase the message must hold)
    "folder named like a JSON Lines file": (lambda f: (f / "x.jsonl").mkdir() or f / "x.jsonl",
                                            "is a folder; a folder is read only as a Parquet dataset"),
    "dangling symlink": (lambda f: (f / "gone.jsonl").symlink_to(f / "nowhere.jsonl") or f / "gone.jsonl",
                         "is a dangling symlink"),
    "FIFO": (lambda f: os.mkfifo(f / "pipe.jsonl") or f / "pipe.jsonl", "is a FIFO"),
    "file of an unknown type": (lambda f: (f / "notes.txt").write_text("hi") and f / "notes.txt",
                                "not a gateway log file tokenledger can read"),
    "UTF-16 file": (lambda f: (f / "wide.jsonl").write_bytes(b"\xff\xfe" + rec("w").decode().encode("utf-16-le"))
                    and f / "wide.jsonl", "is UTF-16 text"),
    "truncated gzip": (_corrupt_gzip, "is not a readable gzip file"),
    "corrupt Parquet": (lambda f: (f / "broken.parquet").write_bytes(b"PAR1 not really") and f / "broken.parquet",
                        "cannot be read as Parquet"),
    "file with no JSON object": (lambda f: (f / "prose.jsonl").write_text("hello\nworld\n") and f / "prose.jsonl",
                                 "none of its 2 lines is a JSON object"),
    "binary file without a byte-order mark": (
        lambda f: (f / "blob.jsonl").write_bytes(b"\x00\x01\x02\n\x00\x05\n") and f / "blob.jsonl",
        "it looks like UTF-16 or a binary file"),
    "dataset with a folder that is not a partition": (
        lambda f: (f / "ds.parquet" / "extra").mkdir(parents=True) or f / "ds.parquet" / "extra",
        "is a folder inside the Parquet dataset"),
}


@pytest.mark.parametrize("kind", sorted(FATAL_GATEWAY))
def test_an_unreadable_gateway_entry_stops_the_day_naming_it(kind: str, tmp_path: Path) -> None:
    layout, folder = _fatal_home(tmp_path)
    make, phrase = FATAL_GATEWAY[kind]
    entry = make(folder)
    with pytest.raises(InputFileError) as raised:
        _ingest(layout, "gateway")
    message = str(raised.value)
    assert str(entry) in message and phrase in message, message
    assert "re-run" in message  # it says what to do
    assert not (layout.lake / "core" / "gateway_requests").exists()  # nothing of the day was written


FATAL_BILLING = {
    "UTF-16 bill": (b"\xff\xfe" + BILLING_HEADER.encode("utf-16-le"), "is UTF-16 or UTF-32 text"),
    "header that is not UTF-8": (BILLING_HEADER.replace("Tags", "T\xe4gs").encode("latin-1") + b"\n",
                                 "the header is not UTF-8 text"),
    "header naming a column twice": ((BILLING_HEADER + ",Tags\n").encode(), "names Tags more than once"),
    "export without FOCUS columns": (b"date,amount\n2026-11-16,5\n", "has no column ChargePeriodStart"),
}


@pytest.mark.parametrize("kind", sorted(FATAL_BILLING))
def test_an_unreadable_bill_stops_the_day_naming_it(kind: str, tmp_path: Path) -> None:
    layout, _ = _fatal_home(tmp_path)
    body, phrase = FATAL_BILLING[kind]
    path = layout.billing_dir / "bill.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    with pytest.raises(InputFileError) as raised:
        _ingest(layout, "billing")
    assert str(path) in str(raised.value) and phrase in str(raised.value), str(raised.value)


def test_a_landing_folder_that_is_a_file_stops_the_day(tmp_path: Path) -> None:
    (tmp_path / "dt=2026-11-16").write_text("oops")
    with pytest.raises(InputFileError, match="is a file, not a folder"):
        landing_files(tmp_path / "dt=2026-11-16", GATEWAY_FORMATS, "gateway log")


# --- configuration -------------------------------------------------------------------------------------------------

def _bomb() -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\ndeployments: *a9\n"


CONFIG_FAULTS = {
    # kind: (file, text or bytes, phrases the message must hold)
    "alias bomb": ("deployments.yaml", _bomb(), [f"more than {MAX_EXPANDED_NODES:,} nodes", "refused unread"]),
    # The size bound before anything is parsed (issue 56: 10 MB of small mappings hung the parser).
    "over the size bound": ("costs.yaml", b"versions:\n" + b"  - {a: 1}\n" * (MAX_CONFIG_BYTES // 11 + 1),
                            [f"is over {MAX_CONFIG_BYTES:,} bytes", "refused unread"]),
    "alias that contains itself": ("slo.yaml", "versions: &v [*v]\n", ["an alias refers to a node that contains"]),
    "key written twice": ("costs.yaml", "versions:\n  - price_version: a\n    price_version: b\n",
                          ["key 'price_version' appears twice", "lines 2 and 3"]),
    "unknown top-level key": ("deployments.yaml", DEPLOYMENTS_YAML + "deploymnets: []\n",
                              ["unknown key 'deploymnets' in deployments.yaml"]),
    "empty file": ("slo.yaml", "", ["the file must be a mapping, found nothing"]),
    "a list instead of a mapping": ("costs.yaml", "- a\n- b\n", ["the file must be a mapping, found a list"]),
    "not UTF-8": ("slo.yaml", b"versions:\n  - slo_version: \xff\n", ["is not UTF-8 text"]),
    "tab indentation": ("slo.yaml", "versions:\n\t- slo_version: v1\n", ["is not valid YAML at line 2"]),
}


@pytest.mark.parametrize("kind", sorted(CONFIG_FAULTS))
def test_a_broken_config_file_stops_the_run_with_its_line(kind: str, tmp_path: Path) -> None:
    layout, _ = _fatal_home(tmp_path)
    name, body, phrases = CONFIG_FAULTS[kind]
    path = layout.config / name
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(ConfigError) as raised, duckdb.connect() as con:
        load_config(con, layout)
    message = str(raised.value)
    assert str(path) in message and all(p in message for p in phrases), message


def test_a_config_of_more_nodes_than_the_bound_stops_where_it_passes_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The node bound applies while the file is read, not after it is built: the message names the line where it
    was passed (the bound lowered to 1,000 here, so that the test reads a small file: 1 for the file's mapping, 2 for
    `versions` and its list, then 3 a line, so the 1,001st node is on line 334)."""
    from tokenledger.config import source

    monkeypatch.setattr(source, "MAX_EXPANDED_NODES", 1_000)
    layout, _ = _fatal_home(tmp_path)
    path = layout.config / "costs.yaml"
    path.write_text("versions:\n" + "".join(f"  - {{a: {i}}}\n" for i in range(5_000)))
    with pytest.raises(ConfigError) as raised, duckdb.connect() as con:
        load_config(con, layout)
    assert str(raised.value) == (
        f"{path}: more than 1,000 YAML nodes by line 334 (a configuration has a few thousand at most), so it is "
        "refused unread: keep only the entries tokenledger reads in it, then re-run.")


def test_merge_keys_still_work_within_the_bound(tmp_path: Path) -> None:
    """Anchors and `<<:` merges, which the docs' deployments use for versions, are not refused."""
    layout, _ = _fatal_home(tmp_path)
    with duckdb.connect() as con:
        load_config(con, layout)  # conftest's DEPLOYMENTS_YAML versions the 70B with <<: *m70
        gpus = con.execute("SELECT list(gpus ORDER BY valid_from) FROM cfg_deployments "
                           "WHERE deployment_id = 'm70-h100'").fetchone()[0]
    assert gpus == [16, 24]


def test_the_checked_config_is_shared_by_a_databases_connections_and_follows_an_edit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's connection reads the config checked once per process; an edit between two steps is read and
    checked again, and no connection reads the earlier version afterwards; going back to an earlier version
    reads it as it was checked, without checking it again; a database on disk gets no table."""
    from tokenledger import config

    layout, _ = _fatal_home(tmp_path)
    checked: list[str] = []
    real_load_rows = config._load_rows

    def load_rows(con: duckdb.DuckDBPyConnection, rows: Any, table: Any) -> None:  # counts the tables checked
        checked.append(table.name)
        real_load_rows(con, rows, table)

    monkeypatch.setattr(config, "_load_rows", load_rows)

    def gpus(con: duckdb.DuckDBPyConnection) -> list[int]:
        return con.execute("SELECT list(gpus ORDER BY valid_from) FROM cfg_deployments "
                           "WHERE deployment_id = 'm70-h100'").fetchone()[0]

    db = duckdb.connect()
    steps = [db.cursor() for _ in range(4)]
    for step in steps[:3]:
        load_config(step, layout)
        assert gpus(step) == [16, 24]
    shared = db.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND table_name LIKE 'cfg%'")
    assert shared.fetchone()[0] == 12  # made once, when the second step found the files unchanged
    deployments = layout.config / "deployments.yaml"
    deployments.write_text(deployments.read_text().replace("gpus: 24", "gpus: 32"))
    load_config(steps[3], layout)  # read and checked again
    assert gpus(steps[3]) == [16, 32]
    for step in steps[:3]:
        load_config(step, layout)
        assert gpus(step) == [16, 32]
    deployments.write_text(deployments.read_text().replace("gpus: 32", "gpus: -1"))
    with pytest.raises(ConfigError, match="deployments.yaml"):
        load_config(db.cursor(), layout)
    on_disk = duckdb.connect(str(tmp_path / "file.duckdb"))
    deployments.write_text(deployments.read_text().replace("gpus: -1", "gpus: 24"))
    checked.clear()
    back = db.cursor()
    load_config(back, layout)  # the first version again: read as it was checked
    assert gpus(back) == [16, 24] and checked == []
    load_config(on_disk, layout)
    assert gpus(on_disk) == [16, 24]
    assert on_disk.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary").fetchone()[0] == 0


def test_duckdb_reaching_its_memory_limit_is_one_message_saying_what_to_raise(home: Path) -> None:
    """What a 100M-request day once met in core.capacity_windows and infra.slo_daily with the default 4 GB (README,
    Performance; both now bound their percentiles' memory), here with a limit no step can work in: the step fails
    with a message, not a traceback."""
    from tests.conftest import materialize

    result = materialize("2026-11-16", selection=["core/deployments_daily"], run_config={
        "resources": {"ledger": {"config": {"home": str(home), "duckdb_memory_limit": "4MB"}}}})
    text = failure_text(result)
    assert not result.success
    assert text.startswith("2026-11-16: DuckDB reached its memory limit (Out of Memory Error: "), text
    assert "Raise it (TOKENLEDGER_DUCKDB_MEMORY_LIMIT, e.g. 8GB" in text and "Traceback" not in text
