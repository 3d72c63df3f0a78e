"""The configuration files of a home, as pydantic models: deployments.yaml, slo.yaml, costs.yaml and the optional
whatif.yaml (docs/configuration.md, whose field lists `python -m tools.docs` writes from these classes).

Each file is a model (`DeploymentsFile`, `SloFile`, `CostsFile`, `WhatifFile`) of models of its entries. A model
says which keys a mapping takes, how entries nest, and the defaults of keys left out; the values of its leaf keys
(`Value[...]`) are typed and judged by the contract of the table they are flattened into
(data_contracts/config/*.odcs.yaml), which also holds the effective-dating rules (versions that overlap, a version
that ends before it starts). tokenledger.config.schema says why the work is split so.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from tokenledger.config.schema import Column, ConfigModel, Shape, Value, rule_broken
from tokenledger.config.source import _Mapping

# An LRU pass replays a deployment's day exactly up to this many block accesses, else a SHARDS sample of about as
# many (docs/adr/0084-lru-caches-of-large-days-are-sampled.md).
DEFAULT_BUDGET_ACCESSES = 50_000_000
# The model name of an SLO version's default policy, which every model inherits.
DEFAULT_MODEL = "*"

Instant = date | datetime
ServiceTier = Literal["standard", "flex", "priority", "batch"]


# --- deployments.yaml ------------------------------------------------------------------------------------------------

class Deployment(ConfigModel):
    """One version of one deployment: what serves which model, on what, from when until when."""

    what = "a deployment"
    contract = "deployments/deployments"

    deployment_id: Value[str] = Field(None, description="Stable id, also used in gateway logs and billing tags.")
    model: Value[str] = Field(None, description="The model name as it appears in gateway logs.")
    kind: Value[Literal["gpu", "api"]] = "gpu"
    provider: Value[str] = None
    price_sheet: Value[str] = None
    service_tier: Value[ServiceTier] = None
    inference_region: Value[str] = None
    rate_limit_rpm: Value[int] = None
    rate_limit_tpm: Value[int] = None
    model_version: Value[str] = None
    model_developer: Value[str] = None
    model_family: Value[str] = None
    engine: Value[str] = None
    engine_version: Value[str] = None
    gpu_type: Value[str] = Field(None, description="The GPU model, e.g. H100-SXM-80GB.")
    gpus: Value[int] = Field(None, description="Total GPUs while this version is in force.")
    gpus_per_replica: Value[int] = Field(None, description="GPUs of one replica: gpus is a multiple of it.")
    tp: Value[int] = Field(None, description="Tensor parallel degree.")
    pp: Value[int] = Field(None, description="Pipeline parallel degree.")
    quantization: Value[str] = Field(
        None, description="The weights' quantization (e.g. fp8, bf16); part of the configuration's identity.")
    cache_policy: Value[str] = None
    kv_block_tokens: Value[int] = None
    gpu_power_w: Value[float] = Field(None, description="Nominal board power per GPU, in watts.")
    slots_per_replica: Value[int] = None
    # The model's facts, for the GPU memory budget (docs/metrics.md, section 6).
    params_billion: Value[float] = Field(None, description="The model's parameters, in billions (e.g. 70.6).")
    weight_bytes_per_param: Value[float] = Field(
        None, description="Bytes of one weight as served (fp8 1, bf16 2, int4 0.5).",
        json_schema_extra={"default": "from quantization when it is fp8, int8, bf16, fp16, fp32 or int4"})
    num_layers: Value[int] = Field(None, description="Transformer layers.")
    num_kv_heads: Value[int] = Field(None, description="Key/value heads of one layer (grouped-query attention).")
    head_dim: Value[int] = Field(None, description="Dimension of one attention head.")
    kv_bytes_per_element: Value[float] = Field(
        None, description="Bytes of one KV-cache element (fp8 1, bf16 2): the engine's kv_cache_dtype.")
    # The engine's settings: memory and batching (batching is part of the configuration's identity).
    gpu_memory_gib: Value[float] = Field(None, description="Memory of one GPU, GiB (an H100 SXM: 79.6).")
    gpu_memory_utilization: Value[float] = Field(
        None, description="Share of GPU memory the engine may use (vLLM's gpu_memory_utilization; default 0.9).")
    runtime_memory_gib: Value[float] = Field(
        None, description="Per GPU: CUDA context, activations, CUDA graphs and workspace, GiB.")
    max_model_len: Value[int] = Field(None, description="Longest context a sequence may have, tokens.")
    max_num_seqs: Value[int] = Field(None, description="Sequences one replica batches at most.")
    max_num_batched_tokens: Value[int] = Field(None, description="Tokens one engine step batches at most.")
    chunked_prefill: Value[bool] = Field(None, description="Whether long prefills are split into chunks.")
    # Failure domains and the unit the deployment is bought in.
    gpus_per_node: Value[int] = Field(None, description="GPUs of one node (server).")
    nodes_per_rack: Value[int] = Field(None, description="Nodes of one rack (e.g. an NVL72 rack: 18 of 4).")
    racks_per_zone: Value[int] = Field(None, description="Racks of one zone.")
    bought_in: Value[Literal["gpu", "node", "rack"]] = Field(
        None, description="The unit GPUs are bought or rented in; the plan is also given in it.",
        json_schema_extra={"default": "gpu"})
    scale_out_minutes: Value[float] = None
    warmup_minutes: Value[float] = None
    hosting: Value[Literal["cloud", "on_prem"]] = Field(
        None, description="cloud (costed from the FOCUS bill) or on_prem (costed from a rate card).",
        json_schema_extra={"default": "cloud (kind gpu)"})
    rate_card: Value[str] = Field(None, description="on_prem only: the name of a rate card in costs.yaml.")
    resource_ids: Value[list[str]] = None
    gpu_uuids: Value[list[str]] = None
    gpu_hosts: Value[list[str]] = None
    gpu_pods: Value[list[str]] = None
    gpu_active_floor_pct: Value[float] = None
    valid_from: Value[Instant] = Field(None, description="In force from (inclusive): a date or a timestamp.")
    valid_to: Value[Instant] = Field(None, description="Until (exclusive); null or left out: still in force.")

    def complete(self) -> None:
        if self.kind == "gpu" and "hosting" not in self.model_fields_set:
            self.hosting = "cloud"
        # A unit bought is never guessed: a node needs gpus_per_node, a rack nodes_per_rack as well.
        needs = {"node": ("gpus_per_node",), "rack": ("gpus_per_node", "nodes_per_rack")}.get(str(self.bought_in), ())
        missing = [k for k in needs if getattr(self, k) is None]
        if missing:
            raise rule_broken(f"deployment {self.deployment_id} is bought_in {self.bought_in} but has no "
                              f"{' and no '.join(missing)}, so a {self.bought_in} has no size in GPUs. Give "
                              f"{' and '.join(missing)} (docs/configuration.md).", self.line_of("bought_in"))


class DeploymentsFile(ConfigModel):
    """config/deployments.yaml: the inventory."""

    what = "deployments.yaml"

    deployments: Annotated[list[Deployment], Shape("deployments", item="a deployment", item_line="key")] = Field(
        description="Every version of every deployment.")


# --- slo.yaml --------------------------------------------------------------------------------------------------------

class IslBucket(ConfigModel):
    """One bucket of input length, [min_input_tokens, max_input_tokens), with its TTFT limit."""

    what = "an ISL bucket"
    contract = "config/slo_isl_bucket"

    isl_bucket: Value[str] = Field(None, description="The bucket's name, as published (e.g. 0-4k).")
    min_input_tokens: Value[int] = Field(None, description="Its least input length, inclusive.")
    max_input_tokens: Value[int] = None
    ttft_limit_ms: Value[float] = Field(None, description="The TTFT a request of the bucket must meet.")


class Headroom(ConfigModel):
    """The headroom a capacity plan adds to the GPUs the load needs (docs/metrics.md, section 6)."""

    what = "headroom"
    contract = "config/slo_policy"
    column_prefix = "headroom_"

    n_minus_k: Value[int] = Field(None, description="Replicas that may fail (N-k).")
    scaling_lag_pct: Value[float] = Field(None, description="For the load that grows while a replica is added.")
    forecast_error_pct: Value[float] = Field(None, description="For the error of the demand forecast.")
    release_pct: Value[float] = Field(None, description="For releases (rolling upgrades, canaries).")
    jitter_pct: Value[float] = Field(None, description="For performance jitter.")
    failure_domain: Value[Literal["replica", "node", "rack"]] = Field(
        None, description="What n_minus_k counts: replicas, nodes or racks that may fail.",
        json_schema_extra={"default": "replica"})


class SloPolicy(ConfigModel):
    """An SLO policy: a version's default, which needs every key (isl_buckets too, before a day can be judged), or
    a model's override of any of them."""

    what = "an SLO policy"
    contract = "config/slo_policy"
    check_order = ("headroom", "isl_buckets")

    isl_buckets: Annotated[list[IslBucket], Shape("isl_buckets", item="an ISL bucket", empty="falsy")] = Field(
        None, description="The buckets of input length, from 0 to unbounded; an override replaces the whole list.")
    itl_limit_ms: Value[float] = Field(None, description="The per-request limit on itl_max_ms.")
    itl_missing: Value[Literal["ignore", "fail"]] = Field(
        None, description="How a request without itl_max_ms is judged: ignore or fail.")
    itl_p99_ms: Value[float] = Field(None, description="The limit on the P99 of ITL.")
    queue_p99_ms: Value[float] = Field(None, description="The limit on the P99 of queue time.")
    tpot_p99_ms: Value[float] = Field(None, description="The limit on the P99 of TPOT.")
    success_rate_target: Value[float] = Field(None, description="The least share of effective requests that succeed.")
    attainment_target: Value[float] = Field(
        None, description="The least share of judged requests of each ISL bucket that meet its limits.")
    stable_window_min: Value[int] = Field(
        None, description="Minutes of the windows sustainable goodput is measured over (and a load test's step).")
    step_min: Value[int] = Field(None, description="Minutes between the starts of those windows.")
    min_requests_per_bucket: Value[int] = Field(
        None, description="Effective requests a bucket needs to be judged on attainment.")
    peak_basis: Value[Literal["busiest_5min", "busiest_hour"]] = Field(
        None, description="The planning peak: the busiest 5 minutes or the busiest hour.")
    agent_step_output_tokens: Value[float] = Field(
        None, description="Output tokens of an agent step, when the day's sessions do not measure it.")
    loadtest_max_age_days: Value[int] = Field(
        None, description="Days after which a load test is stale and the review asks to re-baseline.",
        json_schema_extra={"default": "90"})
    loadtest_recomputed_input_tolerance_pct: Value[float] = Field(
        None, description="How far a load test's recomputed input per request may be from production's, percent.",
        json_schema_extra={"default": "25"})
    loadtest_isl_p90_tolerance_pct: Value[float] = Field(
        None, description="How far a load test's P90 input length may be from production's, percent.",
        json_schema_extra={"default": "50"})
    headroom: Annotated[Headroom, Shape("headroom", line="key", empty="falsy")] = Field(
        None, description="In an override, merged key by key with the default's.")


