"""Adapters: request logs in the formats users already have, each mapped once onto the gateway_request contract.

A source format lands in its own folder, `raw/<source>/dt=YYYY-MM-DD/`, beside the canonical `raw/gateway/`.
Reading one of its files takes four steps, all in DuckDB:

1. records: every physical line (JSON Lines, through tokenledger/ingest/lines.py) or row (Parquet, CSV) as a JSON
   object `j`, with why it cannot be a record when it cannot (`line_problem`);
2. the source's own contract (`data_contracts/source_<name>.odcs.yaml`): each of its fields is read from `j`
   at the JSON path(s) the contract gives, typed and judged, so a bad value is quarantined with a reason that
   names the source's field (`completion_tokens: -5 is below the minimum 0`); nothing else of the record is read
   or kept, prompt text among it;
3. the adapter's mapping (`sql/adapt_<name>.sql`) from the typed source fields to the canonical fields (for
   example Anthropic's input = input_tokens + cache reads + cache writes);
4. the canonical contract over the mapped row, whose cross-field rules (cached within input, e2e after TTFT)
   are reported under the source's field names (`Adapter.labels`).

The rows then join the canonical gateway rows: one request id is one request across every source of the day,
and each source reconciles on its own (rows read = accepted + quarantined + merged + skipped, per source).

A folder may take more than one format (raw/openai/ takes OpenAI's responses and Codex CLI session logs): each
JSON Lines file is told apart by its first records (tokenledger/ingest/adapters/detect.py), and a file whose records are
those of a format that belongs in another folder stops the day with a message naming the format and its folder.
"""

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


def adapters() -> dict[str, Adapter]:
    """Every adapter by source name (imported here, not at module load, to keep the modules independent)."""
    from tokenledger.ingest.adapters import anthropic, litellm, openai, otel

    return {a.name: a for a in (litellm.ADAPTER, openai.ADAPTER, anthropic.ADAPTER, otel.ADAPTER)}
