"""The Celery app tokenledger's workers run: `celery -A tokenledger.pipelines.celery_app worker` (docs/deploying.md).

dagster-celery's step task on the broker and result backend the runs use, read from the same variables
(TOKENLEDGER_CELERY_BROKER, TOKENLEDGER_CELERY_BACKEND) with the executor's own settings and tokenledger's
(`celery_settings`: a step whose worker dies is executed again, after TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT), as
dagster-celery's documentation says to give workers a broker of one's own: a worker and the runs it serves are
configured once, and the broker's URL, which may hold a password, is written nowhere.
"""

from __future__ import annotations

import os

from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task
from tokenledger.pipelines.executors import BACKEND_ENV, BROKER_ENV, celery_settings

from tokenledger.errors import ConfigError

if not os.environ.get(BROKER_ENV, "").strip():
    raise ConfigError(f"a tokenledger Celery worker needs {BROKER_ENV}, the broker the runs hand their steps to (for "
                      "example redis://127.0.0.1:6379/0): set it as the runs have it")

app = make_app(CeleryExecutor.for_cli(broker=os.environ[BROKER_ENV],
                                      backend=os.environ.get(BACKEND_ENV, "").strip() or None,
                                      config_source=celery_settings()).app_args())
execute_plan = create_task(app)
