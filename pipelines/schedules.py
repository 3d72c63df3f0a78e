"""The daily schedule: yesterday's UTC partition, once its logs are complete."""

import dagster as dg
from tokenledger.pipelines.jobs import daily_pipeline

# Gateway logs for a UTC day are expected complete by 04:00 UTC the next day (the freshness checks warn after
# that); the run starts at 06:00 UTC, leaving two hours for late shippers.
LOGS_COMPLETE_HOUR_UTC = 4
SCHEDULE_HOUR_UTC = 6

daily_schedule = dg.build_schedule_from_partitioned_job(
    daily_pipeline,
    name="daily_pipeline_schedule",
    hour_of_day=SCHEDULE_HOUR_UTC,
    minute_of_hour=0,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Every day at 06:00 UTC: every asset of the previous UTC day, checks included, then the trend.",
)
