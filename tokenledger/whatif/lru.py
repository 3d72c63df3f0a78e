"""An LRU prefix cache replayed over a stream of requests' block hashes, every cache size in one pass, compiled with
numba; exactly, or over a SHARDS sample of the blocks (docs/adr/0083-every-lru-size-in-one-pass.md,
docs/adr/0084-lru-caches-of-large-days-are-sampled.md).

The cache holds KV blocks named by their prefix hashes. A request looks its blocks up when it arrives: its cached
prefix is the leading run of its blocks found in the cache. Then it touches every block, last to first, so that
a prompt's first blocks are the most recently used: the cache evicts a prefix's tail before its head, as vLLM
(which frees a request's blocks tail first) and SGLang (whose radix tree evicts leaves) do, and never holds a
block without the blocks before it.

LRU is a stack algorithm: the cache of C blocks holds the C most recently touched blocks. So one recency list
answers every size asked: a boundary per size marks the last block inside that size's cache, and each block
carries the index of the smallest size whose cache holds it. A touch moves a block to the front and each boundary
at most a few places, so an access costs a hash-table look-up and a few pointer moves per size, whatever the
sizes; blocks behind the largest size's boundary are dropped, so memory is that size's blocks.

SHARDS (Waldspurger et al., FAST '15) replays a spatial sample instead: a block is kept when hash(block) mod P < R P
(P = 2^32, R = 1/`every`), so a kept block is kept at every access, and it stands for 1/R blocks: it weighs 1/R in
the recency list, which is the paper's cache of C/P sampled blocks. A boundary that falls inside a block of
weight P holds part of it, read as that fraction of a hit: the estimate interpolates between the sampled sizes
below and above C/P. Blocks shared by a large share of the requests (system prompts) are kept whole (weight 1):
they are few and carry most hits, and sampled they made the estimate swing by 5-16 points
(docs/adr/0084-lru-caches-of-large-days-are-sampled.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

# The sampling hash is SplitMix64 of the block xor this constant, so that it is not the hash table's order.
SAMPLING_SALT = 0x5EED_CAFE_F00D_D00D
# Node arrays start at this many blocks and double as needed (a cache sized beyond the day's blocks).
INITIAL_NODES = 1 << 12


@njit(inline="always")
def _mix(x):
    """SplitMix64's finalizer (as tokenledger/generate/prefix.py's mix64)."""
    z = np.uint64(x) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _find(keys, nodes, key):
    """The node of `key` in the open-addressing table (linear probing), or -1."""
    mask = len(keys) - 1
    i = np.int64(_mix(key) & np.uint64(mask))
    while nodes[i] >= 0:
        if keys[i] == key:
            return nodes[i]
        i = (i + 1) & mask
    return -1


@njit(inline="always")
def _insert(keys, nodes, key, node):
    mask = len(keys) - 1
    i = np.int64(_mix(key) & np.uint64(mask))
    while nodes[i] >= 0:
        i = (i + 1) & mask
    keys[i] = key
    nodes[i] = node


@njit(inline="always")
def _delete(keys, nodes, key):
    """Remove `key` (present), shifting the entries after it back so that no probe chain breaks."""
    mask = len(keys) - 1
    i = np.int64(_mix(key) & np.uint64(mask))
    while keys[i] != key or nodes[i] < 0:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if nodes[j] < 0:
            break
        home = np.int64(_mix(keys[j]) & np.uint64(mask))
        # the entry at j moves back to i unless its home lies cyclically in (i, j]
        if (home <= i or home > j) if i < j else (j < home <= i):
            keys[i] = keys[j]
            nodes[i] = nodes[j]
            i = j
    nodes[i] = -1


@njit(nogil=True, cache=True)
def _sample(values, below, salt, shared_keys, shared_used):
    """Per block access: 1 kept whole (a shared block, in the open-addressing set shared_keys/shared_used), 2 kept
    by the sample (the top 32 bits of its salted hash below `below`), 0 not replayed. A pass of its own: inside
    the replay's loop the same test took 3x as long."""
    out = np.zeros(len(values), dtype=np.int8)
    mask = len(shared_keys) - 1
    for j in range(len(values)):
        block = values[j]
        mixed = _mix(np.uint64(block) ^ np.uint64(salt))
        i = np.int64(mixed & np.uint64(mask))
        while shared_used[i] and shared_keys[i] != block:
            i = (i + 1) & mask
        if shared_used[i]:
            out[j] = 1
        elif (mixed >> np.uint64(32)) < np.uint64(below):
            out[j] = 2
    return out


