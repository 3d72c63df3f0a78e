"""docs/tables.md and the field lists of docs/inputs.md and docs/configuration.md, written from the contracts, the
table registry and the configuration models.

    python -m tools.docs           rewrite docs/tables.md and the generated blocks of docs/inputs.md and
                                   docs/configuration.md
    python -m tools.docs --check   exit 1, naming the files, when the committed ones differ

A table or input is described once, in its contract (data_contracts/**/*.odcs.yaml, read by tokenledger.contracts) and
its registry line (tokenledger/catalog.py): a new contract or column shows up here by re-running this module, and
tests/test_docs_links.py fails while the committed files lag behind.

docs/inputs.md is hand-written around its field lists: each list sits between
`<!-- BEGIN GENERATED: fields <contract>[/<table>] -->` and `<!-- END GENERATED -->` and only that part is rewritten.
docs/configuration.md likewise, around the keys of each mapping of the configuration files, between
`<!-- BEGIN GENERATED: config <model> -->` and `<!-- END GENERATED -->`: the model's keys (tokenledger/config/models.py:
nesting, defaults, meaning) with the type and rules of the contract column each is flattened into.
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from pydantic_core import PydanticUndefined

from tokenledger.catalog import TABLES, TableRef
from tokenledger.config.models import FILES as CONFIG_FILES
from tokenledger.config.schema import ConfigModel, Shape, container_kind, strip
from tokenledger.contracts import Column, Contract, Table, load_contract
from tokenledger.packaged import contract_ids

PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the checkout: this tool writes its docs/
DOCS_DIR = PROJECT_ROOT / "docs"
TABLES_MD = DOCS_DIR / "tables.md"
INPUTS_MD = DOCS_DIR / "inputs.md"
CONFIGURATION_MD = DOCS_DIR / "configuration.md"

# The schemas of tables tokenledger writes, in the order docs/tables.md lists them (published first).
SCHEMAS = ("quality", "infra", "finance", "focus", "core")
_SCHEMA_TEXT = {
    "quality": "What was read, accepted, quarantined and merged, per day and source.",
    "infra": "Tokens, SLO attainment, goodput, capacity, load and the capacity plan, per model and configuration.",
    "finance": "What a million tokens cost, who used them, and the bill reconciled. Also as CSV for spreadsheets.",
    "focus": "The tenant showback once more as a FinOps FOCUS 1.2 cost and usage dataset (FOCUS column names).",
    "core": "Internal: the typed inputs and intermediate results. Readable through the warehouse's `core` views; "
            "not a published interface (columns may change between versions).",
}
_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: fields (?P<ref>[\w/]+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)",
                    re.DOTALL)
_OTHERS = re.compile(r"(<!-- BEGIN GENERATED: other sources -->\n)(.*?)(<!-- END GENERATED -->)", re.DOTALL)
_CONFIG_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: config (?P<model>\w+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)",
                           re.DOTALL)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _rules(col: Column) -> str:
    """The column's own rules in a few words: ranges, allowed values, pattern, length, numbers accepted as text."""
    parts = []
    if col.minimum is not None:
        parts.append(f">= {_number(col.minimum)}")
    if col.exclusive_minimum is not None:
        parts.append(f"> {_number(col.exclusive_minimum)}")
    if col.maximum is not None:
        parts.append(f"<= {_number(col.maximum)}")
    if col.exclusive_maximum is not None:
        parts.append(f"< {_number(col.exclusive_maximum)}")
    if col.valid_values:
        parts.append("one of " + ", ".join(f"`{v}`" for v in col.valid_values))
    if col.pattern:
        parts.append(f"matches `{col.pattern}`")
    if col.max_length:
        parts.append(f"at most {col.max_length} characters")
    if col.unique:
        parts.append("unique")
    if col.accept_numbers:
        parts.append("a number is read as its digits")
    if col.no_raw_keys:
        parts.append("never an API key")
    if col.default is not None:
        parts.append(f"missing reads as `{col.default}`")
    if col.epoch:
        parts.append(f"or a number of {col.epoch} since the epoch")
    if col.zoneless == "utc":
        parts.append("without an offset: UTC, as the format defines")
    elif col.physical_type.upper() == "TIMESTAMPTZ" and col.paths:
        parts.append("without an offset: read as UTC, counted per file in the reconciliation's notes")
    return "; ".join(parts)


