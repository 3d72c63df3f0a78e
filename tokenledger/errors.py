"""Errors a user can act on.

A `LedgerError` is a problem with the user's data or configuration, not with tokenledger: its message names the
file (and line or row, field and rule where there is one) and says what to do. Assets turn it into a Dagster
`Failure` and the CLI prints it without a traceback.
"""


class LedgerError(Exception):
    """A fatal problem in the landing zone or the configuration, described for the person who can fix it."""


class ConfigError(LedgerError):
    """A configuration file is missing, is not valid YAML, or breaks its contract."""


class InputFileError(LedgerError):
    """An input file cannot be read at all (corrupt, wrong format); row-level problems are quarantined instead."""
