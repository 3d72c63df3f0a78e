"""The prefix-cache what-if (issue 16): block hashes in the gateway contract, the simulation's formulas on
hand-worked traces, and the daily table through Dagster."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import request, write_jsonl
from tokenledger.ingest.landing import LandingFile
from tokenledger.ingest.sources import stage_gateway_files
from tokenledger.storage.lake import DayWindow


def _staged(tmp_path: Path, path: Path, fmt: str) -> dict[str, tuple]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    [staged] = stage_gateway_files(con, [LandingFile(path, fmt)], tmp_path / "stage")
    return {r[0]: (r[1], r[2]) for r in con.execute(
        "SELECT request_id, prefix_block_hashes, reason FROM read_parquet($p)", {"p": str(staged)}).fetchall()}


def test_block_hashes_are_read_exactly_or_quarantined_with_the_rule(tmp_path: Path) -> None:
    records = [
        request("plain", prefix_block_hashes=[7, 8, -9]),
        request("none"),
        request("empty", prefix_block_hashes=[]),
        request("fraction", prefix_block_hashes=[1, 2.5]),
        request("text", prefix_block_hashes=["prompt text"]),
        request("scalar", prefix_block_hashes=12),
        request("beyond", prefix_block_hashes=[2**63]),
        request("largest", prefix_block_hashes=[2**63 - 1]),
    ]
    # JSON Python does not write: an exponent, spacing, and elements from_json would turn into numbers or NULLs
    written = {"exponent": "[1E3]", "spaced": "[ 3 ,\t4 ]", "boolean": "[true]", "null": "[1,null]",
               "nested": "[[1],[2]]", "object": '[{"k":1}]', "string": '["12"]'}
    records += [request(name, prefix_block_hashes=f"@{name}@") for name in written]
    path = write_jsonl(tmp_path / "a.jsonl", records)
    text = path.read_text()
    for name, array in written.items():
        text = text.replace(f'"@{name}@"', array)
    path.write_text(text)
    got = _staged(tmp_path, path, "jsonl")
    assert got["spaced"] == ([3, 4], None)
    for name in ("exponent", "boolean", "null", "nested", "object", "string"):
        assert got[name][0] is None and "is not a JSON array of integers" in got[name][1], (name, got[name])
    assert got["plain"] == ([7, 8, -9], None)
    assert got["none"] == (None, None)
    assert got["empty"] == ([], None)
    assert got["largest"] == ([2**63 - 1], None)
    assert got["fraction"] == (None, "prefix_block_hashes: [1,2.5] is not a JSON array of integers (each within "
                                     "signed 64 bits)")
    # a string inside the array could be prompt text: it is never repeated in the reason
    assert got["text"] == (None, "prefix_block_hashes: [a JSON array was here, not kept] is not a JSON array of "
                                 "integers (each within signed 64 bits)")
    assert got["scalar"] == (None, "prefix_block_hashes: a value of type integer is not a valid array")
    assert got["beyond"][0] is None and "9223372036854775808" in got["beyond"][1]

    # Parquet: a list column is read through its JSON text, so the same rules hold
    base = ", ".join(f"{v!r} AS {k}" for k, v in request("x").items() if k != "request_id")
    got = {}
    for name, values in (("signed", "('pq-1', [5, -6]::BIGINT[]), ('pq-2', NULL)"),
                         ("unsigned", "('pq-3', [1]::UBIGINT[]), ('pq-4', [18446744073709551615]::UBIGINT[])")):
        parquet = tmp_path / f"{name}.parquet"
        duckdb.connect().execute(f"COPY (SELECT *, {base} FROM (VALUES {values}) t(request_id, prefix_block_hashes)) "
                                 "TO $p (FORMAT PARQUET)", {"p": str(parquet)})
        got.update(_staged(tmp_path / name, parquet, "parquet"))
    assert got["pq-1"] == ([5, -6], None)
    assert got["pq-2"] == (None, None)
    assert got["pq-3"] == ([1], None)
    assert got["pq-4"] == (None, "prefix_block_hashes: [18446744073709551615] is not a JSON array of integers "
                                 "(each within signed 64 bits)")


# --- the replay, hand-worked -----------------------------------------------------------------------------------
#
# Five requests to deployment d1 (blocks of 4 tokens, two replicas), in this order:
#
#   r1  session s1  [A, B, C]     10 tokens (4 + 4 + 2: the last block is partial)
#   r2  session s1  [A, B, D]     12 tokens
#   r3  session s2  [E]            3 tokens
#   r4  session s1  [A, B, C, F]  15 tokens
#   r5  session s1  [A, B, C]      9 tokens (4 + 4 + 1)
#
# Infinite cache, shared: r1 0, r2 A B = 8, r3 0, r4 A B C = 12, r5 A B C = 12 tokens of blocks but 9 of input:
# 29 of 49 tokens cached.
#
# LRU of 2 blocks, shared. A request looks its blocks up when it arrives, then touches them last to first (its
# head most recent). r1 misses and leaves {B, A}; r2 hits A B (8) and leaves {B, A}; r3 misses E and leaves
# {A, E}; r4 hits A only (4), leaves {B, A}; r5 hits A B (8): 20 tokens.
#
# Two replicas, each its own cache. md5 puts session s1 on replica 1, s2 on replica 0, and the request ids r1 r2 r4
# on replica 0, r3 r5 on replica 1 (int.from_bytes(md5(id), 'little') % 2, DuckDB's md5_number % 2).
#   session-affine, infinite: replica 1 sees r1 r2 r4 r5 (0 + 8 + 12 + 9), replica 0 r3 (0): 29.
#   random, infinite: replica 0 sees r1 r2 r4 (0 + 8 + 12), replica 1 r3 r5 (0 + 0: A is new there): 20.
#   session-affine, LRU of 2: replica 1: r1 0, r2 8, r4 A B (8), r5 A B (8) = 24; replica 0: 0. 24.
#   random, LRU of 2: replica 0: r1 0, r2 8, r4 8 = 16; replica 1: 0. 16.

FIVE = [("r1", "s1", ["A", "B", "C"], 10), ("r2", "s1", ["A", "B", "D"], 12), ("r3", "s2", ["E"], 3),
        ("r4", "s1", ["A", "B", "C", "F"], 15), ("r5", "s1", ["A", "B", "C"], 9)]
DAY = DayWindow(date(2026, 11, 16))  # the day of _day_tables' requests
HASH = {name: value for value, name in enumerate("ABCDEF", start=101)}
SCENARIOS = [
    ("infinite", "infinite", None, None, "shared", None),
    ("lru-2", "lru", 2, None, "shared", None),
    ("lru-2gb", "lru", None, 0.002, "shared", None),  # 0.002 GB / (250,000 bytes x 4 tokens) = 2 blocks
    ("infinite-affine", "infinite", None, None, "per_replica", "session_affine"),
    ("infinite-random", "infinite", None, None, "per_replica", "random"),
    ("lru-2-affine", "lru", 2, None, "per_replica", "session_affine"),
    ("lru-2-random", "lru", 2, None, "per_replica", "random"),
    ("lru-1tb", "lru", None, 1000.0, "shared", None),  # far more blocks than the day has: the infinite cache
]


def _day_tables(con: duckdb.DuckDBPyConnection, requests: list[tuple], scenarios: list[tuple] = SCENARIOS,
                kv_bytes: int | None = 250_000, minutes_apart: int = 1, budget_accesses: int = 50_000_000) -> None:
    """The tables a day's replay reads, by hand: day_requests (from 10:00, `minutes_apart`), day_deployments and
    the what-if config."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TEMP TABLE day_requests (request_id VARCHAR, received_at TIMESTAMPTZ, deployment_id VARCHAR, "
                "session_id VARCHAR, status VARCHAR, input_tokens BIGINT, cached_input_tokens BIGINT, "
                "output_tokens BIGINT, prefix_block_hashes BIGINT[])")
    for k, (rid, session, blocks, tokens) in enumerate(requests):
        con.execute("INSERT INTO day_requests VALUES ($rid, TIMESTAMPTZ '2026-11-16 10:00:00+00' + "
                    "to_minutes($minute), 'd1', $session, 'ok', $tokens, 0, 10, $hashes)",
                    {"rid": rid, "minute": k * minutes_apart, "session": session, "tokens": tokens,
                     "hashes": None if blocks is None else [HASH[b] for b in blocks]})
    con.execute("CREATE TEMP TABLE day_deployments AS SELECT 'd1' AS deployment_id, 'm' AS model, 'gpu' AS kind, "
                "4 AS kv_block_tokens, 2 AS replicas, TIMESTAMPTZ '2026-11-17 00:00:00+00' AS in_force_to")
    con.execute("CREATE TEMP TABLE cfg_whatif_model AS SELECT 'm' AS model, $b::BIGINT AS kv_bytes_per_token "
                "WHERE $b IS NOT NULL", {"b": kv_bytes})
    con.execute("CREATE TEMP TABLE cfg_whatif_scenario (scenario VARCHAR, cache VARCHAR, size_blocks BIGINT, "
                "size_gb DOUBLE, scope VARCHAR, routing VARCHAR)")
    con.executemany("INSERT INTO cfg_whatif_scenario VALUES (?, ?, ?, ?, ?, ?)", scenarios)
    con.execute("CREATE TEMP TABLE cfg_whatif_sampling AS SELECT $b::BIGINT AS budget_accesses", {"b": budget_accesses})


