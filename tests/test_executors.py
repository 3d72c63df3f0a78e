"""TOKENLEDGER_EXECUTOR chooses where a run's steps execute (pipelines/executors.py): in the run's process (the
default), a process per step, Celery workers or Kubernetes Jobs; anything else is one line saying what to set."""

from __future__ import annotations

import os
import sys

import dagster as dg
import pytest
from tokenledger.pipelines.executors import (
    HeldRunExecutor,
    broker_lost,
    broker_shown,
    celery_settings,
    executor_from_env,
)

from tokenledger.errors import ConfigError


def test_the_default_is_the_run_process() -> None:
    assert executor_from_env({}) is dg.in_process_executor
    assert executor_from_env({"TOKENLEDGER_EXECUTOR": " "}) is dg.in_process_executor
    # Dagster's multiprocess executor, its runs held by their orchestrating process (pipelines/resources.py).
    multiprocess = executor_from_env({"TOKENLEDGER_EXECUTOR": "multiprocess"})
    assert multiprocess.name == "multiprocess"
    assert multiprocess.config_schema is dg.multiprocess_executor.config_schema


def test_an_unknown_executor_names_the_ones_there_are() -> None:
    with pytest.raises(ConfigError) as raised:
        executor_from_env({"TOKENLEDGER_EXECUTOR": "kubernetes"})
    assert str(raised.value) == ("TOKENLEDGER_EXECUTOR='kubernetes' is not an executor tokenledger knows: set it to "
                                 "one of in_process, multiprocess, celery, k8s (in_process is the default), or unset "
                                 "it")


def test_celery_needs_its_broker_named_and_reads_its_url_where_the_run_executes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="^TOKENLEDGER_EXECUTOR=celery needs TOKENLEDGER_CELERY_BROKER, the Celery"):
        executor_from_env({"TOKENLEDGER_EXECUTOR": "celery"})
    url = "redis://:secret@127.0.0.1:6379/0"
    executor = executor_from_env({"TOKENLEDGER_EXECUTOR": "celery", "TOKENLEDGER_CELERY_BROKER": url})
    assert executor.name == "celery"
    # The executor's config names the variable (Dagster's env: form): the URL and its password are read by the
    # process that runs the job, from its own environment, and are in no definition or run config.
    monkeypatch.delenv("TOKENLEDGER_CELERY_BROKER", raising=False)
    unresolved = executor.apply_config_mapping({})
    assert not unresolved.success and 'environment variable "TOKENLEDGER_CELERY_BROKER"' in str(unresolved.errors)
    monkeypatch.setenv("TOKENLEDGER_CELERY_BROKER", url)
    assert executor.apply_config_mapping({}).value["config"]["broker"] == url


def test_celery_runs_and_workers_share_the_settings_that_give_a_dead_workers_step_to_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The app a run builds from its executor's config (dagster-celery's core loop: make_app of its app_args) and the
    workers' app (pipelines/celery_app.py) have the same settings: a step's task acknowledged once it has ended, and
    handed out again after TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT seconds unacknowledged (tests/test_celery.py kills a
    worker)."""
    from dagster_celery.executor import CeleryExecutor
    from dagster_celery.make_app import make_app

    url = "redis://:secret@127.0.0.1:6379/0"
    monkeypatch.setenv("TOKENLEDGER_CELERY_BROKER", url)
    monkeypatch.setenv("TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT", "600")
    run_config = executor_from_env({**os.environ, "TOKENLEDGER_EXECUTOR": "celery"}).apply_config_mapping({})
    run_app = make_app(HeldRunExecutor(CeleryExecutor.for_cli(
        broker=url, backend=url, config_source=run_config.value["config"]["config_source"])).app_args())
    monkeypatch.delitem(sys.modules, "tokenledger.pipelines.celery_app", raising=False)
    from tokenledger.pipelines.celery_app import app as worker_app

    for conf in (run_app.conf, worker_app.conf):
        assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is True
        assert conf.worker_prefetch_multiplier == 1  # dagster-celery's: a worker holds no task it is not executing
        # dagster-celery's connection retries kept beside them; each worker looks for such tasks every 10 s.
        assert conf.broker_transport_options == {"max_retries": 3, "interval_start": 0, "interval_step": 0.2,
                                                 "interval_max": 0.5, "visibility_timeout": 600,
                                                 "unacked_restore_throttle": 1}
    # Only the run's orchestrating process gives up on a lost Redis result backend (TOKENLEDGER_CELERY_BACKEND) after
    # two retries a second apart, instead of Celery's 20 for each step result pending when the run fails; a worker
    # keeps Celery's 20, to ride out a restart of the backend.
    assert run_app.backend.retry_policy == {"max_retries": 2, "interval_start": 0, "interval_step": 1,
                                            "interval_max": 1}
    monkeypatch.setenv("TOKENLEDGER_CELERY_BACKEND", url)
    monkeypatch.delitem(sys.modules, "tokenledger.pipelines.celery_app", raising=False)
    from tokenledger.pipelines.celery_app import app as worker_app

    assert worker_app.backend.retry_policy["max_retries"] == 20
    # A dead worker's step found within 2 minutes when unset (a live worker's heartbeat renews its task every 10 s).
    assert celery_settings({})["broker_transport_options"]["visibility_timeout"] == 60
    for bad in ("0", "-5", "1h", "2.5"):
        with pytest.raises(ConfigError) as raised:
            celery_settings({"TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT": bad})
        assert str(raised.value) == (
            f"TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT={bad!r} is not a number of seconds: set it to how long a step's "
            "task may go without a heartbeat from its worker before another worker executes it again, longer than "
            "10 s (the default, when unset, is 60)")
    with pytest.raises(ConfigError, match=r"^TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT=10 is not longer than the 10 s "):
        celery_settings({"TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT": "10"})


def test_a_lost_broker_is_named_without_its_password() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    url = "redis://:s3cret@10.0.0.5:6380/2"
    assert broker_shown(url) == "redis://10.0.0.5:6380/2"
    assert broker_shown("redis://broker") == "redis://broker"
    try:
        try:
            raise RedisConnectionError("Error 111 connecting to 10.0.0.5:6380 (s3cret). Connection refused.")
        except RedisConnectionError as exc:
            raise RuntimeError("while waiting for a result") from exc
    except RuntimeError as outer:
        lost = broker_lost(url, outer)
    assert lost is not None and str(lost) == (
        "lost the Celery broker redis://10.0.0.5:6380/2 that TOKENLEDGER_CELERY_BROKER names while the run's steps "
        "executed (Error 111 connecting to 10.0.0.5:6380 (***). Connection refused.): check that the broker is "
        "running and reachable from this machine and the workers (Redis: redis-cli -h HOST -p PORT ping; its log, its "
        "memory limit), then re-run the run's days; a day its run had not published is left as it was")
    assert broker_lost(url, ValueError("a bug")) is None


def test_k8s_runs_each_step_as_a_kubernetes_job_held_by_the_run() -> None:
    executor = executor_from_env({"TOKENLEDGER_EXECUTOR": "k8s"})
    # dagster-k8s's executor (a Job per step), wrapped so that the run's own pod holds its day locks.
    from dagster_k8s import k8s_job_executor

    assert executor.name == k8s_job_executor.name == "k8s"
    assert executor is not k8s_job_executor
    assert executor.config_schema.as_field().config_type.fields.keys() >= {"job_namespace", "max_concurrent"}