def _required(col: Column) -> str:
    if col.required:
        return "yes"
    if col.required_when:
        return f"when `{_cell(col.required_when)}`"
    return ""


def field_table(table: Table, with_paths: bool = False) -> str:
    """A Markdown table of `table`'s columns: name, type, required, rules, meaning (and where a source reads it)."""
    head = ["field", "type", "required", "rules", "meaning"]
    if with_paths:
        head.insert(1, "read from")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for col in table.columns:
        key = " (key)" if col.primary_key else ""
        row = [f"`{col.name}`{key}", f"`{col.physical_type}`", _required(col), _cell(_rules(col)),
               _cell(col.description)]
        if with_paths:
            row.insert(1, ", ".join(f"`{p}`" for p in col.paths) or "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _table_rules(table: Table) -> list[str]:
    rules = [*table.row_rules, *table.set_rules]
    return [f"- `{r.name}`" + (" (warning)" if r.severity == "warning" else "") + f": {_cell(r.description)}"
            for r in rules]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _about(contract: Contract) -> list[str]:
    out = []
    for key in ("purpose", "usage", "limitations"):
        if contract.description.get(key):
            out.append(f"{key.capitalize()}: {_cell(contract.description[key])}")
    return out


def _unregistered() -> list[TableRef]:
    """Tables with a contract of their own (`<schema>_<table>`) that the daily registry does not list: the ones
    kept whole rather than per day (infra.capacity_trend, infra.cache_whatif_traces)."""
    known = {t.contract_id for t in TABLES}
    refs = []
    for cid in contract_ids():
        schema, _, name = cid.partition("_")
        if schema in SCHEMAS and name and cid not in known:
            refs.append(TableRef(schema, name, published=schema != "core"))
    return refs


def _section(ref: TableRef, whole: bool) -> list[str]:
    contract = load_contract(ref.contract_id)
    table = contract.table(ref.contract_table) if ref.contract_table else (
        contract.tables.get(ref.name) or contract.table())
    key = ", ".join(table.primary_key)
    grain = ref.grain or (f"one row per {key}" if key else "")
    lines = [f"### `{ref.qualified}`", ""]
    facts = []
    if grain:
        facts.append(f"Grain: {grain}.")
    if whole:
        facts.append(f"Kept whole, not per day: one file, `exports/{ref.schema}/{ref.name}/data.parquet` once "
                     "published (its usage line says when).")
    elif ref.published:
        where = f"`exports/{ref.schema}/{ref.name}/day=YYYY-MM-DD/data.parquet`"
        if ref.csv_export:
            where += f", and as CSV in `exports/csv/{ref.schema}/{ref.name}/`"
        facts.append(f"Published: {where}.")
    else:
        facts.append(f"Internal: `lake/{ref.schema}/{ref.name}/day=YYYY-MM-DD/`.")
    if ref.stage:
        facts.append(f"Stage: {ref.stage}; rows from `{ref.sql_file}`" + (
            "." if not ref.reads else ", reading " + ", ".join(f"`{r}`" for r in ref.reads) + "."))
    facts.append(f"Contract: [`{ref.contract_file}`](../{ref.contract_file})" + (
        f", table `{table.name}`." if ref.contract and len(contract.tables) > 1 else "."))
    lines.append(" ".join(facts))
    lines.append("")
    about = _about(contract)
    if table.description:
        about.insert(0, _cell(table.description))
    if about:
        lines += ["- " + a for a in about] + [""]
    if ref.contract:
        # A core table typed by the contract of the input it was read by: its fields are listed in docs/inputs.md.
        lines += [f"Columns: the fields of the input contract `{ref.contract}`, typed as it says; listed in "
                  "[inputs.md](inputs.md).", ""]
        return lines
    lines.append(field_table(table).replace("| field |", "| column |", 1))
    rules = _table_rules(table)
    if rules:
        lines += ["Rules across columns and rows (checked before the day is published):", "", *rules, ""]
    return lines


def render_tables() -> str:
    registered = [t for t in TABLES if t.schema in SCHEMAS]
    whole = _unregistered()
    order = {s: i for i, s in enumerate(SCHEMAS)}
    out = [
        "# Tables",
        "",
        "<!-- GENERATED by `python -m tools.docs` from data_contracts/**/*.odcs.yaml and tokenledger/catalog.py;",
        "     edit those and re-run it, never this file (tests/test_docs_links.py compares them). -->",
        "",
        "Every table tokenledger writes, its grain and its columns. The published ones are the interface for finance "
        "and infra: read them from the warehouse (`warehouse.duckdb`, one schema per section below) or from "
        "`exports/<schema>/<table>/`, a Hive-partitioned Parquet dataset with one `day=YYYY-MM-DD/` folder per day "
        "(the files hold every column but `day`, which is the folder's name). Names and columns are a contract: "
        "columns may be added, never renamed or dropped without a new contract version. A day's rows are published "
        "only after its blocking checks pass, and re-running a day replaces them at once: a reader sees the old day "
        "or the new one, never a mix.",
        "",
        "What each figure means: [metrics.md](metrics.md) (cited by section). What is read: [inputs.md](inputs.md). "
        "Why it is built this way: [the decision records](adr/README.md).",
        "",
        "| table | grain | published |",
        "|---|---|---|",
    ]
    refs = sorted([(t, False) for t in registered] + [(t, True) for t in whole],
                  key=lambda p: (order[p[0].schema], TABLES.index(p[0]) if not p[1] else len(TABLES)))
    for ref, is_whole in refs:
        contract = load_contract(ref.contract_id)
        grain = ref.grain or "one row per " + ", ".join(
            (contract.tables.get(ref.name) or contract.table()).primary_key)
        pub = ("yes, and CSV" if ref.csv_export else "yes") if ref.published else "no (internal)"
        if is_whole:
            pub += "; kept whole"
        heading = f"`{ref.qualified}`"
        out.append(f"| [{heading}](#{_anchor(heading)}) | {_cell(grain)} | {pub} |")
    out.append("| [capacity review](#reports) | one HTML and one Markdown file per day | yes, in `reports/` |")
    out.append("")
    for schema in SCHEMAS:
        out += [f"## {schema}", "", _SCHEMA_TEXT[schema], ""]
        for ref, is_whole in refs:
            if ref.schema == schema:
                out += _section(ref, is_whole)
    out += [
        "## Reports",
        "",
        "`reports/capacity-review-YYYY-MM-DD.html` and `.md`: the day's capacity review, written from the day's "
        "tables above and published with them in the same switch (a published day always has its review; a day "
        "whose review fails is not published). It leads with the verdict table, one row per deployment, hosted-API "
        "ones included, printed from `infra.capacity_verdict_daily` (its words in a colour per verdict: ok, policy, "
        "short, SLO missed), with $/MTok delivered and under SLO, good tokens a day, GPUs needed against GPUs in "
        "force, hours over capacity and the capacity basis; then the cost per MTok over the days, and per model one "
        "screen: demand against capacity by hour, attainment by ISL bucket and the SLO table, with the capacity "
        "template, figures, latency, workload, input split and cache what-if folded under it; a glossary defines "
        "every term it uses. Every figure carries the table and column it came from. A section without data "
        "is left out with one line saying why. See [the decision record](adr/0077-the-capacity-review.md).",
        "",
    ]
    return "\n".join(out)


def _block_ref(ref: str) -> tuple[Table, bool]:
    cid, _, name = ref.partition("/")
    contract = load_contract(cid)
    table = contract.table(name or None)
    return table, any(c.paths for c in table.columns)


def _other_sources(text: str) -> str:
    """A field list for every request format (`source_*` contract) that docs/inputs.md has no block of yet."""
    named = {m.group("ref").partition("/")[0] for m in _BLOCK.finditer(text)}
    out = []
    for cid in contract_ids():
        if not cid.startswith("source_") or cid in named:
            continue
        contract = load_contract(cid)
        out += [f"#### Contract `{cid}`", "", *[f"- {a}" for a in _about(contract)], ""]
        for table in contract.tables.values():
            out.append(field_table(table, any(c.paths for c in table.columns)))
    if not out:
        return "No other format.\n"
    return "\n".join(out)


def render_inputs(text: str) -> str:
    """`text` (docs/inputs.md) with every generated field list rewritten from its contract, and the formats no
    block names listed in the `other sources` block."""

    def block(m: re.Match[str]) -> str:
        table, with_paths = _block_ref(m.group("ref"))
        return m.group(1) + field_table(table, with_paths) + m.group(4)

    text = _BLOCK.sub(block, text)
    return _OTHERS.sub(lambda m: m.group(1) + _other_sources(text) + m.group(3), text)


# --- docs/configuration.md: the keys of the configuration models --------------------------------------------------

# A leaf's type in a configuration file's words: by its contract column's type, else by the model's annotation.
_CONFIG_TYPES = {"VARCHAR": "text", "INTEGER": "integer", "BIGINT": "integer", "DOUBLE": "number",
                 "DECIMAL(38,12)": "decimal", "DATE": "date", "TIMESTAMPTZ": "date or timestamp",
                 "VARCHAR[]": "list of text"}
_ANNOTATION_TYPES = {str: "text", int: "integer", float: "number", Decimal: "decimal", date: "date",
                     date | datetime: "date or timestamp", list[str]: "list of text"}


def config_models() -> list[type[ConfigModel]]:
    """Every configuration model: each file's, then depth-first the models its keys hold, in their order."""
    found: list[type[ConfigModel]] = []

    def visit(model: type[ConfigModel]) -> None:
        if model in found:
            return
        found.append(model)
        for info in model.model_fields.values():
            for inner in _models_in(info.annotation):
                visit(inner)

    for model in CONFIG_FILES.values():
        visit(model)
    return found


def _models_in(annotation: object) -> list[type[ConfigModel]]:
    """The models a key's value is (or is a list or mapping of), in the order a union names them."""
    tp = strip(annotation)[0]
    while container_kind(tp):
        tp = strip(typing.get_args(tp)[-1])[0]
    members = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, type(int | str)) else (tp,)
    return [m for m in (strip(a)[0] for a in members) if isinstance(m, type) and issubclass(m, ConfigModel)]


