"""Token counts and arrival times of chat requests and coding-agent sessions, vectorized with numpy.

Nothing here loops per request or per session: sessions are expanded into steps with ``np.repeat`` and
per-session running sums are taken as a global cumulative sum minus the value at each session's first step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scenario import MINUTES_PER_DAY, STREAMS, TENANTS, AgentProfile, ChatProfile, Stream

BLOCK = 16  # KV-cache block size: only whole blocks are cached


@dataclass
class Batch:
    """Requests of one stream: times are milliseconds from the start of the window (day or load test)."""

    t_ms: np.ndarray
    input_tokens: np.ndarray
    cached: np.ndarray
    cache_write: np.ndarray
    output: np.ndarray
    tenant: np.ndarray  # index into TENANTS
    session: np.ndarray  # session number within the batch, -1 for requests outside a session
    # The prompt's content, for its prefix block hashes (prefix.py): the leading tokens every request of the stream
    # sends (its system prompt), and the leading tokens every later step of the session resends unchanged.
    stream: np.ndarray  # index into STREAMS
    stream_prefix: np.ndarray
    session_prefix: np.ndarray

    def __len__(self) -> int:
        return len(self.t_ms)

    def take(self, idx: np.ndarray) -> Batch:
        return Batch(**{k: v[idx] for k, v in self.__dict__.items()})

    @staticmethod
    def concat(batches: list[Batch]) -> Batch:
        return Batch(**{k: np.concatenate([getattr(b, k) for b in batches]) for k in Batch.__annotations__})


def _lognormal_int(
    rng: np.random.Generator, median: float, sigma: float, lo: int, hi: int, n: int
) -> np.ndarray:
    return np.clip(np.rint(rng.lognormal(np.log(median), sigma, n)), lo, hi).astype(np.int64)


def _floor_block(x: np.ndarray) -> np.ndarray:
    return (x // BLOCK) * BLOCK


def _tenants(rng: np.random.Generator, stream: Stream, n: int) -> np.ndarray:
    names, weights = zip(*stream.tenants, strict=True)
    codes = np.array([TENANTS.index(t) for t in names], dtype=np.int16)
    p = np.asarray(weights, dtype=float)
    return codes[rng.choice(len(codes), size=n, p=p / p.sum())]


def poisson_times(rng: np.random.Generator, per_minute: np.ndarray) -> np.ndarray:
    """Poisson arrivals with a piecewise-constant rate: counts per minute, uniform within the minute."""
    counts = rng.poisson(per_minute)
    base = np.repeat(np.arange(len(per_minute), dtype=np.int64) * 60_000, counts)
    return base + rng.integers(0, 60_000, size=base.size)


def chat_batch(rng: np.random.Generator, stream: Stream, t_ms: np.ndarray) -> Batch:
    """Independent chat requests arriving at ``t_ms``."""
    p = stream.profile
    assert isinstance(p, ChatProfile)
    n = len(t_ms)
    inp = _lognormal_int(rng, p.input_median, p.input_sigma, p.input_min, p.input_max, n)
    out = _lognormal_int(rng, p.output_median, p.output_sigma, 1, p.output_max, n)
    warm = rng.random(n) < p.warm_prefix_share
    cached = np.where(warm, _floor_block(np.minimum(p.system_tokens, inp - 1)), 0)
    return Batch(
        t_ms=t_ms,
        input_tokens=inp,
        cached=cached,
        cache_write=np.maximum(_floor_block(inp) - cached, 0),
        output=out,
        tenant=_tenants(rng, stream, n),
        session=np.full(n, -1, dtype=np.int64),
        stream=np.full(n, STREAMS.index(stream), dtype=np.int8),
        stream_prefix=np.minimum(p.system_tokens, inp),
        session_prefix=np.minimum(p.system_tokens, inp),
    )


def _segment_cumsum(x: np.ndarray, first: np.ndarray, sid: np.ndarray) -> np.ndarray:
    """Running sum of ``x`` within each session (``x`` is 0 at every session's first step)."""
    cs = np.cumsum(x)
    return cs - cs[first][sid]


def agent_batch(rng: np.random.Generator, stream: Stream, starts_ms: np.ndarray, horizon_ms: int) -> Batch:
    """Expand sessions starting at ``starts_ms`` into steps; steps at or after ``horizon_ms`` are cut."""
    p = stream.profile
    assert isinstance(p, AgentProfile)
    s = len(starts_ms)
    steps = rng.integers(p.steps_min, p.steps_max + 1, size=s)
    total = int(steps.sum())
    sid = np.repeat(np.arange(s), steps)
    first = np.cumsum(steps) - steps
    k = np.arange(total) - first[sid]
    later = k > 0

    repo = _lognormal_int(rng, p.repo_median, p.repo_sigma, p.repo_min, p.repo_max, s)
    task = _lognormal_int(rng, p.task_median, 0.6, 20, 4_000, s)
    out = _lognormal_int(rng, p.output_median, p.output_sigma, 1, p.output_max, total)
    tool = _lognormal_int(rng, p.tool_median, p.tool_sigma, 20, p.tool_max, total)
    prev_out = np.zeros(total, dtype=np.int64)
    prev_out[1:] = out[:-1]
    new = np.where(later, tool + prev_out, 0)

    full = p.system_tokens + (repo + task)[sid] + _segment_cumsum(new, first, sid)
    truncated = full > p.context_limit
    inp = np.minimum(full, p.context_limit)
    prev_inp = np.zeros(total, dtype=np.int64)
    prev_inp[1:] = inp[:-1]

    system = _floor_block(np.int64(p.system_tokens))
    cold = (rng.random(s) < p.cold_system_share)[sid]
    miss = (rng.random(total) < p.miss_rate) | truncated
    cached = np.where(later, np.where(miss, system, _floor_block(prev_inp)), np.where(cold, 0, system))
    cached = np.minimum(cached, inp - 1)

    tool_s = np.clip(
        rng.lognormal(np.log(p.tool_seconds_median), p.tool_seconds_sigma, total), 1.0, p.tool_seconds_max
    )
    gen_s = np.zeros(total)
    gen_s[1:] = 0.4 + 0.03 * out[:-1]
    gap_ms = np.where(later, np.rint((tool_s + gen_s) * 1000), 0).astype(np.int64)
    t = starts_ms[sid] + _segment_cumsum(gap_ms, first, sid)

    # A step resends the previous step's prompt and appends to it, so its whole prompt stays in every later step's
    # prefix; a truncated prompt keeps only system prompt, repository and task before the tool results it cut.
    head = p.system_tokens + (repo + task)[sid]
    keep = t < horizon_ms
    batch = Batch(
        t_ms=t,
        input_tokens=inp,
        cached=cached,
        cache_write=np.maximum(_floor_block(inp) - cached, 0),
        output=out,
        tenant=_tenants(rng, stream, s)[sid],
        session=sid.astype(np.int64),
        stream=np.full(total, STREAMS.index(stream), dtype=np.int8),
        stream_prefix=np.full(total, p.system_tokens, dtype=np.int64),
        session_prefix=np.where(truncated, head, inp),
    )
    return batch.take(np.flatnonzero(keep))


def stream_batch(rng: np.random.Generator, stream: Stream, per_minute: np.ndarray) -> Batch:
    """Requests of ``stream`` whose expected arrivals per minute are ``per_minute`` (a day or a load test)."""
    horizon = len(per_minute) * 60_000
    if stream.is_agent:
        assert isinstance(stream.profile, AgentProfile)
        starts = poisson_times(rng, per_minute / stream.profile.mean_steps)
        return agent_batch(rng, stream, starts, horizon)
    return chat_batch(rng, stream, poisson_times(rng, per_minute))


def daily_per_minute(requests_per_day: float, shape: np.ndarray) -> np.ndarray:
    """Expected arrivals per minute for a daily volume spread along ``shape`` (mean 1 on a plain weekday)."""
    return requests_per_day / MINUTES_PER_DAY * shape


def agent_step_samples(rng: np.random.Generator, stream: Stream, n: int) -> Batch:
    """``n`` steps drawn at random from freshly generated sessions (agent traffic replayed in load tests).

    Times are zero and sessions are dropped: a replayed step is an independent request.
    """
    assert isinstance(stream.profile, AgentProfile)
    sessions = int(np.ceil(n / stream.profile.mean_steps)) + 1
    pool = agent_batch(rng, stream, np.zeros(sessions, dtype=np.int64), np.iinfo(np.int64).max)
    b = pool.take(rng.choice(len(pool), size=n, replace=n > len(pool)))
    b.session = np.full(n, -1, dtype=np.int64)
    return b
