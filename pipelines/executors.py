"""Where a run's steps execute, chosen by `TOKENLEDGER_EXECUTOR` when the definitions load.

    in_process    (the default) every step in the run's own process, one after the other, as tokenledger always has:
                  steps already use every core through DuckDB, and GX is imported once per run
    multiprocess  a process per step on the run's machine (Dagster's multiprocess_executor), independent steps at once
    celery        each step a task on a Celery broker, executed by whichever worker takes it (`celery -A
                  tokenledger.pipelines.celery_app worker`; dagster_celery.celery_executor): the broker is
                  TOKENLEDGER_CELERY_BROKER, the result backend TOKENLEDGER_CELERY_BACKEND (default: the broker's
                  rpc:// replies). Needs the `celery` extra, an instance every worker can reach (the Postgres instance)
                  and a home every worker sees at the same path. A step whose worker dies is executed again by
                  another (`celery_settings`).
    k8s           each step a Kubernetes Job of its own (dagster_k8s.k8s_job_executor), in the run's image and
                  namespace; its config (resources, max_concurrent, ...) goes under `execution: config:` of the run
                  config. Needs the `k8s` extra, a cluster, the Postgres instance and a home in a bucket
                  (docs/deploying.md, "Kubernetes": not run by the tests, which have no cluster).

The broker's URL (which may hold a password) is never in the code or the run config: the executor's config names the
variables (Dagster's `env:` form), read by the process that runs the job. See docs/deploying.md.

Under the last three, the process orchestrating a run holds it (its run record and day locks,
pipelines/resources.py) from its first step to its last, as a run's own process does under in_process, and tags it so
that its steps hold nothing: two steps of one run never wait on each other's lock. A Celery run first connects to its
broker: one that cannot be reached fails the run before any step, in one line naming it (`check_broker`), and one lost
while its steps execute fails it as soon as the run next asks it for a result, in one line naming it (`broker_lost`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
from dagster._core.system_config.objects import ResolvedRunConfig
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.errors import ConfigError, EnvironmentProblem

EXECUTOR_ENV = "TOKENLEDGER_EXECUTOR"
BROKER_ENV = "TOKENLEDGER_CELERY_BROKER"
BACKEND_ENV = "TOKENLEDGER_CELERY_BACKEND"
VISIBILITY_ENV = "TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT"
EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")
# How long a step's task may go without a sign of life from its worker before the broker hands it to another worker
# (docs/adr/0112-a-dead-celery-worker-is-found-within-two-minutes.md). The worker executing a step renews the task's
# time every HEARTBEAT_S while it lives (`keep_visible`), so this need not exceed the longest step, only the longest
# silence of a live worker: a worker killed mid-step is found in this, plus up to 10 s for another worker to look.
VISIBILITY_TIMEOUT_S = 60
HEARTBEAT_S = 10
# How long a run waits for its broker to answer before failing.
BROKER_TIMEOUT_S = 5
# How the orchestrating process of a run retries its result backend (by default the broker) once the connection is
# lost: twice, a second apart. Celery's default (20 times, and again for each step result still pending when the
# run ends) kept a run whose broker was gone alive for minutes. The workers keep Celery's default: a broker back
# within seconds costs them no step.
ORCHESTRATOR_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 1, "interval_max": 1}


def executor_from_env(env: Mapping[str, str] = os.environ) -> dg.ExecutorDefinition:
    """The executor `TOKENLEDGER_EXECUTOR` names (in_process when unset or empty); a ConfigError for anything else."""
    name = env.get(EXECUTOR_ENV, "").strip() or "in_process"
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return _held_by_orchestrator(dg.multiprocess_executor)
    if name == "celery":
        return _celery(env)
    if name == "k8s":
        try:
            from dagster_k8s import k8s_job_executor
        except ImportError:
            raise ConfigError(f"{EXECUTOR_ENV}=k8s needs dagster-k8s, which is not installed: pip install "
                              f"'tokenledger[k8s]', or unset {EXECUTOR_ENV}") from None
        return _held_by_orchestrator(k8s_job_executor)
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
    config: dict = {"broker": {"env": BROKER_ENV}, "config_source": celery_settings(env)}
    if env.get(BACKEND_ENV, "").strip():
        config["backend"] = {"env": BACKEND_ENV}
    return _held_by_orchestrator(celery_executor).configured(config, name="celery")


def celery_settings(env: Mapping[str, str] = os.environ) -> dict:
    """The Celery settings the runs and the workers share (dagster-celery's `config_source`, over its defaults): a step
    whose worker dies (SIGKILL, out of memory, its machine lost) goes back on the broker and is executed again by
    the next worker that takes it, instead of its run waiting forever for a result no worker will send.

    A step's task is acknowledged once the step has ended (`task_acks_late`; under the solo pool Celery's early
    acknowledgement already waited for that), so the broker still holds the task of a worker that died. Redis hands
    such a task out again once its time in the broker's index of unacknowledged tasks is
    TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT seconds old (`visibility_timeout`, default VISIBILITY_TIMEOUT_S), looked for
    by each worker at every poll (`unacked_restore_throttle`: kombu's default looks every 10th). The worker executing
    the step renews that time every HEARTBEAT_S (`keep_visible`), so only a dead worker's task ages. A worker
    reserves no task beyond the ones it executes (`worker_prefetch_multiplier` 1): a task it reserved behind a long
    step would get no heartbeat, be handed to another worker and later be executed by both. A pool whose child
    process dies (prefork) hands its task back at once (`task_reject_on_worker_lost`) instead of failing the step
    with WorkerLostError. Executing a step again is what re-running its day does after a killed run
    (tests/test_faults_operations.py), and publishing a day is one atomic switch that leaves what readers see as it
    was until it is made (tokenledger/publish/versions.py)."""
    from dagster_celery.defaults import broker_transport_options

    raw = env.get(VISIBILITY_ENV, "").strip()
    if not raw:
        timeout = VISIBILITY_TIMEOUT_S
    elif raw.isdigit() and int(raw) > 0:
        timeout = int(raw)
    else:
        raise ConfigError(f"{VISIBILITY_ENV}={raw!r} is not a number of seconds: set it to how long a step's task may "
                          "go without a heartbeat from its worker before another worker executes it again, longer "
                          f"than {HEARTBEAT_S} s (the default, when unset, is {VISIBILITY_TIMEOUT_S})")
    if timeout <= HEARTBEAT_S:
        raise ConfigError(f"{VISIBILITY_ENV}={raw} is not longer than the {HEARTBEAT_S} s between a worker's "
                          "heartbeats: a step still executing would be handed to another worker; set it higher (the "
                          f"default, when unset, is {VISIBILITY_TIMEOUT_S})")
    return {"task_acks_late": True, "task_reject_on_worker_lost": True, "worker_prefetch_multiplier": 1,
            "broker_transport_options": {**broker_transport_options, "visibility_timeout": timeout,
                                         "unacked_restore_throttle": 1}}


def keep_visible(app: Any, delivery_tag: str, stop: threading.Event, every_s: float = HEARTBEAT_S) -> None:
    """Until `stop` is set: every `every_s`, renew the time of the task `delivery_tag` (which this worker executes) in
    the Redis broker's index of unacknowledged tasks, so that the broker does not hand it to another worker while this
    one lives. Only a task still in the index is touched (an acknowledged one is not put back), and a broker that is
    not Redis (which has no visibility timeout) is left alone. A failed renewal is logged and tried again at the next
    beat (redis-py reconnects): the task is handed out again only after the visibility timeout without one."""
    log = logging.getLogger(__name__)
    with app.connection_for_write() as connection:
        if connection.transport.driver_type != "redis":
            return
        while not stop.wait(every_s):
            try:
                channel = connection.default_channel
                channel.client.zadd(channel.unacked_index_key, {delivery_tag: time.time()}, xx=True)
            except Exception as exc:  # the broker gone a moment: the next beat reconnects
                log.warning("could not renew the broker's visibility of task %s (%s)", delivery_tag, exc)


def _held_by_orchestrator(definition: dg.ExecutorDefinition) -> dg.ExecutorDefinition:
    """`definition`, a process per step, with each run held by the process orchestrating it."""
    create = definition.executor_creation_fn
    return dg.ExecutorDefinition(name=definition.name, config_schema=definition.config_schema,
                                 requirements=definition.get_requirements, description=definition.description,
                                 executor_creation_fn=lambda context: HeldRunExecutor(create(context)))


class HeldRunExecutor(dg.Executor):
    """An executor of a process per step (`steps`) whose orchestrating process holds the run while the steps
    execute; a Celery one first checks that its broker answers."""

    def __init__(self, steps: dg.Executor) -> None:
        self.steps = steps

    @property
    def retries(self):
        return self.steps.retries

    @property
    def step_dependency_config(self):
        return self.steps.step_dependency_config

    def app_args(self) -> dict:
        """The Celery app of the orchestrating process (dagster-celery builds it from these): the workers' settings,
        with the result backend's retries bounded (ORCHESTRATOR_RETRY), so that a run whose broker is lost fails
        within seconds instead of after Celery's 20 reconnections for each step result it was waiting for."""
        from dagster_celery.config import dict_wrapper

        args = self.steps.app_args()
        source = dict(vars(args["config_source"]))  # dagster-celery's dict_wrapper: the settings as attributes
        source["result_backend_transport_options"] = {**source.get("result_backend_transport_options", {}),
                                                      "retry_policy": ORCHESTRATOR_RETRY}
        return {**args, "config_source": dict_wrapper(source)}

    def __getattr__(self, name: str):
        # What an executor's own loop asks of the run's executor, which is this one (dagster-celery: app_args).
        return getattr(self.steps, name)

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:
        if broker := getattr(self.steps, "broker", None):  # dagster_celery's CeleryExecutor
            check_broker(broker)
        run = plan_context.dagster_run
        # The ledger resource as the steps configure it: the run's config over the definitions' (the home's path).
        config = ResolvedRunConfig.build(plan_context.reconstructable_job.get_definition(), run.run_config)
        ledger = LedgerResource(**config.resources["ledger"].config)
        with ledger.holding_run_for_steps(run, plan_context.instance, plan_context.log):
            try:
                yield from self.steps.execute(plan_context, execution_plan)
            except Exception as exc:
                if broker and (lost := broker_lost(broker, exc)) is not None:
                    raise lost from None
                raise


def broker_shown(url: str) -> str:
    """The broker's URL for messages: its scheme, host, port and database, never its user or password
    (redis://127.0.0.1:6379/0)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: said as it is, still without the password
        port = ":" + parts.netloc.rpartition("@")[2].rpartition(":")[2]
    return f"{parts.scheme}://{parts.hostname or 'localhost'}{port}{parts.path}"


def broker_lost(url: str, exc: BaseException) -> EnvironmentProblem | None:
    """One line naming the broker at `url` and what to check when `exc` (or what caused it) is the connection to it
    lost while the run's steps were handed out and waited for (dagster-celery's loop, whose result backend is by
    default the broker itself); None for any other error."""
    lost: list[type[BaseException]] = [ConnectionError, TimeoutError]  # the socket's own (OSError's subclasses)
    try:
        from kombu.exceptions import OperationalError

        lost.append(OperationalError)
    except ImportError:
        pass
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        lost += [RedisConnectionError, RedisTimeoutError]
    except ImportError:
        pass
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        if isinstance(current, tuple(lost)):
            break
        current = current.__cause__ or current.__context__
    else:
        return None
    cause = " ".join(str(current).split()) or type(current).__name__
    password = _password_of(url)
    if password:
        cause = cause.replace(password, "***")
    return EnvironmentProblem(
        f"lost the Celery broker {broker_shown(url)} that {BROKER_ENV} names while the run's steps executed ({cause}): "
        "check that the broker is running and reachable from this machine and the workers (Redis: redis-cli -h HOST "
        "-p PORT ping; its log, its memory limit), then re-run the run's days; a day its run had not published is "
        "left as it was")


def _password_of(url: str) -> str | None:
    """The password in a broker's URL, to keep it out of messages (None when there is none)."""
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None


