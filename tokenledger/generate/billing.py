"""FOCUS 1.0 billing export for the cloud deployments over the generated days.

The rows exercise every path of cost allocation: GPU and CPU instances hourly (tagged to their deployment),
network egress and storage daily (one storage row with a 6-hour period, untagged, placed only by its
ResourceId pattern), an untagged platform cost, a shared-pool cost tagged ``shared``, and a credit spanning
several days.
The on-premises deployments have no rows: they are costed from their rate cards.

Formatting follows the public FOCUS 1.0 sample: ``YYYY-MM-DD HH:MM:SS`` UTC timestamps (end exclusive),
literal unquoted ``NULL`` for missing values, strings double-quoted, numbers plain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pyarrow as pa

from .fleet import initial_replicas, replicas_per_minute
from .gateway import connect
from .scenario import (
    DEPLOYMENTS,
    GATEWAY,
    GATEWAY_NODES,
    ROUTER,
    WEEKDAY_FACTOR,
    Deployment,
    Instance,
    rng_for,
)

ACCOUNT = "123456789012"
SUB_ACCOUNT = ("210987654321", "ml-inference-prod")
REGION = ("us-east-1", "US East (N. Virginia)")
AZ = "us-east-1a"
PROVIDER = "AWS"
PUBLISHER = "Amazon Web Services, Inc."
TAG_KEY = "tokenledger:deployment"
SAVINGS_PLAN = "arn:aws:savingsplans::123456789012:savingsplan/sp-0f1e2d3c4b5a69788"

COLUMNS = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription",
    "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
    "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
    "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
)  # fmt: skip
NUMERIC = (
    "BilledCost", "ConsumedQuantity", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost",
    "ListUnitPrice", "PricingQuantity",
)  # fmt: skip

#: Daily network egress (GB) and model-weight storage (GB per replica) of each cloud deployment.
EGRESS_GB_PER_DAY = {"qwen3coder30b-h100": 40.0}
WEIGHTS_GB_PER_REPLICA = {"qwen3coder30b-h100": 120.0}
EGRESS_PER_GB = 0.09
EBS_PER_GB_MONTH = 0.08
SNAPSHOT_PER_GB_MONTH = 0.05
EKS_PER_HOUR = 0.10
MONITORING_PER_DAY = 9.60
CREDIT_PER_DAY = -12.0  # a promotional GPU credit of about a tenth of the coding model's instance bill


@dataclass(frozen=True)
class FocusFile:
    path: Path
    rows: int


def _ts(d: datetime) -> str:
    return d.strftime("%Y-%m-%d %H:%M:%S")


def _month(d: datetime) -> tuple[str, str]:
    first = d.replace(day=1, hour=0, minute=0, second=0)
    nxt = (first + timedelta(days=32)).replace(day=1)
    return _ts(first), _ts(nxt)


def _tags(value: str | None, **extra: str) -> str | None:
    if value is None:
        return None
    return json.dumps({TAG_KEY: value, **extra})


def _row(
    *,
    start: datetime,
    end: datetime,
    service_category: str,
    service_name: str,
    description: str,
    effective: float,
    billed: float,
    list_cost: float,
    list_unit_price: float | None,
    quantity: float | None,
    unit: str | None,
    resource_id: str | None,
    resource_name: str | None,
    resource_type: str | None,
    sku: str | None,
    tags: str | None,
    charge_category: str = "Usage",
    frequency: str = "Usage-Based",
    committed: bool = False,
    zone: str | None = AZ,
) -> dict[str, object]:
    period_start, period_end = _month(start)
    return {
        "AvailabilityZone": zone,
        "BilledCost": billed,
        "BillingAccountId": ACCOUNT,
        "BillingAccountName": "tokenledger-demo",
        "BillingCurrency": "USD",
        "BillingPeriodEnd": period_end,
        "BillingPeriodStart": period_start,
        "ChargeCategory": charge_category,
        "ChargeClass": None,
        "ChargeDescription": description,
        "ChargeFrequency": frequency,
        "ChargePeriodEnd": _ts(end),
        "ChargePeriodStart": _ts(start),
        "CommitmentDiscountCategory": "Spend" if committed else None,
        "CommitmentDiscountId": SAVINGS_PLAN if committed else None,
        "CommitmentDiscountName": "gpu-compute-sp-3yr" if committed else None,
        "CommitmentDiscountStatus": "Used" if committed else None,
        "CommitmentDiscountType": "Compute Savings Plans" if committed else None,
        "ConsumedQuantity": quantity,
        "ConsumedUnit": unit,
        "ContractedCost": list_cost,
        "ContractedUnitPrice": list_unit_price,
        "EffectiveCost": effective,
        "InvoiceIssuerName": PUBLISHER,
        "ListCost": list_cost,
        "ListUnitPrice": list_unit_price,
        "PricingCategory": ("Committed" if committed else "Standard") if charge_category == "Usage" else None,
        "PricingQuantity": quantity,
        "PricingUnit": unit,
        "ProviderName": PROVIDER,
        "PublisherName": PUBLISHER,
        "RegionId": REGION[0],
        "RegionName": REGION[1],
        "ResourceId": resource_id,
        "ResourceName": resource_name,
        "ResourceType": resource_type,
        "ServiceCategory": service_category,
        "ServiceName": service_name,
        "SkuId": sku,
        "SkuPriceId": f"{sku}.{'SP' if committed else 'OD'}.{REGION[0]}"
        if sku and charge_category == "Usage"
        else None,
        "SubAccountId": SUB_ACCOUNT[0],
        "SubAccountName": SUB_ACCOUNT[1],
        "Tags": tags,
    }


def _instance_arn(kind: str, prefix: str, n: int) -> str:
    return f"arn:aws:ec2:{REGION[0]}:{ACCOUNT}:{kind}/{prefix}{n:012d}"


def _hourly_instance(
    start: datetime, inst: Instance, arn: str, name: str, tag: str, committed: bool
) -> dict[str, object]:
    effective = inst.committed_per_hour if committed else inst.list_per_hour
    return _row(
        start=start,
        end=start + timedelta(hours=1),
        service_category="Compute",
        service_name="Amazon Elastic Compute Cloud",
        description=f"{inst.sku} ({inst.description}), {'Savings Plan' if committed else 'On Demand'} Linux",
        effective=effective,
        billed=inst.list_per_hour,
        list_cost=inst.list_per_hour,
        list_unit_price=inst.list_per_hour,
        quantity=1.0,
        unit="Hours",
        resource_id=arn,
        resource_name=name,
        resource_type="Instance",
        sku=inst.sku,
        tags=_tags(tag),
        committed=committed,
    )


def _deployment_rows(start: date, day: date, dep: Deployment, seed: int,
                     requests_per_day: int) -> list[dict[str, object]]:
    assert dep.instance is not None
    rows = []
    d0 = datetime.combine(day, time(0), tzinfo=UTC)
    reps = replicas_per_minute(dep, start, day, requests_per_day)
    initial = initial_replicas(dep.deployment_id, requests_per_day)
    for h in range(24):
        hour = d0 + timedelta(hours=h)
        for i in range(int(reps[h * 60])):
            arn = _instance_arn("instance", f"i-{dep.instance_prefix}", i + 1)
            # The initial replicas are covered by a savings plan; scale-up capacity runs on demand.
            rows.append(
                _hourly_instance(
                    hour,
                    dep.instance,
                    arn,
                    f"{dep.deployment_id}-{i + 1}",
                    dep.deployment_id,
                    committed=i < initial,
                )
            )
        rows.append(
            _hourly_instance(
                hour,
                ROUTER,
                _instance_arn("instance", "i-0e7a0", 100 + DEPLOYMENTS.index(dep)),
                f"{dep.deployment_id}-router",
                dep.deployment_id,
                committed=False,
            )
        )
    rng = rng_for(seed, day, dep.deployment_id, "billing")
    gb = EGRESS_GB_PER_DAY[dep.deployment_id] * WEEKDAY_FACTOR[day.weekday()] * rng.uniform(0.9, 1.1)
    rows.append(
        _row(
            start=d0,
            end=d0 + timedelta(days=1),
            service_category="Networking",
            service_name="AWS Data Transfer",
            description=f"${EGRESS_PER_GB} per GB - {REGION[0]} data transfer to Internet",
            effective=gb * EGRESS_PER_GB,
            billed=gb * EGRESS_PER_GB,
            list_cost=gb * EGRESS_PER_GB,
            list_unit_price=EGRESS_PER_GB,
            quantity=gb,
            unit="GB",
            resource_id=None,
            resource_name=None,
            resource_type=None,
            sku="DataTransfer-Out-Bytes",
            tags=_tags(dep.deployment_id),
            zone=None,
        )
    )
    gb_month = WEIGHTS_GB_PER_REPLICA[dep.deployment_id] * float(reps.mean()) / 30.0
    cost = gb_month * EBS_PER_GB_MONTH
    rows.append(
        _row(
            start=d0,
            end=d0 + timedelta(days=1),
            service_category="Storage",
            service_name="Amazon Elastic Block Store",
            description=f"${EBS_PER_GB_MONTH} per GB-month of gp3 provisioned storage (model weights)",
            effective=cost,
            billed=cost,
            list_cost=cost,
            list_unit_price=EBS_PER_GB_MONTH,
            quantity=gb_month,
            unit="GB-Mo",
            resource_id=_instance_arn("volume", f"vol-{dep.instance_prefix}", 1),
            resource_name=f"{dep.deployment_id}-weights",
            resource_type="Volume",
            sku="EBS:VolumeUsage.gp3",
            tags=_tags(dep.deployment_id),
        )
    )
    return rows


def _shared_rows(day: date) -> list[dict[str, object]]:
    d0 = datetime.combine(day, time(0), tzinfo=UTC)
    rows = []
    for h in range(24):
        for i, (node, *_rest) in enumerate(GATEWAY_NODES):
            rows.append(
                _hourly_instance(
                    d0 + timedelta(hours=h),
                    GATEWAY,
                    _instance_arn("instance", "i-0ea7e", i + 1),
                    node,
                    "shared",
                    committed=False,
                )
            )
    eks = EKS_PER_HOUR * 24
    for service, description, cost, qty, unit, sku in (
        (
            "Amazon Elastic Kubernetes Service",
            "Amazon EKS cluster usage (control plane)",
            eks,
            24.0,
            "Hours",
            "AmazonEKS-Hours:perCluster",
        ),
        (
            "Amazon CloudWatch",
            "Metrics, logs and dashboards for the inference platform",
            MONITORING_PER_DAY,
            None,
            None,
            "CW:MetricMonitorUsage",
        ),
    ):
        rows.append(
            _row(
                start=d0,
                end=d0 + timedelta(days=1),
                service_category="Management and Governance",
                service_name=service,
                description=description,
                effective=cost,
                billed=cost,
                list_cost=cost,
                list_unit_price=EKS_PER_HOUR if qty else None,
                quantity=qty,
                unit=unit,
                resource_id=f"arn:aws:eks:{REGION[0]}:{ACCOUNT}:cluster/inference-prod" if qty else None,
                resource_name="inference-prod" if qty else None,
                resource_type="Cluster" if qty else None,
                sku=sku,
                tags=None,
                zone=None,
            )
        )
    return rows


def _special_rows(start: date, days: int) -> list[dict[str, object]]:
    """The one-off rows: a 6-hour snapshot charge and a credit spread over the generated days."""
    d0 = datetime.combine(start, time(0), tzinfo=UTC)
    qwen = next(d for d in DEPLOYMENTS if d.deployment_id == "qwen3coder30b-h100")
    snap_gb_month = WEIGHTS_GB_PER_REPLICA[qwen.deployment_id] * 6 / 24 / 30.0
    snap_cost = snap_gb_month * SNAPSHOT_PER_GB_MONTH
    snapshot = _row(
        start=d0 + timedelta(hours=6),
        end=d0 + timedelta(hours=12),
        service_category="Storage",
        service_name="Amazon Elastic Block Store",
        description="EBS snapshot of the model weights before an upgrade",
        effective=snap_cost,
        billed=snap_cost,
        list_cost=snap_cost,
        list_unit_price=SNAPSHOT_PER_GB_MONTH,
        quantity=snap_gb_month,
        unit="GB-Mo",
        resource_id=_instance_arn("snapshot", f"snap-{qwen.instance_prefix}", 1),
        resource_name=None,
        resource_type="Snapshot",
        sku="EBS:SnapshotUsage",
        tags=None,
    )
    credit = CREDIT_PER_DAY * days
    credit_row = _row(
        start=d0,
        end=d0 + timedelta(days=days),
        service_category="Compute",
        service_name="Amazon Elastic Compute Cloud",
        description="GPU capacity promotional credit",
        effective=credit,
        billed=credit,
        list_cost=0.0,
        list_unit_price=None,
        quantity=None,
        unit=None,
        resource_id=None,
        resource_name=None,
        resource_type=None,
        sku=qwen.instance.sku if qwen.instance else None,
        tags=_tags(qwen.deployment_id),
        charge_category="Credit",
        frequency="One-Time",
        zone=None,
    )
    return [snapshot, credit_row]


def _fmt(v: object) -> str | None:
    if v is None:
        return None
    return f"{v:.10f}" if isinstance(v, float) else str(v)


def write_focus(home: Path, start: date, days: int, seed: int, requests_per_day: int) -> FocusFile:
    """Write ``raw/billing/focus-<first day>-<last day>.csv`` (both inclusive) for the fleet sized to
    ``requests_per_day`` (:mod:`tokenledger.generate.fleet`)."""
    rows: list[dict[str, object]] = []
    for i in range(days):
        day = start + timedelta(days=i)
        for dep in DEPLOYMENTS:
            if dep.hosting == "cloud":
                rows.extend(_deployment_rows(start, day, dep, seed, requests_per_day))
        rows.extend(_shared_rows(day))
    rows.extend(_special_rows(start, days))
    rows.sort(
        key=lambda r: (r["ChargePeriodStart"], r["ServiceCategory"], r["ResourceId"] or "", r["SkuId"] or "")
    )
    table = pa.table({c: pa.array([_fmt(r[c]) for r in rows], pa.string()) for c in COLUMNS})
    last = start + timedelta(days=days - 1)
    path = home / "raw" / "billing" / f"focus-{start.isoformat()}-{last.isoformat()}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    quoted = ", ".join(f'"{c}"' for c in COLUMNS if c not in NUMERIC)
    body = path.with_suffix(".body")
    con = connect()
    con.register("focus", table)
    con.execute(
        f"COPY (SELECT * FROM focus) TO '{body}' "
        f"(FORMAT CSV, HEADER false, NULLSTR 'NULL', QUOTE '\"', ESCAPE '\"', FORCE_QUOTE ({quoted}))"
    )
    con.close()
    # DuckDB quotes only the forced columns' names in a header; the FOCUS sample quotes them all.
    header = ",".join(f'"{c}"' for c in COLUMNS) + "\n"
    path.write_bytes(header.encode() + body.read_bytes())
    body.unlink()
    return FocusFile(path=path, rows=len(rows))
