"""The configuration files read into their models (tokenledger/config/models.py): the messages of a broken shape
(file, line, key, did-you-mean), the defaults, the merges of slo.yaml, the effective-dating rules the contracts
keep, and the models agreeing with the contracts they are flattened into."""

from __future__ import annotations

import typing
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import COSTS_YAML, DEPLOYMENTS_YAML, SLO_YAML, make_home
from tokenledger.config import flatten_costs, flatten_deployments, flatten_slo, flatten_whatif, load_config
from tokenledger.config.models import ApiPriceSheet, Deployment
from tokenledger.config.schema import ConfigModel, Shape, strip
from tokenledger.contracts import load_contract
from tokenledger.errors import ConfigError
from tokenledger.storage.layout import HomeLayout
from tools.docs import config_models


def _error(flatten: typing.Callable[[Path], object], path: Path, text: str) -> str:
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        flatten(path)
    return str(raised.value)


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


# --- the messages of a broken shape ----------------------------------------------------------------------------------

def test_an_unknown_key_with_a_close_one_gets_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "deployments.yaml"
    text = DEPLOYMENTS_YAML.replace("    gpus_per_replica: 1\n", "    gpu_per_replica: 1\n")
    assert _error(flatten_deployments, path, text) == (
        f"{path} line {_line(text, 'gpu_per_replica')}: unknown key 'gpu_per_replica' in a deployment: did you mean "
        "'gpus_per_replica'? (docs/configuration.md)")


def test_an_unknown_key_without_a_close_one_lists_the_known_keys(tmp_path: Path) -> None:
    path = tmp_path / "whatif.yaml"
    text = "scenarios:\n  - {scenario: infinite, cache: infinite}\nsampling:\n  budget: 1000\n"
    assert _error(flatten_whatif, path, text) == (
        f"{path} line 4: unknown key 'budget' in sampling (known keys: budget_accesses). Check the spelling "
        "(docs/configuration.md).")


def test_a_key_of_the_default_slo_policy_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    text = SLO_YAML.replace("queue_p99_ms", "queue_p99_msec")
    assert _error(flatten_slo, path, text) == (
        f"{path} line 11: unknown key 'queue_p99_msec' in an SLO policy: did you mean 'queue_p99_ms'? "
        "(docs/configuration.md)")


def test_an_unknown_key_of_headroom_names_its_own_line(tmp_path: Path) -> None:
    """Headroom was checked once merged (default and override), a mapping without lines: its messages said line 0."""
    path = tmp_path / "slo.yaml"
    text = SLO_YAML + "    models:\n      m8:\n        headroom:\n          jiter_pct: 0.1\n"
    assert _error(flatten_slo, path, text) == (
        f"{path} line {_line(text, 'jiter_pct')}: unknown key 'jiter_pct' in headroom: did you mean 'jitter_pct'? "
        "(docs/configuration.md)")