def _replayed(tmp_path: Path, requests: list[tuple], chunk_accesses: int = 1 << 20, **kw) -> dict[str, int | None]:
    from tokenledger.whatif.replay import replay_day

    con = duckdb.connect()
    _day_tables(con, requests, **kw)
    replay_day(con, tmp_path, DAY, chunk_accesses)
    results = dict(con.execute("SELECT scenario, cached_tokens FROM whatif_results").fetchall())
    notes = dict(con.execute("SELECT scenario, note FROM whatif_scenario_units WHERE note IS NOT NULL").fetchall())
    return {s[0]: results.get(s[0], notes.get(s[0])) for s in kw.get("scenarios", SCENARIOS)}


def test_five_requests_through_every_cache_by_hand(tmp_path: Path) -> None:
    assert _replayed(tmp_path, FIVE) == {
        "infinite": 29, "lru-2": 20, "lru-2gb": 20, "infinite-affine": 29, "infinite-random": 20,
        "lru-2-affine": 24, "lru-2-random": 16, "lru-1tb": 29}


def test_the_replay_is_the_same_whatever_the_chunks(tmp_path: Path) -> None:
    # Batches of 3 accesses hold one request each: every cache's recency list crosses a batch boundary.
    assert _replayed(tmp_path, FIVE, chunk_accesses=3) == _replayed(tmp_path / "one", FIVE)


