"""Late data: a file that lands in an already processed day's folder re-runs that day.

The sensor compares each gateway file's modification time (for a home on object storage, the time its bucket
lists) with the time that day's core/gateway_requests was last materialized, and each billing file with the days
its charge periods cover. A later file means the day's result no longer reflects the landing zone, so the day runs
again; the run key (day and newest file time) keeps
a tick from asking twice for the same file. Days never processed are left to the schedule or a backfill, and a
change of config (prices, policies) is applied by backfilling the range it concerns (README).
"""

from datetime import UTC, date, datetime

import dagster as dg
import duckdb
from tokenledger.pipelines.jobs import daily_pipeline
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.errors import LedgerError
from tokenledger.ingest.landing import landing_files, newest_mtime
from tokenledger.ingest.sources import BILLING_FORMATS, GATEWAY_FORMATS
from tokenledger.storage.duck import literal_path
from tokenledger.storage.remote import pull

GATEWAY = dg.AssetKey(["core", "gateway_requests"])
BILLING = dg.AssetKey(["core", "billing_charges"])
# How far back a late file still re-runs its day by itself; older days are re-run by a backfill.
LOOKBACK_DAYS = 35


def _materialized_at(instance: dg.DagsterInstance, key: dg.AssetKey, day: date) -> float | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[day.isoformat()]), limit=1).records
    return records[0].timestamp if records else None


def _billing_days(path: str, fmt: str) -> tuple[date, date] | None:
    """The first and last UTC day a billing file's charge periods touch (None when none is readable)."""
    reader = ("read_parquet($f)" if fmt == "parquet"
              else "read_csv($f, all_varchar = true, nullstr = ['NULL', ''])")
    try:
        first, last = duckdb.connect().execute(
            "SELECT min(try_cast(ChargePeriodStart AS TIMESTAMP))::DATE, "
            f"max(try_cast(ChargePeriodEnd AS TIMESTAMP) - INTERVAL 1 MICROSECOND)::DATE FROM {reader}",
            {"f": literal_path(path)}).fetchone()
    except duckdb.Error:
        return None  # unreadable: the next run of its days reports it
    return (first, last) if first and last else None


def _recent(partitions: set[str], today: date) -> list[date]:
    days = (date.fromisoformat(k) for k in partitions)
    return sorted(d for d in days if (today - d).days <= LOOKBACK_DAYS)


def _newest_remote(layout, day: date) -> float | None:
    """The newest gateway log of a remote home's day, by the times its bucket lists (nothing is downloaded)."""
    listed = layout.remote.list(f"raw/gateway/dt={day.isoformat()}/")
    times = [obj.mtime for rel, obj in listed.items() if rel.endswith(tuple(GATEWAY_FORMATS))]
    return max(times, default=None)


def late_days(instance: dg.DagsterInstance, ledger: LedgerResource, today: date | None = None) -> dict[date, float]:
    """Processed days with a file newer than their last materialization, and the newest such file's time."""
    layout = ledger.layout
    today = today or datetime.now(UTC).date()
    late: dict[date, float] = {}
    if layout.remote is not None:  # the bucket's: the object times, and the bill pulled (its days are in it)
        pull(layout.remote, layout.home, "raw/billing/")
    for day in _recent(instance.get_materialized_partitions(GATEWAY), today):
        try:
            newest = (_newest_remote(layout, day) if layout.remote is not None else
                      newest_mtime(landing_files(layout.gateway_day_dir(day), GATEWAY_FORMATS, "gateway log")))
        except (LedgerError, OSError):
            continue  # an entry the pipeline cannot read: the day's next run reports it
        done = _materialized_at(instance, GATEWAY, day)
        if newest and done and newest > done:
            late[day] = max(late.get(day, 0.0), newest)
    billed = _recent(instance.get_materialized_partitions(BILLING), today)
    try:
        billing_files = landing_files(layout.billing_dir, BILLING_FORMATS, "FOCUS billing")
    except LedgerError:
        billing_files = []
    for file in billing_files:
        span = _billing_days(str(file.path), file.fmt)
        if not span:
            continue
        mtime = file.path.stat().st_mtime
        for day in (d for d in billed if span[0] <= d <= span[1]):
            done = _materialized_at(instance, BILLING, day)
            if done and mtime > done:
                late[day] = max(late.get(day, 0.0), mtime)
    return late


@dg.sensor(job=daily_pipeline, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Re-runs a processed day when a gateway or billing file for it lands after it ran.")
def late_data_sensor(context: dg.SensorEvaluationContext, ledger: LedgerResource):
    late = late_days(context.instance, ledger)
    for day, newest in sorted(late.items()):
        stamp = datetime.fromtimestamp(newest, UTC).isoformat(timespec="seconds")
        yield dg.RunRequest(partition_key=day.isoformat(), run_key=f"late-{day}-{newest:.6f}",
                            tags={"tokenledger/reason": f"late data: newest file {stamp}"})
    if not late:
        yield dg.SkipReason("no file newer than its day's last run")
