"""Failure domains and the units a deployment is bought in (docs/metrics.md, section 6, "Failure domains" and
"Units bought"; docs/adr/0123-failure-domains-and-units-bought.md), worked by hand on small inputs: N-1 node for a
deployment of 2 nodes of 8 GPUs, a rack, a replica larger than a node, units needed rounded up to whole nodes, the
verdict's words, and a domain the inventory cannot size (an error, never a guess)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEPLOYMENTS_YAML
from tests.test_capacity_rules import PLAN_ROW, plan_table
from tests.verdict_sql import verdict_rows
from tokenledger.capacity.day import failure_and_units, unsized_failure_domain
from tokenledger.capacity.queueing import (
    Headroom,
    gpus_needed,
    replicas_per_failure_domain,
    unit_gpus,
    units_needed,
)
from tokenledger.config import flatten_deployments
from tokenledger.errors import ConfigError

NODE_OF_8 = Headroom(n_minus_k=1, gpus_per_failure_domain=8)


# --- the failure headroom of a domain --------------------------------------------------------------------------------

def test_n_minus_1_node_for_a_deployment_of_2_nodes_of_8_gpus() -> None:
    # Replicas of 2 GPUs packed 4 to a node of 8: a node's failure takes down 8 / 2 = 4 replicas = 8 GPUs. The load
    # needs 4 replicas (8 GPUs, no percentages): 8 + 8 = 16 GPUs = the 2 nodes, no more. Counting a replica as the
    # domain (N-1 replica) it would be 8 + 2 = 10 GPUs, which the same 2 nodes hold with 6 to spare: a plan that
    # survives no node failure (one node left of 8 GPUs holds 4 replicas, the load's 4 with nothing to spare only
    # because the node domain added them).
    need = gpus_needed(4, 2, NODE_OF_8)
    assert (need.failure_replicas, need.failure_gpus, need.gpus_needed) == (4, 8.0, 16.0)
    assert units_needed(need.gpus_needed, 8) == 2
    by_replica = gpus_needed(4, 2, Headroom(n_minus_k=1))
    assert (by_replica.failure_replicas, by_replica.failure_gpus, by_replica.gpus_needed) == (1, 2.0, 10.0)
    # 5 replicas for the load (10 GPUs): by node 10 + 8 = 18 GPUs, 3 nodes (18 / 8 = 2.25 rounded up); by replica
    # 10 + 2 = 12 GPUs, 2 nodes.
    assert units_needed(gpus_needed(5, 2, NODE_OF_8).gpus_needed, 8) == 3
    assert units_needed(gpus_needed(5, 2, Headroom(n_minus_k=1)).gpus_needed, 8) == 2
    # N-2 nodes: 2 x 4 = 8 replicas, 16 GPUs. N-0: nothing.
    assert gpus_needed(4, 2, Headroom(n_minus_k=2, gpus_per_failure_domain=8)).failure_gpus == 16.0
    assert gpus_needed(4, 2, Headroom(n_minus_k=0, gpus_per_failure_domain=8)).failure_gpus == 0.0


def test_the_failure_headroom_is_added_after_the_percentages_at_the_domains_size() -> None:
    # 4 replicas of 2 GPUs = 8 GPUs x 1.1 (scaling lag) = 8.8, then a node of 8: 4 replicas, 8 GPUs: 16.8.
    need = gpus_needed(4, 2, Headroom(n_minus_k=1, scaling_lag_pct=0.1, gpus_per_failure_domain=8))
    assert (need.pct_gpus["scaling_lag"], need.failure_gpus, need.gpus_needed) == (
        pytest.approx(0.8), 8.0, pytest.approx(16.8))
    assert need.replicas_needed == 9  # 16.8 / 2 = 8.4, rounded up


def test_a_rack_and_a_replica_larger_than_a_node() -> None:
    # A rack of 18 nodes of 4 GPUs (an NVL72 rack): 72 GPUs. Replicas of 8 (tensor parallel over 2 nodes): a rack
    # takes down 72 / 8 = 9 replicas = 72 GPUs; N-2 racks 18 replicas = 144 GPUs.
    rack = unit_gpus("rack", 8, 4, 18)
    assert rack == 72
    assert gpus_needed(3, 8, Headroom(n_minus_k=1, gpus_per_failure_domain=rack)).failure_gpus == 72.0
    assert Headroom(n_minus_k=2, gpus_per_failure_domain=rack).failure_replicas(8) == 18
    # A node of 4 in the same deployment: one replica of 8 has GPUs on it, and it is lost whole: 8 GPUs, not 4.
    assert replicas_per_failure_domain(4, 8) == 1
    assert gpus_needed(3, 8, Headroom(n_minus_k=1, gpus_per_failure_domain=4)).failure_gpus == 8.0
    # A replica of 16 over 2 nodes of 8: one node's failure takes the one replica on it, 16 GPUs.
    assert replicas_per_failure_domain(8, 16) == 1
    # Replicas of 3 in a node of 8: 8 / 3 = 2.67, rounded up to 3 replicas = 9 GPUs (2 whole and one that may
    # straddle the node's edge).
    assert replicas_per_failure_domain(8, 3) == 3
    # A replica domain is the replica itself: n_minus_k replicas.
    assert replicas_per_failure_domain(2, 2) == 1 and unit_gpus("replica", 2, 8, 4) == 2


def test_the_units_of_each_domain_and_unit_bought() -> None:
    assert [unit_gpus(u, 2, 8, 4) for u in ("gpu", "replica", "node", "rack")] == [1, 2, 8, 32]
    # What the inventory does not give has no size: never a guess.
    assert (unit_gpus("node", 2, None, 4), unit_gpus("rack", 2, 8, None), unit_gpus("rack", 2, None, None)) == (
        None, None, None)
    with pytest.raises(ValueError, match="unknown unit 'zone'"):
        unit_gpus("zone", 2, 8, 4)


def test_units_needed_round_up_to_whole_units() -> None:
    # 14 GPUs in nodes of 8: 1.75 -> 2; 16 -> 2 exactly (float noise of a sum is not a third node); 16.01 -> 3;
    # 80 GPUs in racks of 72: 2 racks; in GPUs, 14.2 -> 15; none needed, none bought.
    assert units_needed(14.0, 8) == 2
    assert units_needed(8 * 1.1 + 7.2, 8) == 2  # 16.000000000000004
    assert units_needed(16.01, 8) == 3
    assert units_needed(80.0, 72) == 2
    assert units_needed(14.2, 1) == 15
    assert units_needed(0.0, 8) == 0


# --- the plan's columns ----------------------------------------------------------------------------------------------

# Erlang C on test_capacity_rules' peak: 0.2 req/s x 1.5 s = 0.3 Erlangs need 3 slots; one slot per replica makes
# 3 replicas of 2 GPUs = 6 GPUs before headroom, and no percentages here.
TWO_NODES = {**PLAN_ROW, "deployment_id": "two-nodes", "gpus_per_replica": 2, "slots_per_replica": 1,
             "headroom_scaling_lag_pct": 0.0, "headroom_forecast_error_pct": 0.0, "headroom_release_pct": 0.0,
             "headroom_jitter_pct": 0.0, "headroom_failure_domain": "node", "gpus_per_node": 8, "nodes_per_rack": 4,
             "bought_in": "node", "gpus_deployed": 16}


def _plans(*rows: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["deployment_id"]: r for r in plan_table(list(rows))}


def test_the_plan_of_2_nodes_of_8_gpus_by_node_and_by_replica() -> None:
    plans = _plans(TWO_NODES, {**TWO_NODES, "deployment_id": "by-replica", "headroom_failure_domain": "replica"},
                   {**TWO_NODES, "deployment_id": "by-rack", "headroom_failure_domain": "rack", "bought_in": "rack"})
    node = plans["two-nodes"]
    # 6 GPUs + a node (4 replicas of 2 = 8 GPUs) = 14 GPUs needed against 16: 2 nodes needed (14 / 8 = 1.75), 2 in
    # force (16 / 8), none to spare in nodes though 2 GPUs to spare.
    assert (node["headroom_failure_domain"], node["headroom_n_minus_k"], node["gpus_per_failure_domain"]) == (
        "node", 1, 8)
    assert (node["headroom_failure_replicas"], node["headroom_failure_gpus"], node["gpus_needed"]) == (4, 8.0, 14.0)
    assert (node["bought_in"], node["gpus_per_unit"], node["units_needed"]) == ("node", 8, 2)
    assert (node["units_deployed"], node["unit_surplus"], node["gpu_surplus"]) == (2.0, 0.0, 2.0)
    # By replica: 6 + 2 = 8 GPUs, 1 node: a node to spare that a node's failure would take half the fleet from.
    replica = plans["by-replica"]
    assert (replica["gpus_per_failure_domain"], replica["headroom_failure_replicas"], replica["gpus_needed"]) == (
        2, 1, 8.0)
    assert (replica["units_needed"], replica["unit_surplus"]) == (1, 1.0)
    # By rack (4 nodes of 8 = 32 GPUs, 16 replicas): 6 + 32 = 38 GPUs, bought in racks of 32: 2 racks needed, 0.5
    # in force.
    rack = plans["by-rack"]
    assert (rack["gpus_per_failure_domain"], rack["headroom_failure_replicas"], rack["gpus_needed"]) == (32, 16, 38.0)
    assert (rack["gpus_per_unit"], rack["units_needed"], rack["units_deployed"], rack["unit_surplus"]) == (
        32, 2, 0.5, -1.5)
    # No capacity figure: no capacity per unit.
    assert node["daily_capacity_tokens_per_unit"] is None


def test_a_day_without_requests_keeps_only_a_nodes_failure_headroom() -> None:
    idle = {**TWO_NODES, "deployment_id": "idle", "peak_arrival_rate": 0.0, "peak_requests": 0, "requests": 0,
            "successful_requests": 0, "mean_service_time_s": None, "p99_service_time_s": None}
    plan = _plans(idle)["idle"]
    # 0 slots, 0 replicas: only the node of 8 GPUs, 1 node.
    assert (plan["gpus_needed"], plan["units_needed"], plan["unit_surplus"]) == (8.0, 1, 1.0)
    assert plan["plan_note"].startswith("no request in the day: 0 slots; only the failure headroom (1 node(s))")


def test_the_daily_capacity_of_one_unit_bought() -> None:
    # 0.5 output tok/s per GPU x 86,400 s x 8 GPUs a node = 345,600 tokens a day per node; bought in GPUs, 43,200.
    figures = failure_and_units({**TWO_NODES, "capacity_goodput_per_gpu": 0.5}, 14.0)
    assert (figures["daily_capacity_tokens_per_unit"], figures["units_needed"]) == (345_600.0, 2)
    figures = failure_and_units({**TWO_NODES, "capacity_goodput_per_gpu": 0.5, "bought_in": "gpu"}, 14.0)
    assert (figures["gpus_per_unit"], figures["units_needed"], figures["daily_capacity_tokens_per_unit"]) == (
        1, 14, 43_200.0)
    # Without a bought_in (a row of before the inventory said it): GPUs; without a domain: a replica.
    figures = failure_and_units({**TWO_NODES, "bought_in": None, "headroom_failure_domain": None}, None)
    assert (figures["bought_in"], figures["units_needed"], figures["headroom_failure_domain"],
            figures["headroom_failure_replicas"]) == ("gpu", None, "replica", 1)


# --- the verdict's words ---------------------------------------------------------------------------------------------

def _verdict(domain: str, n_minus_k: int, failure_replicas: int) -> dict[str, Any]:
    # 3 replicas of 2 GPUs at the peak (6 GPUs), no percentages, against 8 GPUs in force: the peak fits with 2 to
    # spare, but the failure replicas' GPUs are added.
    needed = 6.0 + failure_replicas * 2
    plan = {"model": "m", "deployment_id": "m-a", "gpus_needed": needed, "binding_sizing": "erlang_c",
            "gpus_deployed": 8.0, "gpus_per_replica": 2, "headroom_failure_replicas": failure_replicas,
            "headroom_n_minus_k": n_minus_k, "headroom_failure_domain": domain, "base_gpus": 6.0,
            "headroom_scaling_lag_pct": 0.0, "headroom_forecast_error_pct": 0.0, "headroom_release_pct": 0.0,
            "headroom_jitter_pct": 0.0, "hours_over_capacity": 0}
    met = {"attainment": 0.995, "attainment_target": 0.99, "attainment_met": True, "success_rate": 0.9998,
           "success_rate_target": 0.9995, "success_rate_met": True, "all_met": True}
    rows = verdict_rows({
        "day_slo_policy": [{"model": "m", "attainment_target": 0.99, "success_rate_target": 0.9995,
                            "queue_p99_ms": 300.0, "itl_p99_ms": 100.0, "tpot_p99_ms": 40.0}],
        "day_slo_isl_bucket": [{"model": "m", "isl_bucket": "0-4k", "bucket_order": 0}],
        "day_slo_daily": [{"model": "m", "isl_bucket": b, **met} for b in ("0-4k", "all")],
        "day_capacity_plan": [plan],
        "day_capacity": [{"model": "m", "deployment_id": "m-a", "capacity_source": "loadtest",
                          "capacity_verified": True, "loadtest_run_id": "lt-1"}]})
    return rows[0]


def test_the_verdict_names_the_failure_domain() -> None:
    # N-1 node of 8: 6 + 8 = 14 needed against 8: 6 GPUs more, 3 replicas of 2, all of them redundancy.
    got = _verdict("node", 1, 4)
    assert (got["verdict"], got["gap_slo_capacity"], got["gap_headroom"], got["gap_redundancy"]) == (
        "policy", -2.0, 0.0, 8.0)
    assert got["verdict_text"] == "SLO met; policy: 3 more replicas (6 GPUs) for N+1 node"
    # N-2 racks of 32 (16 replicas each): 6 + 64 = 70 needed, 62 more = 31 replicas.
    assert _verdict("rack", 2, 32)["verdict_text"] == "SLO met; policy: 31 more replicas (62 GPUs) for N+2 racks"
    # A replica: as before, N+1 and no domain word. 6 + 2 = 8 needed against 8 in force: ok.
    assert _verdict("replica", 1, 1)["verdict"] == "ok"
    assert _verdict("replica", 2, 2)["verdict_text"] == "SLO met; policy: 1 more replica (2 GPUs) for N+2"


# --- a domain or unit the inventory cannot size ----------------------------------------------------------------------

def test_a_policy_domain_the_inventory_cannot_size_stops_the_plan() -> None:
    row = {**TWO_NODES, "gpus_per_node": None, "config_line": 12, "slo_version": "v1"}
    assert unsized_failure_domain(row, "config/deployments.yaml") == (
        "config/deployments.yaml line 12: deployment two-nodes has no gpus_per_node, so a node (the SLO policy's "
        "headroom failure_domain, SLO version v1) has no size in GPUs. Give gpus_per_node to the deployment, or name "
        "a domain it can size (failure_domain replica in slo.yaml), and re-run the day.")
    # A rack needs nodes_per_rack as well.
    row = {**TWO_NODES, "headroom_failure_domain": "rack", "bought_in": "gpu", "nodes_per_rack": None,
           "config_line": 12, "slo_version": "v1"}
    assert "has no nodes_per_rack, so a rack (the SLO policy's headroom failure_domain" in unsized_failure_domain(
        row, "deployments.yaml")
    # Sized: no error; a replica domain and GPUs bought need nothing of the inventory.
    assert unsized_failure_domain(TWO_NODES, "deployments.yaml") is None
    bare = {**TWO_NODES, "headroom_failure_domain": "replica", "bought_in": "gpu", "gpus_per_node": None,
            "nodes_per_rack": None}
    assert unsized_failure_domain(bare, "deployments.yaml") is None


def test_a_deployment_bought_in_nodes_needs_their_size_when_the_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "deployments.yaml"
    text = DEPLOYMENTS_YAML.replace("    gpus_per_replica: 1\n", "    gpus_per_replica: 1\n    bought_in: rack\n"
                                    "    gpus_per_node: 4\n", 1)
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        flatten_deployments(path)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "bought_in" in t)
    assert str(raised.value) == (
        f"{path} line {line}: deployment m8-onprem is bought_in rack but has no nodes_per_rack, so a rack has no size "
        "in GPUs. Give nodes_per_rack (docs/configuration.md).")
    path.write_text(text.replace("    gpus_per_node: 4\n", "    gpus_per_node: 4\n    nodes_per_rack: 8\n", 1))
    assert flatten_deployments(path)


# --- the review -------------------------------------------------------------------------------------------------------

def test_the_review_says_the_domain_and_the_units_bought() -> None:
    from tests.test_report_consistent import POLICY_SHORT, _one_gpu, _row, _texts

    # The policy-short plan of test_report_consistent (1 replica of 2 GPUs at the peak, 2 GPUs in force), N-1 node
    # of 8: 4 replicas, 8 GPUs. 2 x 1.334025 + 8 = 10.67 GPUs needed, bought in nodes of 8: 2 nodes, 0.25 in force.
    # One node at 247.75 tok/s per GPU: 247.75 x 86,400 x 8 = 171,244,800 tokens a day.
    needed = 2 * 1.334025 + 8
    review = _one_gpu(**{**POLICY_SHORT, "headroom_failure_domain": "node", "headroom_n_minus_k": 1,
                         "gpus_per_failure_domain": 8, "headroom_failure_replicas": 4, "headroom_failure_gpus": 8.0,
                         "gpus_needed_erlang_c": needed, "gpus_needed": needed, "bought_in": "node",
                         "gpus_per_unit": 8, "units_needed": 2, "units_deployed": 0.25, "unit_surplus": -1.75,
                         "daily_capacity_tokens_per_unit": 247.75 * 86_400 * 8})
    # 10.67 - 2 in force = 8.67 GPUs: 5 replicas of 2.
    assert _row(review)["verdict"] == "SLO met; policy: 5 more replicas (10 GPUs) for N+1 node and 33.4% headroom"
    for document in _texts(review):
        text = " ".join(document.split())
        assert ("N+1 node: 1 node(s) of 8 GPUs may fail, taking down 4 replica(s) of 2 GPUs, and the rest keep the "
                "SLO = 8.00 GPUs") in text
        assert ("In the unit bought: 2 node(s) of 8 GPUs needed against 0.25 in force (-1.75 to spare; negative: "
                "short); one node delivers 171,244,800 output tokens a day within the SLO.") in text
