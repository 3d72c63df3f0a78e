"""The compiled LRU replay (tokenledger/whatif/lru.py): exact against a cache replayed one block at a time, and its
SHARDS estimate worked by hand; the compiled infinite cache against a set and by hand."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from tokenledger.whatif import lru
from tokenledger.whatif.lru import InfiniteCache, LruCache, Sampling, cached_tokens


def _lru_by_the_book(requests: list[tuple[list[int], int]], size: int, block_tokens: int) -> int:
    """The cached tokens of an LRU cache of `size` blocks, one request and one block at a time: a request's leading
    run of blocks found on arrival, then its blocks touched last to first."""
    cache: OrderedDict[int, None] = OrderedDict()
    total = 0
    for hashes, tokens in requests:
        run = next((i for i, h in enumerate(hashes) if h not in cache), len(hashes))
        total += min(run * block_tokens, tokens)
        for h in reversed(hashes):
            cache[h] = None
            cache.move_to_end(h)
        while len(cache) > size:
            cache.popitem(last=False)
    return total


def _arrays(requests: list[tuple[list[int], int]], block_tokens: int = 4) -> tuple[np.ndarray, ...]:
    """The replay's arrays: offsets and values (each request's hashes, first block first), inputs, block sizes."""
    offsets = np.r_[0, np.cumsum([len(h) for h, _ in requests])].astype(np.int64)
    values = np.array([b for h, _ in requests for b in h], dtype=np.int64)
    inputs = np.array([t for _, t in requests], dtype=np.int64)
    return offsets, values, inputs, np.full(len(requests), block_tokens, dtype=np.int64)


def _random_requests(rng: np.random.Generator, prefixes_only: bool) -> list[tuple[list[int], int]]:
    requests = []
    for _ in range(int(rng.integers(1, 60))):
        n = int(rng.integers(0, 8))
        if prefixes_only or rng.random() < 0.7:  # prefix hashes of a few conversations
            root = int(rng.integers(0, 4)) * 100 + int(rng.integers(0, 3)) * 10
            hashes = [root + k for k in range(n)]
        else:  # anything, repeats within a request included
            hashes = [int(h) for h in rng.integers(0, 12, n)]
        requests.append((hashes, max(0, 4 * n - int(rng.integers(0, 4)))))
    return requests


def test_the_compiled_lru_agrees_with_one_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two nodes to start with: the node arrays and the hash table grow (and are rehashed) within the replay.
    monkeypatch.setattr(lru, "INITIAL_NODES", 2)
    rng = np.random.default_rng(16)
    sizes = [1, 2, 3, 5, 8, 13, 1000]
    for _ in range(200):
        requests = _random_requests(rng, prefixes_only=False)
        offsets, values, inputs, blocks = _arrays(requests)
        cache, start = LruCache(np.array(sizes)), 0
        while start < len(requests):  # batches of whole requests, of random lengths
            end = min(len(requests), start + int(rng.integers(1, 8)))
            cache.replay(offsets, values, inputs, blocks, np.arange(start, end))
            start = end
        expected = {s: _lru_by_the_book(requests, s, 4) for s in sizes}
        assert cached_tokens([cache]) == expected, requests
        assert cache.accesses == len(values)
        alone = int(rng.choice(sizes))  # one size alone gives what it gave among others
        cache = LruCache(np.array([alone]))
        cache.replay(offsets, values, inputs, blocks, np.arange(len(requests)))
        assert cached_tokens([cache]) == {alone: expected[alone]}


def test_sampling_at_rate_one_is_the_exact_replay() -> None:
    # Hashes that name a whole prefix, as the gateway's and Mooncake's do: a block's parent is touched after it in
    # every request that holds it, so the cache always holds a leading run of each prompt, and counting a request's
    # blocks found (what a sample can do) is counting its leading run (what the exact replay does).
    rng = np.random.default_rng(7)
    sizes = np.array([1, 2, 3, 5, 8, 13, 1000])
    for _ in range(100):
        requests = _random_requests(rng, prefixes_only=True)
        offsets, values, inputs, blocks = _arrays(requests)
        exact, sampled = LruCache(sizes), LruCache(sizes, Sampling(1))
        for cache in (exact, sampled):
            cache.replay(offsets, values, inputs, blocks, np.arange(len(requests)))
        assert cached_tokens([sampled]) == cached_tokens([exact]) == {
            int(s): _lru_by_the_book(requests, int(s), 4) for s in sizes}
        assert sampled.accesses == exact.accesses == len(values)


# --- a SHARDS estimate by hand ------------------------------------------------------------------------------------
#
# Four requests, blocks of 4 tokens, every block full (56 input tokens), one LRU cache of 3 blocks:
#
#   r1 [A, B, C, D]    r2 [A, B, C, D]    r3 [E, F]    r4 [A, B, C, D]
#
# Exact: r1 misses and leaves {A, B, C} (D, touched first, is the least recent of four); r2 finds A B C (12
# tokens) and leaves {A, B, C}; r3 misses and leaves {E, F, A}; r4 finds A, not B (4 tokens). 16 of 56: 0.2857.
#
# Sampled at the rate 1/2: the hash keeps A and D (and none of B, C, E, F), each standing for 2 blocks, so the
# sampled cache is 3 / 2 = 1.5 blocks: the most recent kept block is inside, the next one half inside.
#   r1: A, D missed (8 sampled tokens); touched D then A: A (weight 2 of 3), then D, half inside.
#   r2: A found (4), D half found (2) of 8 sampled tokens; the list stays A, D.
#   r3: no kept block: nothing replayed, the eviction it causes unseen.
#   r4: A found (4), D half found (2) of 8.
# The sampled blocks found 12 of their 24 tokens; the estimate is 12 / 24 of all 56 tokens (none is kept whole):
# 28 tokens, a hit ratio of 0.5 against the exact 0.2857: an error of +0.2143, which six blocks cannot average away.
A, B, C, D, E, F = 102, 101, 105, 103, 109, 110


def test_a_shards_estimate_and_its_error_by_hand() -> None:
    sample = Sampling(2)
    # The hash's verdict on these blocks (2: sampled), pinned: it is part of the arithmetic above.
    assert sample.kept(np.array([A, B, C, D, E, F])).tolist() == [2, 0, 0, 2, 0, 0]
    requests = [([A, B, C, D], 16), ([A, B, C, D], 16), ([E, F], 8), ([A, B, C, D], 16)]
    offsets, values, inputs, blocks = _arrays(requests)
    exact, sampled = LruCache(np.array([3])), LruCache(np.array([3]), sample)
    for cache in (exact, sampled):
        cache.replay(offsets, values, inputs, blocks, np.arange(4))
    assert cached_tokens([exact]) == {3: 16} == {3: _lru_by_the_book(requests, 3, 4)}
    assert sampled.sampled_hits.tolist() == [12.0]
    assert sampled.totals.tolist() == [24, 56, 6]  # sampled tokens, tokens not kept whole, accesses replayed
    assert cached_tokens([sampled]) == {3: 28.0}  # the error: 28 / 56 - 16 / 56 = +0.2143

    # B kept whole (a shared block, weight 1) beside the sample: after a request the list is A (2), B (1), and D
    # (2) is out of the cache of 3. r1 misses A, B, D; r2 finds A (4, sampled) and B (4, whole), not D; r4 the
    # same. Whole: 8 tokens found. Sampled: 8 of 24 sampled tokens (A and D in r1, r2, r4), scaled to the 44 tokens
    # not kept whole (A, C, D three times, E and F): 8 + 8 / 24 x 44 = 22.67 tokens, 0.4048, 9 accesses replayed.
    with_b = LruCache(np.array([3]), Sampling(2, np.array([B])))
    with_b.replay(offsets, values, inputs, blocks, np.arange(4))
    assert with_b.whole_hits.tolist() == [8.0] and with_b.sampled_hits.tolist() == [8.0]
    assert with_b.totals.tolist() == [24, 44, 9]
    assert cached_tokens([with_b])[3] == pytest.approx(8 + 8 / 24 * 44)


def test_the_sample_keeps_about_one_block_in_every() -> None:
    ids = np.arange(1_000_000, dtype=np.int64) * 7919
    for every in (2, 9, 89):
        kept = int((Sampling(every).kept(ids) == 2).sum())
        # binomial: within 4 standard deviations of a million / every
        assert abs(kept - 1_000_000 / every) < 4 * (1_000_000 / every) ** 0.5, (every, kept)
    shared = ids[::1000]
    verdict = Sampling(9, shared).kept(ids)
    assert (verdict[::1000] == 1).all() and int((verdict == 1).sum()) == len(shared)


def _infinite_by_the_book(requests: list[tuple[list[int], int]], block_tokens: int) -> int:
    """The infinite cache's cached tokens, a request at a time: its leading run of blocks seen before, then all of its
    blocks seen."""
    seen: set[int] = set()
    total = 0
    for hashes, tokens in requests:
        run = next((i for i, h in enumerate(hashes) if h not in seen), len(hashes))
        total += min(run * block_tokens, tokens)
        seen.update(hashes)
    return total


def test_the_compiled_infinite_cache_agrees_with_a_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two slots to start with: the table grows (and is rehashed) within the replay; block 0 and repeats within a
    # request are among the random hashes.
    monkeypatch.setattr(lru, "INITIAL_NODES", 2)
    rng = np.random.default_rng(44)
    for _ in range(200):
        requests = _random_requests(rng, prefixes_only=False)
        offsets, values, inputs, blocks = _arrays(requests)
        cache, start = InfiniteCache(), 0
        while start < len(requests):
            end = min(len(requests), start + int(rng.integers(1, 8)))
            cache.replay(offsets, values, inputs, blocks, np.arange(start, end))
            start = end
        assert cache.cached_tokens == _infinite_by_the_book(requests, 4), requests


def test_the_infinite_cache_by_hand() -> None:
    a, b, c, d, e, f = 101, 102, 103, 104, 105, 106
    # Blocks of 4 tokens. [A B C] of 10 tokens finds nothing: 0. [A B D] of 12: A B seen, D not: 8. [E] of 3: 0.
    # [A B C F] of 15: A B C seen: 12. [A B C] of 9: all three seen, 12 tokens, but only its 9: 9. 0 + 8 + 0 + 12 + 9
    # = 29, as sql/whatif/whatif_infinite.sql gives (tests/test_whatif.py).
    cache = InfiniteCache()
    requests = [([a, b, c], 10), ([a, b, d], 12), ([e], 3), ([a, b, c, f], 15), ([a, b, c], 9)]
    offsets, values, inputs, blocks = _arrays(requests)
    cache.replay(offsets, values, inputs, blocks, np.arange(5))
    assert cache.cached_tokens == 29
    # Block 0 is a block like any other, and a block twice in one request is new only at its first place: [0 7 0] of
    # 12 finds nothing: 0. [0 7] of 8: both seen: 8. [7 5 7] of 12: 7 seen, 5 not: 4. 0 + 8 + 4 = 12.
    cache = InfiniteCache()
    offsets, values, inputs, blocks = _arrays([([0, 7, 0], 12), ([0, 7], 8), ([7, 5, 7], 12)])
    cache.replay(offsets, values, inputs, blocks, np.arange(3))
    assert cache.cached_tokens == 12