class SloVersion(ConfigModel):
    """One version of the SLO policy, in force from its valid_from until the next version's."""

    what = "an SLO version"
    contract = "config/slo_policy"
    shapes_first = True

    slo_version: Value[str] = Field(None, description="The version's name, published with every SLO figure.")
    valid_from: Value[date] = Field(None, description="In force from this day until the next version's valid_from.")
    default: Annotated[SloPolicy, Shape("default")] = Field(
        default_factory=_Mapping, validate_default=True, description="The policy of every model.")
    models: Annotated[dict[Any, SloPolicy], Shape(
        "models", item="the override of {name}", item_line="container", keys="model", empty="falsy",
        item_empty="falsy")] = Field(None, description="Per-model overrides of any key of the default.")


class SloFile(ConfigModel):
    """config/slo.yaml: the SLO policy, effective-dated."""

    what = "slo.yaml"

    versions: Annotated[list[SloVersion], Shape("versions", item="an SLO version", item_line="key")] = Field(
        description="The versions of the policy.")


# --- costs.yaml ------------------------------------------------------------------------------------------------------

class TokenClassWeights(ConfigModel):
    """How much a token of each class weighs when a deployment's cost is spread over its tokens."""

    what = "token_class_weights"
    contract = "config/cost_policy"
    column_prefix = "weight_"

    cached: Value[float] = Field(None, description="An input token read from the prefix cache.")
    recomputed: Value[float] = Field(None, description="An input token computed again (not cached).")
    output: Value[float] = Field(None, description="An output token.")


