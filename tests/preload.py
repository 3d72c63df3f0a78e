"""What the fork server of tests/processes.py imports once for every process it forks: the CLI, the Dagster
definitions and CLI, and Great Expectations (imported as the checks import it, tokenledger.expectations._gx,
without creating a context: each process makes its own)."""

import warnings

warnings.filterwarnings("ignore")

import dagster._cli  # noqa: E402,F401 - what the `dagster` executable runs
import tokenledger.pipelines.definitions  # noqa: E402,F401

import tokenledger.cli  # noqa: E402,F401
from tokenledger.expectations import _defer_scipy_stats  # noqa: E402

_defer_scipy_stats()
import great_expectations  # noqa: E402,F401
import great_expectations.expectations  # noqa: E402,F401
