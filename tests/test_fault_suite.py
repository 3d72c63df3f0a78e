"""The fault suite: the same kinds of bad input against every input contract, each judged by the smallest real code
path that reads it (issue 56, item 8).

Every input (the canonical gateway log, the LiteLLM, OpenAI, Codex, Anthropic and OTel request formats, FOCUS
billing, nvidia-smi and Prometheus GPU telemetry, the providers' cost pages) gets the same kinds where they apply:
per field of its contract (generated from the field's type, whether it is required and its range) a value missing,
null, of the wrong JSON type, negative, over its range, fractional, beyond 64 bits, not a number ("12abc",
"1,234"), a timestamp that is not one and one without a zone; per file an empty file, blank lines, a line that is not
a record among good ones, a cut gzip, bytes that are not UTF-8, a byte-order mark, CRLF line ends, a line nested
10,000 deep, a line over the reader's limit, a key written twice, a record written twice and two copies of one id
that disagree.

The outcome of each (input, kind) is one of: quarantined (the quarantine names the line and gives a reason),
refused (the project's user error, one line naming the file), accepted, merged or skipped; never another exception,
and the day's reconciliation is balanced. The expected outcomes are written below by hand (`expected`, and
`EXPECTED` for the cases the rules do not decide); a row whose fix belongs to a file under work elsewhere is marked
xfail(strict) with what is wrong, so it flips when fixed. The table is rendered into docs/faults.md
(TOKENLEDGER_WRITE_DOCS=1 rewrites it).

Line-level kinds of one input are written into one file (a good line first, then one line or pair per case) and
judged in one ingest; if that ingest stops, each case is run on its own so that the stop is blamed on its case.
File-level kinds get a home each, copied from the input's base home.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT, request
from tests.test_api_pricing import _home
from tokenledger.contracts import load_contract
from tokenledger.errors import LedgerError
from tokenledger.ingest.lines import MAX_LINE_BYTES
from tokenledger.storage import lake
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

DAY = "2026-11-16"
WINDOW = DayWindow(date.fromisoformat(DAY))
T10 = 1794823200  # 2026-11-16T10:00:00Z in Unix seconds
DOCS = PROJECT_ROOT / "docs" / "faults.md"
BEGIN, END = "<!-- BEGIN GENERATED: fault suite -->", "<!-- END GENERATED -->"
OUTCOMES = ("quarantined", "refused", "accepted", "merged", "skipped")


# --- the inputs ------------------------------------------------------------------------------------------------------

def _litellm(n: int) -> dict[str, Any]:
    return {"request_id": f"chatcmpl-{n}", "call_type": "acompletion", "startTime": f"{DAY}T12:00:00Z",
            "endTime": f"{DAY}T12:00:02Z", "completionStartTime": f"{DAY}T12:00:00.5Z", "model": "hosted_vllm/m8",
            "model_group": "m8", "status": "success", "team_id": "team-a", "session_id": "s-1", "spend": 0.001,
            "request_duration_ms": 2000.0, "prompt_tokens": 200, "completion_tokens": 50, "total_tokens": 250,
            "metadata": {"status": "success"}}


def _openai(n: int) -> dict[str, Any]:
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": T10 + n, "model": "m8",
            "service_tier": "default", "user": "u-1", "choices": [],
            "usage": {"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600,
                      "prompt_tokens_details": {"cached_tokens": 100},
                      "completion_tokens_details": {"reasoning_tokens": 20}}}


def _anthropic(n: int) -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m8", "stop_reason": "end_turn",
            "timestamp": f"{DAY}T09:00:{n % 60:02d}Z", "tenant_id": "team-x",
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 40,
                      "output_tokens": 30, "service_tier": "standard"}}


def _codex_usage(n: int) -> dict[str, int]:
    return {"input_tokens": 400, "cached_input_tokens": 100, "output_tokens": 60, "reasoning_output_tokens": 20,
            "total_tokens": 460}


def _codex(n: int) -> dict[str, Any]:
    """A Codex token_count event: one turn. The session's meta and context lines come first in every file."""
    return {"timestamp": f"{DAY}T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z", "type": "event_msg",
            "payload": {"type": "token_count", "info": {"last_token_usage": _codex_usage(n),
                                                        "total_token_usage": {k: v * (n + 1) for k, v in
                                                                              _codex_usage(n).items()}}}}


CODEX_HEAD = [
    {"timestamp": f"{DAY}T09:59:00.000Z", "type": "session_meta",
     "payload": {"id": "0199a213-81c0-7800-8aa1-bbab2a035a53", "timestamp": f"{DAY}T09:59:00.000Z",
                 "originator": "codex_cli_rs", "cli_version": "0.46.0", "model_provider": "openai"}},
    {"timestamp": f"{DAY}T09:59:00.100Z", "type": "turn_context", "payload": {"model": "m8", "effort": "medium"}},
]


def _otel(n: int) -> dict[str, Any]:
    """One OTLP export holding one model-call span; its attributes as a plain object (see `_otlp`)."""
    return {"spanId": f"{n:016x}", "traceId": "5b8efff798038103d269b633813fc60c", "name": "chat m8",
            "startTimeUnixNano": str((T10 + n) * 10**9), "endTimeUnixNano": str((T10 + n + 1) * 10**9),
            "status": {"code": 1},
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                           "gen_ai.request.model": "m8", "gen_ai.response.model": "m8",
                           "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100,
                           "gen_ai.usage.cache_read.input_tokens": 200, "gen_ai.conversation.id": "conv-1"}}