class CategoryRule(ConfigModel):
    """A rule giving a FOCUS cost line its category; the first rule that matches wins, a rule without a condition
    matches everything left. Patterns take * and ?, case-insensitive."""

    what = "a category rule"
    contract = "config/cost_category_rule"

    category: Value[Literal["gpu", "cpu", "network", "storage", "platform"]] = None
    service_category: Value[str] = Field(None, description="A pattern of FOCUS ServiceCategory.")
    service_name: Value[str] = Field(None, description="A pattern of FOCUS ServiceName.")
    sku_id: Value[str] = Field(None, description="A pattern of FOCUS SkuId.")
    resource_id: Value[str] = Field(None, description="A pattern of FOCUS ResourceId.")
    charge_category: Value[str] = Field(None, description="A pattern of FOCUS ChargeCategory.")


class ListPrice(ConfigModel):
    """A model's list price, for the daily value of its tokens."""

    what = "a list price"
    contract = "config/list_price"

    output_per_mtok: Value[float] = Field(None, description="Per 1M output tokens, in the version's currency.")


class RateCard(ConfigModel):
    """The cost of an on-premises GPU-hour."""

    what = "a rate card"
    contract = "config/rate_card"

    capex_per_gpu: Value[float] = Field(None, description="Purchase price of a GPU, amortized over lifetime_hours.")
    lifetime_hours: Value[float] = Field(None, description="Hours the purchase is amortized over.")
    power_kw_per_gpu: Value[float] = Field(None, description="Power drawn per GPU, kW.")
    pue: Value[float] = Field(None, description="Power usage effectiveness of the site.")
    price_per_kwh: Value[float] = Field(None, description="Price of a kWh.")
    opex_per_gpu_hour: Value[float] = Field(None, description="Other operating cost per GPU-hour.")


