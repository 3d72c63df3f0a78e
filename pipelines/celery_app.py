"""The Celery app tokenledger's workers run: `celery -A tokenledger.pipelines.celery_app worker` (docs/deploying.md).

dagster-celery's step task on the broker and result backend the runs use, read from the same variables
(TOKENLEDGER_CELERY_BROKER, TOKENLEDGER_CELERY_BACKEND) with the executor's own settings and tokenledger's
(`celery_settings`: a step whose worker dies is executed again, after TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT), as
dagster-celery's documentation says to give workers a broker of one's own: a worker and the runs it serves are
configured once, and the broker's URL, which may hold a password, is written nowhere.

While a worker executes a step, a thread of it renews the step's task in the broker (`keep_visible`), so that only
the task of a worker that died is handed to another; the worker that takes such a task says so in the run's event
log, naming the step and the worker that stopped answering (`_handed_over`).
"""

from __future__ import annotations

import logging
import os
import threading

from celery.signals import task_postrun, task_prerun
from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task
from tokenledger.pipelines.executors import BACKEND_ENV, BROKER_ENV, celery_settings, keep_visible
from tokenledger.pipelines.progress import HANDED_OVER

from tokenledger.errors import ConfigError

if not os.environ.get(BROKER_ENV, "").strip():
    raise ConfigError(f"a tokenledger Celery worker needs {BROKER_ENV}, the broker the runs hand their steps to (for "
                      "example redis://127.0.0.1:6379/0): set it as the runs have it")

settings = celery_settings()
app = make_app(CeleryExecutor.for_cli(broker=os.environ[BROKER_ENV],
                                      backend=os.environ.get(BACKEND_ENV, "").strip() or None,
                                      config_source=settings).app_args())
execute_plan = create_task(app)

_beating: dict[str, threading.Event] = {}  # task id -> what stops its heartbeat


@task_prerun.connect
def _keep_visible(task_id: str, task, kwargs=None, **_) -> None:
    tag = (getattr(task.request, "properties", None) or {}).get("delivery_tag")
    if tag is None:
        return
    stop = _beating[task_id] = threading.Event()
    threading.Thread(target=keep_visible, args=(app, tag, stop), name=f"keep-visible-{task_id[:8]}",
                     daemon=True).start()
    if (task.request.delivery_info or {}).get("redelivered"):
        _handed_over(task.request.hostname, kwargs or {})


@task_postrun.connect
def _stop_keeping_visible(task_id: str, **_) -> None:
    if stop := _beating.pop(task_id, None):
        stop.set()


def _handed_over(worker: str, kwargs: dict) -> None:
    """A step's task the broker handed out again, its worker silent for the visibility timeout: a line in the run's
    event log (and this worker's log) naming the step, the worker that stopped answering and this one. Nothing
    more than a report: any failure here is logged, never the step's."""
    log = logging.getLogger(__name__)
    try:
        from dagster import DagsterEventType, DagsterInstance
        from dagster._core.events import EngineEventData
        from dagster._grpc.types import ExecuteStepArgs
        from dagster._serdes import unpack_value

        step_args = unpack_value(kwargs["execute_step_args_packed"], as_type=ExecuteStepArgs)
        [step_key] = step_args.step_keys_to_execute or [""]
        with DagsterInstance.from_ref(step_args.instance_ref) as instance:
            run = instance.get_run_by_id(step_args.run_id)
            before = [entry.dagster_event.engine_event_data.metadata["Celery worker"].value
                      for entry in instance.all_logs(step_args.run_id, of_type=DagsterEventType.ENGINE_EVENT)
                      if entry.step_key == step_key and entry.dagster_event
                      and "Celery worker" in entry.dagster_event.engine_event_data.metadata]
            silent = settings["broker_transport_options"]["visibility_timeout"]
            message = (f"step {step_key.replace('__', '/')} on worker {before[-1] if before else '(unknown)'}: no "
                       f"answer for {silent} s; handed to worker {worker}")
            log.warning(message)
            if run is not None:
                instance.report_engine_event(message, run, EngineEventData({HANDED_OVER: worker}),
                                             step_key=step_key or None)
    except Exception as exc:
        log.warning("could not report the step handed over to this worker (%s)", exc)