def _otel_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # OTLP JSON writes 64-bit integers as strings
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, float):
        return {"doubleValue": v}
    if v is None:
        return {}
    return {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": json.dumps(v)}}]}}


def _otlp(span: dict[str, Any]) -> dict[str, Any]:
    """The span as the Collector's file exporter writes it: attributes as key/value pairs, in one export."""
    span = {**span, "attributes": [{"key": k, "value": _otel_value(v)} for k, v in span["attributes"].items()]}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                             "value": {"stringValue": "bot"}}]},
                               "scopeSpans": [{"scope": {"name": "genai"}, "spans": [span]}]}]}


def _billing(n: int) -> dict[str, str]:
    return {"ChargePeriodStart": f"{DAY}T10:00:00Z", "ChargePeriodEnd": f"{DAY}T11:00:00Z",
            # the day a row without a readable charge period is judged on: this one
            "BillingPeriodStart": f"{DAY}T00:00:00Z", "EffectiveCost": f"{5 + n / 100:.2f}",
            "BilledCost": f"{5 + n / 100:.2f}", "BillingCurrency": "USD", "ChargeCategory": "Usage",
            "ServiceCategory": "Compute", "ServiceName": "EC2", "ResourceId": f"i-m70-{n}", "SkuId": "p5",
            "ConsumedQuantity": "1", "Tags": '{"tokenledger:deployment": "m70-h100"}'}


SMI_HEADER = ["timestamp", "uuid", "index", "power.draw [W]", "utilization.gpu [%]", "memory.used [MiB]"]
SMI_FIELDS = dict(zip(["timestamp", "uuid", "index", "power_draw", "utilization_gpu", "memory_used"], SMI_HEADER,
                      strict=True))


def _smi(n: int) -> dict[str, str]:
    return {"timestamp": f"2026/11/16 10:{n // 60 % 60:02d}:{n % 60:02d}.000", "uuid": "GPU-z0", "index": "0",
            "power.draw [W]": "250.00 W", "utilization.gpu [%]": "87 %", "memory.used [MiB]": "1234 MiB"}


def _prometheus(n: int) -> dict[str, Any]:
    """One series of one sample: the labels and the [time, "value"] pair, as a flat record (see `_prom_doc`)."""
    return {"__name__": "DCGM_FI_DEV_POWER_USAGE", "Hostname": "node-a", "gpu": "0", "UUID": f"GPU-a{n}",
            "modelName": "NVIDIA H100", "namespace": "llm", "pod": "m70-0", "timestamp": T10 + n, "value": "300"}


def _prom_series(record: dict[str, Any]) -> dict[str, Any]:
    labels = {k: v for k, v in record.items() if k not in ("timestamp", "value")}
    pair = [record[k] for k in ("timestamp", "value") if k in record]
    return {"metric": labels, "values": [pair]}


def _prom_doc(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": [_prom_series(r) for r in records]}}


def _page(n: int) -> dict[str, Any]:
    """One result of an Anthropic cost report page (one bucket of the day)."""
    return {"currency": "USD", "amount": "2.5", "workspace_id": None, "description": f"Claude Opus Usage {n}",
            "cost_type": "tokens", "context_window": "0-200k", "model": "opus", "service_tier": "standard",
            "token_type": "uncached_input_tokens"}


def _page_doc(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"data": [{"starting_at": f"{DAY}T00:00:00Z", "ending_at": "2026-11-17T00:00:00Z", "results": results}],
            "has_more": False, "next_page": None}


@dataclass(frozen=True)
class Field:
    """A contract field as the suite mutates it: where it sits in the base record, its type and its bounds."""

    name: str
    path: tuple[str, ...]
    kind: str  # string | integer | number | timestamp | boolean
    required: bool
    minimum: float | None
    maximum: float | None


@dataclass(frozen=True)
class Input:
    name: str
    title: str
    form: str  # jsonl | csv | prometheus | page
    folder: str  # under the home
    file: str
    good: Callable[[int], dict[str, Any]]
    contract: str
    stage: str  # requests | billing | gpu | provider_costs
    head: tuple[dict[str, Any], ...] = ()  # lines every file starts with (Codex's session meta)
    header: tuple[str, ...] = ()  # a CSV's header
    # contract field -> path in the base record, where the contract's own path does not say (CSV, Prometheus)
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)


INPUTS = {i.name: i for i in [
    Input("gateway", "gateway log", "jsonl", f"raw/gateway/dt={DAY}", "a.jsonl", lambda n: request(f"r-{n}"),
          "gateway_request", "requests"),
    Input("litellm", "LiteLLM spend log", "jsonl", f"raw/litellm/dt={DAY}", "a.jsonl", _litellm, "source_litellm",
          "requests"),
    Input("openai", "OpenAI responses", "jsonl", f"raw/openai/dt={DAY}", "a.jsonl", _openai, "source_openai",
          "requests"),
    Input("codex", "Codex session", "jsonl", f"raw/openai/dt={DAY}", "a.jsonl", _codex, "source_codex", "requests",
          head=tuple(CODEX_HEAD)),
    Input("anthropic", "Anthropic messages", "jsonl", f"raw/anthropic/dt={DAY}", "a.jsonl", _anthropic,
          "source_anthropic", "requests"),
    Input("otel", "OTel GenAI spans", "jsonl", f"raw/otel/dt={DAY}", "a.jsonl", _otel, "source_otel", "requests"),
    Input("billing", "FOCUS billing", "csv", "raw/billing", "focus.csv", _billing, "focus_billing", "billing",
          header=tuple(_billing(0))),
    Input("nvidia_smi", "nvidia-smi log", "csv", f"raw/gpu/dt={DAY}", "node-z.csv", _smi, "gpu_nvidia_smi", "gpu",
          header=tuple(SMI_HEADER), paths={k: (v,) for k, v in SMI_FIELDS.items()}),
    Input("prometheus", "Prometheus DCGM", "prometheus", f"raw/gpu/dt={DAY}", "dcgm.json", _prometheus,
          "gpu_prometheus", "gpu", paths={"metric": ("__name__",)}),
    Input("provider_costs", "provider cost page", "page", "raw/provider_costs", "anthropic.json", _page, "", "cost"),
]}


