"""The tables tokenledger keeps: one registry line per table (docs/tables.md for the published ones).

A line says where the table sits (its stage, the Dagster group), its grain, what it reads, whether it is published
(and as CSV too), and which contract types it. Everything else is derived from the line: the asset's key, group,
partitions, lineage and catalog metadata (assets/tables.py), its contract checks (assets/checks.py), its
publication (assets/publish.py) and its warehouse view (tokenledger/publish/warehouse.py). The rows come from
sql/<stage>/<name>.sql (or the file `sql` names). A table that SQL computes alone from one of the standard inputs
(`inputs`) needs no Python at all: adding one touches its SQL, its contract and one line here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenledger import packaged


@dataclass(frozen=True)
class TableRef:
    """A table kept per day; its asset key is [schema, name], its contract data_contracts/<folder>/<contract>.odcs.yaml.

    Two refs are equal when they name the same table; the registry's other fields describe it."""

    schema: str
    name: str
    csv_export: bool = field(default=False, compare=False)
    contract: str | None = field(default=None, compare=False)
    contract_table: str | None = field(default=None, compare=False)
    stage: str = field(default="", compare=False)
    grain: str = field(default="", compare=False)
    reads: tuple[str, ...] = field(default=(), compare=False)
    published: bool = field(default=False, compare=False)
    # For a table computed by its SQL alone: what the SQL needs attached first (pipelines/tables.py, INPUTS).
    inputs: str | None = field(default=None, compare=False)
    sql: str | None = field(default=None, compare=False)  # the SQL file's name when it is not the table's

    @property
    def sql_file(self) -> str:
        """The SQL file of the rows, as the checkout names it (sql/<stage>/<name>.sql)."""
        return packaged.shown(packaged.sql_file(self.sql or self.name))

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def key_path(self) -> list[str]:
        return [self.schema, self.name]

    @property
    def contract_id(self) -> str:
        """The contract that types and guards the table: its own, or for a core table the input's it was read by."""
        return self.contract or f"{self.schema}_{self.name}"

    @property
    def contract_file(self) -> str:
        """The contract's file, as the checkout names it (data_contracts/<schema>/<contract>.odcs.yaml)."""
        return packaged.shown(packaged.contract_file(self.contract_id))


_INGEST = ("core.deployments_daily", "core.gateway_requests", "core.billing_charges", "core.gpu_samples")
_REQUESTS = ("core.gateway_requests", "core.deployments_daily")
_USAGE = ("core.usage_hourly", "core.deployments_daily")


def _t(qualified: str, stage: str, grain: str, reads: tuple[str, ...] = (), **kw) -> TableRef:
    schema, name = qualified.split(".")
    return TableRef(schema, name, stage=stage, grain=grain, reads=reads, **kw)