def _contract_table(model: type[ConfigModel]) -> Table | None:
    if not model.contract:
        return None
    contract, _, table = model.contract.partition("/")
    return load_contract(contract).table(table)


def _config_type(model: type[ConfigModel], key: str, column: Column | None) -> str:
    info = model.model_fields[key]
    shape = next((m for m in info.metadata if isinstance(m, Shape)), None)
    if shape is not None:
        names = " or ".join(f"`{m.__name__}`" for m in _models_in(info.annotation))
        kind = container_kind(info.annotation)
        if kind == "list":
            return f"list of {names}" if names else "list of text"
        if kind == "mapping":
            return f"mapping: {shape.keys} → {names}"
        return names
    if column is not None:
        return _CONFIG_TYPES.get(column.physical_type, column.physical_type)
    annotation = info.annotation
    if typing.get_origin(annotation) is typing.Literal:
        return "text"
    return _ANNOTATION_TYPES.get(annotation, str(annotation))


def _config_default(model: type[ConfigModel], key: str) -> str:
    info = model.model_fields[key]
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "default" in extra:
        return _cell(str(extra["default"]))
    if info.default is None or info.default is PydanticUndefined:
        return ""
    return f"`{info.default}`"


def _leaf_columns(model: type[ConfigModel]) -> int:
    return sum(1 for key, info in model.model_fields.items()
               if model.column_of(key) and not any(isinstance(m, Shape) for m in info.metadata))


