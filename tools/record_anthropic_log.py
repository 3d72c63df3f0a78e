"""Record tests/data/anthropic/sdk-messages.jsonl: an Anthropic response log written by the official Python SDK.

A logging wrapper around `client.messages.create`, as a team would write one, records each call on a line: a
reply as the SDK serializes its `Message` (`message.model_dump(mode="json")`) with the time it arrived beside it
(`timestamp`), and a failed call as the SDK hands it over (`APIStatusError.body`, the API's error body with its
`request_id`) with the time, the HTTP status (`status_code`) and, where the wrapper knows it, the model asked for.

The SDK talks to a local server that answers as the Messages API does (the bodies and headers of
docs.claude.com/en/api/messages and /en/api/errors): four replies, two `429 rate_limit_error`, one
`400 invalid_request_error`. The wrapper logs the model of the two rate-limited calls and not of the invalid one.
No network, no key. Run it with the SDK installed (`pip install anthropic`):

    python tools/record_anthropic_log.py tests/data/anthropic/sdk-messages.jsonl

The log is committed; tests read it and never need the SDK.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic

MODEL = "claude-sonnet-4-5-20250929"


def _usage(uncached: int, read: int, written: int, output: int) -> dict:
    return {"input_tokens": uncached, "cache_read_input_tokens": read, "cache_creation_input_tokens": written,
            "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output, "service_tier": "standard", "server_tool_use": None}


def _message(mid: str, usage: dict) -> dict:
    return {"id": mid, "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "text", "text": "(reply text, never read)"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": usage}


def _error(kind: str, message: str, request_id: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


# (time the response arrived, HTTP status, body, whether the wrapper logs the model it asked for)
CALLS = [
    ("2026-11-16T09:00:01.204Z", 200, _message("msg_01SDK1", _usage(14, 0, 2048, 310)), True),
    ("2026-11-16T09:00:09.880Z", 200, _message("msg_01SDK2", _usage(9, 2048, 0, 122)), True),
    ("2026-11-16T09:00:10.113Z", 429, _error(
        "rate_limit_error", "This request would exceed the rate limit for your organization of 50,000 input tokens "
        "per minute. Please reduce the prompt length or the maximum tokens requested, or try again later.",
        "req_011SDK429a"), True),
    ("2026-11-16T09:00:10.540Z", 429, _error(
        "rate_limit_error", "This request would exceed the rate limit for your organization of 50,000 input tokens "
        "per minute. Please reduce the prompt length or the maximum tokens requested, or try again later.",
        "req_011SDK429b"), True),
    ("2026-11-16T09:01:30.002Z", 400, _error(
        "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"",
        "req_011SDK400"), False),
    ("2026-11-16T09:02:00.750Z", 200, _message("msg_01SDK3", _usage(1200, 0, 0, 64)), True),
    ("2026-11-16T09:02:41.377Z", 200, _message("msg_01SDK4", _usage(3, 2048, 516, 1024)), True),
]


class _Api(BaseHTTPRequestHandler):
    """Answers each POST /v1/messages with the next of CALLS, as the API does (request-id header included)."""

    calls = iter(CALLS)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _, status, body, _ = next(self.calls)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("request-id", body.get("request_id", f"req_{body.get('id', '')}"))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def main(target: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = anthropic.Anthropic(api_key="not-a-key", base_url=f"http://127.0.0.1:{server.server_port}",
                                 max_retries=0)
    lines = []
    for at, _, _, logs_model in CALLS:
        try:
            message = client.messages.create(model=MODEL, max_tokens=1024,
                                             messages=[{"role": "user", "content": "(prompt, never logged)"}])
            lines.append({"timestamp": at, **message.model_dump(mode="json")})
        except anthropic.APIStatusError as exc:
            record = {"timestamp": at, "status_code": exc.status_code, **exc.body}
            if logs_model:
                record["model"] = MODEL
            lines.append(record)
    server.shutdown()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(line) + "\n" for line in lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