class LongContext(ConfigModel):
    """When a request is long context, and what of it the long-context rate prices."""

    what = "the long_context of {name}"
    contract = "config/api_price"

    above_input_tokens: Annotated[Value[int], Column("context_threshold_tokens")] = Field(
        None, description="A request whose input (cache reads and writes included) exceeds this is long context.")
    rule: Annotated[Value[Literal["whole_request", "tokens_above"]], Column("context_rule")] = Field(
        "whole_request", description="whole_request: every token at the long rate; tokens_above: only the input "
        "above the threshold.")


_PRICES = ("input_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok", "cache_write_1h_per_mtok",
           "output_per_mtok")
# The prices of a rate, per 1M tokens of each class in the version's currency (besides reasoning's own).
PRICE_KEYS = frozenset(_PRICES)
# What a price a rate leaves out is (the docs' default column).
_SCALED = {"default": "the standard rate's times multiplier"}


class PriceRate(ConfigModel):
    """A rate of a price sheet other than its standard one: a served tier, a region, long context or a mix of them.
    A class it leaves out is the standard rate's price times its multiplier."""

    what = "a rate of the price sheet {name}"
    contract = "config/api_price"

    service_tier: Value[ServiceTier] = Field("standard", description="The served tier it prices.")
    inference_region: Value[str] = Field(None, description="The region it prices.")
    context_tier: Value[Literal["standard", "long"]] = Field(
        "standard", description="long: the requests above the sheet's long_context threshold.")
    multiplier: Annotated[Value[Decimal], Column(None)] = Field(
        1, description="The standard rate's prices times this, for the classes it does not price itself.")
    input_per_mtok: Value[Decimal] = Field(None, description="Uncached input.", json_schema_extra=_SCALED)
    cache_read_per_mtok: Value[Decimal] = Field(None, description="Cache reads.", json_schema_extra=_SCALED)
    cache_write_per_mtok: Value[Decimal] = Field(None, description="Five-minute cache writes.",
                                                 json_schema_extra=_SCALED)
    cache_write_1h_per_mtok: Value[Decimal] = Field(None, description="One-hour cache writes.",
                                                    json_schema_extra=_SCALED)
    output_per_mtok: Value[Decimal] = Field(None, description="Output, reasoning tokens included.",
                                            json_schema_extra=_SCALED)
    reasoning_per_mtok: Value[Decimal] = Field(
        None, description="Reasoning tokens (a part of output).", json_schema_extra={
            "default": "the standard rate's times multiplier if the sheet prices reasoning, else the rate's output "
                       "price"})

    def complete(self) -> None:
        tier = {"service_tier": self.service_tier, "inference_region": self.inference_region,
                "context_tier": self.context_tier}
        if tier == {"service_tier": "standard", "inference_region": None, "context_tier": "standard"}:
            raise rule_broken("a rate of the price sheet {name} names no service_tier, inference_region or "
                              "context_tier, so it would be the sheet's standard rate again. Say which tier, region "
                              "or context it prices (docs/configuration.md).", self.line)

    def prices(self) -> dict[str, Any]:
        """The prices the rate gives itself (written, even as null)."""
        return {k: v for k, v in self.written().items() if k in PRICE_KEYS or k == "reasoning_per_mtok"}


