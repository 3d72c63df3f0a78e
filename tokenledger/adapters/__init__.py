"""Adapters: request logs in the formats users already have, each mapped once onto the gateway_request contract.

A source format lands in its own folder, `raw/<source>/dt=YYYY-MM-DD/`, beside the canonical `raw/gateway/`.
Reading one of its files takes four steps, all in DuckDB:

1. records: every physical line (JSON Lines, through tokenledger/lines.py) or row (Parquet, CSV) as a JSON
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
and each source reconciles on its own (rows read = accepted + quarantined + merged, per source).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# How the quarantine reason of a record that is not a request begins (a Claude Code prompt or summary, written
# beside the model's replies): quarantined so that it is counted (rows read = accepted + quarantined + merged),
# but not held against max_quarantine_share (assets/checks.py), since no request was lost.
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


def adapters() -> dict[str, Adapter]:
    """Every adapter by source name (imported here, not at module load, to keep the modules independent)."""
    from tokenledger.adapters import anthropic, litellm, openai

    return {a.name: a for a in (litellm.ADAPTER, openai.ADAPTER, anthropic.ADAPTER)}
