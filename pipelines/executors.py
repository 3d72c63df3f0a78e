"""Where a run's steps execute, chosen by `TOKENLEDGER_EXECUTOR` when the definitions load.

    in_process    (the default) every step in the run's own process, one after the other, as tokenledger always has:
                  steps already use every core through DuckDB, and GX is imported once per run
    multiprocess  a process per step on the run's machine (Dagster's multiprocess_executor), independent steps at once
    celery        each step a task on a Celery broker, executed by whichever `dagster-celery worker` takes it
                  (dagster_celery.celery_executor): the broker is TOKENLEDGER_CELERY_BROKER, the result backend
                  TOKENLEDGER_CELERY_BACKEND (default: the broker's rpc:// replies). Needs the `celery` extra, an
                  instance every worker can reach (the Postgres instance) and a home every worker sees at the same path.

The broker's URL (which may hold a password) is never in the code or the run config: the executor's config names the
variables (Dagster's `env:` form), read by the process that runs the job. See docs/deploying.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from tokenledger.errors import ConfigError

EXECUTOR_ENV = "TOKENLEDGER_EXECUTOR"
BROKER_ENV = "TOKENLEDGER_CELERY_BROKER"
BACKEND_ENV = "TOKENLEDGER_CELERY_BACKEND"
EXECUTORS = ("in_process", "multiprocess", "celery")


def executor_from_env(env: Mapping[str, str] = os.environ) -> dg.ExecutorDefinition:
    """The executor `TOKENLEDGER_EXECUTOR` names (in_process when unset or empty); a ConfigError for anything else."""
    name = env.get(EXECUTOR_ENV, "").strip() or "in_process"
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "celery":
        return _celery(env)
    raise ConfigError(f"{EXECUTOR_ENV}={name!r} is not an executor tokenledger knows: set it to one of "
                      f"{', '.join(EXECUTORS)} (in_process is the default), or unset it")


def _celery(env: Mapping[str, str]) -> dg.ExecutorDefinition:
    try:
        from dagster_celery import celery_executor
    except ImportError:
        raise ConfigError(f"{EXECUTOR_ENV}=celery needs dagster-celery, which is not installed: pip install "
                          "'tokenledger[celery]' (dagster-celery and the redis client), or unset "
                          f"{EXECUTOR_ENV}") from None
    if not env.get(BROKER_ENV, "").strip():
        raise ConfigError(f"{EXECUTOR_ENV}=celery needs {BROKER_ENV}, the Celery broker the workers listen to (for "
                          f"example redis://127.0.0.1:6379/0); set it, or unset {EXECUTOR_ENV}")
    config: dict = {"broker": {"env": BROKER_ENV}}
    if env.get(BACKEND_ENV, "").strip():
        config["backend"] = {"env": BACKEND_ENV}
    return celery_executor.configured(config, name="celery")