class PriceSheet(ConfigModel):
    """A hosted-API model's prices written out: its standard rate (service tier standard, the regions of
    `regions`, input within the long-context threshold) and its other rates."""

    what = "the price sheet {name}"
    contract = "config/api_price"
    check_order = ("rates", "long_context", "regions")

    input_per_mtok: Value[Decimal] = Field(None, description="Uncached input: neither read from nor written to the "
                                                              "cache.")
    cache_read_per_mtok: Value[Decimal] = Field(None, description="Cache reads.",
                                                json_schema_extra={"default": "input_per_mtok's"})
    cache_write_per_mtok: Value[Decimal] = Field(None, description="Five-minute cache writes.",
                                                 json_schema_extra={"default": "input_per_mtok's"})
    cache_write_1h_per_mtok: Value[Decimal] = Field(None, description="One-hour cache writes.",
                                                    json_schema_extra={"default": "cache_write_per_mtok's"})
    output_per_mtok: Value[Decimal] = Field(None, description="Output, reasoning tokens included.")
    reasoning_per_mtok: Value[Decimal] = Field(None, description="Reasoning tokens (a part of output).",
                                               json_schema_extra={"default": "each rate's output price"})
    long_context: Annotated[LongContext, Shape("the long_context of {name}", line="key")] = Field(
        None, description="Left out: no request is long context.")
    regions: Annotated[list[Value[str]], Column(None), Shape("the regions of {name}", line="key")] = Field(
        None, description="The regions the standard rate prices; left out: every region without a rate of its own.")
    rates: Annotated[list[PriceRate], Shape("the rates of {name}", line="key", item="a rate of the price sheet {name}",
                                            item_line="key", empty="falsy")] = Field(
        None, description="Its other rates: served tiers, regions, long context.")

    def complete(self) -> None:
        for rate in self.rates or []:
            if rate.context_tier == "long" and "long_context" not in self.model_fields_set:
                raise rule_broken("a rate of the price sheet {name} prices context_tier long, but the sheet has no "
                                  "long_context (above_input_tokens and rule). Add it.", rate.line)
        regions = self.regions
        if "regions" in self.model_fields_set and (
                not regions or not all(isinstance(r, str) and r and "," not in r for r in regions)):
            raise rule_broken("the regions of the price sheet {name} must be a non-empty list of region names "
                              "(without commas).", self.line_of("regions"))

    def standard(self) -> dict[str, Any]:
        """The standard rate's prices as written (None where left out)."""
        return {k: getattr(self, k) for k in (*_PRICES, "reasoning_per_mtok")}


class LitellmPriceSheet(ConfigModel):
    """A hosted-API model's prices read from LiteLLM's model price map (the version's litellm_price_map): its
    per-token prices, served tiers (`_flex`, `_priority`, `_batches`) and long-context rate (`_above_<N>k_tokens`)
    as the map's keys give them."""

    what = "the price sheet {name} (read from the LiteLLM price map)"

    litellm: Value[str] = Field(description="The map's key of the model, e.g. gpt-4.1.")


def _sheet_kind(value: Any) -> str:
    return "litellm" if isinstance(value, dict) and "litellm" in value else "written"


ApiPriceSheet = Annotated[Annotated[PriceSheet, Tag("written")] | Annotated[LitellmPriceSheet, Tag("litellm")],
                          Discriminator(_sheet_kind)]