def _kind_of(physical: str, logical: str) -> str:
    p = physical.upper()
    if p in ("BIGINT", "INTEGER"):
        return "integer"
    if p == "DOUBLE" or p.startswith("DECIMAL"):
        return "number"
    if p.startswith("TIMESTAMP"):
        return "timestamp"
    if p == "BOOLEAN":
        return "boolean"
    return "string"


def _json_path(path: str) -> tuple[str, ...]:
    """`$.a.b."c.d"` -> ("a", "b", "c.d")."""
    return tuple(m.group(1) or m.group(2) for m in re.finditer(r'\.(?:"([^"]+)"|([^."]+))', path))


def _get(record: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(record, dict) or key not in record:
            raise KeyError(key)
        record = record[key]
    return record


def fields(inp: Input) -> list[Field]:
    """The contract's fields the base record holds, each with where it holds it: the fields the suite mutates."""
    if not inp.contract:
        return []
    base = inp.good(1)
    found = []
    for col in load_contract(inp.contract).table().columns:
        candidates = [inp.paths[col.name]] if col.name in inp.paths else (
            [_json_path(p) for p in col.paths] if col.paths else [(col.name,)])
        for path in candidates:
            try:
                _get(base, path)
            except KeyError:
                continue
            found.append(Field(col.name, path, _kind_of(col.physical_type, col.logical_type),
                               col.required or bool(col.required_when), col.minimum, col.maximum))
            break
    return found


# --- the kinds -------------------------------------------------------------------------------------------------------

MISSING = object()  # drop the field


def field_values(f: Field, form: str, base: Any) -> dict[str, Any]:
    """Kind -> the value a field gets, by the field's type. CSV values are text; MISSING drops a JSON field."""
    text = form in ("csv",)
    values: dict[str, Any] = {}
    if not text:
        values["missing"] = MISSING
    values["null"] = "" if text else None
    if not text:
        values["object for " + {"string": "a string", "integer": "an integer", "number": "a number",
                                  "timestamp": "a timestamp", "boolean": "a boolean"}[f.kind]] = {"v": 1}
    if f.kind in ("integer", "number"):
        if not text:
            values["string for a number"] = "12abc"  # a JSON string that is no number
        else:
            values["non-numeric text"] = "12abc"
        values["thousands separator"] = "1,234"
        values["negative"] = "-5" if text else -5
        if f.maximum is not None:
            values["over the maximum"] = str(int(f.maximum) + 1) if text else int(f.maximum) + 1
    if f.kind == "integer":
        values["fraction for an integer"] = "12.5" if text else 12.5
        values["integer beyond 64 bits"] = str(2**64) if text else 2**64
    if f.kind == "timestamp":
        values["not a timestamp"] = "2026-13-45T25:61:00Z"
        if isinstance(base, str) and base.endswith("Z"):  # not an epoch number, not a log that has no zone anyway
            values["timestamp without a zone"] = base[:-1]
    return values


def _set(record: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    record = json.loads(json.dumps(record))
    target = record
    for key in path[:-1]:
        target = target[key]
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return record


@dataclass
class Case:
    input: str
    kind: str
    expected: str
    reason: str = ""  # a phrase the quarantine reason or the refusal must hold
    open: str | None = None  # why the expected outcome is not yet the actual one (xfail)
    records: list[Any] = field(default_factory=list)  # line-level: the records (or raw bytes) of the case
    raw: bytes | None = None  # file-level: the whole file
    name: str | None = None  # file-level: its name, if not the input's

    @property
    def id(self) -> str:
        return f"{self.input}: {self.kind}"


def _tweak(inp: Input, f: Field, kind: str) -> tuple[str, str]:
    """The careful user's outcome of a field kind, from the field's contract: (outcome, phrase of the reason)."""
    if kind in ("missing", "null"):
        return ("quarantined", f"{f.name}: required") if f.required else ("accepted", "")
    if kind == "negative":
        return ("quarantined", "below the minimum") if f.minimum is not None and f.minimum >= 0 else ("accepted", "")
    if kind == "timestamp without a zone":
        return "accepted", ""  # UTC, as the contracts say
    return "quarantined", f.name


def line_cases() -> list[Case]:
    cases = []
    for inp in INPUTS.values():
        if inp.form == "page":
            continue
        for f in fields(inp):
            for kind, value in field_values(f, inp.form, _get(inp.good(1), f.path)).items():
                outcome, reason = _tweak(inp, f, kind)
                if inp.form == "csv":  # the reason names the header's column
                    reason = reason.replace(f.name, f.path[-1])
                record = _set(inp.good(100 + len(cases)), f.path, value)
                cases.append(Case(inp.name, f"{f.name}: {kind}", outcome, reason, records=[record]))
    return cases


# --- running a day -------------------------------------------------------------------------------------------------

def _encode(inp: Input, records: list[Any]) -> bytes:
    """A file of `records` in the input's form (raw bytes kept as written)."""
    if inp.form == "jsonl":
        lines = [r if isinstance(r, bytes) else json.dumps(_otlp(r) if inp.name == "otel" else r).encode()
                 for r in [*inp.head, *records]]
        return b"".join(line + b"\n" for line in lines)
    if inp.form == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(inp.header)
        body = out.getvalue().encode()
        for r in records:
            if isinstance(r, bytes):
                body += r + b"\n"
                continue
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerow([r.get(h, "") for h in inp.header])
            body += out.getvalue().encode()
        return body
    if inp.form == "prometheus":
        return json.dumps(_prom_doc(records), indent=1).encode()
    return json.dumps(_page_doc(records)).encode()


def _first_line(inp: Input) -> int:
    """The number of the first line (row, sample) that holds a case's record."""
    return len(inp.head) + (2 if inp.form == "csv" else 1)


@dataclass
class Result:
    outcome_by_line: dict[int, list[tuple[str, str]]]  # line -> [(fate, reason)]
    refused: str | None = None
    balanced: bool | None = None
    rows_read: int | None = None


def _day(home: Path, inp: Input) -> Result:
    """Run the input's day on `home` and what became of each line of its file."""
    from tokenledger.config import load_config
    from tokenledger.cost.day import build_api_request_costs, build_provider_cost_reconciliation
    from tokenledger.ingest.gpu import ingest_gpu_day
    from tokenledger.ingest.sources import ingest_billing_day, ingest_deployments_day, ingest_gateway_day
    from tokenledger.storage.duck import compute_connection

    layout = HomeLayout.of(home)
    scratch = home / "tmp" / "stage"
    with compute_connection(home / "tmp" / "spill") as con:
        load_config(con, layout)
        ingest_deployments_day(con, layout, WINDOW)
        try:
            if inp.stage == "requests":
                counts = {c.source: c for c in ingest_gateway_day(con, layout, WINDOW, scratch, idle=True)}
                count = counts.get("openai" if inp.name == "codex" else inp.name)
                relation, accepted = "checked_gateway", "gateway_requests"
            elif inp.stage == "billing":
                count, relation, accepted = ingest_billing_day(con, layout, WINDOW, scratch), "billing_day", None
            elif inp.stage == "gpu":
                count, relation, accepted = ingest_gpu_day(con, layout, WINDOW, scratch), "gpu_day", None
            else:
                ingest_gateway_day(con, layout, WINDOW, scratch, idle=True)
                build_api_request_costs(con, layout, WINDOW)
                build_provider_cost_reconciliation(con, layout, WINDOW, 0.01)
                path = lake.day_file(layout.lake, "finance", "provider_cost_reconciliation_daily", WINDOW.day)
                (total,) = con.execute("SELECT sum(provider_cost) FROM read_parquet($p)", {"p": str(path)}).fetchone()
                # The base page holds one result of 0.025 USD: counted once, or more than once, or lost.
                fate = {None: "lost", 0.025: "accepted"}.get(None if total is None else float(total), "counted twice")
                return Result({1: [(fate, "")]}, balanced=True)
        except LedgerError as exc:
            return Result({}, refused=str(exc))
        return _fates(con, layout, inp, relation, accepted, count)


def _fates(con: duckdb.DuckDBPyConnection, layout: HomeLayout, inp: Input, relation: str, accepted: str | None,
           count: Any) -> Result:
    file = str(home_file(layout.home, inp))
    if count is None:
        return Result({}, balanced=True, rows_read=0)
    quarantine = lake.day_file(layout.lake, "quality_parts", f"quarantine_{inp.stage}", WINDOW.day)
    reasons: dict[int, list[str]] = {}
    for line, reason in con.execute("SELECT line, reason FROM read_parquet($p) WHERE file = $f",
                                    {"p": str(quarantine), "f": file}).fetchall():
        assert line is not None and reason, f"a quarantined row without its line or reason: {line} {reason}"
        reasons.setdefault(line, []).append(reason)
    if inp.stage == "requests":
        kept = lake.day_file(layout.lake, "core", accepted, WINDOW.day)
        rows = con.execute(
            f"SELECT c.source_line, CASE WHEN c.skipped THEN 'skipped' WHEN c.reason IS NOT NULL THEN 'quarantined' "
            f"WHEN a.source_line IS NOT NULL THEN 'accepted' ELSE 'merged' END FROM {relation} AS c "
            f"LEFT JOIN (SELECT DISTINCT source_file, source_line, request_id FROM read_parquet($k)) AS a "
            f"ON c.reason IS NULL AND a.source_file = c.source_file AND a.source_line = c.source_line "
            f"AND a.request_id = c.request_id WHERE c.source_file = $f", {"k": str(kept), "f": file}).fetchall()
    elif inp.stage == "gpu":
        rows = con.execute(
            f"SELECT source_line, CASE WHEN skipped THEN 'skipped' WHEN reason IS NOT NULL THEN 'quarantined' "
            f"WHEN duplicate THEN 'merged' ELSE 'accepted' END FROM {relation} WHERE source_file = $f",
            {"f": file}).fetchall()
    else:
        rows = con.execute(
            f"SELECT source_line, CASE WHEN reason IS NOT NULL THEN 'quarantined' WHEN d.row_fingerprint IS NOT NULL "
            f"AND b.file_index <> d.kept_file_index THEN 'merged' ELSE 'accepted' END FROM {relation} AS b "
            f"LEFT JOIN billing_duplicates AS d ON b.reason IS NULL AND d.row_fingerprint = b.row_fingerprint "
            f"WHERE source_file = $f", {"f": file}).fetchall()
    fates: dict[int, list[tuple[str, str]]] = {}
    for line, fate in rows:
        reason = reasons.get(line, [""]).pop(0) if fate == "quarantined" and reasons.get(line) else ""
        if fate == "quarantined":
            assert reason, f"line {line} counted quarantined but not in the quarantine"
        fates.setdefault(line, []).append((fate, reason))
    return Result(fates, balanced=count.balanced, rows_read=count.rows_read)


def home_file(home: Path, inp: Input, name: str | None = None) -> Path:
    return home / inp.folder / (name or inp.file)


@pytest.fixture(scope="module")
def base_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config every case's home is copied from (the deployments of tests/test_api_pricing.py: m70, m8, the
    hosted APIs)."""
    return _home(tmp_path_factory.mktemp("fault-suite") / "base")


def _copy(base: Path, where: Path) -> Path:
    shutil.copytree(base, where)
    return where


def _classify(fates: list[tuple[str, str]]) -> tuple[str, str]:
    """One outcome for a case's lines: the worst of their fates (the baseline's own line excluded)."""
    for outcome in ("lost", "quarantined", "merged", "skipped", "accepted"):
        found = [reason for fate, reason in fates if fate == outcome]
        if found:
            return outcome, found[0]
    return "lost", ""


def _deep() -> bytes:
    return b'{"a": ' * 10_000 + b"1" + b"}" * 10_000


def _long() -> bytes:
    return b'{"request_id": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}'


def _dup_key(inp: Input, n: int) -> bytes:
    """A good record whose first field is written a second time with another value."""
    text = json.dumps(_otlp(inp.good(n)) if inp.name == "otel" else inp.good(n))
    if inp.name == "otel":  # the export's one key again, holding no span
        return (text[:-1] + ', "resourceSpans": []}').encode()
    key = next(iter(inp.good(n)))
    return (text[:-1] + f', "{key}": "other"}}').encode()


def _conflict(inp: Input, n: int) -> dict[str, Any]:
    """Another copy of good(n) that disagrees on a count."""
    record = inp.good(n)
    for f in fields(inp):
        if f.kind in ("integer", "number") and f.name not in ("gpu", "index"):
            value = _get(record, f.path)
            if isinstance(value, str):  # a CSV value, with its unit maybe ("250.00 W")
                return _set(record, f.path, re.sub(r"[\d.]+", lambda m: str(float(m.group()) + 7), value, count=1))
            return _set(record, f.path, value + 7)
    raise AssertionError(f"{inp.name} has no count to change")


def _gzip_cut(inp: Input) -> bytes:
    return gzip.compress(_encode(inp, [inp.good(i) for i in range(200)]))[:-20]


def _crlf(body: bytes) -> bytes:
    return body.replace(b"\n", b"\r\n")


def _non_utf8(inp: Input, n: int) -> bytes | dict[str, Any]:
    """good(n) with a byte that is not UTF-8 in a text field."""
    text = _encode(inp, [inp.good(n)]).splitlines()[-1]
    return text.replace(b'": "', b'": "\xff', 1) if inp.form == "jsonl" else text.replace(b",", b",\xff", 1)


def file_cases() -> list[Case]:
    """The file-level kinds of each input, with their expected outcomes."""
    cases: list[Case] = []

    def add(inp: Input, kind: str, expected: str, reason: str = "", records: list[Any] | None = None,
            raw: bytes | None = None, name: str | None = None) -> None:
        cases.append(Case(inp.name, kind, expected, reason, records=records or [], raw=raw, name=name))

    for inp in INPUTS.values():
        g = inp.good
        if inp.form in ("jsonl", "csv"):
            # An empty JSON Lines log is an hour without traffic; a CSV without its header is no export.
            add(inp, "empty file", "accepted" if inp.form == "jsonl" else "refused",
                "" if inp.form == "jsonl" else "line 1" if inp.stage == "gpu" else "has no column", raw=b"")
            # A JSON Lines file without one record is not a log (a blank line among records is quarantined).
            add(inp, "only blank lines", "refused" if inp.form == "jsonl" else "accepted",
                "is a JSON object" if inp.form == "jsonl" else "",
                raw=_encode(inp, [])[: -1 if inp.form == "jsonl" and not inp.head else None] + b"\n\n\n")
            add(inp, "a line that is not a record among good ones", "quarantined",
                "not valid JSON" if inp.form == "jsonl" else "fields",
                records=[b"not json" if inp.form == "jsonl" else b"oops", g(2)])
            add(inp, "truncated gzip", "refused", "gzip" if inp.form == "jsonl" else "truncated or corrupt",
                raw=_gzip_cut(inp), name=inp.file + ".gz")
            add(inp, "bytes that are not UTF-8", "quarantined", "UTF-8", records=[_non_utf8(inp, 3)])
            add(inp, "UTF-8 byte-order mark", "accepted", raw=b"\xef\xbb\xbf" + _encode(inp, [g(1), g(2)]))
            add(inp, "CRLF line ends", "accepted", raw=_crlf(_encode(inp, [g(1), g(2)])))
            if inp.form == "jsonl":
                add(inp, "a line nested 10,000 deep", "quarantined", records=[_deep()])
                add(inp, "a line over the reader's limit", "quarantined", "longer than", records=[_long()])
                add(inp, "a key written twice", "quarantined", records=[_dup_key(inp, 4)])
            else:
                add(inp, "a line over the reader's limit", "quarantined", "",
                    records=[{**g(4), inp.header[1]: "x" * (MAX_LINE_BYTES + 10)}])
                add(inp, "a column named twice", "refused", "more than once",
                    raw=_encode(inp, [g(1)]).replace(b"\n", b"," + inp.header[-1].encode() + b"\n", 1))
            # The same record twice: a request merged; a bill's row twice in one export is two charges (an export
            # lists a repeated charge twice), a GPU sample merged.
            add(inp, "the same record twice", "accepted" if inp.name == "billing" else "merged",
                records=[g(5), g(5)])
            if inp.name != "billing":  # a FOCUS row has no id
                # two copies of one request: the one that finished last is kept (docs/inputs.md); two values of
                # one GPU sample: neither can be told right, both quarantined.
                add(inp, "two copies of one id that disagree", "quarantined" if inp.stage == "gpu" else "merged",
                    "conflicting" if inp.stage == "gpu" else "", records=[g(6), _conflict(inp, 6)])
        elif inp.form == "prometheus":
            add(inp, "empty file", "refused", "", raw=b"")
            add(inp, "only blank lines", "refused", "", raw=b"\n\n\n")
            add(inp, "text after the document", "refused", "", raw=_encode(inp, [g(1)]) + b"\nnot json\n")
            cut = gzip.compress(_encode(inp, [g(i) for i in range(200)]))[:-20]
            add(inp, "truncated gzip", "refused", "", raw=cut, name=inp.file + ".gz")
            add(inp, "bytes that are not UTF-8", "refused", "UTF-8",
                raw=_encode(inp, [g(1)]).replace(b"node-a", b"node\xff-a"))
            add(inp, "UTF-8 byte-order mark", "accepted", raw=b"\xef\xbb\xbf" + _encode(inp, [g(1), g(2)]))
            add(inp, "CRLF line ends", "accepted", raw=_crlf(_encode(inp, [g(1), g(2)])))
            # a key that is not read, however deep: ignored
            add(inp, "a document nested 10,000 deep", "accepted",
                raw=_encode(inp, [g(1)])[:-1] + b', "extra": ' + _deep() + b"}")
            # A label twice in one series: Prometheus never writes one; DuckDB's map refuses the file, naming it.
            add(inp, "a key written twice", "refused", "",
                raw=_encode(inp, [g(1)]).replace(b'"UUID": "GPU-a1"', b'"UUID": "GPU-a1", "UUID": "GPU-b1"'))
            add(inp, "the same record twice", "merged", records=[g(5), g(5)])
            add(inp, "two copies of one id that disagree", "quarantined", "conflicting",
                records=[g(6), {**g(6), "value": "500"}])
        else:
            page = _encode(inp, [g(1)])
            add(inp, "empty file", "refused", "empty file", raw=b"")
            add(inp, "only blank lines", "refused", "", raw=b"\n\n\n")
            add(inp, "text after the document", "refused", "", raw=page + b"\nnot json\n")
            add(inp, "bytes that are not UTF-8", "refused", "", raw=page.replace(b"Opus", b"Op\xffus"))
            add(inp, "UTF-8 byte-order mark", "accepted", raw=b"\xef\xbb\xbf" + page)
            add(inp, "CRLF line ends", "accepted", raw=json.dumps(_page_doc([g(1)]), indent=1).encode()
                .replace(b"\n", b"\r\n"))
            add(inp, "a document nested 10,000 deep", "accepted", raw=page[:-1] + b', "extra": ' + _deep() + b"}")
            add(inp, "a key written twice", "refused", "", raw=page.replace(b'"amount": "2.5"',
                                                                             b'"amount": "2.5", "amount": "9"'))
            add(inp, "the same page twice", "merged", raw=page)
            for kind, value in (("amount: not a number", "12abc"), ("amount: thousands separator", "1,234"),
                                ("amount: missing", MISSING), ("amount: object for a number", {"v": 1})):
                add(inp, kind, "refused", "amount", raw=_encode(inp, [_set(g(1), ("amount",), value)]))
            add(inp, "currency: missing", "refused", "currency",
                raw=_encode(inp, [_set(g(1), ("currency",), MISSING)]))
            doc = _page_doc([g(1)])
            for kind, value, outcome in (("starting_at: not a timestamp", "2026-13-45T25:61:00Z", "refused"),
                                         ("starting_at: timestamp without a zone", "2026-11-16 00:00:00", "accepted"),
                                         ("starting_at: missing", MISSING, "refused")):
                bucket = _set(doc["data"][0], ("starting_at",), value)
                add(inp, kind, outcome, "" if outcome == "accepted" else "starting_at",
                    raw=json.dumps({**doc, "data": [bucket]}).encode())
    return cases


# --- the expected outcomes the rules above do not decide, and the rows still open -----------------------------------

# id -> (expected outcome, phrase of the reason, why it is open or None)
DEPLOYMENT = "name deployments that config/deployments.yaml does not have"
EXPECTED: dict[str, tuple[str, str, str | None]] = {
    # Optional in the source's contract, but what the request is accounted by: the mapping requires them.
    "litellm: completionStartTime: missing": ("quarantined", "completionStartTime - startTime: required", None),
    "litellm: completionStartTime: null": ("quarantined", "completionStartTime - startTime: required", None),
    # Without the public model name, LiteLLM's provider model (hosted_vllm/m8) is no deployment: the day stops.
    "litellm: model_group: missing": ("refused", DEPLOYMENT, None),
    "litellm: model_group: null": ("refused", DEPLOYMENT, None),
    "openai: object: missing": ("quarantined", "object: missing", None),
    "openai: object: null": ("quarantined", "object: missing", None),
    "openai: object: object for a string": ("quarantined", "object", None),
    "openai: created: missing": ("quarantined", "created (or created_at): required", None),
    "openai: created: null": ("quarantined", "created (or created_at): required", None),
    "openai: model: missing": ("quarantined", "model: required", None),
    "openai: model: null": ("quarantined", "model: required", None),
    "openai: prompt_tokens: missing": ("quarantined", "prompt_tokens (or input_tokens): required", None),
    "openai: prompt_tokens: null": ("quarantined", "prompt_tokens (or input_tokens): required", None),
    "openai: completion_tokens: missing": ("quarantined", "completion_tokens (or output_tokens): required", None),
    "openai: completion_tokens: null": ("quarantined", "completion_tokens (or output_tokens): required", None),
    "codex: type: object for a string": ("quarantined", "type", None),
    "codex: timestamp: missing": ("quarantined", "timestamp: required", None),
    "codex: timestamp: null": ("quarantined", "timestamp: required", None),
    "codex: input_tokens: missing": ("quarantined", "input_tokens and output_tokens", None),
    "codex: input_tokens: null": ("quarantined", "input_tokens and output_tokens", None),
    "codex: output_tokens: missing": ("quarantined", "input_tokens and output_tokens", None),
    "codex: output_tokens: null": ("quarantined", "input_tokens and output_tokens", None),
    # An event_msg carrying token usage without payload.type may be a token count: neither counted nor skipped.
    "codex: payload_type: missing": ("quarantined", "payload_type: required", None),
    "codex: payload_type: null": ("quarantined", "payload_type: required", None),
    # A Codex session's file holds its meta lines, so blank lines are quarantined among them, not the file refused.
    "codex: only blank lines": ("quarantined", "empty line", None),
    "anthropic: timestamp: missing": ("quarantined", "timestamp: missing", None),
    "anthropic: timestamp: null": ("quarantined", "timestamp: missing", None),
    "otel: input_tokens: missing": ("quarantined", "required on a call that did not fail", None),
    "otel: input_tokens: null": ("quarantined", "required on a call that did not fail", None),
    "otel: output_tokens: missing": ("quarantined", "required on a call that did not fail", None),
    "otel: output_tokens: null": ("quarantined", "required on a call that did not fail", None),
    # nvidia-smi's measures take their ranges from gpu_measures, shared with the Prometheus form.
    **{f"nvidia_smi: {name}: negative": ("quarantined", "is below the minimum 0", None)
       for name in ("power_draw", "utilization_gpu", "memory_used")},
    # A pair of one element: which of time and value is missing cannot be told.
    "prometheus: timestamp: missing": ("quarantined", "required but missing", None),
    # An attribute of another OTLP value type (a kvlistValue here) is never read as absent: the reason names both.
    **{f"otel: {name}: object for {kind}": ("quarantined", f"{name} (attribute ", None)
       for name, kind in (("operation_name", "a string"), ("provider_name", "a string"), ("request_model", "a string"),
                          ("response_model", "a string"), ("cache_read_tokens", "an integer"),
                          ("conversation_id", "a string"))},
    # A JSON object without resourceSpans is no OTLP export (one whose resourceSpans is empty is skipped).
    "otel: a line nested 10,000 deep": ("quarantined", "not an OTLP export", None),
    # A label the file holds as an object is never read as its JSON text (nor a series of another metric skipped).
    **{f"prometheus: {name}: object for a string": ("quarantined", f"{name}: a value of type object", None)
       for name in ("metric", "UUID", "Hostname", "modelName", "namespace", "pod")},
    "provider_costs: a key written twice": ("refused", "amount", None),
}


@dataclass
class Observed:
    outcome: str
    reason: str = ""
    balanced: bool | None = True


def _run(base: Path, where: Path, inp: Input, files: dict[str, bytes]) -> Result:
    home = _copy(base, where)
    for name, body in files.items():
        path = home_file(home, inp, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    try:
        return _day(home, inp)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _observe(result: Result, lines: list[int] | None, inp: Input, file: str, body: bytes) -> Observed:
    """The case's outcome from what became of its lines (`lines`: the case's, or None for every line of the file)."""
    if result.refused is not None:
        message = result.refused
        # One line naming the file; a refusal that lists what to add (deployments a log names that the inventory does
        # not have) names the file on its list's lines.
        clear = file in message and "Traceback" not in message
        return Observed("refused" if clear else "refused, unclear", message, None)
    fates = [f for line, fs in result.outcome_by_line.items() for f in fs
             if (line in lines if lines is not None else line > len(inp.head))]
    if lines is not None:
        fates += [("lost", "") for line in lines if line not in result.outcome_by_line]
    if not fates:
        content = body.split(b"\n", 1)[1] if inp.form == "csv" and b"\n" in body else body
        return Observed("accepted" if not content.strip() else "lost", "", result.balanced)
    outcome, reason = _classify(fates)
    return Observed(outcome, reason, result.balanced)


def _lines_of(inp: Input, start: int, records: list[Any]) -> list[int]:
    return list(range(start, start + len(records)))


def _crash(exc: BaseException) -> Observed:
    return Observed(f"crash: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200], "", None)


def observe_all(base: Path, tmp: Path) -> dict[str, Observed]:
    observed: dict[str, Observed] = {}
    n = 0
    for inp in INPUTS.values():
        # A case expected to stop the day, or still open (a crash among them), runs alone: the batch is for cases that
        # leave the day standing.
        alone = [c for c in LINE_CASES if c.input == inp.name and (c.expected == "refused" or c.open)]
        batch = [c for c in LINE_CASES if c.input == inp.name and c not in alone]
        for case in alone:
            n += 1
            observed[case.id] = _file_case(base, tmp / f"c{n}", inp, case)
        if batch:
            records = [inp.good(0)]
            spans = {}
            line = _first_line(inp) + 1
            for case in batch:
                spans[case.id] = _lines_of(inp, line, case.records)
                records += case.records
                line += len(case.records)
            body = _encode(inp, records)
            n += 1
            try:
                result = _run(base, tmp / f"c{n}", inp, {inp.file: body})
            except Exception as exc:  # noqa: BLE001 - a crash is an outcome, judged per case below
                result = Result({}, refused=f"crash {exc!r}")
            if result.refused is None:
                for case in batch:
                    observed[case.id] = _observe(result, spans[case.id], inp, inp.file, body)
            else:
                observed.update(_bisect(base, tmp / f"c{n}", inp, batch))
        for case in FILE_CASES:
            if case.input == inp.name:
                n += 1
                observed[case.id] = _file_case(base, tmp / f"c{n}", inp, case)
    return observed


def _bisect(base: Path, tmp: Path, inp: Input, batch: list[Case]) -> dict[str, Observed]:
    """The cases of a batch that stopped, in halves until the case that stops it is alone."""
    if len(batch) == 1:
        return {batch[0].id: _file_case(base, tmp / "1", inp, batch[0])}
    found: dict[str, Observed] = {}
    for i, half in enumerate((batch[:len(batch) // 2], batch[len(batch) // 2:])):
        records = [inp.good(0)]
        spans = {}
        for case in half:
            spans[case.id] = _lines_of(inp, _first_line(inp) + len(records), case.records)
            records += case.records
        body = _encode(inp, records)
        try:
            result = _run(base, tmp / f"h{i}", inp, {inp.file: body})
        except Exception as exc:  # noqa: BLE001 - judged per case below
            result = Result({}, refused=f"crash {exc!r}")
        if result.refused is None:
            found.update({c.id: _observe(result, spans[c.id], inp, inp.file, body) for c in half})
        else:
            found.update(_bisect(base, tmp / f"h{i}", inp, half))
    return found


def _file_case(base: Path, where: Path, inp: Input, case: Case) -> Observed:
    name = case.name or inp.file
    if case.raw is not None:
        body, lines = case.raw, None
    else:
        body = _encode(inp, [inp.good(0), *case.records])
        lines = _lines_of(inp, _first_line(inp) + 1, case.records)
    files = {name: body}
    if case.kind == "the same page twice":
        files["anthropic-again.json"] = body
    try:
        result = _run(base, where, inp, files)
    except Exception as exc:  # noqa: BLE001 - a crash is an outcome
        return _crash(exc)
    observed = _observe(result, lines, inp, name, body)
    if case.kind == "the same page twice" and observed.outcome == "accepted":
        observed.outcome = "merged"  # counted once
    return observed


def _cases() -> list[Case]:
    cases = LINE_CASES + FILE_CASES
    for case in cases:
        if case.id in EXPECTED:
            case.expected, case.reason, case.open = EXPECTED[case.id]
    return cases


LINE_CASES = line_cases()
FILE_CASES = file_cases()
CASES = _cases()
assert len({c.id for c in CASES}) == len(CASES), "two cases of one id"
assert not set(EXPECTED) - {c.id for c in CASES}, set(EXPECTED) - {c.id for c in CASES}


@pytest.fixture(scope="module")
def observed(base_home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Observed]:
    return observe_all(base_home, tmp_path_factory.mktemp("fault-cases"))


def _param(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=case.open)] if case.open else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_each_fault_has_its_expected_outcome(case: Case, observed: dict[str, Observed]) -> None:
    got = observed[case.id]
    assert got.outcome in OUTCOMES, f"{case.id}: {got.outcome} {got.reason}"
    assert got.outcome == case.expected, (f"{case.id}: expected {case.expected}, got {got.outcome}: "
                                         f"{got.reason}")
    assert case.reason.lower() in got.reason.lower(), f"{case.id}: {got.reason!r} does not say {case.reason!r}"
    assert got.balanced is not False, f"{case.id}: the day's reconciliation does not balance"


# --- the table in docs/faults.md --------------------------------------------------------------------------------------

def _first_words(reason: str, words: int = 7) -> str:
    text = re.sub(r"/\S+", "<file>", reason.splitlines()[0] if reason else "")
    cut = text.split()
    return " ".join(cut[:words]) + (" ..." if len(cut) > words else "")


def render(observed: dict[str, Observed]) -> str:
    out = [BEGIN, ""]
    for inp in INPUTS.values():
        cases = [c for c in CASES if c.input == inp.name]
        out += [f"### {inp.title} (`{inp.name}`)", "", "| kind | outcome | reason (first words) |",
                "|---|---|---|"]
        for case in cases:
            got = observed[case.id]
            if case.open or got.outcome != case.expected:
                outcome, reason = f"{case.expected} (open)", ""
            else:
                outcome, reason = got.outcome, _first_words(got.reason) if got.outcome == "quarantined" else ""
            cells = [case.kind, outcome, reason]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def test_the_docs_table_is_the_suite_s(observed: dict[str, Observed]) -> None:
    table = render(observed)
    text = DOCS.read_text() if DOCS.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    current = text[start:end + len(END)] if start >= 0 and end >= 0 else None
    if os.environ.get("TOKENLEDGER_WRITE_DOCS") == "1":
        if current is None:
            raise AssertionError(f"{DOCS} has no {BEGIN} ... {END} block to write into")
        DOCS.write_text(text.replace(current, table))
        return
    assert current == table, ("docs/faults.md is stale: run TOKENLEDGER_WRITE_DOCS=1 pytest "
                              "tests/test_fault_suite.py")