@njit(nogil=True, cache=True)
def _replay(keys, table, key, prev, nxt, weight, zone, meta, boundary, above, sizes,
            offsets, values, kept, input_tokens, block_tokens, requests, start, every, per_block,
            cached, whole_hits, sampled_hits, totals):
    """Replay requests[start:] through the cache; returns how many were replayed (the caller grows the node
    arrays and calls again when fewer than all: a request needs room for all its blocks). `kept`, per access of
    `values`: 1 replayed whole (weight 1), 2 sampled (weight `every`), 0 not replayed.

    The recency list: `meta` = [front (most recent), back, free list, nodes in use]. Per size i (ascending):
    `boundary[i]`, the last node at least partly inside, and `above[i]`, the weight in front of it; a node's `zone`
    is the smallest size whose boundary is at or behind it (-1: a free node). Exact (`per_block` false):
    `cached[i]` adds each request's leading run of blocks cached at size i, in tokens up to its input. Per block:
    `whole_hits[i]` and `sampled_hits[i]` add each replayed block's tokens times the part of it inside size i
    (whole blocks and sampled ones apart); `totals` = [tokens of the sampled blocks, tokens of all blocks not kept
    whole, accesses replayed]."""
    k = len(sizes)
    free = len(key) - meta[3]
    run = np.zeros(k, dtype=np.int64)
    longest = 0
    for q in range(start, len(requests)):
        longest = max(longest, offsets[requests[q] + 1] - offsets[requests[q]])
    weights = np.zeros(longest, dtype=np.int64)  # per block of the request: its weight, and its node when known
    found = np.zeros(longest, dtype=np.int64)
    for q in range(start, len(requests)):
        r = requests[q]
        first = offsets[r]
        n = offsets[r + 1] - first
        if free < n + 2:
            return q
        inputs = input_tokens[r]
        tokens = block_tokens[r]
        # Look-ups when the request arrives, first block first.
        run[:] = 0
        running = k
        looked = n
        for j in range(n):
            block = values[first + j]
            w = kept[first + j]
            if w == 2:
                w = every
            weights[j] = w
            found[j] = -1
            if per_block and w != 1:
                tokens_j = max(0, min(tokens, inputs - j * tokens))
                totals[1] += tokens_j
                if w > 1:
                    totals[0] += tokens_j
            if w == 0 or running == 0:
                continue
            e = _find(keys, table, block)
            found[j] = e
            if not per_block:
                if e < 0:
                    running = 0
                    looked = j + 1
                    continue
                for i in range(k):
                    if run[i] == j:
                        if zone[e] <= i and (boundary[i] != e or above[i] + weight[e] <= sizes[i]):
                            run[i] = j + 1
                        else:
                            running -= 1
                if running == 0:
                    looked = j + 1
                continue
            if e < 0:
                continue
            tokens_j = max(0, min(tokens, inputs - j * tokens))
            for i in range(k):
                if zone[e] > i:
                    continue
                part = 1.0
                if boundary[i] == e and above[i] + weight[e] > sizes[i]:
                    part = (sizes[i] - above[i]) / weight[e]
                if w == 1:
                    whole_hits[i] += tokens_j * part
                else:
                    sampled_hits[i] += tokens_j * part
        if not per_block:
            for i in range(k):
                cached[i] += min(run[i] * tokens, inputs)
        # Touches, last block first.
        for j in range(n - 1, -1, -1):
            w = weights[j]
            if w == 0:
                continue
            block = values[first + j]
            totals[2] += 1
            e = found[j] if j < looked else -1
            if e < 0 or zone[e] < 0 or key[e] != block:  # not looked up, or evicted since by this request's touches
                e = _find(keys, table, block)
            if e >= 0:  # out of the list, each boundary kept on a node still in it
                p, x = prev[e], nxt[e]
                for i in range(k):
                    if boundary[i] == e:
                        if x >= 0:
                            boundary[i] = x
                            zone[x] = min(zone[x], i)
                        elif p >= 0:
                            above[i] -= weight[p]
                            boundary[i] = p
                        else:
                            boundary[i] = -1
                            above[i] = 0
                    elif zone[e] <= i:
                        above[i] -= weight[e]
                if p >= 0:
                    nxt[p] = x
                else:
                    meta[0] = x
                if x >= 0:
                    prev[x] = p
                else:
                    meta[1] = p
            else:
                e = meta[2]
                meta[2] = nxt[e]
                meta[3] += 1
                free -= 1
                key[e] = block
                _insert(keys, table, block, e)
            weight[e] = w
            zone[e] = 0
            prev[e] = -1
            nxt[e] = meta[0]
            if meta[0] >= 0:
                prev[meta[0]] = e
            meta[0] = e
            if meta[1] < 0:
                meta[1] = e
            for i in range(k):  # each boundary back to where the weight in front of it fits its size
                if boundary[i] < 0:
                    boundary[i] = e
                    above[i] = 0
                else:
                    above[i] += w
                b = boundary[i]
                while above[i] >= sizes[i] and prev[b] >= 0:
                    zone[b] = i + 1
                    b = prev[b]
                    above[i] -= weight[b]
                while nxt[b] >= 0 and above[i] + weight[b] < sizes[i]:
                    above[i] += weight[b]
                    b = nxt[b]
                    zone[b] = min(zone[b], i)
                boundary[i] = b
            while meta[1] != boundary[k - 1]:  # behind the largest size: out of every cache
                last = meta[1]
                meta[1] = prev[last]
                nxt[meta[1]] = -1
                _delete(keys, table, key[last])
                zone[last] = -1
                nxt[last] = meta[2]
                meta[2] = last
                meta[3] -= 1
                free += 1
    return len(requests)


