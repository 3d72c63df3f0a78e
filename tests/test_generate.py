"""Tests of the synthetic landing zone: contracts, calibration targets, billing shape and the load-test knee, and
the first day's hosted-API logs in the adapters' formats.

One week at 20,000 requests per weekday is generated once per module; everything is asserted with DuckDB over
the written files, the way the pipeline will read them (the adapter formats with json, record by record).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import yaml

from tokenledger.generate import (
    DEMO_BENCH_DEPLOYMENT,
    DEMO_BENCH_MODEL,
    DEMO_BENCH_RATES,
    DEMO_BENCH_STEP_MINUTES,
    GenerateSummary,
    capacity_rps,
    default_steps,
    generate_landing_zone,
    generate_loadtest_run,
    generate_vllm_bench_run,
    initial_replicas,
    knee_index,
)
from tokenledger.generate.gateway import generate_day
from tokenledger.generate.prefix import STREAM_SPAN
from tokenledger.generate.scenario import BAD_ROW_KINDS, DEPLOYMENT_BY_ID, ISL_BUCKETS, STREAMS

START = date(2026, 11, 16)  # a Monday
DAYS = 7
RPD = 20_000
SEED = 7
MODEL_70B, DEP_70B = "llama-3.1-70b-instruct", "llama70b-h100nvl-tp2"
DEP_CODER = "qwen3coder30b-h100"
DEMO_RPD = 200_000  # the demo volume, which the scenario's fleet is sized for (one replica each)

VARCHAR_COLUMNS = {
    c: "VARCHAR"
    for c in [
        "request_id",
        "received_at",
        "model",
        "deployment_id",
        "tenant_id",
        "session_id",
        "status",
        "input_tokens",
        "cached_input_tokens",
        "cache_write_tokens",
        "output_tokens",
        "ttft_ms",
        "e2e_ms",
        "queue_ms",
        "itl_max_ms",
        "http_status",
        "error_type",
    ]
}
TYPED = """
  filename, request_id, model, deployment_id, tenant_id, session_id, status,
  try_cast(input_tokens AS BIGINT) AS input_tokens,
  try_cast(cached_input_tokens AS BIGINT) AS cached_input_tokens,
  try_cast(output_tokens AS BIGINT) AS output_tokens, try_cast(ttft_ms AS DOUBLE) AS ttft_ms,
  try_cast(e2e_ms AS DOUBLE) AS e2e_ms, try_cast(queue_ms AS DOUBLE) AS queue_ms,
  try_cast(itl_max_ms AS DOUBLE) AS itl_max_ms