def test_a_mapping_where_a_list_belongs_names_the_entry_and_line(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    text = SLO_YAML.replace('        - {isl_bucket: "0-4k"', '        x: {isl_bucket: "0-4k"').replace(
        '        - {isl_bucket: "4k+"', '        y: {isl_bucket: "4k+"')
    # the line of the default policy (its first key), as the buckets' rows have it; _Mapping: the YAML mapping
    assert _error(flatten_slo, path, text) == f"{path} line 5: isl_buckets must be a list, found _Mapping."


def test_a_list_where_a_mapping_belongs_names_the_entry_and_line(tmp_path: Path) -> None:
    path = tmp_path / "costs.yaml"
    text = COSTS_YAML.replace("token_class_weights: {cached: 0.1, recomputed: 1.0, output: 5.0}",
                              "token_class_weights: [0.1, 1.0, 5.0]")
    assert _error(flatten_costs, path, text) == (
        f"{path} line 2: token_class_weights must be a mapping, found a list. Formats: docs/configuration.md.")


def test_an_entry_that_is_not_a_mapping_names_the_line_of_its_list(tmp_path: Path) -> None:
    path = tmp_path / "deployments.yaml"
    assert _error(flatten_deployments, path, "# the inventory\ndeployments:\n  - m70-h100\n") == (
        f"{path} line 2: a deployment must be a mapping, found a str. Formats: docs/configuration.md.")


def test_a_file_without_its_list(tmp_path: Path) -> None:
    path = tmp_path / "costs.yaml"
    assert _error(flatten_costs, path, "# nothing yet\nversion: []\n") == (
        f"{path} line 2: unknown key 'version' in costs.yaml: did you mean 'versions'? (docs/configuration.md)")
    assert _error(flatten_costs, path, "versions:\n") == f"{path} line 1: versions must be a list, found NoneType."


def test_a_key_that_is_not_text_is_an_unknown_key(tmp_path: Path) -> None:
    """YAML reads `3:` and `null:` as a number and None; the hand-written check failed on them with a TypeError."""
    path = tmp_path / "whatif.yaml"
    assert _error(flatten_whatif, path, "scenarios:\n  - {scenario: a, cache: infinite, null: 1}\n") == (
        f"{path} line 2: unknown key None in a scenario (known keys: cache, routing, scenario, scope, size_blocks, "
        "size_gb). Check the spelling (docs/configuration.md).")


def test_the_first_problem_in_reading_order_is_the_one_reported(tmp_path: Path) -> None:
    """A mapping's keys before what its values hold; entries in the order they are written; in an SLO version, the
    shape of default and models before what either holds."""
    path = tmp_path / "slo.yaml"
    text = SLO_YAML.replace("      itl_limit_ms", "      itl_limit_msec") + "    model: {}\n"
    assert "unknown key 'model' in an SLO version" in _error(flatten_slo, path, text)
    text = SLO_YAML.replace("      itl_limit_ms", "      itl_limit_msec") + "    models: [m8]\n"
    # (the line of the version, as every message about a key of it)
    assert f"{path} line 2: models must be a mapping, found a list." in _error(flatten_slo, path, text)
    path = tmp_path / "costs.yaml"
    text = COSTS_YAML + "    list_prices:\n      m70: {output_per_mtk: 1}\n      m8: 5\n"
    assert "unknown key 'output_per_mtk' in a list price" in _error(flatten_costs, path, text)


# --- price sheets: the rules across keys ---------------------------------------------------------------------------

SHEET = COSTS_YAML + """\
    api_prices:
      opus:
        input_per_mtok: 5
        output_per_mtok: 25
"""


def test_a_rate_that_names_no_tier_region_or_context(tmp_path: Path) -> None:
    path = tmp_path / "costs.yaml"
    text = SHEET + "        rates:\n          - {multiplier: 2}\n"
    assert _error(flatten_costs, path, text) == (
        f"{path} line {_line(text, 'multiplier')}: a rate of the price sheet opus names no service_tier, "
        "inference_region or context_tier, so it would be the sheet's standard rate again. Say which tier, region or "
        "context it prices (docs/configuration.md).")


def test_a_long_context_rate_needs_the_sheets_threshold(tmp_path: Path) -> None:
    path = tmp_path / "costs.yaml"
    text = SHEET + "        rates:\n          - {context_tier: long, multiplier: 2}\n"
    assert _error(flatten_costs, path, text) == (
        f"{path} line {_line(text, 'context_tier')}: a rate of the price sheet opus prices context_tier long, but "
        "the sheet has no long_context (above_input_tokens and rule). Add it.")
    text += "        long_context: {above_input_tokens: 200000}\n"
    path.write_text(text)
    rows = {(r["service_tier"], r["context_tier"]): r for r in flatten_costs(path)[-1].rows}
    assert rows[("standard", "long")]["output_per_mtok"] == "50"
    assert rows[("standard", "standard")]["context_rule"] == "whole_request"  # the rule's default


def test_regions_and_the_keys_of_a_litellm_sheet(tmp_path: Path) -> None:
    path = tmp_path / "costs.yaml"
    text = SHEET + "        regions: [us, 'eu,west']\n"
    assert _error(flatten_costs, path, text) == (
        f"{path} line {_line(text, 'regions')}: the regions of the price sheet opus must be a non-empty list of "
        "region names (without commas).")
    text = SHEET + "      gpt: {litellm: gpt-4.1, input_per_mtok: 2}\n"
    assert _error(flatten_costs, path, text) == (
        f"{path} line {_line(text, 'litellm')}: unknown key 'input_per_mtok' in the price sheet gpt (read from the "
        "LiteLLM price map) (known keys: litellm). Check the spelling (docs/configuration.md).")


# --- values: typed and judged by the contracts -----------------------------------------------------------------------

def _load_error(home: Path) -> str:
    with pytest.raises(ConfigError) as raised, duckdb.connect() as con:
        load_config(con, HomeLayout.of(home))
    return str(raised.value)


def test_a_value_of_the_wrong_type_names_file_line_and_rule(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    path = home / "config" / "deployments.yaml"
    text = DEPLOYMENTS_YAML.replace("    gpus: 4\n", "    gpus: four\n")
    path.write_text(text)
    assert _load_error(home) == (
        f"{path} breaks the deployments contract (data_contracts/*.odcs.yaml):\n"
        f"  {path} line {_line(text, 'gpus: four')}: gpus: four is not a valid integer\n"
        "Fix these entries and re-run.")


def test_versions_of_a_deployment_that_overlap_stop_the_run(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    path = home / "config" / "deployments.yaml"
    path.write_text(DEPLOYMENTS_YAML.replace("    valid_from: 2026-11-16T12:00:00Z\n", "    valid_from: 2026-11-10\n"))
    assert _load_error(home) == (
        f"{path}: versions_do_not_overlap: two versions of one deployment must not be in force at the same time. "
        "(1 case(s)). Fix the file and re-run.")


def test_a_version_that_ends_before_it_starts(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    path = home / "config" / "deployments.yaml"
    text = DEPLOYMENTS_YAML.replace("    valid_to: 2026-11-16T12:00:00Z\n", "    valid_to: 2026-10-01\n")
    path.write_text(text)
    assert "valid_to_after_valid_from: A version must end after it starts" in _load_error(home)


# --- defaults and merges ---------------------------------------------------------------------------------------------

def test_defaults_of_keys_left_out(tmp_path: Path) -> None:
    path = tmp_path / "deployments.yaml"
    path.write_text("deployments:\n  - {deployment_id: a, model: m}\n  - {deployment_id: b, model: m, kind: api}\n"
                    "  - {deployment_id: c, model: m, kind: null}\n")
    rows = flatten_deployments(path)[0].rows
    assert [(r["kind"], r["hosting"]) for r in rows] == [("gpu", "cloud"), ("api", None), (None, None)]
    path = tmp_path / "whatif.yaml"
    scenarios, _, traces, sampling = flatten_whatif(path)  # no file: the upper bound, and the default budget
    assert scenarios.rows == [{"scenario": "infinite", "cache": "infinite", "scope": "shared"}]
    path.write_text("scenarios: []\ntraces:\n  mooncake: {kv_block_tokens: 512}\n")
    scenarios, _, traces, sampling = flatten_whatif(path)
    assert scenarios.rows == [] and traces.rows[0]["replicas"] == "1"
    assert sampling.rows == [{"budget_accesses": "50000000"}] and sampling.lines == [1]


def test_an_override_merges_headroom_key_by_key_and_replaces_the_buckets(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(SLO_YAML + "    models:\n      m8:\n        tpot_p99_ms: 30\n        headroom: {n_minus_k: 2}\n"
                               "        isl_buckets:\n          - {isl_bucket: all, min_input_tokens: 0, "
                               "ttft_limit_ms: 900}\n      m70:\n")
    policy, buckets = flatten_slo(path)
    rows = {r["model"]: r for r in policy.rows}
    assert (rows["m8"]["tpot_p99_ms"], rows["m8"]["headroom_n_minus_k"], rows["m8"]["headroom_jitter_pct"]) == (
        "30", "2", "0.05")
    assert rows["m70"] == {**rows["*"], "model": "m70"}  # an empty override is the default
    assert [(r["model"], r["isl_bucket"]) for r in buckets.rows] == [
        ("*", "0-4k"), ("*", "4k+"), ("m8", "all"), ("m70", "0-4k"), ("m70", "4k+")]


# --- the models and the contracts agree ------------------------------------------------------------------------------

ALL_MODELS = config_models()  # every model, from the four files' down
# A leaf's type as the models declare it, and the contract types that read it.
_TYPES = {int: ("INTEGER", "BIGINT"), float: ("DOUBLE",), Decimal: ("DECIMAL(38,12)",), str: ("VARCHAR",),
          date: ("DATE",), date | datetime: ("TIMESTAMPTZ",), list[str]: ("VARCHAR[]",),
          bool: ("BOOLEAN",)}


def test_a_deployment_takes_the_columns_of_its_contract() -> None:
    assert list(Deployment.model_fields) == load_contract("deployments").table().column_names


@pytest.mark.parametrize("model", [m for m in ALL_MODELS if m.contract], ids=lambda m: m.__name__)
def test_leaf_keys_agree_with_their_contract_columns(model: type[ConfigModel]) -> None:
    contract, _, table_name = model.contract.partition("/")
    table = load_contract(contract).table(table_name)
    for key, info in model.model_fields.items():
        column_name = model.column_of(key)
        if column_name is None or any(isinstance(m, Shape) for m in info.metadata):
            continue
        column = table.column(column_name)
        declared = info.annotation
        values = None
        if typing.get_origin(declared) is typing.Literal:
            values, declared = typing.get_args(declared), str
        assert column.physical_type in _TYPES[declared], (key, declared, column.physical_type)
        assert values is None or values == column.valid_values, (key, values, column.valid_values)
        assert column.valid_values is None or values is not None, f"{key}: declare its values as a Literal"


def test_every_model_names_what_it_is() -> None:
    assert all(m.what != ConfigModel.what for m in ALL_MODELS)
    assert {m.__name__ for m in ALL_MODELS} >= {"PriceSheet", "LitellmPriceSheet", "PriceRate", "Headroom"}
    assert typing.get_origin(strip(ApiPriceSheet)[0]) in (typing.Union, type(int | str))