def test_a_day_replayed_hour_by_hour_carries_every_cache_from_one_hour_to_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenledger.whatif import replay as whatif

    # 2.5 hours apart, the five requests fall in five hours (10:00 to 20:00). A small day is sorted in one run of
    # hours, one file; with runs of at most one access, each hour is a file of its own and every cache state
    # crosses from one file to the next.
    one = _replayed(tmp_path / "one", FIVE)
    assert _replayed(tmp_path / "small", FIVE, minutes_apart=150) == one
    assert [p.name for p in (tmp_path / "small").glob("whatif_requests-*")] == ["whatif_requests-10.parquet"]
    monkeypatch.setattr(whatif, "SLAB_ACCESSES_PER_LIMIT_BYTE", 1e-12)
    assert _replayed(tmp_path / "hours", FIVE, minutes_apart=150) == one
    assert _replayed(tmp_path / "chunks", FIVE, chunk_accesses=3, minutes_apart=150) == one
    assert sorted(p.name for p in (tmp_path / "hours").glob("whatif_requests-*")) == [
        "whatif_requests-10.parquet", "whatif_requests-12.parquet", "whatif_requests-15.parquet",
        "whatif_requests-17.parquet", "whatif_requests-20.parquet"]


def test_hours_are_sorted_in_runs_of_at_most_the_limit() -> None:
    from tokenledger.whatif.replay import hour_runs

    # 5 + 4 fit in 10, 3 more would not; 12 alone is above the limit and a run of its own; 2 + 6 + 1 fit.
    assert hour_runs([(0, 5), (1, 4), (2, 3), (3, 12), (4, 2), (5, 6), (6, 1)], 10) == [
        [0, 1], [2], [3], [4, 5, 6]]
    assert hour_runs([(7, 0), (8, 0)], 1) == [[7, 8]]
    assert hour_runs([], 10) == []