class CostVersion(ConfigModel):
    """One version of the cost policy, in force from its valid_from until the next version's."""

    what = "a cost policy version"
    contract = "config/cost_policy"

    price_version: Value[str] = Field(None, description="The version's name, published with every cost figure.")
    valid_from: Value[date] = Field(None, description="In force from this day until the next version's valid_from.")
    currency: Value[str] = Field(None, description="The currency of its rate cards and prices (ISO 4217).")
    deployment_tag_keys: Value[list[str]] = Field(None, description="FOCUS Tags keys naming a deployment.")
    shared_tag_value: Value[str] = Field(
        None, description="A deployment tag with this value marks a cost of the shared pool.")
    shared_cost_key: Value[Literal["gpu_hours", "requests", "output_tokens"]] = Field(
        None, description="How shared costs are spread over the deployments.")
    token_class_weights: Annotated[TokenClassWeights, Shape("token_class_weights", empty="falsy")] = Field(
        None, description="What a token of each class weighs when a cost is spread over tokens.")
    category_rules: Annotated[list[CategoryRule], Shape("category_rules", item="a category rule",
                                                        empty="falsy")] = Field(
        None, description="The rules giving FOCUS cost lines their category, in order.")
    list_prices: Annotated[dict[Any, ListPrice], Shape(
        "list_prices", item="the list price of {name}", item_line="container", keys="model", empty="falsy")] = Field(
        None, description="List prices per model, for daily value.")
    rate_cards: Annotated[dict[Any, RateCard], Shape(
        "rate_cards", item="rate card {name}", item_line="container", keys="rate card", empty="falsy")] = Field(
        None, description="On-premises cost per GPU-hour, by the name a deployment's rate_card gives.")
    api_prices: Annotated[dict[Any, ApiPriceSheet], Shape(
        "api_prices", item="the price sheet {name}", item_line="container", keys="price sheet", empty="falsy")] = Field(
        None, description="Price sheets of hosted-API models, by the name a deployment's price_sheet (or model) gives.")
    litellm_price_map: Annotated[Value[str], Column(None)] = Field(
        None, description="The file name of LiteLLM's model price map in the config folder, for sheets read from it.")
    energy_price_per_kwh: Value[float] = None


class CostsFile(ConfigModel):
    """config/costs.yaml: the cost policy, effective-dated."""

    what = "costs.yaml"

    versions: Annotated[list[CostVersion], Shape("versions", item="a cost policy version", item_line="key")] = Field(
        description="The versions of the policy.")


# --- whatif.yaml -----------------------------------------------------------------------------------------------------

class Scenario(ConfigModel):
    """A prefix cache the day's requests are replayed through."""

    what = "a scenario"
    contract = "whatif/whatif_scenario"

    scenario: Value[str] = None
    cache: Value[Literal["infinite", "lru"]] = None
    size_blocks: Value[int] = None
    size_gb: Value[float] = None
    scope: Value[Literal["shared", "per_replica"]] = "shared"
    routing: Value[Literal["session_affine", "random"]] = None


class WhatifModel(ConfigModel):
    """What the KV cache of one token of a model weighs."""

    what = "the entry of model {name}"
    contract = "whatif/whatif_model"

    kv_bytes_per_token: Value[int] = None


class Trace(ConfigModel):
    """How to replay one folder of raw/traces/."""

    what = "the entry of trace {name}"
    contract = "whatif/whatif_trace"

    kv_block_tokens: Value[int] = None
    replicas: Value[int] = 1
    kv_bytes_per_token: Value[int] = None


class Sampling(ConfigModel):
    """How an LRU scenario is replayed on a large day."""

    what = "sampling"
    contract = "whatif/whatif_sampling"

    budget_accesses: Value[int] = DEFAULT_BUDGET_ACCESSES


class WhatifFile(ConfigModel):
    """config/whatif.yaml (optional): the prefix-cache scenarios and what they need."""

    what = "whatif.yaml"

    scenarios: Annotated[list[Scenario] | None, Shape("scenarios", line="key", item="a scenario", item_line="key",
                                               empty="null-kept")] = Field(
        None, description="The caches to replay; left out: the one scenario `infinite`, the upper bound.")
    models: Annotated[dict[Any, WhatifModel], Shape(
        "models", line="key", item="the entry of model {name}", item_line="entry", keys="model",
        empty="falsy")] = Field(None, description="Bytes of KV cache per token of each model, for caches sized in GB.")
    traces: Annotated[dict[Any, Trace], Shape(
        "traces", line="key", item="the entry of trace {name}", item_line="entry", keys="trace folder",
        empty="falsy")] = Field(None, description="How to replay each folder of raw/traces/.")
    sampling: Annotated[Sampling, Shape("sampling", line="key", empty="falsy")] = Field(
        default_factory=_Mapping, validate_default=True, description="How large days are sampled.")


# The four files, by name.
FILES: dict[str, type[ConfigModel]] = {
    "deployments.yaml": DeploymentsFile, "slo.yaml": SloFile, "costs.yaml": CostsFile, "whatif.yaml": WhatifFile,
}
