"""What every adapter is: one source format mapped onto the gateway_request contract (the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field

# How a mapping says why a record is not a request (a Claude Code prompt or summary, a Codex session's context,
# written beside the requests by design): such a record is counted in skipped_not_request (rows read = accepted
# + quarantined + merged + skipped), never quarantined, since nothing is wrong with it.
NOT_A_REQUEST = "not a request record"


@dataclass(frozen=True)
class Adapter:
    """One source format: where it lands, what it is read as, and how it maps onto gateway_request."""

    name: str  # the folder under raw/ and the `source` of its rows
    title: str  # what a user calls it, in messages
    contract: str  # data_contracts/<contract>.odcs.yaml: the source's fields and their paths
    mapping: str  # sql/<mapping>.sql: typed source fields -> canonical text and kinds
    formats: dict[str, str]  # file-name ending -> jsonl | parquet | csv
    labels: dict[str, str] = field(default_factory=dict)  # canonical column -> the source field(s) it is read from
    # Columns of a Parquet or CSV export that hold JSON text (LiteLLM's metadata): parsed before paths are read.
    json_columns: tuple[str, ...] = ()
    # The formats (tokenledger.ingest.adapters.detect.FORMATS) this adapter reads, as told from a file's first records.
    kinds: tuple[str, ...] = ()
    # A JSON Lines format whose one line holds many records (OTLP's spans): sql/<records>.sql turns the lines
    # (source_line, line_problem, j) into records of the same shape, each keeping its line's number.
    records: str | None = None
    # Other formats landing in the same folder, each read by its own adapter when a file's first records are its.
    variants: tuple[Adapter, ...] = ()

    def for_kind(self, kind: str | None) -> Adapter | None:
        """The adapter of this folder that reads format `kind`: this one for an unknown format (its rows are then
        quarantined one by one, naming the fields they lack), None for a format this folder does not take."""
        if kind is None or kind in self.kinds:
            return self
        return next((v for v in self.variants if kind in v.kinds), None)
