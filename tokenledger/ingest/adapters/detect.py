"""Which request-log format a JSON Lines file holds, told from its first records.

A folder under raw/ may take more than one format (raw/openai/: OpenAI's responses and Codex CLI session logs),
and a file dropped in the wrong folder would otherwise have every line quarantined for a field its records never
have (`id: required but missing` for a Claude Code log in raw/openai/). Only the first few records are looked
at, and only their keys and type fields: the requests themselves are read in DuckDB, by the adapter the format
names (tokenledger/ingest/sources.py).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

# Format -> (what a user calls it, the folder under raw/ it is read from).
FORMATS = {
    "gateway": ("canonical gateway log", "gateway"),
    "litellm": ("LiteLLM spend log", "litellm"),
    "openai": ("OpenAI response log", "openai"),
    "codex": ("Codex CLI session log", "openai"),
    "anthropic_message": ("Anthropic message log", "anthropic"),
    "claude_code": ("Claude Code session log", "anthropic"),
    "otlp": ("OTLP JSON trace export", "otel"),
}
# A Codex rollout line is {"timestamp", "type", "payload"} with one of these types (codex-rs/protocol RolloutItem).
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
# Claude Code's record types (besides assistant, the model's replies).
CLAUDE_CODE_TYPES = {"assistant", "user", "summary", "system", "attachment", "file-history-snapshot"}
OPENAI_OBJECTS = {"chat.completion", "chat.completion.chunk", "response"}
_RECORDS = 8  # records looked at
_LINE_BYTES = 1 << 20  # a longer line is not looked at (Claude Code's tool results can be megabytes)


def _text(value: Any) -> str | None:
    """A field's value when it is a string; a number, object or list in a type field says nothing of the format."""
    return value if isinstance(value, str) else None


def record_format(record: dict[str, Any]) -> str | None:
    """The format one record belongs to, None when its keys say nothing certain."""
    kind = _text(record.get("type"))
    if "resourceSpans" in record:
        return "otlp"
    if "payload" in record and kind in CODEX_TYPES:
        return "codex"
    if ("sessionId" in record and kind in CLAUDE_CODE_TYPES) or (kind == "summary" and "leafUuid" in record):
        return "claude_code"
    message = record.get("message") if isinstance(record.get("message"), dict) else record
    if _text(message.get("type")) == "message" and str(message.get("id", "")).startswith("msg_"):
        return "anthropic_message"
    body = record.get("response", {}).get("body") if isinstance(record.get("response"), dict) else None
    batch_line = "custom_id" in record and (body is None or isinstance(body, dict))
    if _text(record.get("object")) in OPENAI_OBJECTS or batch_line:
        return "openai"
    if "request_id" in record and ("startTime" in record or "call_type" in record or "model_group" in record):
        return "litellm"
    if "request_id" in record and "received_at" in record:
        return "gateway"
    return None


def sniff(path: Path) -> str | None:
    """The format of a JSON Lines file (FORMATS), when its first records agree on one; None otherwise (a file
    that does not open, or whose records say nothing certain, is left to its folder's reader to judge)."""
    found: set[str] = set()
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")) as f:
            for _ in range(_RECORDS):
                line = f.readline(_LINE_BYTES)
                if not line:
                    break
                if not line.endswith(b"\n") and len(line) == _LINE_BYTES:
                    break
                try:
                    record = json.loads(line.lstrip(b"\xef\xbb\xbf"))
                except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses: the reader's
                    continue
                if isinstance(record, dict) and (kind := record_format(record)):
                    found.add(kind)
    except (OSError, EOFError, ValueError):
        return None
    return found.pop() if len(found) == 1 else None


def misplaced(path: Path, kind: str, folder: str) -> str:
    """The message for a file of format `kind` found in raw/`folder`/."""
    title, home = FORMATS[kind]
    day = path.parent.name if path.parent.name.startswith("dt=") else "dt=YYYY-MM-DD"
    article = "an" if title[0] in "AEIOU" else "a"
    return (f"{path}: its first records are those of {article} {title}, which tokenledger reads from raw/{home}/, not "
            f"raw/{folder}/. Move it to raw/{home}/{day}/ and re-run the day.")