def _rules_owners() -> dict[str, type[ConfigModel]]:
    """For each contract table of the configuration, the model its rules across keys and entries are listed under:
    the one flattened into most of its columns (an SLO policy's rules under SloPolicy, not SloVersion)."""
    owners: dict[str, type[ConfigModel]] = {}
    for model in config_models():
        best = owners.get(model.contract) if model.contract else model
        if best is None or _leaf_columns(model) > _leaf_columns(best):
            owners[model.contract] = model
    return owners


def config_table(model: type[ConfigModel], with_rules: bool = True) -> str:
    """The keys of `model` as a Markdown table (key, type, required, default, rules, meaning), then, `with_rules`,
    the rules of its contract table across keys and entries."""
    table = _contract_table(model)
    lines = [f"**`{model.__name__}`**: {_cell(model.__doc__ or '')}", "",
             "| key | type | required | default | rules | meaning |", "|---|---|---|---|---|---|"]
    for key, info in model.model_fields.items():
        name = model.column_of(key)
        shaped = any(isinstance(m, Shape) for m in info.metadata)
        column = table.column(name) if table is not None and name and not shaped else None
        default = _config_default(model, key)
        required = "yes" if info.is_required() else ""
        if column is not None and not default:
            required = _required(column)
        rules = _cell(_rules(column)) if column is not None else ""
        meaning = _cell(info.description or (column.description if column is not None else ""))
        lines.append(f"| `{key}` | {_config_type(model, key, column)} | {required} | {default} | {rules} | "
                     f"{meaning} |")
    out = "\n".join(lines) + "\n"
    if table is not None and with_rules and (table.row_rules or table.set_rules):
        out += "\nRules across keys and entries (checked when the file is read):\n\n" + "\n".join(
            _table_rules(table)) + "\n"
    return out