def test_the_infinite_cache_taken_run_by_run_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenledger.storage import lake
    from tokenledger.whatif import replay as whatif

    # 2.5 hours apart, with runs of at most one access: five runs, each aggregated on its own and probing the
    # hashes the runs before it sighted first (r2 sights only D, r4 only F, r5 nothing; r3 is E's first).
    monkeypatch.setattr(whatif, "SLAB_ACCESSES_PER_LIMIT_BYTE", 1e-12)
    written: dict[str, int] = {}
    real = lake.write_query

    def counted(con, query, target, *args, **kwargs):
        rows = real(con, query, target, *args, **kwargs)
        if target.name.startswith("whatif_first_sightings-"):
            written[target.name] = written.get(target.name, 0) + rows
        return rows

    monkeypatch.setattr(lake, "write_query", counted)
    con = duckdb.connect()
    _day_tables(con, FIVE, scenarios=[SCENARIOS[0]], minutes_apart=150)
    whatif.replay_day(con, tmp_path, DAY)
    # per run, the hashes sighted first: r1 A B C, r2 D, r3 E, r4 F, r5 none
    assert written == {"whatif_first_sightings-000.parquet": 3, "whatif_first_sightings-001.parquet": 1,
                       "whatif_first_sightings-002.parquet": 1, "whatif_first_sightings-003.parquet": 1,
                       "whatif_first_sightings-004.parquet": 0}
    # r1 misses at block 0, r2 at block 2 (D: 8 of 12 tokens), r3 at 0, r4 at 3 (12 of 15), r5 all 3 blocks but
    # only its 9 tokens: 8 + 12 + 9
    assert con.execute("SELECT cached_tokens FROM whatif_results").fetchall() == [(29,)]
    assert not list(tmp_path.glob("whatif_first_sightings-*"))  # the runs' files are removed


def test_the_infinite_cache_counted_in_the_lru_stream_is_the_same(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenledger.storage import lake
    from tokenledger.whatif import replay as whatif

    # Every infinite scenario of SCENARIOS shares its scope and routing with an LRU one: it is counted in the LRU
    # pass's stream, and DuckDB writes no first sightings. With no memory for the stream's sets (a share of 0 of
    # DuckDB's limit) they are dropped and DuckDB counts each infinite cache, one file of first sightings each (a
    # small day is one run). The figures are the same either way: 29, 29 and 20 tokens, worked by hand in
    # test_five_requests_through_every_cache_by_hand.
    written: list[str] = []
    real = lake.write_query

    def counted(con, query, target, *args, **kwargs):
        if target.name.startswith("whatif_first_sightings-"):
            written.append(target.name)
        return real(con, query, target, *args, **kwargs)

    monkeypatch.setattr(lake, "write_query", counted)
    streamed = _replayed(tmp_path / "stream", FIVE)
    assert written == []
    monkeypatch.setattr(whatif, "INFINITE_MEMORY_SHARE", 0)
    by_duckdb = _replayed(tmp_path / "duckdb", FIVE)
    assert written == ["whatif_first_sightings-000.parquet"] * 3
    assert streamed == by_duckdb
    assert {s: streamed[s] for s in ("infinite", "infinite-affine", "infinite-random")} == {
        "infinite": 29, "infinite-affine": 29, "infinite-random": 20}


def test_the_last_block_counts_only_up_to_the_input(tmp_path: Path) -> None:
    # Both requests are one block of 4 tokens; the second is cached whole, yet holds 1 token only.
    only = [("infinite", "infinite", None, None, "shared", None)]
    assert _replayed(tmp_path, [("a", None, ["A"], 4), ("b", None, ["A"], 1)], scenarios=only) == {"infinite": 1}


def test_requests_out_of_arrival_order_stop_the_replay(tmp_path: Path) -> None:
    # The LRU replay reads whatif_requests in its file's order (no sort): a file out of order must not give figures.
    from tokenledger.whatif.replay import replay, replay_day

    con = duckdb.connect()
    _day_tables(con, FIVE, scenarios=[SCENARIOS[1]])
    replay_day(con, tmp_path, DAY)
    con.execute("CREATE OR REPLACE TEMP TABLE reversed AS SELECT * FROM whatif_requests ORDER BY seq DESC")
    con.execute("CREATE OR REPLACE TEMP VIEW whatif_requests AS SELECT * FROM reversed")
    with pytest.raises(RuntimeError, match=r"not in arrival order for unit 1 \(cache 0\)"):
        replay(con, tmp_path)


def test_requests_without_hashes_or_a_size_in_blocks_are_not_replayed(tmp_path: Path) -> None:
    from tokenledger.whatif.replay import replay_day

    con = duckdb.connect()
    _day_tables(con, FIVE + [("r6", "s1", None, 100)], kv_bytes=None)
    assert replay_day(con, tmp_path, DAY) == 5  # r6 carries no hashes
    note = con.execute("SELECT note FROM whatif_scenario_units WHERE scenario = 'lru-2gb'").fetchone()[0]
    assert note == ("model m has no kv_bytes_per_token in config/whatif.yaml, so a cache of 0.002 GB has no size in "
                    "blocks")


# --- large days: SHARDS ----------------------------------------------------------------------------------------

def _figures(con: duckdb.DuckDBPyConnection) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in con.execute(
        "SELECT scenario, cached_tokens, method, sampling_rate, sampled_accesses FROM whatif_results").fetchall()}


