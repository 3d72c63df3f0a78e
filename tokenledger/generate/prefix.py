"""Prefix block hashes of generated prompts: one integer per started KV block, each standing for its block and every
block before it (the convention of public serving traces: Mooncake's ``hash_ids``).

A prompt's blocks are named by what they hold, in three runs (``workload.Batch``):

* blocks within ``stream_prefix`` (the stream's system prompt) are the same for every request of the stream;
* blocks within ``session_prefix`` are the same for every step of an agent session that resends them: a step's
  prompt is the previous step's plus new tool results, so block ``j`` of one session holds the same tokens at every
  step where it is full (a truncated prompt keeps only its head);
* the rest, and a partial last block, are the request's own.

So two requests share block ``j``'s hash exactly when they share every block up to ``j``, and a step of an agent
session finds the previous step's full blocks among its leading hashes: the generated cached tokens ``c`` of a
request are covered by its first ``floor(c / kv_block_tokens)`` hashes, which earlier requests sent (the generator
caches whole blocks of 16 tokens, a divisor of every deployment's ``kv_block_tokens``).

Like Mooncake's, the hashes are compact ids rather than 64-bit digests, which keeps a day of agent prompts (~140
hashes a coding step) about half the size to write and read: a stream's system-prompt blocks are
``stream * 2**20 + j`` on every day; a day's other blocks are numbered from ``(days since 2020-01-01) * 10**8``, a
run of consecutive ids per session and per request, so ids never repeat across days. A day of 1M requests names
~7M distinct blocks (an agent session's steps share theirs), so 10**8 a day holds ~14M requests a day. A day
generated in parts numbers each further part's blocks from ``part * 2**44`` up (its system prompts are the
stream's, shared by every part), so a part holds ~14M requests.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa

STREAM_SPAN = 1 << 20  # ids per stream's system prompt: more blocks than any prompt has
DAY_SPAN = 10**8  # ids per day (per part of a day)
PART_SPAN = 1 << 44  # part p > 0 of a day numbers its blocks from p * 2**44 above the day's: beyond any day's ids
_EPOCH = date(2020, 1, 1).toordinal()


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer: a bijection on uint64, so distinct keys give distinct, random-looking ids."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _first_base(keys: np.ndarray, extent: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row, the first id of its key's run: runs of ``max(extent)`` ids per distinct key, back to back."""
    uniq, inv = np.unique(keys, return_inverse=True)
    size = np.zeros(len(uniq), dtype=np.int64)
    np.maximum.at(size, inv, extent)
    return (np.cumsum(size) - size)[inv], int(size.sum())


def prefix_block_hashes(
    day: date,
    input_tokens: np.ndarray,
    block_tokens: np.ndarray,
    stream: np.ndarray,
    stream_prefix: np.ndarray,
    session_key: np.ndarray,
    session_prefix: np.ndarray,
    request_key: np.ndarray,
    valid: np.ndarray,
    part: int = 0,
) -> pa.LargeListArray:
    """``ceil(input_tokens / block_tokens)`` hashes per row (null where ``valid`` is false), vectorized.

    ``session_key`` is 0 for a request outside a session; ``request_key`` names the request (a duplicate copy of a
    request has its key, and so its hashes).
    """
    inp = np.where(valid, np.maximum(input_tokens, 0), 0).astype(np.int64)
    block = block_tokens.astype(np.int64)
    blocks = -(-inp // block)
    # A block belongs to the stream's (or session's) run only when it ends within that run's tokens.
    in_stream = np.minimum(stream_prefix, inp) // block
    in_session = np.where(session_key != 0, np.maximum(np.minimum(session_prefix, inp) // block, in_stream), in_stream)

    day_base = (day.toordinal() - _EPOCH) * DAY_SPAN + part * PART_SPAN
    session_base, sessions = np.zeros(len(inp), dtype=np.int64), 0
    has = np.flatnonzero(valid & (session_key != 0))
    session_base[has], sessions = _first_base(session_key[has], (in_session - in_stream)[has])
    request_base = np.zeros(len(inp), dtype=np.int64)
    request_base[valid], requests = _first_base(request_key[valid], (blocks - in_session)[valid])
    if sessions + requests > DAY_SPAN:
        raise ValueError(f"{day}: {sessions + requests:,} distinct prompt blocks exceed the {DAY_SPAN:,} ids of a day "
                         "(tokenledger/generate/prefix.py); generate fewer requests a day, or the day in more parts")

    # Each row's blocks are three runs of consecutive ids: id = run's first id + (position - run's first position).
    lengths = np.stack([in_stream, in_session - in_stream, blocks - in_session], axis=1).ravel()
    firsts = np.stack([stream.astype(np.int64) * STREAM_SPAN, day_base + session_base,
                       day_base + sessions + request_base], axis=1).ravel()
    positions = np.cumsum(lengths) - lengths
    values = np.arange(int(lengths.sum()), dtype=np.int64)
    values += np.repeat(firsts - positions, lengths)
    offsets = np.zeros(len(inp) + 1, dtype=np.int64)
    np.cumsum(blocks, out=offsets[1:])
    return pa.LargeListArray.from_arrays(offsets, values, mask=pa.array(~valid))