# Every day table, in the order of the pipeline. `published`: copied to exports/ once the day's blocking checks
# pass; `csv_export`: finance also as CSV. The focus schema holds FinOps FOCUS datasets, FOCUS column names and all.
TABLES = (
    # ingest: the inputs, typed by the contracts they were read by (GPU telemetry's two forms: core_gpu_samples)
    _t("core.deployments_daily", "ingest", "day x deployment version", contract="deployments"),
    _t("core.gateway_requests", "ingest", "day x request_id", ("core.deployments_daily",), contract="gateway_request"),
    _t("core.billing_charges", "ingest", "day x FOCUS row", contract="focus_billing"),
    _t("core.gpu_samples", "ingest", "day x GPU x measure x sampled_at", ("core.deployments_daily",)),
    # quality
    _t("quality.quarantine", "quality", "day x rejected row", _INGEST, published=True),
    _t("quality.ingest_reconciliation_daily", "quality", "day x source", _INGEST, published=True),
    # accounting: SQL over the day's judged requests or the usage cube
    _t("core.usage_hourly", "accounting", "day x hour x model x deployment_id x tenant_id x isl_bucket", _REQUESTS,
       inputs="judged"),
    _t("infra.slo_daily", "accounting", "day x model x isl_bucket (and 'all')", _REQUESTS, published=True,
       inputs="judged+slo_percentiles"),
    _t("infra.slo_hourly", "accounting", "day x hour x model x isl_bucket (and 'all')", _USAGE, published=True,
       inputs="judged+usage"),
    _t("infra.token_split_daily", "accounting", "day x model", ("core.usage_hourly", *_REQUESTS), published=True,
       inputs="usage+requests"),
    _t("infra.token_split_hourly", "accounting", "day x hour x model", _USAGE, published=True, inputs="usage"),
    _t("infra.goodput_hourly", "accounting", "day x hour x model x deployment_id", _USAGE, published=True,
       inputs="usage+slo"),
    _t("infra.gpu_usage_hourly", "accounting", "day x hour x model x deployment_id (and unmapped GPUs)",
       ("core.gpu_samples", "core.deployments_daily", "infra.goodput_hourly"), published=True),
    _t("infra.gpu_usage_daily", "accounting", "day x model x deployment_id (and unmapped GPUs)",
       ("infra.gpu_usage_hourly", "core.gpu_samples"), published=True),
    # cost
    _t("core.api_request_costs", "cost", "day x request_id (reached requests of hosted-API deployments)",
       _REQUESTS),
    _t("core.cost_lines", "cost", "day x cost line", ("core.billing_charges", "core.api_request_costs", *_USAGE)),
    _t("core.cost_allocation_daily", "cost", "day x currency x source x placement x deployment_id x category",
       ("core.cost_lines", *_USAGE)),
    _t("finance.cost_per_mtok_daily", "cost", "day x model x deployment_id x currency",
       ("core.cost_allocation_daily", "core.api_request_costs", *_USAGE, "infra.gpu_usage_daily"), published=True,
       csv_export=True),
    _t("finance.tenant_showback_daily", "cost", "day x tenant_id x model x currency",
       ("finance.cost_per_mtok_daily", "core.usage_hourly", "core.api_request_costs"), published=True,
       csv_export=True),
    _t("finance.cost_reconciliation_daily", "cost", "day x currency",
       ("core.billing_charges", "core.cost_lines", "core.cost_allocation_daily", "core.api_request_costs"),
       published=True, csv_export=True),
    _t("finance.provider_cost_reconciliation_daily", "cost", "day x provider x model x service_tier x currency",
       ("core.api_request_costs", "core.deployments_daily"), published=True),
    _t("focus.cost_and_usage_daily", "cost", "day x tenant x deployment x model and token class x currency",
       ("finance.tenant_showback_daily", "finance.cost_per_mtok_daily", "core.api_request_costs", *_USAGE),
       published=True,
       sql="focus_cost_and_usage_daily"),
    # capacity
    _t("core.loadtest_steps", "capacity", "run_id x step_index (runs starting on the day)",
       ("core.deployments_daily",)),
    _t("core.capacity_windows", "capacity", "day x model x deployment_id x window_index", _REQUESTS),
    _t("infra.capacity_daily", "capacity", "day x model x deployment_id",
       ("core.usage_hourly", *_REQUESTS, "core.capacity_windows", "core.loadtest_steps",
        "finance.cost_per_mtok_daily"), published=True),
    _t("infra.loadtest_sweep_daily", "capacity", "day x model x deployment_id x step_index (the run chosen)",
       ("core.loadtest_steps", "core.deployments_daily"), published=True),
    _t("infra.load_hourly", "capacity", "day x hour x model", ("core.usage_hourly", *_REQUESTS, "infra.capacity_daily"),
       published=True),
    _t("infra.capacity_model_daily", "capacity", "day x model x deployment_id (GPU deployments)",
       (*_REQUESTS, "core.usage_hourly", "core.gpu_samples", "core.loadtest_steps", "infra.gpu_usage_hourly",
        "infra.capacity_daily", "infra.load_hourly"), published=True),
    _t("infra.capacity_plan_daily", "capacity", "day x model x deployment_id",
       (*_REQUESTS, "infra.capacity_daily", "infra.load_hourly", "infra.capacity_model_daily"), published=True),
    _t("infra.gpu_memory_daily", "capacity", "day x model x deployment_id (GPU deployments)",
       (*_REQUESTS, "infra.capacity_plan_daily"), published=True),
    _t("infra.capacity_verdict_daily", "capacity", "day x model x deployment_id (GPU and hosted-API deployments)",
       (*_REQUESTS, "infra.slo_daily", "finance.cost_per_mtok_daily", "infra.capacity_daily",
        "infra.capacity_plan_daily"), published=True),
    # what-if
    _t("infra.cache_whatif_daily", "whatif", "day x model x deployment_id x scenario",
       (*_REQUESTS, "finance.cost_per_mtok_daily"), published=True),
)

# Internal tables: the typed, reconciled inputs and intermediate results. Queried through the `core` views.
CORE_TABLES = tuple(t for t in TABLES if t.schema == "core")
# Published tables, in the order of docs/tables.md's schemas.
PUBLISHED_TABLES = tuple(t for s in ("quality", "infra", "finance", "focus") for t in TABLES
                         if t.published and t.schema == s)
# Tables published whole, not per day, each one file alone in its folder (a dataset of one): the trend over every
# published day, `day` a column of it (tokenledger/capacity/trend.py), and the what-if's replayed traces
# (tokenledger/whatif/replay.py).
TREND = TableRef("infra", "capacity_trend")
TRACES = TableRef("infra", "cache_whatif_traces")
WHOLE_TABLES = (TREND, TRACES)
_BY_NAME = {t.qualified: t for t in TABLES}


def table(qualified: str) -> TableRef:
    """The registry line of `schema.name`."""
    try:
        return _BY_NAME[qualified]
    except KeyError:
        raise KeyError(f"{qualified} is not in tokenledger/catalog.py's TABLES") from None