@njit(cache=True)
def _rehash(keys, table, key, nxt, front):
    node = front
    while node >= 0:
        _insert(keys, table, key[node], node)
        node = nxt[node]


@njit(cache=True)
def _fill(keys, used, blocks, salt):
    """The open-addressing set `_sample` probes: each block at its salted hash's slot, or the next free one."""
    mask = len(keys) - 1
    for block in blocks:
        i = np.int64(_mix(np.uint64(block) ^ np.uint64(salt)) & np.uint64(mask))
        while used[i]:
            i = (i + 1) & mask
        keys[i] = block
        used[i] = True


@njit(nogil=True, cache=True)
def _infinite(keys, meta, offsets, values, input_tokens, block_tokens, requests, start, fill, cached):
    """The infinite cache over requests[start:] (as `_replay`'s): each request's leading run of blocks seen in an
    earlier request, in tokens up to its input, added to cached[0]; then its blocks are seen. The set of blocks seen
    is an open-addressing table `keys` (0: a free slot; block 0 itself is meta[1]), meta[0] the blocks in it.
    Returns how many requests were replayed: fewer when the next one could take the table past `fill` blocks (the
    caller grows it and calls again)."""
    mask = len(keys) - 1
    for q in range(start, len(requests)):
        r = requests[q]
        first = offsets[r]
        n = offsets[r + 1] - first
        if meta[0] + n > fill:
            return q
        miss = n
        for j in range(n):
            block = values[first + j]
            if block == 0:
                if meta[1] == 0:
                    meta[1] = 1
                    miss = min(miss, j)
                continue
            i = np.int64(_mix(block) & np.uint64(mask))
            while keys[i] != 0 and keys[i] != block:
                i = (i + 1) & mask
            if keys[i] == 0:
                keys[i] = block
                meta[0] += 1
                miss = min(miss, j)
        cached[0] += min(miss * block_tokens[r], input_tokens[r])
    return len(requests)