"""


def _gateway(con: duckdb.DuckDBPyConnection, home: Path) -> None:
    """Views ``raw`` (every row as read, received_at parsed or NULL) and ``g`` (rows keeping the contract)."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"""
        CREATE OR REPLACE VIEW raw AS
        SELECT {TYPED}, received_at AS received_at_text, try_cast(received_at AS TIMESTAMPTZ) AS ts,
               regexp_extract(filename, 'dt=([0-9-]+)', 1)::DATE AS folder_day
        FROM read_json('{home}/raw/gateway/*/*.jsonl*', format = 'newline_delimited',
                       columns = {VARCHAR_COLUMNS}, ignore_errors = true, filename = true)
        UNION ALL
        SELECT {TYPED}, received_at::VARCHAR, received_at, regexp_extract(filename, 'dt=([0-9-]+)', 1)::DATE
        FROM read_parquet('{home}/raw/gateway/*/*.parquet', filename = true, hive_partitioning = false)
    """)
    con.execute("""
        CREATE OR REPLACE VIEW g AS SELECT * FROM raw
        WHERE request_id IS NOT NULL AND ts IS NOT NULL AND output_tokens IS NOT NULL AND input_tokens >= 0
          AND cached_input_tokens <= input_tokens AND status <> 'okay'
          AND (e2e_ms IS NULL OR ttft_ms IS NULL OR e2e_ms >= ttft_ms)
    """)


@pytest.fixture(scope="module")
def zone(tmp_path_factory: pytest.TempPathFactory) -> GenerateSummary:
    return generate_landing_zone(tmp_path_factory.mktemp("home"), START, DAYS, RPD, SEED)


@pytest.fixture(scope="module")
def con(zone: GenerateSummary) -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    _gateway(c, zone.home)
    return c


def _digests(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in home.rglob("*")
        if p.is_file()
    }


def test_same_arguments_give_identical_files_and_days_do_not_depend_on_the_range(tmp_path: Path) -> None:
    a = generate_landing_zone(tmp_path / "a", START, 2, 4_000, SEED)
    b = generate_landing_zone(tmp_path / "b", START, 2, 4_000, SEED)
    assert _digests(a.home) == _digests(b.home)
    one = generate_landing_zone(tmp_path / "c", START, 1, 4_000, SEED)
    day = f"raw/gateway/dt={START.isoformat()}"
    assert {k: v for k, v in _digests(one.home).items() if k.startswith(day)} == {
        k: v for k, v in _digests(a.home).items() if k.startswith(day)
    }
    other = generate_landing_zone(tmp_path / "d", START, 1, 4_000, SEED + 1)
    assert _digests(other.home) != _digests(one.home)




def test_a_day_in_parts_is_its_first_part_plus_slices_with_ids_of_their_own(tmp_path: Path) -> None:
    """What `make bench` writes a 100M-request day with: part 0 of a day in 3 parts is byte for byte a one-part day
    of a third of the volume; the other parts share no request, session or prompt block with it or each other
    (only the streams' system prompts, ids below 2**20 * streams), and written by two workers they are the same."""
    one = generate_landing_zone(tmp_path / "one", START, 1, 2_000, SEED)
    parts = generate_landing_zone(tmp_path / "parts", START, 1, 6_000, SEED, parts=3, workers=2)
    day = f"raw/gateway/dt={START.isoformat()}"
    whole = {k: v for k, v in _digests(one.home).items() if k.startswith(day)}
    sliced = {k: v for k, v in _digests(parts.home).items() if k.startswith(day)}
    assert len(sliced) == 3 * len(whole) and whole.items() <= sliced.items()
    assert sum(1 for k in sliced if "-p01-" in k) == sum(1 for k in sliced if "-p02-" in k) == len(whole)
    assert len(parts.bad_rows) == len(one.bad_rows) == 8 and all("-p0" not in b.file for b in parts.bad_rows)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE r AS SELECT coalesce(regexp_extract(filename, '-p(\\d\\d)-', 1), '') AS part, request_id, "
        "session_id, "
        "prefix_block_hashes AS h FROM read_json($f, filename = true, format = 'newline_delimited', "
        "ignore_errors = true, columns = {request_id: 'VARCHAR', session_id: 'VARCHAR', "
        "prefix_block_hashes: 'BIGINT[]'}) WHERE request_id IS NOT NULL",
        {"f": str(parts.home / day / "*.jsonl*")})
    shared = con.execute(
        "SELECT (SELECT count(*) FROM (SELECT request_id FROM r GROUP BY 1 HAVING count(DISTINCT part) > 1)), "
        "(SELECT count(*) FROM (SELECT session_id FROM r WHERE session_id IS NOT NULL GROUP BY 1 "
        " HAVING count(DISTINCT part) > 1)), "
        "(SELECT count(*) FROM (SELECT b FROM (SELECT unnest(h) AS b, part FROM r) WHERE b >= $streams GROUP BY b "
        " HAVING count(DISTINCT part) > 1)), "
        "(SELECT count(*) FROM (SELECT b FROM (SELECT unnest(h) AS b, part FROM r) WHERE b < $streams GROUP BY b "
        " HAVING count(DISTINCT part) = 3)), "
        "(SELECT count(DISTINCT part) FROM r)", {"streams": len(STREAMS) * STREAM_SPAN}).fetchone()
    assert shared[:3] == (0, 0, 0) and shared[3] > 0 and shared[4] == 3
    serial = generate_landing_zone(tmp_path / "serial", START, 1, 6_000, SEED, parts=3)
    assert _digests(serial.home) == _digests(parts.home)
def test_layout_and_summary(zone: GenerateSummary) -> None:
    home = zone.home
    for i in range(DAYS):
        folder = home / "raw" / "gateway" / f"dt={START + timedelta(days=i)}"
        names = sorted(p.name for p in folder.iterdir())
        assert sum(n.endswith(".jsonl.gz") for n in names) == 7
        assert sum(n.endswith(".jsonl") for n in names) == 1
        assert sum(n.endswith(".parquet") for n in names) == 1
    assert zone.billing_file == home / "raw" / "billing" / "focus-2026-11-16-2026-11-22.csv"
    assert {p.name for p in zone.config_files} == {"deployments.yaml", "slo.yaml", "costs.yaml", "whatif.yaml"}
    assert zone.rows_written == zone.requests + zone.duplicate_rows + len(zone.bad_rows)
    weekday, sunday = zone.per_day[0].requests, zone.per_day[6].requests
    assert 0.95 * RPD < weekday < 1.1 * RPD
    assert 0.45 < sunday / weekday < 0.65


def test_every_row_is_within_its_folder_day(con: duckdb.DuckDBPyConnection, zone: GenerateSummary) -> None:
    outside = con.execute(
        "SELECT count(*) FROM raw WHERE ts IS NOT NULL AND ts::DATE <> folder_day"
    ).fetchone()
    assert outside == (0,)
    # Only two bad rows a day lack a parseable received_at: the invalid JSON line and the garbage stamp.
    assert con.execute("SELECT count(*) FROM raw WHERE ts IS NULL").fetchone() == (2 * DAYS,)
    offsets = con.execute(
        "SELECT count(*) FILTER (WHERE received_at_text LIKE '%+08:00'), "
        "count(*) FILTER (WHERE received_at_text LIKE '%Z') FROM raw WHERE filename LIKE '%gw-b-%'"
    ).fetchone()
    assert offsets[0] > 0 and offsets[1] == 0