def render_configuration(text: str) -> str:
    """`text` (docs/configuration.md) with every generated block of keys rewritten from its model, a contract
    table's rules across keys and entries under one of the models flattened into it (`_rules_owners`)."""
    known = {m.__name__: m for m in config_models()}
    owners = _rules_owners()

    def block(m: re.Match[str]) -> str:
        name = m.group("model")
        if name not in known:
            raise SystemExit(f"docs/configuration.md names config model {name}, which tokenledger.config.models "
                             f"does not have (it has {', '.join(known)})")
        model = known[name]
        return m.group(1) + config_table(model, owners.get(model.contract) is model) + m.group(4)

    return _CONFIG_BLOCK.sub(block, text)


def outputs() -> dict[Path, str]:
    """Each generated file with the text the generator writes."""
    out = {TABLES_MD: render_tables()}
    if INPUTS_MD.is_file():
        out[INPUTS_MD] = render_inputs(INPUTS_MD.read_text())
    if CONFIGURATION_MD.is_file():
        out[CONFIGURATION_MD] = render_configuration(CONFIGURATION_MD.read_text())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed file is not up to date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.write_text(text)
    rel = ", ".join(str(p.relative_to(PROJECT_ROOT)) for p in stale)
    if args.check:
        if stale:
            print(f"not up to date: {rel}; run python -m tools.docs", file=sys.stderr)
            return 1
        return 0
    print(f"wrote {rel}" if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