@njit(nogil=True, cache=True)
def _reinsert(keys, old):
    mask = len(keys) - 1
    for block in old:
        if block != 0:
            i = np.int64(_mix(block) & np.uint64(mask))
            while keys[i] != 0:
                i = (i + 1) & mask
            keys[i] = block


class InfiniteCache:
    """The infinite cache of one cache (a unit's shared one, or a replica's), counted in the LRU pass's stream
    (tokenledger/whatif/replay.py): the same figure as sql/whatif/whatif_first_sightings.sql and
    sql/whatif/whatif_infinite.sql (a
    request's cached prefix is its leading run of blocks sighted in an earlier request), from a set of the blocks
    seen, 8 bytes a slot, grown to stay at most FILL full."""

    FILL = 0.7

    def __init__(self) -> None:
        self.keys = np.zeros(INITIAL_NODES, dtype=np.int64)
        self.meta = np.zeros(2, dtype=np.int64)  # blocks in the table, block 0 seen
        self.cached = np.zeros(1, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes)

    def replay(self, offsets: np.ndarray, values: np.ndarray, input_tokens: np.ndarray, block_tokens: np.ndarray,
               requests: np.ndarray) -> None:
        """As `LruCache.replay`: requests (indices into the per-request arrays) in arrival order."""
        done = 0
        while done < len(requests):
            done = _infinite(self.keys, self.meta, offsets, values, input_tokens, block_tokens, requests, done,
                             int(len(self.keys) * self.FILL), self.cached)
            if done < len(requests):
                r = requests[done]
                need = int(self.meta[0] + offsets[r + 1] - offsets[r])
                slots = len(self.keys)
                while need > slots * self.FILL:
                    slots *= 2
                old, self.keys = self.keys, np.zeros(slots, dtype=np.int64)
                _reinsert(self.keys, old)

    @property
    def cached_tokens(self) -> int:
        return int(self.cached[0])

    def release(self) -> None:
        """Free the set (its figure is no longer wanted)."""
        self.keys = np.zeros(1, dtype=np.int64)


