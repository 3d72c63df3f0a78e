"""TOKENLEDGER_EXECUTOR chooses where a run's steps execute (pipelines/executors.py): in the run's process (the
default), a process per step, Celery workers or Kubernetes Jobs; anything else is one line saying what to set."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.executors import executor_from_env
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


def test_k8s_runs_each_step_as_a_kubernetes_job_held_by_the_run() -> None:
    executor = executor_from_env({"TOKENLEDGER_EXECUTOR": "k8s"})
    # dagster-k8s's executor (a Job per step), wrapped so that the run's own pod holds its day locks.
    from dagster_k8s import k8s_job_executor

    assert executor.name == k8s_job_executor.name == "k8s"
    assert executor is not k8s_job_executor
    assert executor.config_schema.as_field().config_type.fields.keys() >= {"job_namespace", "max_concurrent"}
