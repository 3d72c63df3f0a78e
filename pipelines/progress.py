"""A Dagster logger that prints one line per finished step, so `tokenledger run` shows a day's progress as its
steps complete, not only when the day ends."""

from __future__ import annotations

import logging
import sys
import time

import dagster as dg

_STEP_END = {"STEP_SUCCESS": "done", "STEP_FAILURE": "FAILED"}


class _StepLines(logging.Handler):
    def __init__(self, stream) -> None:
        super().__init__(level=logging.DEBUG)
        self.stream = stream
        self.started = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        outcome = _STEP_END.get(getattr(event, "event_type_value", ""))
        if outcome is None:
            return
        step = (meta.get("step_key") or "").replace("__", "/")
        self.stream.write(f"    {time.monotonic() - self.started:7.1f} s  {step} {outcome}\n")
        self.stream.flush()


@dg.logger(description="One line per finished step on standard output (tokenledger run's progress).")
def step_progress(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = logging.getLogger(f"tokenledger.progress.{id(init_context)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.handlers = [_StepLines(sys.stdout)]
    return logger