def test_above_the_budget_the_lru_is_sampled_and_says_so(tmp_path: Path) -> None:
    from tokenledger.whatif.replay import replay_day

    # The five requests hold 14 block accesses. A budget of 2 samples every LRU scenario at the rate
    # 1 / ceil(14 / 2) = 1/7; every block is in at least 0.1% of the requests, so each is kept whole, and the
    # estimate is the exact replay: per replica and shared, it says how it was found. The infinite cache stays exact.
    exact = _replayed(tmp_path / "exact", FIVE)
    con = duckdb.connect()
    _day_tables(con, FIVE, budget_accesses=2)
    replay_day(con, tmp_path / "sampled", DAY)
    got = _figures(con)
    assert {s: got[s][0] for s in got} == exact
    assert {s: got[s][1:] for s in got} == {
        s: ("exact", 1.0, 14) if s.startswith("infinite") else ("shards", 1 / 7, 14) for s in got}


def _mooncake_day(requests: int, seed: int) -> pa.Table:
    """A day of `requests` shaped like Mooncake's traces, with the generator's prefix hashes
    (tokenledger/generate/prefix.py; blocks of 512 tokens): four streams with system prompts of 1-12k tokens, 70% of
    requests steps of agent sessions (about 20 steps, each resending the last prompt and ~1,500 tokens more), the rest
    single chats; in random order through the day."""
    from tokenledger.generate.prefix import prefix_block_hashes

    rng = np.random.default_rng(seed)
    system = np.array([2048, 6144, 1024, 12288])
    share = [0.4, 0.3, 0.2, 0.1]
    agent = rng.random(requests) < 0.7
    sessions = max(1, int(agent.sum()) // 20)
    session = np.where(agent, rng.integers(1, sessions + 1, requests), 0)
    stream = np.where(agent, rng.choice(4, sessions + 1, p=share)[session], rng.choice(4, requests, p=share))
    step = np.zeros(requests, dtype=np.int64)
    steps: dict[int, int] = {}
    for i in np.flatnonzero(agent).tolist():
        step[i] = steps.get(int(session[i]), 0)
        steps[int(session[i])] = int(step[i]) + 1
    resent = system[stream] + step * 1500
    chat = system[stream] + rng.integers(200, 3000, requests)
    inputs = np.where(agent, resent + rng.integers(100, 900, requests), chat)
    hashes = prefix_block_hashes(DAY.day, inputs, np.full(requests, 512), stream, system[stream], session,
                                 np.where(agent, resent, 0), np.arange(1, requests + 1), np.ones(requests, dtype=bool))
    micros = np.sort(rng.integers(0, 86_400_000_000, requests))
    return pa.table({"request_id": [f"q{i:06d}" for i in range(requests)],
                     "received_at": pa.array(np.datetime64("2026-11-16T00:00:00", "us")
                                             + micros.astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
                     "input_tokens": inputs, "prefix_block_hashes": hashes.cast(pa.list_(pa.int64()))})


def test_shards_on_a_mooncake_shaped_day_is_within_half_a_point_of_the_exact_replay(tmp_path: Path) -> None:
    from tokenledger.whatif.replay import replay_day

    day = _mooncake_day(20_000, seed=1)
    sizes = [16, 64, 256, 1024]  # 8k to 512k tokens: below one system prompt to a few hundred sessions
    scenarios = [("infinite", "infinite", None, None, "shared", None)] + [
        (f"lru-{n}", "lru", n, None, "shared", None) for n in sizes]

    def replayed(budget: int) -> tuple[dict[str, tuple], int]:
        con = duckdb.connect()
        _day_tables(con, [], scenarios=scenarios, budget_accesses=budget)
        con.register("mooncake", day)
        con.execute("INSERT INTO day_requests SELECT request_id, received_at, 'd1', NULL, 'ok', input_tokens, 0, 10, "
                    "prefix_block_hashes FROM mooncake")
        con.execute("UPDATE day_deployments SET kv_block_tokens = 512, replicas = 1")
        replay_day(con, tmp_path / str(budget), DAY)
        return _figures(con), int(con.execute("SELECT sum(input_tokens) FROM whatif_requests").fetchone()[0])

    exact, tokens = replayed(10**12)
    accesses = exact["infinite"][3]
    sampled, _ = replayed(accesses // 7 + 1)  # the rate 1/7
    assert {s: f[1:] for s, f in exact.items()} == {s: ("exact", 1.0, accesses) for s in exact}
    assert sampled["infinite"] == exact["infinite"]
    for size in sizes:
        name = f"lru-{size}"
        method, rate, replayed_accesses = sampled[name][1:]
        assert (method, rate) == ("shards", 1 / 7)
        # the sample, plus the blocks of the four system prompts and of sessions seen in 20 requests or more, whole
        assert accesses / 7 < replayed_accesses < accesses / 2
        error = (sampled[name][0] - exact[name][0]) / tokens
        assert abs(error) <= 0.005, (name, exact[name][0] / tokens, error)


def test_the_sampling_budget_is_read_from_whatif_yaml(tmp_path: Path) -> None:
    from tokenledger.config import DEFAULT_BUDGET_ACCESSES, flatten_whatif
    from tokenledger.errors import ConfigError

    path = tmp_path / "whatif.yaml"
    path.write_text("scenarios:\n  - {scenario: infinite, cache: infinite}\nsampling:\n  budget_accesses: 1000\n")
    assert [r.rows for r in flatten_whatif(path) if r.table == "whatif_sampling"] == [[{"budget_accesses": "1000"}]]
    path.write_text("scenarios:\n  - {scenario: infinite, cache: infinite}\n")
    assert [r.rows for r in flatten_whatif(path) if r.table == "whatif_sampling"] == [
        [{"budget_accesses": str(DEFAULT_BUDGET_ACCESSES)}]]
    path.write_text("sampling:\n  budget: 1000\n")
    with pytest.raises(ConfigError, match=r"line 2: unknown key 'budget' in sampling \(known keys: budget_accesses\)"):
        flatten_whatif(path)


# --- a tiny day through Dagster ------------------------------------------------------------------------------------

WHATIF_YAML = """\
models:
  m70: {kv_bytes_per_token: 250000}
scenarios:
  - {scenario: infinite, cache: infinite}
  - {scenario: lru-2, cache: lru, size_blocks: 2}
  - {scenario: lru-2gb, cache: lru, size_gb: 0.002}
  - {scenario: infinite-affine, cache: infinite, scope: per_replica, routing: session_affine}
  - {scenario: infinite-random, cache: infinite, scope: per_replica, routing: random}
traces:
  five: {kv_block_tokens: 4, replicas: 2}
"""


def test_a_day_and_a_trace_through_dagster(home: Path) -> None:
    """The five requests on m70-h100 (blocks of 4 tokens; 3 replicas at the end of the day, after the noon
    scale-up from 16 to 24 GPUs), with a request without hashes, a rejected one and one whose hashes do not fit its
    input; a $240 GPU charge values the difference. The same five requests land as a trace."""
    from tests.conftest import failure_text, gateway_dir, materialize, rows
    from tests.test_cost import charge, write_focus

    config = home / "config"
    text = (config / "deployments.yaml").read_text()
    (config / "deployments.yaml").write_text(text.replace("cache_policy: prefix-cache\n",
                                                          "cache_policy: prefix-cache\n    kv_block_tokens: 4\n", 1))
    (config / "whatif.yaml").write_text(WHATIF_YAML)
    observed = {"r1": 0, "r2": 8, "r3": 0, "r4": 8, "r5": 8}
    records = [request(rid, received_at=f"2026-11-16T10:0{i}:00Z", session_id=session, input_tokens=tokens,
                       cached_input_tokens=observed[rid], output_tokens=10,
                       prefix_block_hashes=[HASH[b] for b in blocks])
               for i, (rid, session, blocks, tokens) in enumerate(FIVE)]
    records += [request("r6", received_at="2026-11-16T10:06:00Z", input_tokens=100, cached_input_tokens=0,
                        output_tokens=10),
                request("r7", received_at="2026-11-16T10:07:00Z", status="rejected", input_tokens=8,
                        cached_input_tokens=0, output_tokens=0, ttft_ms=..., queue_ms=..., itl_max_ms=..., e2e_ms=...,
                        http_status=429, prefix_block_hashes=[HASH["A"], HASH["B"]]),
                request("r8", received_at="2026-11-16T10:08:00Z", input_tokens=20, cached_input_tokens=0,
                        output_tokens=10, prefix_block_hashes=[7])]
    write_jsonl(gateway_dir(home, "2026-11-16") / "a.jsonl", records)
    write_focus(home, [charge("240.00", resource="i-m70-1", sku="p5.48xlarge", tag="m70-h100")])
    write_jsonl(home / "raw" / "traces" / "five" / "trace.jsonl", [
        {"timestamp": 1000 * i, "input_length": tokens, "output_length": 10,
         "hash_ids": [HASH[b] for b in blocks], "session_id": session}
        for i, (_, session, blocks, tokens) in enumerate(FIVE)])

    result = materialize("2026-11-16")
    assert result.success, failure_text(result)
    checks = {(e.event_specific_data.asset_check_key.asset_key.to_user_string(), e.event_specific_data.asset_check_key
               .name): e.event_specific_data.passed for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert checks[("infra/cache_whatif_daily", "contract")] and checks[("infra/cache_whatif_traces", "contract")]

    day = {r["scenario"]: r for r in rows(home, "infra", "cache_whatif_daily", "2026-11-16")}
    assert set(day) == {"infinite", "lru-2", "lru-2gb", "infinite-affine", "infinite-random"}
    row = day["infinite"]
    # r6 has no hashes and r7 was rejected: the five plus r8 (20 tokens, one hash: a mismatch, and a miss)
    assert (row["requests"], row["requests_simulated"], row["requests_block_mismatch"]) == (7, 6, 1)
    assert (row["replicas"], row["caches"], row["kv_block_tokens"]) == (3, 1, 4)
    assert (row["input_tokens"], row["simulated_cached_tokens"], row["simulated_recomputed_tokens"]) == (69, 29, 40)
    assert row["simulated_hit_ratio"] == 29 / 69 and row["observed_hit_ratio"] == 24 / 69
    # m70's $240 over weighted tokens 0.1 x 24 cached + 145 recomputed + 5 x 70 output = 497.4 (every reached
    # request counts in the unit costs): each cached token instead of a recomputed one saves 0.9 x 240 / 497.4.
    assert row["currency"] == "USD" and row["note"] is None
    assert abs(row["unit_cost_recomputed_per_mtok"] - 240 / 497.4 * 1e6) < 1e-6
    assert abs(row["cost_change"] - (29 - 24) * -0.9 * 240 / 497.4) < 1e-9
    assert abs(row["cost_change_per_mtok_input"] - row["cost_change"] / 69 * 1e6) < 1e-6
    assert {s: r["simulated_cached_tokens"] for s, r in day.items()} == {
        "infinite": 29, "lru-2": 20, "lru-2gb": 20,
        # three replicas: md5 puts s1 on replica 2 (r1 r2 r4 r5: 0 + 8 + 12 + 9), s2 on 1, r8 (no session) on 0;
        # by request id r2 goes to 1, r8 to 0 and r1 r3 r4 r5 to 2 (0 + 0 + 12 + 9)
        "infinite-affine": 29, "infinite-random": 21}
    assert (day["lru-2"]["cache_blocks"], day["lru-2gb"]["cache_blocks"], day["infinite-affine"]["caches"]) == (2, 2, 3)

    cur = duckdb.connect().execute("SELECT * FROM read_parquet($p)", {
        "p": str(home / "lake" / "infra" / "cache_whatif_traces" / "data.parquet")})
    names = [d[0] for d in cur.description]
    trace = {r[1]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    assert {s: trace[s]["simulated_cached_tokens"] for s in ("infinite", "lru-2", "infinite-affine")} == {
        "infinite": 29, "lru-2": 20, "infinite-affine": 29}
    assert trace["infinite"]["input_tokens"] == 49 and trace["infinite"]["requests_block_mismatch"] == 0
    assert trace["lru-2gb"]["note"] == ("trace five has no kv_bytes_per_token in config/whatif.yaml, so a cache of "
                                        "0.002 GB has no size in blocks")
    # published with the day, in the warehouse's and finance's reach
    assert (home / "exports" / "infra" / "cache_whatif_daily" / "day=2026-11-16" / "data.parquet").is_file()
    # the traces table too: one dataset of one file, read back by pandas and through the warehouse's view
    import pandas as pd

    from tokenledger.publish.warehouse import connect

    frame = pd.read_parquet(home / "exports" / "infra" / "cache_whatif_traces")
    replayed = {s: r["simulated_cached_tokens"] for s, r in trace.items()}
    assert len(frame) == len(trace) == 5 and set(frame["trace"]) == {"five"}
    assert frame.set_index("scenario")["simulated_cached_tokens"].dropna().astype(int).to_dict() == {
        s: n for s, n in replayed.items() if n is not None}
    with connect(home) as con:
        assert dict(con.execute("SELECT scenario, simulated_cached_tokens FROM infra.cache_whatif_traces "
                                "WHERE trace = 'five'").fetchall()) == replayed


def test_the_replica_of_a_key_is_its_md5_modulo_the_replicas_as_any_tool_computes_it() -> None:
    """sql/whatif/md5_mod.sql (through sql/whatif/replica_of.sql) takes md5 mod replicas from md5's two 64-bit halves;
    it must be
    the 128-bit number's remainder (Python: int.from_bytes(md5(key), 'little') % replicas), and 0 when nothing is
    per replica."""
    import hashlib

    import duckdb

    from tokenledger.storage.duck import run_sql, statement

    con = duckdb.connect()
    keys = [f"req-{i}" for i in range(400)] + ["", "ü-session", "s" * 300]
    con.execute("CREATE TABLE day_requests AS SELECT unnest($k) AS request_id, unnest($k) || '/s' AS session_id, "
                "'d' || (row_number() OVER () % 6) AS deployment_id, TIMESTAMPTZ '2026-11-16 00:00:00+00' "
                "AS received_at, 1 AS input_tokens, 0 AS cached_input_tokens, 1 AS output_tokens, 'ok' AS status, "
                "[1]::BIGINT[] AS prefix_block_hashes", {"k": keys})
    replicas = {"d0": 2, "d1": 3, "d2": 7, "d3": 1000, "d4": 4294967295, "d5": 1}
    con.execute("CREATE TABLE whatif_units AS SELECT unnest($u) AS unit, 1 AS unit_id, 16 AS kv_block_tokens, "
                "unnest($r) AS replicas", {"u": list(replicas), "r": list(replicas.values())})
    run_sql(con, "md5_mod")
    run_sql(con, "replica_of")
    for per_replica in (True, False):
        con.execute("CREATE OR REPLACE TABLE cfg_whatif_scenario AS SELECT $s AS scope",
                    {"s": "per_replica" if per_replica else "shared"})
        query = statement("whatif_day_rows")
        rows = con.execute(f"SELECT unit, request_id, replica_affine, replica_random FROM ({query})").fetchall()
        assert len(rows) == len(keys)

        def md5_mod(key: str, m: int, per_replica: bool = per_replica) -> int:
            return int.from_bytes(hashlib.md5(key.encode()).digest(), "little") % m if per_replica else 0

        assert [(r[2], r[3]) for r in rows] == [(md5_mod(r[1] + "/s", replicas[r[0]]), md5_mod(r[1], replicas[r[0]]))
                                                for r in rows]
