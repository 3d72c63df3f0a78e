"""The prefix-cache what-if (issue 16): the day's requests, and any landed trace, replayed through the caches
config/whatif.yaml describes. The logic is in tokenledger/whatif/replay.py and tokenledger/whatif/lru.py and the SQL
file named after each table; decisions in docs/adr/README.md, "Prefix-cache what-if" (0079-0086).
"""

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from tokenledger.assets.daily import for_each_day, user_errors
from tokenledger.assets.tables import table_asset
from tokenledger.pipelines.partitions import single_run
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.catalog import TRACES
from tokenledger.config import load_config
from tokenledger.contracts import load_contract
from tokenledger.expectations import CRITICAL, validate_files
from tokenledger.storage.lake import DayWindow
from tokenledger.whatif.replay import build_cache_whatif_daily, build_cache_whatif_traces, traces_file

_TRACES_CONTRACT = dg.AssetCheckSpec(
    "contract", asset=dg.AssetKey(TRACES.key_path), blocking=True,
    description=f"Every critical rule of data_contracts/{TRACES.contract_id}.odcs.yaml.")


@table_asset("infra.cache_whatif_daily")
def cache_whatif_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """What another prefix cache would have cached of the day's input: per scenario, the requests with block hashes
    replayed through an infinite cache or an LRU of some size, shared or per replica under session-affine or random
    routing, with the simulated and observed hit ratios side by side and the change in input cost at the day's unit
    costs per token class.

    Grain: day x model x deployment_id x scenario (GPU deployments declaring kv_block_tokens or serving requests
    with prefix_block_hashes). Source: core.gateway_requests, core.deployments_daily, finance.cost_per_mtok_daily,
    config/whatif.yaml. Definition: docs/adr/README.md, "Prefix-cache what-if"; contract
    data_contracts/infra/infra_cache_whatif_daily.odcs.yaml.
    """
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, scratch: Path) -> dict[str, Any]:
        return build_cache_whatif_daily(con, ledger.layout, window, scratch)

    return for_each_day(context, ledger, day_fn, needs_config=True)


@dg.asset(key=TRACES.key_path, backfill_policy=single_run, group_name="whatif", kinds={"duckdb", "parquet"},
          check_specs=[_TRACES_CONTRACT])
def cache_whatif_traces(context: dg.AssetExecutionContext, ledger: LedgerResource):
    """The same replay over every trace landed in raw/traces/<trace>/*.jsonl (Mooncake's shape: timestamp,
    input_length, output_length, hash_ids), without cost: input cached and recomputed per scenario.

    Grain: trace x scenario, all traces in one file (a trace has no day), rebuilt in every run. Source:
    raw/traces/, config/whatif.yaml. Definition: docs/adr/README.md, "Prefix-cache what-if"; contract
    data_contracts/infra/infra_cache_whatif_traces.odcs.yaml.
    """
    table = load_contract(TRACES.contract_id).table()
    with user_errors(f"replaying the traces of {ledger.layout.raw / 'traces'}"), \
            ledger.compute() as (con, scratch):
        load_config(con, ledger.layout)
        figures = build_cache_whatif_traces(con, ledger.layout, scratch / "traces")
        validation = validate_files(con, TRACES.qualified, table, [traces_file(ledger.layout)])
    yield dg.MaterializeResult(
        metadata={**figures, "path": dg.MetadataValue.path(str(traces_file(ledger.layout)))},
        check_results=[dg.AssetCheckResult(check_name="contract", passed=not validation.failed(CRITICAL),
                                           description=validation.describe(CRITICAL))])
