"""An LRU prefix cache replayed over a stream of block accesses, vectorized with numpy, in bounded memory.

The cache holds KV blocks named by their prefix hashes. A request looks its blocks up when it arrives: its cached
prefix is the leading run of its blocks found in the cache. Then it touches every block, last to first, so that
a prompt's first blocks are the most recently used: the cache evicts a prefix's tail before its head, as vLLM
(which frees a request's blocks tail first) and SGLang (whose radix tree evicts leaves) do, and never holds a
block without the blocks before it.

LRU is a stack algorithm: when a request arrives at instant s, the cache of C blocks holds the C blocks touched
most recently, so a block is in it iff its last touch is at or after B_C(s), the last touch of the C-th most
recently touched block (none when fewer than C blocks were touched). So every cache size asked is answered by
one number per request and size, whatever the request's length, and one pass over the accesses answers all of
them. The accesses are replayed a chunk of whole requests at a time; the state carried from one chunk to the next
is the recency order of the largest cache (at most C blocks), replayed as the chunk's first touches. It
needs only the chunk's last touches (`advance`), so the next chunk can start while this one is answered
(`answer`): tokenledger/whatif.py answers chunks on several threads.

Within a chunk, the last touches before s are the accesses j < s whose block is not touched again before s
(next[j] >= s): ordered by next, they are a suffix of that order, and B_C(s) is the C-th largest of those before
s, a k-th-smallest query over a suffix. A wavelet matrix over the positions answers all the chunk's queries
together, one bit of the answer per pass over the chunk: O(n log n) numpy work per chunk, nothing per access in
Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

# The replay reads a day's requests in chunks of about CHUNK_ACCESSES block accesses, and answers each cache's
# accesses in pieces of about ANSWER_ACCESSES (tokenledger/whatif.py): `answer`'s sorts and wavelet passes over a
# piece stay in the CPU's caches. The 1M-request day's LRU replay took 10.1-11.1 s of wall time (17-20 s of CPU)
# answered a chunk at a time, 5.5-6.3 s (9.7-11 s of CPU) in pieces of 2^17; 2^16 and 2^18 were no faster.
CHUNK_ACCESSES = 1 << 20
ANSWER_ACCESSES = 1 << 17


@dataclass
class LruCache:
    """The recency order of one cache's blocks (most recent first), at most `capacity` of them."""

    capacity: int
    blocks: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


LAST_BITS = 5  # the bits a query's range no longer needs the matrix for: at most 2^5 values are left in it