def test_contract_holds_on_valid_rows(con: duckdb.DuckDBPyConnection) -> None:
    broken = con.execute("""
        SELECT
          count(*) FILTER (WHERE output_tokens > 0 AND ttft_ms IS NULL),
          count(*) FILTER (WHERE queue_ms > ttft_ms),
          count(*) FILTER (WHERE status = 'rejected' AND (e2e_ms IS NOT NULL OR ttft_ms IS NOT NULL)),
          count(*) FILTER (WHERE status <> 'rejected' AND e2e_ms IS NULL),
          count(*) FILTER (WHERE status NOT IN ('ok', 'error', 'timeout', 'disconnected', 'rejected',
                                                'cancelled')),
          count(*) FILTER (WHERE session_id IS NOT NULL AND model = 'llama-3.1-8b-instruct'),
          count(*) FILTER (WHERE tenant_id LIKE 'sk-%')
        FROM g""").fetchone()
    assert broken == (0,) * 7
    missing_dep = con.execute(
        "SELECT model, count(*) FROM g WHERE deployment_id IS NULL GROUP BY model"
    ).fetchall()
    assert [m for m, _ in missing_dep] == ["llama-3.1-8b-instruct"]
    itl_missing = con.execute(
        "SELECT avg((itl_max_ms IS NULL)::INT) FROM g WHERE status = 'ok' AND output_tokens >= 2"
    ).fetchone()[0]
    assert 0.002 < itl_missing < 0.01


