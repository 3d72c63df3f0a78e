"""A generated home says where its data ends: `config/generated.yaml`, written by `tokenledger generate`.

A home `tokenledger generate` wrote holds a fixed run of days and no more will land in it. Its partitions end at
the last generated day, not at yesterday (the UI would show every day since as missing), and the daily schedule is
stopped by default (it would run days without logs). A home without the file (a real one) keeps partitions up to
the last complete UTC day and the schedule on (docs/adr/0116-a-generated-home-says-where-its-data-ends.md).

The file sits in config/ so that it travels with the home's configuration (a home in a bucket pulls config/ when
a command starts). Deleting it makes the home a real one.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from tokenledger.errors import ConfigError
from tokenledger.storage import atomic

GENERATED_FILE = "generated.yaml"

# The last day partitions reach, read when the definitions load (tokenledger/pipelines/partitions.py). `tokenledger
# run` and `tokenledger ui` set it from config/generated.yaml when it is absent from the environment; set and empty,
# partitions reach the last complete UTC day whatever the home holds.
END_DATE_ENV = "TOKENLEDGER_END_DATE"

_KEY = "last_day:"


def generated_last_day(config: Path) -> date | None:
    """The last generated day of the home whose config folder is `config`, None when it was not generated (no
    config/generated.yaml). A file that names no date stops the command, naming it."""
    path = config / GENERATED_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    values = [line.removeprefix(_KEY).strip().strip("'\"") for line in text.splitlines() if line.startswith(_KEY)]
    try:
        (value,) = values
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{path} says the home was generated but not the last day of its data: it should hold one "
                          f"line `last_day: YYYY-MM-DD` (`tokenledger generate` writes it). Delete the file if real "
                          "logs land in this home.") from None


def write_generated(config: Path, last: date) -> Path:
    """Record in `config` that the home holds generated days up to `last`, or up to the day an earlier generation
    recorded when that is later (generating more days into a home extends it, never shortens it)."""
    try:
        earlier = generated_last_day(config)
    except ConfigError:  # unreadable: this generation's day replaces it
        earlier = None
    last = max(last, earlier) if earlier else last
    path = config / GENERATED_FILE
    atomic.write_text(path, (
        "# Written by `tokenledger generate`: this home holds generated days, the last of them below. Its Dagster\n"
        "# partitions end there, and daily_pipeline_schedule is stopped by default (docs/operations.md). Delete\n"
        "# this file once real logs land in this home every day: partitions then reach the last complete UTC day\n"
        "# and the schedule runs.\n"
        f"{_KEY} {last.isoformat()}\n"))
    return path