def check_broker(url: str) -> None:
    """Connect once to the Celery broker at `url`; an EnvironmentProblem naming its host and port (never the
    password) and what to check when that fails, a ConfigError for a URL that names no broker Celery knows."""
    from kombu import Connection

    try:
        connection = Connection(url, connect_timeout=BROKER_TIMEOUT_S)
        server = f"{connection.hostname or 'localhost'}:{connection.port or connection.transport.default_port}"
    except (KeyError, ImportError) as exc:  # kombu: "No such transport: ...", or its client is not installed
        raise ConfigError(f"{BROKER_ENV} names no broker Celery can use ({exc.args[0] if exc.args else exc}): give "
                          f"it a URL such as redis://HOST:6379/0, or unset {EXECUTOR_ENV}") from None
    try:
        connection.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_S)
    except Exception as exc:
        cause = " ".join(str(exc).split())
        if connection.password:
            cause = cause.replace(connection.password, "***")
        raise EnvironmentProblem(
            f"cannot reach the Celery broker {server} that {BROKER_ENV} names ({cause}): check that the broker is "
            "running and accepts connections from this machine on that host and port (Redis: redis-cli -h HOST -p "
            f"PORT ping) and the URL in {BROKER_ENV}, then re-run; or unset {EXECUTOR_ENV} to execute the steps in the "
            "run's own process") from None
    finally:
        connection.release()
