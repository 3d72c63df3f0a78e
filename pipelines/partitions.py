"""UTC day partitions, and the days a (possibly ranged) run covers."""

from __future__ import annotations

import os
import warnings
from datetime import UTC, date, timedelta
from pathlib import Path

import dagster as dg

from tokenledger.errors import ConfigError

# single_run backfills are what `dagster asset materialize --partition-range` needs; the beta notice is noise.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

DEFAULT_START_DATE = "2024-01-01"


def first_landing_day(raw: Path) -> date | None:
    """The earliest `dt=YYYY-MM-DD` folder of any request source under `raw` (folder names only are read)."""
    days = []
    try:
        for source in raw.iterdir():
            if source.is_dir() and source.name not in ("billing", "loadtest"):
                for folder in source.glob("dt=*"):
                    try:
                        days.append(date.fromisoformat(folder.name.removeprefix("dt=")))
                    except ValueError:
                        continue
    except OSError:
        return None
    return min(days, default=None)


def first_remote_landing_day(url: str) -> date | None:
    """first_landing_day of a home on object storage, from the names its bucket lists under raw/."""
    from tokenledger.storage.remote import WHOLE_RAW, RemoteHome

    remote = RemoteHome.parse(url)
    days = []
    for source in remote.folders("raw/"):
        if source not in WHOLE_RAW:
            for name in remote.folders(f"raw/{source}/"):
                try:
                    days.append(date.fromisoformat(name.removeprefix("dt=")))
                except ValueError:
                    continue
    return min(days, default=None)


def _start_date() -> str:
    """TOKENLEDGER_START_DATE, else the home's first landed day, so the UI's partitions start where the data does
    (and its fill shows real gaps), else 2024-01-01."""
    from tokenledger.storage.remote import is_remote

    if os.getenv("TOKENLEDGER_START_DATE"):
        return os.environ["TOKENLEDGER_START_DATE"]
    home = os.getenv("TOKENLEDGER_HOME")
    if home and is_remote(home):
        first = first_remote_landing_day(home)
        return first.isoformat() if first else DEFAULT_START_DATE
    raw = os.getenv("TOKENLEDGER_RAW_DIR") or (str(Path(home) / "raw") if home else None)
    first = first_landing_day(Path(raw)) if raw else None
    return first.isoformat() if first else DEFAULT_START_DATE


# The first day a backfill may reach. Settable because the partition list is fixed when definitions load.
START_DATE = _start_date()
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
