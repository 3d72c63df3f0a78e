"""UTC day partitions, and the days a (possibly ranged) run covers."""

from __future__ import annotations

import os
import warnings
from datetime import UTC, date, timedelta

import dagster as dg

from tokenledger.errors import ConfigError
from tokenledger.ingest.landing import DEFAULT_START_DATE, START_DATE_ENV
from tokenledger.storage.generated import END_DATE_ENV

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

# The last day partitions reach, from the environment too: set by `tokenledger run` and `tokenledger ui` from a
# generated home's config/generated.yaml (tokenledger/storage/generated.py), so that the UI shows the home's days and
# not every day since as missing. Unset or empty (a real home), the last complete UTC day, as Dagster's default.
END_DATE = os.getenv(END_DATE_ENV) or ""
try:
    LAST_DAY = date.fromisoformat(END_DATE) if END_DATE else None
except ValueError:
    raise ConfigError(f"TOKENLEDGER_END_DATE={END_DATE!r} is not a date: write the last day partitions may reach as "
                      "YYYY-MM-DD (for example 2026-11-22), or unset it.") from None
if LAST_DAY is not None and LAST_DAY < FIRST_DAY:
    raise ConfigError(f"TOKENLEDGER_END_DATE={END_DATE} is before TOKENLEDGER_START_DATE={FIRST_DAY}: partitions would "
                      "hold no day. Set the last day partitions reach on or after the first, or unset it.")


def daily_partitions_of(first: date, last: date | None) -> dg.DailyPartitionsDefinition:
    """UTC days from `first` to `last` inclusive (Dagster's end_date is exclusive), or to the last complete UTC day
    when `last` is None. A `last` still to come ends them at the last complete day too."""
    end = (last + timedelta(days=1)).isoformat() if last is not None else None
    return dg.DailyPartitionsDefinition(start_date=first.isoformat(), end_date=end, timezone="UTC")


daily_partitions = daily_partitions_of(FIRST_DAY, LAST_DAY)

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
