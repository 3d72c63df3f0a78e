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
and each source reconciles on its own (rows read = accepted + quarantined + merged + skipped + failures that name no
model, per source).

A folder may take more than one format (raw/openai/ takes OpenAI's responses and Codex CLI session logs): each
JSON Lines file is told apart by its first records (tokenledger/ingest/adapters/detect.py), and a file whose records are
those of a format that belongs in another folder stops the day with a message naming the format and its folder.
"""

from __future__ import annotations

from tokenledger.ingest.adapters import anthropic, litellm, openai, otel
from tokenledger.ingest.adapters.base import Adapter


def adapters() -> dict[str, Adapter]:
    """Every adapter by source name."""
    return {a.name: a for a in (litellm.ADAPTER, openai.ADAPTER, anthropic.ADAPTER, otel.ADAPTER)}
