"""An LRU prefix cache replayed over a stream of block accesses, vectorized with numpy, in bounded memory.

The cache holds KV blocks named by their prefix hashes. A request looks its blocks up when it arrives: its cached
prefix is the leading run of its blocks found in the cache. Then it touches every block, last to first, so that
a prompt's first blocks are the most recently used: the cache evicts a prefix's tail before its head, as vLLM
(which frees a request's blocks tail first) and SGLang (whose radix tree evicts leaves) do, and never holds a
block without the blocks before it.

LRU is a stack algorithm: a block is in a cache of C blocks iff fewer than C other distinct blocks were touched
since it was last touched (its stack distance). So one pass gives every cache size at once: each access's
distance at its request's arrival, capped at the largest size asked, is computed for a chunk of accesses at a
time, and the state carried between chunks is the recency order of the largest cache (at most C blocks).

Within a chunk, counting the distinct blocks touched between two instants is a dominance count (how many
earlier positions hold a value above a threshold), done for all accesses at once with a merge-sort tree:
O(n log n) numpy work per chunk, nothing per access in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

CHUNK_ACCESSES = 1 << 20


def prefix_count_greater(values: np.ndarray, ends: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each query q: how many of values[0:ends[q]] are greater than thresholds[q].

    `values` and `thresholds` are integers of at least -1; the prefix [0, end) is cut into at most log2(n)
    aligned blocks of sizes 2^L, and each block's count is a binary search in that level's block-sorted copy
    of `values`."""
    n = len(values)
    counts = np.zeros(len(ends), dtype=np.int64)
    if n == 0 or len(ends) == 0:
        return counts
    width = int(max(values.max(), thresholds.max())) + 3  # keys of one block never reach the next block's
    shifted = values.astype(np.int64) + 1
    index = np.arange(n, dtype=np.int64)
    level = 0
    while (1 << level) <= n:
        chosen = np.flatnonzero((ends >> level) & 1)
        if len(chosen):
            keys = np.sort((index >> level) * width + shifted)
            block = (ends[chosen] >> level) - 1
            needles = block * width + thresholds[chosen] + 1
            # Searched in sorted order: each search starts where the last ended, in memory already read.
            by_needle = np.argsort(needles)
            below = np.empty(len(needles), dtype=np.int64)
            below[by_needle] = np.searchsorted(keys, needles[by_needle], side="right")
            counts[chosen] += (block + 1) * (1 << level) - below
        level += 1
    return counts


@dataclass
class LruCache:
    """The recency order of one cache's blocks (most recent first), at most `capacity` of them."""

    capacity: int
    blocks: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def replay_chunk(cache: LruCache, requests: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Replay one chunk of whole requests through `cache` (updated in place).

    `requests` numbers the request of each access (non-decreasing) and `hashes` are its blocks, each request's
    last to first. Returns, per access, the smallest cache size (in blocks) at which the block is part of its
    request's cached prefix when the request arrives: capacity + 1 for "at no size up to capacity".
    """
    n = len(hashes)
    miss = cache.capacity + 1
    if n == 0:
        return np.empty(0, dtype=np.int64)
    position = np.arange(n, dtype=np.int64)
    new_request = np.r_[True, requests[1:] != requests[:-1]]
    starts = np.flatnonzero(new_request)
    start = starts[np.cumsum(new_request) - 1]  # each access's request arrival: the request's first access
    blocks, block = np.unique(hashes, return_inverse=True)

    # Accesses grouped by block in time order: the next access of each, and the last one before a request arrived.
    order = np.lexsort((position, block))
    same = block[order[1:]] == block[order[:-1]]
    following = np.full(n, n, dtype=np.int64)
    following[order[:-1][same]] = order[1:][same]
    keys = block[order].astype(np.int64) * (n + 1) + order
    before = np.searchsorted(keys, block.astype(np.int64) * (n + 1) + start) - 1
    previous = np.where(before >= 0, order[np.maximum(before, 0)], -1)
    previous = np.where((before >= 0) & (block[np.maximum(previous, 0)] == block), previous, -1)

    # Distinct blocks touched in [0, s): one per block first touched before s.
    first = np.zeros(n, dtype=bool)
    first[order[np.r_[True, ~same]]] = True
    distinct_before = np.r_[0, np.cumsum(first)]

    distance = np.full(n, miss, dtype=np.int64)
    # Touched earlier in the chunk: the distinct blocks touched after it and before the request arrived.
    inside = np.flatnonzero(previous >= 0)
    if len(inside):
        later = prefix_count_greater(following, previous[inside] + 1, start[inside] - 1)
        distance[inside] = distinct_before[start[inside]] - later
    # Not touched in the chunk before the request: its rank in the carried cache, plus the blocks first touched
    # in the chunk before the request that were older than it (or absent).
    rank = _ranks(cache.blocks, blocks)
    outside = np.flatnonzero((previous < 0) & (rank[block] >= 0))
    if len(outside):
        firsts = block[first]  # the chunk's blocks in the order of their first touch
        first_rank = np.where(rank[firsts] >= 0, rank[firsts], miss)
        r = rank[block[outside]]
        distance[outside] = r + prefix_count_greater(first_rank, distinct_before[start[outside]], r)
    smallest = np.minimum(distance + 1, miss)

    # The carried state: the chunk's blocks by their last touch, then the old blocks it did not touch.
    last_touch = order[np.r_[~same, True]]  # per block (in `blocks` order): its group's last access
    touched = blocks[np.argsort(-last_touch, kind="stable")]
    kept = cache.blocks[~np.isin(cache.blocks, blocks)]
    cache.blocks = np.concatenate([touched, kept])[:cache.capacity]
    return smallest


def _ranks(carried: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """The recency rank (0 = most recent) in `carried` of each of `blocks`, -1 when it is not there."""
    if len(carried) == 0:
        return np.full(len(blocks), -1, dtype=np.int64)
    order = np.argsort(carried, kind="stable")
    at = np.minimum(np.searchsorted(carried[order], blocks), len(carried) - 1)
    return np.where(carried[order][at] == blocks, order[at], -1)


def cached_tokens(requests: np.ndarray, smallest: np.ndarray, input_tokens: np.ndarray, block_tokens: np.ndarray,
                  sizes: Iterable[int]) -> dict[int, int]:
    """Cached input tokens of the chunk's requests at each cache size: per request, the leading run of blocks
    cached at that size times the block size, never more than the request's input (its last block is partial).

    Arrays are per access, each request's blocks last to first (as `replay_chunk` takes them)."""
    if len(requests) == 0:
        return {int(c): 0 for c in sizes}
    # First block first, requests in reverse: a running maximum within each request (offset per request so that
    # it never carries over) is the smallest size at which the whole prefix up to that block is cached.
    smallest, input_tokens, block_tokens = smallest[::-1], input_tokens[::-1], block_tokens[::-1]
    new_request = np.r_[True, requests[::-1][1:] != requests[::-1][:-1]]
    ordinal = np.cumsum(new_request) - 1
    step = int(smallest.max()) + 1
    prefix_smallest = np.maximum.accumulate(ordinal * step + smallest) - ordinal * step
    starts = np.flatnonzero(new_request)
    out = {}
    for size in sizes:
        run = np.add.reduceat((prefix_smallest <= size).astype(np.int64), starts)
        out[int(size)] = int(np.minimum(run * block_tokens[starts], input_tokens[starts]).sum())
    return out
