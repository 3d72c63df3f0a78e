"""The daily schedule: yesterday's UTC partition, once its logs are complete."""

import dagster as dg
from tokenledger.pipelines.jobs import daily_pipeline
from tokenledger.pipelines.partitions import LAST_DAY

# Gateway logs for a UTC day are expected complete by 04:00 UTC the next day (the freshness checks warn after
# that); the run starts at 06:00 UTC, leaving two hours for late shippers.
LOGS_COMPLETE_HOUR_UTC = 4
SCHEDULE_HOUR_UTC = 6

# On where logs land every day. A home whose days end (a generated one: TOKENLEDGER_END_DATE, from its
# config/generated.yaml) has no new day to run, so the schedule is stopped there until started in the UI or with
# `dagster schedule start daily_pipeline_schedule` (docs/operations.md). A default only: a schedule started or
# stopped in the instance stays so.
DEFAULT_STATUS = dg.DefaultScheduleStatus.RUNNING if LAST_DAY is None else dg.DefaultScheduleStatus.STOPPED

daily_schedule = dg.build_schedule_from_partitioned_job(
    daily_pipeline,
    name="daily_pipeline_schedule",
    hour_of_day=SCHEDULE_HOUR_UTC,
    minute_of_hour=0,
    default_status=DEFAULT_STATUS,
    description="Every day at 06:00 UTC: every asset of the previous UTC day, checks included, then the trend."
    + ("" if LAST_DAY is None else f" Stopped by default: this home's days end on {LAST_DAY} (TOKENLEDGER_END_DATE, "
       "from a generated home's config/generated.yaml)."),
)
