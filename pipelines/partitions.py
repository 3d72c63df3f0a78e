"""UTC day partitions, and the days a (possibly ranged) run covers."""

from __future__ import annotations

import os
import warnings
from datetime import UTC, date, timedelta

import dagster as dg

from tokenledger.errors import ConfigError
from tokenledger.ingest.landing import DEFAULT_START_DATE, START_DATE_ENV

# single_run backfills are what `dagster asset materialize --partition-range` needs; the beta notice is noise.
warnings.filterwarnings("ignore", category=dg.BetaWarning)



# The first day a backfill may reach, fixed when the definitions load. From the environment only: loading the
# definitions touches neither the home nor its bucket, so a code server starts while the bucket is unreachable (the
# error comes when a run starts, naming it). `tokenledger run` and `tokenledger ui` set it to the home's first landed
# day when it is unset (home_start_date); a deployment sets it in its environment (docs/deploying.md).
START_DATE = os.getenv(START_DATE_ENV) or DEFAULT_START_DATE
try:
    FIRST_DAY = date.fromisoformat(START_DATE)
except ValueError:
    raise ConfigError(f"TOKENLEDGER_START_DATE={START_DATE!r} is not a date: write the first day partitions may "
                      "reach as YYYY-MM-DD (for example 2024-01-01), or unset it.") from None

daily_partitions = dg.DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat(), timezone="UTC")

# One run per range: a backfill of a year is one run per asset, not 365 (the range is walked day by day).
single_run = dg.BackfillPolicy.single_run()


def days_of(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> list[date]:
    """The UTC days of the run's partition or partition range, in order.

    The partition time window is timezone-aware; it is converted to UTC before taking dates so that a window
    reported in another zone can never shift a day.
    """
    window = context.partition_time_window
    first = window.start.astimezone(UTC).date()
    last = window.end.astimezone(UTC).date()
    return [first + timedelta(days=i) for i in range((last - first).days)]