def test_parquet_types(zone: GenerateSummary) -> None:
    path = next(p for p in zone.gateway_files if p.suffix == ".parquet")
    with duckdb.connect() as con:
        described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}', hive_partitioning = false)").fetchall()
    types = {name: kind for name, kind, *_ in described}
    assert types["received_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["input_tokens"] == types["output_tokens"] == "BIGINT"
    assert types["ttft_ms"] == types["itl_max_ms"] == "DOUBLE"


def test_status_shares(con: duckdb.DuckDBPyConnection) -> None:
    cancelled, failed, rejected = con.execute("""
        SELECT avg((status = 'cancelled')::INT), avg((status IN ('error', 'timeout', 'disconnected'))::INT),
               avg((status = 'rejected')::INT)
        FROM (SELECT DISTINCT ON (request_id) * FROM g)""").fetchone()
    assert 0.008 < cancelled < 0.012
    assert 0.00025 < failed < 0.001
    assert rejected < 0.005


def test_duplicates_are_the_same_request_finishing_later(
    con: duckdb.DuckDBPyConnection, zone: GenerateSummary
) -> None:
    dups, later = con.execute("""
        SELECT count(*), count(*) FILTER (WHERE max_e2e > min_e2e)
        FROM (SELECT request_id, min(e2e_ms) AS min_e2e, max(e2e_ms) AS max_e2e FROM g GROUP BY request_id
              HAVING count(*) > 1)""").fetchone()
    assert dups == zone.duplicate_rows
    assert later == dups
    assert 0.0002 < dups / zone.requests < 0.001


def test_token_mix(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute("""
        SELECT session_id IS NOT NULL AS agent, sum(cached_input_tokens) / sum(input_tokens),
               sum(input_tokens) / sum(output_tokens), avg(output_tokens) FILTER (WHERE status = 'ok')
        FROM g WHERE status <> 'rejected' GROUP BY ALL""").fetchall()
    stats = {agent: (hit, io, out) for agent, hit, io, out in rows}
    hit, io, out = stats[True]
    assert 0.94 <= hit <= 0.98
    assert 250 <= io <= 350
    assert 220 <= out <= 275
    assert stats[False][0] < 0.2
    chat_8b = con.execute(
        "SELECT quantile_cont(input_tokens, 0.5), max(input_tokens) FROM g "
        "WHERE model = 'llama-3.1-8b-instruct'"
    ).fetchone()
    assert 200 < chat_8b[0] < 1_000 and chat_8b[1] <= 8_000


def _ttft_limit_sql() -> str:
    cases = " ".join(
        f"WHEN input_tokens < {hi} THEN {limit}" for _, _, hi, limit in ISL_BUCKETS if hi is not None
    )
    return f"CASE {cases} ELSE {ISL_BUCKETS[-1][3]} END"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """Monday and Friday at the demo volume: the 70B's one replica runs near saturation at Monday's peak; a second
    replica joins on Thursday noon. (At the 20,000 requests of `zone` the same fleet idles at ~6%.)"""
    home = tmp_path_factory.mktemp("loaded")
    for day in (START, START + timedelta(days=4)):
        generate_day(home, START, day, DEMO_RPD, SEED, bad_rows_per_day=0)
    c = duckdb.connect()
    _gateway(c, home)
    return c


def test_70b_violations_cluster_in_weekday_peak_before_the_scale_up(loaded: duckdb.DuckDBPyConnection) -> None:
    scale_up = datetime(2026, 11, 19, 12, tzinfo=UTC)
    rates = dict(
        loaded.execute(f"""
        SELECT CASE WHEN hour(ts) BETWEEN 9 AND 15 THEN 'peak' WHEN hour(ts) < 6 THEN 'night' END AS period,
               avg((ttft_ms > {_ttft_limit_sql()})::INT)
        FROM g WHERE model = '{MODEL_70B}' AND status = 'ok' AND ts < TIMESTAMPTZ '{scale_up.isoformat()}'
        GROUP BY ALL HAVING period IS NOT NULL""").fetchall()
    )
    assert rates["peak"] > 0.01
    assert rates["night"] < 0.002
    assert rates["peak"] > 10 * rates["night"]
    after = loaded.execute(f"""
        SELECT avg((ttft_ms > {_ttft_limit_sql()})::INT) FROM g
        WHERE model = '{MODEL_70B}' AND status = 'ok' AND ts >= TIMESTAMPTZ '{scale_up.isoformat()}'
          AND dayofweek(ts) BETWEEN 1 AND 5 AND hour(ts) BETWEEN 9 AND 15""").fetchone()[0]
    assert after < rates["peak"] / 3


def test_the_fleet_is_sized_to_the_volume() -> None:
    # At the demo volume every deployment runs one replica; ten times more traffic needs more replicas of the same
    # speed, not faster GPUs, and a tenth of it still needs one.
    assert [initial_replicas(d, DEMO_RPD) for d in (DEP_70B, "llama8b-l40s-onprem", DEP_CODER)] == [1, 1, 1]
    assert initial_replicas(DEP_70B, 10 * DEMO_RPD) >= 9
    assert initial_replicas(DEP_70B, DEMO_RPD // 10) == 1


def test_deployments_yaml_has_the_scale_up(zone: GenerateSummary) -> None:
    deployments = yaml.safe_load((zone.home / "config" / "deployments.yaml").read_text())["deployments"]
    v70 = [d for d in deployments if d["deployment_id"] == DEP_70B]
    # One TP2 replica of 2 GPUs (20,000 requests a day need far less, and a fleet has at least one), then two.
    assert [d["gpus"] for d in v70] == [2, 4]
    assert (v70[0]["engine"], v70[0]["scale_out_minutes"], v70[0]["warmup_minutes"]) == ("vllm", 12, 3)
    scale_up = datetime(2026, 11, 19, 12, tzinfo=UTC)
    assert v70[0]["valid_from"] == START and v70[0]["valid_to"] == scale_up
    assert v70[1]["valid_from"] == scale_up and v70[1]["valid_to"] is None
    required = {"deployment_id", "model", "gpu_type", "gpus", "gpus_per_replica", "tp", "pp", "quantization",
                "cache_policy", "gpu_power_w", "slots_per_replica", "hosting", "rate_card", "resource_ids",
                "valid_from", "valid_to"}  # fmt: skip
    assert all(required <= d.keys() for d in deployments)
    costs = yaml.safe_load((zone.home / "config" / "costs.yaml").read_text())["versions"][0]
    assert {d["rate_card"] for d in deployments if d["hosting"] == "on_prem"} == set(costs["rate_cards"])
    assert costs["token_class_weights"] == {"cached": 0.1, "recomputed": 1.0, "output": 5.0}
    assert set(costs["list_prices"]) == {d["model"] for d in deployments}
    slo = yaml.safe_load((zone.home / "config" / "slo.yaml").read_text())["versions"][0]
    assert slo["valid_from"] == START and slo["default"]["queue_p99_ms"] == 300


def _hashed(zone: GenerateSummary) -> duckdb.DuckDBPyConnection:
    """Table ``h``: every valid request once, with its deployment's kv_block_tokens and its prefix_block_hashes."""
    deployments = yaml.safe_load((zone.home / "config" / "deployments.yaml").read_text())["deployments"]
    blocks = ", ".join(f"('{d['deployment_id']}', {d['kv_block_tokens']})" for d in deployments)
    g = f"{zone.home}/raw/gateway/*/"
    cols = ("request_id, try_cast(received_at AS TIMESTAMPTZ) AS ts, deployment_id, session_id, "
            "try_cast(input_tokens AS BIGINT) AS input_tokens, try_cast(cached_input_tokens AS BIGINT) AS cached, "
            "prefix_block_hashes AS h")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"""
        CREATE TABLE h AS
        SELECT DISTINCT ON (request_id) r.*, b.block
        FROM (SELECT {cols} FROM read_json('{g}*.jsonl*', format = 'newline_delimited', ignore_errors = true)
              UNION ALL SELECT {cols} FROM read_parquet('{g}*.parquet', hive_partitioning = false)) AS r
        JOIN (VALUES {blocks}) AS b(deployment_id, block) USING (deployment_id)
        WHERE h IS NOT NULL AND ts IS NOT NULL""")
    return con


def test_every_request_logs_one_prefix_hash_per_started_block(zone: GenerateSummary) -> None:
    deployments = yaml.safe_load((zone.home / "config" / "deployments.yaml").read_text())["deployments"]
    assert {d["deployment_id"]: d["kv_block_tokens"] for d in deployments} == {
        DEP_70B: 512, "llama8b-l40s-onprem": 128, DEP_CODER: 512}
    con = _hashed(zone)
    # Every valid request of every deployment carries hashes, ceil(input / block) of them (the last block partial).
    hashed, mismatched = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE len(h) <> (input_tokens + block - 1) // block) FROM h").fetchone()
    # (The 8B's rows logged without deployment_id, ~1% of requests, are not joined to a block size here.)
    assert hashed > 0.95 * zone.requests and mismatched == 0
    # A coding-agent step resends the previous step's prompt: its leading hashes are the previous step's.
    (shared,), = con.execute(f"""
        WITH s AS (SELECT h, lag(h) OVER (PARTITION BY session_id ORDER BY ts) AS prev, block FROM h
                   WHERE deployment_id = '{DEP_CODER}')
        SELECT avg((h[:len(prev) - 1] = prev[:len(prev) - 1])::INT) FROM s WHERE prev IS NOT NULL""").fetchall()
    assert shared > 0.95


def test_the_generated_cached_tokens_are_blocks_an_earlier_request_sent(zone: GenerateSummary) -> None:
    # A request that generated c cached tokens has its first floor(c / block) hashes among the hashes some earlier
    # request of its deployment sent that day: the prefix it found cached is one the deployment had seen. Only the
    # first requests of a day can break it (a warm system prompt that nobody sent yet that day): a handful a day.
    con = _hashed(zone)
    (cached, unseen), = con.execute("""
        WITH blocks AS (
            SELECT request_id, deployment_id, ts::DATE AS day, ts, unnest(h[:cached // block]) AS hash FROM h),
        sent AS (SELECT deployment_id, ts::DATE AS day, ts, unnest(h) AS hash FROM h),
        first_seen AS (SELECT deployment_id, day, hash, min(ts) AS first_ts FROM sent GROUP BY ALL)
        SELECT count(DISTINCT request_id), count(DISTINCT request_id) FILTER (WHERE first_ts >= ts)
        FROM blocks JOIN first_seen USING (deployment_id, day, hash)""").fetchall()
    assert cached > 0.5 * zone.requests
    assert unseen <= 3 * 3 * DAYS  # at most three requests per deployment and day


def test_focus_export_covers_every_cost_path(zone: GenerateSummary) -> None:
    c = duckdb.connect()
    c.execute(
        f"CREATE TABLE f AS SELECT * FROM read_csv('{zone.billing_file}', nullstr = 'NULL', header = true, "
        "timestampformat = '%Y-%m-%d %H:%M:%S')"
    )
    c.execute("""CREATE VIEW t AS SELECT *, json_extract_string(Tags, '$."tokenledger:deployment"') AS dep,
                 date_diff('hour', ChargePeriodStart, ChargePeriodEnd) AS hours FROM f""")
    # The coding model's one single-GPU instance, every hour of every day (the 70B and 8B are on premises).
    gpu_hours = dict(
        c.execute(f"""SELECT ChargePeriodStart::DATE, sum(ConsumedQuantity) FROM t
                      WHERE dep = '{DEP_CODER}' AND SkuId = 'p5.4xlarge' GROUP BY 1""").fetchall()
    )
    assert [gpu_hours[START + timedelta(days=i)] for i in range(DAYS)] == [24] * DAYS
    patterns = DEPLOYMENT_BY_ID[DEP_CODER].resource_ids
    ids = [r for (r,) in c.execute(
        "SELECT DISTINCT ResourceId FROM t WHERE SkuId = 'p5.4xlarge' AND ChargeCategory = 'Usage'").fetchall()]
    assert len(ids) == 1 and all(any(fnmatch.fnmatchcase(r, p) for p in patterns) for r in ids)
    credit = "ChargeCategory = 'Credit' AND EffectiveCost < 0 AND BilledCost < 0"
    checks = {
        "gpu": "ServiceCategory = 'Compute' AND SkuId LIKE 'p5%' AND hours = 1 AND dep IS NOT NULL",
        "cpu": "ServiceCategory = 'Compute' AND SkuId LIKE 'c7i%' AND hours = 1 AND dep NOT IN ('shared')",
        "network": "ServiceCategory = 'Networking' AND hours = 24 AND dep IS NOT NULL",
        "storage": "ServiceCategory = 'Storage' AND hours = 24",
        "storage_6h": "ServiceCategory = 'Storage' AND hours = 6 AND Tags IS NULL",
        "untagged": "ServiceCategory = 'Management and Governance' AND Tags IS NULL AND hours = 24",
        "shared": "dep = 'shared'",
        "credit": f"{credit} AND hours = {24 * DAYS}",  # one credit spread over the whole week
    }
    counts = {k: c.execute(f"SELECT count(*) FROM t WHERE {w}").fetchone()[0] for k, w in checks.items()}
    assert all(n > 0 for n in counts.values()), counts
    assert counts["storage_6h"] == 1 and counts["credit"] == 1
    assert c.execute(f"SELECT count(*) FROM t WHERE dep IN ('llama8b-l40s-onprem', '{DEP_70B}')").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM t WHERE EffectiveCost <> BilledCost").fetchone()[0] > 0
    header = zone.billing_file.read_text().splitlines()[0]
    assert header.startswith('"AvailabilityZone","BilledCost",')


def test_bad_rows_one_of_each_kind_per_day(con: duckdb.DuckDBPyConnection, zone: GenerateSummary) -> None:
    assert len(zone.bad_rows) == 8 * DAYS
    for d in zone.per_day:
        assert sorted(b.kind for b in d.bad_rows) == sorted(k for k, _ in BAD_ROW_KINDS)
    per_kind = con.execute("""
        SELECT count(*) FILTER (WHERE input_tokens < 0),
               count(*) FILTER (WHERE cached_input_tokens > input_tokens AND input_tokens >= 0),
               count(*) FILTER (WHERE e2e_ms < ttft_ms), count(*) FILTER (WHERE status = 'okay'),
               count(*) FILTER (WHERE request_id IS NULL AND ts IS NOT NULL),
               count(*) FILTER (WHERE ts IS NULL AND received_at_text IS NOT NULL)
        FROM raw""").fetchone()
    assert per_kind == (DAYS,) * 6
    for bad in zone.bad_rows:
        if bad.kind in ("invalid_json", "non_numeric_output_tokens"):
            line = (zone.home / bad.file).read_text().splitlines()[bad.line - 1]
            if bad.kind == "invalid_json":
                with pytest.raises(json.JSONDecodeError):
                    json.loads(line)
            else:
                assert json.loads(line)["output_tokens"] == "unknown"


def test_no_bad_rows_when_asked(tmp_path: Path) -> None:
    z = generate_landing_zone(tmp_path, START, 1, 2_000, SEED, bad_rows_per_day=0)
    assert z.bad_rows == ()
    c = duckdb.connect()
    _gateway(c, tmp_path)
    assert c.execute("SELECT count(*) FROM raw").fetchone() == c.execute("SELECT count(*) FROM g").fetchone()


def test_loadtest_knee(tmp_path: Path) -> None:
    steps = default_steps(DEP_70B)
    knee = knee_index(DEP_70B, steps)
    assert knee == 3 and steps[knee] < capacity_rps(DEP_70B)
    start = datetime(2026, 11, 17, 2, tzinfo=UTC)
    run = generate_loadtest_run(tmp_path, "lt-70b", MODEL_70B, DEP_70B, start, None, 6, SEED)
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert {"run_id", "model", "deployment_id", "start", "warmup_min", "steps"} <= meta.keys()
    assert [s["arrival_rate"] for s in meta["steps"]] == steps
    c = duckdb.connect()
    c.execute("SET TimeZone = 'UTC'")
    c.execute(
        "CREATE TABLE r AS SELECT *, received_at::TIMESTAMPTZ AS ts "
        f"FROM read_json('{run}/requests.jsonl.gz')"
    )
    p99 = []
    for s in meta["steps"]:
        lo = s["start"] + timedelta(minutes=meta["warmup_min"])
        p99.append(
            c.execute(f"""SELECT quantile_cont(ttft_ms, 0.99) FILTER (WHERE input_tokens < 4096),
                                 quantile_cont(queue_ms, 0.99)
                          FROM r WHERE status = 'ok' AND ts >= TIMESTAMPTZ '{lo.isoformat()}'
                            AND ts < TIMESTAMPTZ '{s["end"].isoformat()}'""").fetchone()
        )
    ttft, queue = zip(*p99, strict=True)
    assert all(t <= 1000 for t in ttft[: knee + 1]) and all(t > 1000 for t in ttft[knee + 1 :])
    assert all(q <= 300 for q in queue[: knee + 1]) and all(q > 300 for q in queue[knee + 1 :])


# --- the first day's hosted-API logs in the adapters' formats (`tokenledger generate`, unless --canonical-only) ---


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> GenerateSummary:
    return generate_landing_zone(tmp_path_factory.mktemp("other"), START, 2, 2_000, SEED, bad_rows_per_day=0,
                                 other_formats=True)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_other_formats_add_three_api_deployments_priced_per_token_class(other: GenerateSummary) -> None:
    config = other.home / "config"
    deployments = yaml.safe_load((config / "deployments.yaml").read_text())["deployments"]
    apis = {d["deployment_id"]: d for d in deployments if d.get("kind") == "api"}
    assert {(d["model"], d["provider"], d["price_sheet"], d["rate_limit_rpm"]) for d in apis.values()} == {
        ("claude-haiku-4-5", "anthropic", "claude-haiku-4-5", 50),
        ("gpt-5-mini-2025-08-07", "openai", "gpt-5-mini", 5_000),
        ("claude-sonnet-4-5-20250929", "anthropic", "claude-sonnet-4-5", 4_000),
    }
    assert not any("gpus" in d or "gpu_type" in d for d in apis.values())
    costs = yaml.safe_load((config / "costs.yaml").read_text())["versions"][0]
    assert costs["api_prices"]["claude-sonnet-4-5"] == {"input_per_mtok": 3.0, "cache_read_per_mtok": 0.3,
                                                        "cache_write_per_mtok": 3.75, "cache_write_1h_per_mtok": 6.0,
                                                        "output_per_mtok": 15.0}
    assert costs["api_prices"]["gpt-5-mini"] == {"litellm": "gpt-5-mini"}
    price_map = json.loads((config / costs["litellm_price_map"]).read_text())
    per_mtok = {k: {p: round(v * 1e6, 6) for p, v in e.items() if "cost" in p}
                for k, e in price_map.items()}
    assert per_mtok["claude-haiku-4-5"] == {"input_cost_per_token": 1.0, "cache_read_input_token_cost": 0.1,
                                            "cache_creation_input_token_cost": 1.25,
                                            "cache_creation_input_token_cost_above_1hr": 2.0,
                                            "output_cost_per_token": 5.0}
    assert per_mtok["gpt-5-mini"] == {"input_cost_per_token": 0.25, "cache_read_input_token_cost": 0.025,
                                      "output_cost_per_token": 2.0}


def test_litellm_spend_log_of_the_first_day(other: GenerateSummary) -> None:
    path = other.home / "raw" / "litellm" / f"dt={START}" / "spend_logs.jsonl"
    rows = _jsonl(path)
    # 480 steady calls and a batch job's 58 in the minute 14:07; the organization may send 50 a minute, so 8 fail.
    assert len(rows) == 480 + 58
    failed = [r for r in rows if r["status"] == "failure"]
    assert len(failed) == 58 - 50
    assert {r["metadata"]["error_information"]["error_code"] for r in failed} == {"429"}
    assert {r["startTime"][11:16] for r in failed} == {"14:07"}
    assert sum(r["startTime"][11:16] == "14:07" for r in rows) == 58
    ok = [r for r in rows if r["status"] == "success"]
    for r in ok:
        usage = r["metadata"]["usage_object"]
        read, write = usage["prompt_tokens_details"]["cached_tokens"], usage["cache_creation_input_tokens"]
        assert sorted((read, write)) == [0, 4_608]  # the system prompt: read within five minutes, else written
        uncached = r["prompt_tokens"] - read - write
        assert uncached > 0
        # LiteLLM's spend at the map's prices: 1 uncached, 0.10 read, 1.25 written, 5 output per 1M tokens
        assert r["spend"] == pytest.approx((uncached + 0.1 * read + 1.25 * write + 5 * r["completion_tokens"]) / 1e6)
        assert r["startTime"] < r["completionStartTime"] < r["endTime"]
    assert sum(r["metadata"]["usage_object"]["cache_creation_input_tokens"] > 0 for r in ok) < 20
    assert not (other.home / "raw" / "litellm" / f"dt={START + timedelta(days=1)}").exists()


def test_openai_objects_of_the_first_day(other: GenerateSummary) -> None:
    objects = _jsonl(other.home / "raw" / "openai" / f"dt={START}" / "responses.jsonl")
    assert len(objects) == 240 + 160
    assert sum(o["object"] == "chat.completion" for o in objects) == 240
    failed = [o for o in objects if o["object"] == "response" and o["status"] == "failed"]
    assert len(failed) == 2 and all(o["usage"] is None for o in failed)
    for o in objects:
        if o["usage"] is None:
            continue
        chat = o["object"] == "chat.completion"
        u = o["usage"]
        cached = (u["prompt_tokens_details"] if chat else u["input_tokens_details"])["cached_tokens"]
        reasoning = (u["completion_tokens_details"] if chat else u["output_tokens_details"])["reasoning_tokens"]
        prompt, output = (u["prompt_tokens"], u["completion_tokens"]) if chat else (u["input_tokens"],
                                                                                    u["output_tokens"])
        assert cached == 0 or (cached >= 1_024 and cached % 128 == 0 and cached <= prompt)
        assert reasoning % 64 == 0 and reasoning < output
        day_start = datetime.combine(START, datetime.min.time(), tzinfo=UTC).timestamp()
        assert 0 <= (o["created"] if chat else o["created_at"]) - day_start < 86_400
    assert {o["metadata"]["tenant_id"] for o in objects if o["object"] == "response"} == {
        "team-search", "acme-corp", "agent-platform"}


def test_claude_code_sessions_of_the_first_day(other: GenerateSummary) -> None:
    files = sorted((other.home / "raw" / "anthropic" / f"dt={START}").glob("*.jsonl"))
    assert len(files) == 6
    for path in files:
        records = _jsonl(path)
        assert {r["sessionId"] for r in records if "sessionId" in r} == {path.stem}
        kinds = [r["type"] for r in records]
        # a prompt and 19 tool results; 20 replies, each one record per content block; a summary at the end
        assert (kinds.count("user"), kinds.count("summary"), kinds[-1]) == (20, 1, "summary")
        replies: dict[str, list[dict]] = {}
        for r in records:
            if r["type"] == "assistant":
                replies.setdefault(r["message"]["id"], []).append(r["message"])
        assert len(replies) == 20 and 20 <= kinds.count("assistant") <= 60
        previous_total = None
        for i, copies in enumerate(replies.values()):
            final = copies[-1]
            assert [m["stop_reason"] for m in copies[:-1]] == [None] * (len(copies) - 1)
            assert final["stop_reason"] == ("end_turn" if i == 19 else "tool_use")
            assert all(m["usage"]["cache_read_input_tokens"] == final["usage"]["cache_read_input_tokens"]
                       for m in copies)
            assert max(m["usage"]["output_tokens"] for m in copies) == final["usage"]["output_tokens"]
            u = final["usage"]
            ttl = u["cache_creation"]
            # the first reply writes the prompt for an hour; each later one reads all the earlier context back
            if i == 0:
                assert (u["cache_read_input_tokens"], ttl["ephemeral_5m_input_tokens"]) == (0, 0)
                assert ttl["ephemeral_1h_input_tokens"] == u["cache_creation_input_tokens"] > 17_408
            else:
                assert u["cache_read_input_tokens"] == previous_total and ttl["ephemeral_1h_input_tokens"] == 0
            previous_total = u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
    logs = [log for log in other.other_format_logs if log.source == "anthropic"]
    assert sum(log.requests for log in logs) == 6 * 20
    assert sum(log.records for log in logs) == sum(len(p.read_text().splitlines()) for p in files)


def test_other_formats_are_byte_identical_and_leave_the_canonical_files_as_they_were(tmp_path: Path) -> None:
    bench = (DEMO_BENCH_MODEL, DEMO_BENCH_DEPLOYMENT, datetime(2026, 11, 16, 5, tzinfo=UTC),
             list(DEMO_BENCH_RATES), DEMO_BENCH_STEP_MINUTES, SEED)
    digests = []
    for name in ("a", "b"):
        z = generate_landing_zone(tmp_path / name, START, 1, 1_000, SEED, bad_rows_per_day=0, other_formats=True)
        generate_vllm_bench_run(z.home, "bench-8b", *bench)
        digests.append(_digests(z.home))
    assert digests[0] == digests[1]
    assert {k.split("/")[1] for k in digests[0] if k.startswith("raw/")} == {
        "gateway", "gpu", "billing", "litellm", "openai", "anthropic", "loadtest"}
    plain = _digests(generate_landing_zone(tmp_path / "plain", START, 1, 1_000, SEED, bad_rows_per_day=0).home)
    changed = {k for k, v in plain.items() if digests[0][k] != v}
    assert changed == {"config/deployments.yaml", "config/costs.yaml"}  # the API models and their prices added


def test_gpu_telemetry_follows_the_load_within_each_gpu_types_range(zone: GenerateSummary) -> None:
    from tokenledger.generate.telemetry import IDLE_W
    from tokenledger.ingest.gpu import host_of

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    day = zone.home / "raw" / "gpu" / f"dt={START.isoformat()}"
    names = sorted(p.name for p in day.iterdir())
    # The H100 SXM deployment on Kubernetes as DCGM series through Prometheus, the on-premises hosts as nvidia-smi.
    assert names == ["dcgm-qwen3coder30b-h100.json.gz", "llama70b-h100nvl-tp2-node0.csv",
                     "llama8b-l40s-onprem-node0.csv"]
    deployments = yaml.safe_load((zone.home / "config" / "deployments.yaml").read_text())["deployments"]
    assert {host_of(day / n) for n in names if n.endswith(".csv")} == {
        "llama70b-h100nvl-tp2-node0", "llama8b-l40s-onprem-node0"}
    assert {d["deployment_id"]: d.get("gpu_hosts") or d.get("gpu_pods") for d in deployments
            if d.get("hosting")} == {"llama70b-h100nvl-tp2": ["llama70b-h100nvl-tp2-node*"],
                                     "llama8b-l40s-onprem": ["llama8b-l40s-onprem-node*"],
                                     "qwen3coder30b-h100": ["llm/qwen3coder30b-h100-*"]}
    # Power stays within the type's idle draw (less 10% noise) and board power, and rises with utilization: on this
    # small volume the L40S's quietest tenth of minutes draws its idle 35 W (5,128.8 / 144 = 35.6 W), its busiest
    # tenth twice that (10,720.3 / 144 = 74.4 W).
    power, util = con.execute(
        "SELECT list(trim(regexp_extract(\"power.draw [W]\", '([0-9.]+)', 1))::DOUBLE), "
        "list(trim(regexp_extract(\"utilization.gpu [%]\", '([0-9]+)', 1))::DOUBLE) "
        "FROM read_csv($p, header = true, auto_detect = true)", {"p": str(day / "llama8b-l40s-onprem-node0.csv")}
    ).fetchone()
    assert len(power) == 1440 and 0.9 * IDLE_W["L40S-48GB"] <= min(power) and max(power) <= 350.0
    order = sorted(range(1440), key=lambda i: util[i])
    quiet, busy = [power[i] for i in order[:144]], [power[i] for i in order[-144:]]
    assert sum(quiet) / 144 == pytest.approx(IDLE_W["L40S-48GB"], rel=0.05)
    assert sum(busy) / 144 > 2 * sum(quiet) / 144