def kth_smallest_of_suffixes(values: np.ndarray, starts: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """For each query q: the ranks[q]-th smallest (0-based) of values[starts[q]:], which must exist.

    `values` are distinct non-negative integers below 2^31. A wavelet matrix, built one bit at a time from the
    highest, with the queries descending it as it is built (they are all known), so no level is kept. Once only
    the last LAST_BITS bits are unknown, a query's range holds values that share every higher bit, so at most
    2^LAST_BITS distinct ones: they are sorted directly (one small sort per query instead of five passes over
    all the values)."""
    n = len(values)
    answer = np.zeros(len(starts), dtype=np.int64)
    if n == 0 or len(starts) == 0:
        return answer
    current = values.astype(np.uint32)
    low, high, rank = starts.astype(np.int64), np.full(len(starts), n, dtype=np.int64), ranks.astype(np.int64)
    zeros = np.zeros(n + 1, dtype=np.int64)  # zeros[i]: how many of current[:i] have a 0 at this bit
    last = min(LAST_BITS, int(values.max()).bit_length())
    following = np.empty_like(current)
    for bit in range(int(values.max()).bit_length() - 1, last - 1, -1):
        zero = (current & np.uint32(1 << bit)) == 0
        np.cumsum(zero, out=zeros[1:])
        z_low, z_high = zeros[low], zeros[high]
        in_zeros = z_high - z_low
        left = rank < in_zeros  # the answer has a 0 here: it is among this range's zeros
        rank = np.where(left, rank, rank - in_zeros)
        low = np.where(left, z_low, zeros[n] + low - z_low)
        high = np.where(left, z_high, zeros[n] + high - z_high)
        answer |= np.where(left, 0, 1 << bit)
        # zeros first, each side in order (a radix pass): two compresses, ~3x faster than a stable argsort
        np.compress(zero, current, out=following[:zeros[n]])
        np.compress(~zero, current, out=following[zeros[n]:])
        current, following = following, current
    # The rest: the rank-th smallest of current[low:high], at most 2^last values (padded with the largest uint32).
    width = 1 << last
    at = low[:, None] + np.arange(width, dtype=np.int64)[None, :]
    window = np.where(at < high[:, None], current[np.minimum(at, n - 1)], np.iinfo(np.uint32).max)
    window.sort(axis=1)
    low_bits = window[np.arange(len(rank)), rank].astype(np.int64) & (width - 1)
    return answer | low_bits


def replay_chunk(cache: LruCache, requests: np.ndarray, hashes: np.ndarray, sizes: Iterable[int]) -> np.ndarray:
    """Replay one chunk of whole requests through `cache` (updated in place) for each cache size in `sizes` (in
    blocks, none above cache.capacity).

    `requests` numbers the request of each access (non-decreasing) and `hashes` are its blocks, each request's
    last to first. Returns, per access, the smallest of `sizes` at which the block is in the cache when its
    request arrives: capacity + 1 for "at none of them".

    The same as `answer(advance(cache, requests, hashes), sizes)`: `advance` carries the cache to the chunk's end
    (cheap), `answer` does the rest, so a caller may answer chunks in parallel while it advances the next.
    """
    if len(hashes) == 0:
        return np.empty(0, dtype=np.int64)
    _check_sizes(sizes, cache.capacity)
    return answer(advance(cache, requests, hashes), sizes)


@dataclass
class Chunk:
    """A chunk's touches in time order: the carried recency order (least recent first, `carried` of them), then
    the chunk's accesses, numbered by request (`requests`)."""

    capacity: int
    carried: int
    requests: np.ndarray
    touches: np.ndarray


def _check_sizes(sizes: Iterable[int], capacity: int) -> np.ndarray:
    sizes_asked = np.array(sorted({int(s) for s in sizes}), dtype=np.int64)
    if len(sizes_asked) == 0 or sizes_asked[-1] > capacity or sizes_asked[0] < 1:
        raise ValueError(f"cache sizes {sizes_asked.tolist()} must be between 1 and {capacity} blocks")
    return sizes_asked


def most_recent(touches: np.ndarray, capacity: int) -> np.ndarray:
    """The distinct blocks of `touches` (in time order) by their last touch, most recent first, at most `capacity`.

    Only the tail is read: once the last k touches hold `capacity` distinct blocks, no earlier touch can be among
    the most recent ones. A request touches dozens of blocks, so a tail of twice the capacity is usually enough."""
    k = min(len(touches), 2 * capacity)
    while True:
        tail = touches[len(touches) - k:][::-1]
        _, first = np.unique(tail, return_index=True)  # in the reversed tail, a block's first index: its last touch
        if len(first) >= capacity or k == len(touches):
            return tail[np.sort(first)[:capacity]]
        k = min(len(touches), 4 * k)


def advance(cache: LruCache, requests: np.ndarray, hashes: np.ndarray) -> Chunk:
    """Carry `cache` past one chunk of whole requests (its recency order after their touches) and return what
    `answer` needs to replay them; cheap next to `answer`, which does the sorting."""
    touches = np.concatenate([cache.blocks[::-1], hashes])
    chunk = Chunk(cache.capacity, len(cache.blocks), requests, touches)
    if len(hashes):
        cache.blocks = most_recent(touches, cache.capacity)
    return chunk


def answer(chunk: Chunk, sizes: Iterable[int]) -> np.ndarray:
    """Per access of an advanced chunk, the smallest of `sizes` at which its block is in the cache when its request
    arrives (capacity + 1 for none): see `replay_chunk`. Reads `chunk` only, so chunks may be answered at once."""
    sizes_asked = _check_sizes(sizes, chunk.capacity)
    m, touches, requests = chunk.carried, chunk.touches, chunk.requests
    total = len(touches)
    n, miss = total - m, chunk.capacity + 1
    if n == 0:
        return np.empty(0, dtype=np.int64)
    new_request = np.r_[True, requests[1:] != requests[:-1]]
    arrivals = np.flatnonzero(new_request) + m  # each request's first touch
    request_of = np.cumsum(new_request) - 1
    start = arrivals[request_of]

    # The touches of each block in time order: each touch's previous and next touch of the same block.
    order = np.argsort(touches, kind="stable")
    same = touches[order[1:]] == touches[order[:-1]]
    before = np.full(total, -1, dtype=np.int64)
    before[order[1:][same]] = order[:-1][same]
    after = np.full(total, total, dtype=np.int64)
    after[order[:-1][same]] = order[1:][same]
    # The last touch before the request arrived: the previous one, skipping the request's own earlier touches.
    last = before[m:].copy()
    while (inside := np.flatnonzero(last >= start)).size:
        last[inside] = before[last[inside]]

    # B_C(s) per request and size: the (live - C)-th smallest of the positions j < s with after[j] >= s, where
    # live is the number of blocks touched before s. Positions ordered by `after` (each touch has at most one
    # previous touch, so a slot per value of `after`; never touched again last): those with after[j] >= s are a
    # suffix, from the count of `after` values below s.
    again = after < total
    slot = np.full(total, -1, dtype=np.int64)
    slot[after[again]] = np.flatnonzero(again)
    filled = slot >= 0
    by_after = np.concatenate([slot[filled], np.flatnonzero(~again)])
    after_below = np.r_[0, np.cumsum(filled)]
    live = np.r_[0, np.cumsum(before < 0)][arrivals]  # blocks touched before each arrival
    rank = live[:, None] - sizes_asked[None, :]
    full = rank >= 0  # at least C blocks touched; else every block touched is still cached (boundary -1)
    boundary = np.full(rank.shape, -1, dtype=np.int64)
    boundary[full] = kth_smallest_of_suffixes(
        by_after, np.broadcast_to(after_below[arrivals][:, None], rank.shape)[full], rank[full])

    smallest = np.full(n, miss, dtype=np.int64)
    for i in range(len(sizes_asked) - 1, -1, -1):
        smallest[(last >= 0) & (last >= boundary[request_of, i])] = sizes_asked[i]
    return smallest


def cached_tokens(requests: np.ndarray, smallest: np.ndarray, input_tokens: np.ndarray, block_tokens: np.ndarray,
                  sizes: Iterable[int]) -> dict[int, int]:
    """Cached input tokens of the chunk's requests at each cache size: per request, the leading run of blocks
    cached at that size times the block size, never more than the request's input (its last block is partial).

    `requests` and `smallest` are per access, each request's blocks last to first (as `replay_chunk` takes them);
    `input_tokens` and `block_tokens` per access too (the request's value repeated) or one per request, in order."""
    if len(requests) == 0:
        return {int(c): 0 for c in sizes}
    # First block first, requests in reverse: a running maximum within each request (offset per request so that
    # it never carries over) is the smallest size at which the whole prefix up to that block is cached.
    smallest = smallest[::-1]
    new_request = np.r_[True, requests[::-1][1:] != requests[::-1][:-1]]
    ordinal = np.cumsum(new_request) - 1
    step = int(smallest.max()) + 1
    prefix_smallest = np.maximum.accumulate(ordinal * step + smallest) - ordinal * step
    starts = np.flatnonzero(new_request)
    if len(input_tokens) == len(requests):  # per access: each request's value at its first (reversed) access
        inputs, blocks = input_tokens[::-1][starts], block_tokens[::-1][starts]
    else:  # per request, in order
        inputs, blocks = input_tokens[::-1], block_tokens[::-1]
    if len(inputs) != len(starts):
        raise ValueError(f"{len(inputs)} input token counts for {len(starts)} requests")
    out = {}
    for size in sizes:
        run = np.add.reduceat((prefix_smallest <= size).astype(np.int64), starts)
        out[int(size)] = int(np.minimum(run * blocks, inputs).sum())
    return out
