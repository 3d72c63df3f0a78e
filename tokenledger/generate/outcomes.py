"""Request outcomes: which requests fail, time out, are cancelled or rejected, and what their logs then show.

A request cut short keeps the gateway contract: output is partial, TTFT is absent when no token came back,
E2E >= TTFT and queue <= TTFT whenever they are present, and rejected requests have no latency at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .latency import Latencies
from .scenario import OutcomeRates

STATUSES = (
    "ok",
    "error",
    "timeout",
    "disconnected",
    "rejected",
    "cancelled",
    "okay",
)  # "okay": bad rows only
OK, ERROR, TIMEOUT, DISCONNECTED, REJECTED, CANCELLED, BAD_STATUS = range(len(STATUSES))
ERROR_TYPES = (
    "internal_error",
    "bad_gateway",
    "upstream_timeout",
    "stream_reset",
    "overloaded",
    "client_cancelled",
)
NO_ERROR = -1
GATEWAY_TIMEOUT_MS = 30_000.0


@dataclass
class Outcome:
    """What the gateway logged for each request (NaN = null for latencies, 0 = null for http_status)."""

    status: np.ndarray  # int8 index into STATUSES
    output: np.ndarray
    cached: np.ndarray
    cache_write: np.ndarray
    queue: np.ndarray
    ttft: np.ndarray
    e2e: np.ndarray
    itl: np.ndarray
    http_status: np.ndarray  # int32, 0 = null
    error_type: np.ndarray  # int8 index into ERROR_TYPES, -1 = null


def apply_outcomes(
    rng: np.random.Generator,
    rates: OutcomeRates,
    lat: Latencies,
    output: np.ndarray,
    cached: np.ndarray,
    cache_write: np.ndarray,
) -> Outcome:
    """Draw each request's status and cut its output and latencies accordingly."""
    n = len(output)
    queue_excess_s = np.maximum(lat.queue - rates.timeout_queue_ms, 0.0) / 1000.0
    p_timeout = rates.timeout + rates.timeout_slope * queue_excess_s
    u = rng.random(n)
    c1 = rates.error
    c2 = c1 + rates.disconnected
    c3 = c2 + p_timeout
    c4 = c3 + rates.cancelled
    status = np.full(n, OK, dtype=np.int8)
    status[u < c4] = CANCELLED
    status[u < c3] = TIMEOUT
    status[u < c2] = DISCONNECTED
    status[u < c1] = ERROR
    status[lat.rejected] = REJECTED

    cut = np.floor(rng.random(n) * output).astype(np.int64)  # tokens streamed before the request ended
    out = output.copy()
    queue, ttft, e2e, itl = lat.queue.copy(), lat.ttft.copy(), lat.e2e.copy(), lat.itl.copy()
    http = np.full(n, 200, dtype=np.int32)
    etype = np.full(n, NO_ERROR, dtype=np.int8)

    # Errors: half fail before the first token; the others after part of the stream.
    err = status == ERROR
    early = err & (rng.random(n) < 0.5)
    cut[early] = 0
    http[err] = np.where(rng.random(int(err.sum())) < 0.6, 500, 502)
    etype[err] = np.where(
        http[err] == 500, ERROR_TYPES.index("internal_error"), ERROR_TYPES.index("bad_gateway")
    )

    dis = status == DISCONNECTED
    cut[dis] = np.maximum(cut[dis], 1)
    http[dis] = 0
    etype[dis] = ERROR_TYPES.index("stream_reset")

    can = status == CANCELLED
    http[can] = 499
    etype[can] = ERROR_TYPES.index("client_cancelled")

    partial = err | dis | can
    out[partial] = cut[partial]
    streamed = partial & (out >= 1)
    e2e[streamed] = (
        ttft[streamed]
        + (out[streamed] - 1) * lat.tpot[streamed]
        + rng.uniform(1.0, 20.0, int(streamed.sum()))
    )
    itl[partial & (out <= 1)] = np.nan
    none_streamed = partial & (out == 0)
    ttft[none_streamed] = np.nan
    itl[none_streamed] = np.nan
    # Ended before the first token: a cancel or an error somewhere between arrival and the first token.
    e2e[none_streamed] = lat.ttft[none_streamed] * rng.uniform(0.05, 1.0, int(none_streamed.sum()))
    queue[none_streamed] = np.minimum(queue[none_streamed], e2e[none_streamed])

    to = status == TIMEOUT
    out[to] = 0
    ttft[to] = np.nan
    queue[to] = np.nan
    itl[to] = np.nan
    e2e[to] = GATEWAY_TIMEOUT_MS + rng.uniform(0.0, 250.0, int(to.sum()))
    http[to] = 504
    etype[to] = ERROR_TYPES.index("upstream_timeout")

    rej = status == REJECTED
    out[rej] = 0
    for a in (queue, ttft, e2e, itl):
        a[rej] = np.nan
    http[rej] = 429
    etype[rej] = ERROR_TYPES.index("overloaded")
    cached_out = np.where(rej, 0, cached)
    write_out = np.where(rej, 0, cache_write)

    ok = status == OK
    itl[ok & (rng.random(n) < rates.itl_missing)] = np.nan

    queue, ttft, e2e, itl = (np.round(a, 1) for a in (queue, ttft, e2e, itl))
    e2e = np.where(np.isnan(ttft), e2e, np.maximum(e2e, ttft))
    return Outcome(status, out, cached_out, write_out, queue, ttft, e2e, itl, http, etype)