class Sampling:
    """A SHARDS sample: a block is replayed when the top 32 bits of its salted hash are below 2^32 / `every` (the
    rate 1/every), or whole when it is one of `shared`."""

    def __init__(self, every: int, shared: np.ndarray | None = None) -> None:
        self.every = int(every)
        self.shared = np.unique(np.asarray([] if shared is None else shared, dtype=np.int64))
        slots = 1 << (4 * len(self.shared)).bit_length()  # at most a quarter full: a probe mostly ends at once
        self._keys, self._used = np.zeros(slots, dtype=np.int64), np.zeros(slots, dtype=np.bool_)
        _fill(self._keys, self._used, self.shared, np.uint64(SAMPLING_SALT))

    @property
    def rate(self) -> float:
        return 1 / self.every

    def kept(self, values: np.ndarray) -> np.ndarray:
        """Per block of `values`: 1 kept whole, 2 kept by the sample, 0 not replayed."""
        return _sample(values, (1 << 32) // self.every, np.uint64(SAMPLING_SALT), self._keys, self._used)


@dataclass
class LruCache:
    """One cache's recency list for every size asked (in blocks), and what its replay has counted so far."""

    sizes: np.ndarray
    sampling: Sampling | None = None
    cached: np.ndarray = field(init=False)  # exact: tokens of each request's leading run cached, per size
    whole_hits: np.ndarray = field(init=False)  # sampled: tokens of whole blocks found, per size
    sampled_hits: np.ndarray = field(init=False)  # sampled: tokens of sampled blocks found, per size
    totals: np.ndarray = field(init=False)  # sampled tokens, tokens not kept whole, accesses replayed

    def __post_init__(self) -> None:
        self.sizes = np.array(sorted({int(s) for s in self.sizes}), dtype=np.int64)
        if len(self.sizes) == 0 or self.sizes[0] < 1:
            raise ValueError(f"cache sizes {self.sizes.tolist()} must be at least 1 block")
        k = len(self.sizes)
        self.boundary, self.above = np.full(k, -1, dtype=np.int64), np.zeros(k, dtype=np.int64)
        self.meta = np.array([-1, -1, 0, 0], dtype=np.int64)
        self.cached, self.totals = np.zeros(k, dtype=np.int64), np.zeros(3, dtype=np.int64)
        self.whole_hits, self.sampled_hits = np.zeros(k), np.zeros(k)
        self._allocate(INITIAL_NODES)

    def _allocate(self, nodes: int) -> None:
        self.key = np.zeros(nodes, dtype=np.int64)
        self.prev = np.full(nodes, -1, dtype=np.int64)
        self.nxt = np.arange(1, nodes + 1, dtype=np.int64)  # the free list, through every node
        self.nxt[-1] = -1
        self.weight, self.zone = np.zeros(nodes, dtype=np.int64), np.full(nodes, -1, dtype=np.int64)
        slots = 1 << (2 * nodes - 1).bit_length()  # at most half full
        self.keys, self.table = np.zeros(slots, dtype=np.int64), np.full(slots, -1, dtype=np.int64)

    def _grow(self, at_least: int) -> None:
        n = len(self.key)
        size = max(2 * n, n + at_least)
        old = [self.key, self.prev, self.nxt, self.weight, self.zone]
        self._allocate(size)
        for new, kept in zip([self.key, self.prev, self.nxt, self.weight, self.zone], old, strict=True):
            new[:n] = kept
        self.nxt[size - 1] = self.meta[2]  # the new nodes, then the free ones left
        self.meta[2] = n
        _rehash(self.keys, self.table, self.key, self.nxt, self.meta[0])

    def replay(self, offsets: np.ndarray, values: np.ndarray, input_tokens: np.ndarray, block_tokens: np.ndarray,
               requests: np.ndarray, kept: np.ndarray | None = None) -> None:
        """Replay `requests` (indices into the per-request arrays, in arrival order) through the cache: request r's
        blocks are values[offsets[r]:offsets[r + 1]], first block first; its input and block size in tokens.
        `kept`: the sample's verdict on each of `values` (`Sampling.kept`), computed here when not given (a caller
        replaying several caches of one unit computes it once)."""
        if kept is None:
            kept = np.ones(len(values), dtype=np.int8) if self.sampling is None else self.sampling.kept(values)
        every = 1 if self.sampling is None else self.sampling.every
        done = 0
        while done < len(requests):
            done = _replay(self.keys, self.table, self.key, self.prev, self.nxt, self.weight, self.zone, self.meta,
                           self.boundary, self.above, self.sizes, offsets, values, kept, input_tokens, block_tokens,
                           requests, done, every, self.sampling is not None,
                           self.cached, self.whole_hits, self.sampled_hits, self.totals)
            if done < len(requests):
                r = requests[done]
                self._grow(int(offsets[r + 1] - offsets[r]) + 2)

    @property
    def accesses(self) -> int:
        """Block accesses replayed so far (sampled ones and whole ones; every one when exact)."""
        return int(self.totals[2])


def cached_tokens(caches: list[LruCache]) -> dict[int, float]:
    """The cached input tokens of a unit's caches (one shared, or one per replica) at each size: exact, the sum of
    the caches' counts; sampled, the tokens of whole blocks found, plus the sampled blocks' share found times the
    tokens of all blocks not kept whole (a ratio estimator: how many blocks the hash happened to keep does not
    move it)."""
    sizes = caches[0].sizes
    if caches[0].sampling is None:
        return {int(s): float(sum(int(c.cached[i]) for c in caches)) for i, s in enumerate(sizes)}
    sampled = sum(int(c.totals[0]) for c in caches)
    tail = sum(int(c.totals[1]) for c in caches)
    out = {}
    for i, s in enumerate(sizes):
        whole = sum(float(c.whole_hits[i]) for c in caches)
        found = sum(float(c.sampled_hits[i]) for c in caches)
        out[int(s)] = whole + (found / sampled * tail if sampled else 0.0)
    return out
