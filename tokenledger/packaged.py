"""The files shipped inside the package: the SQL statements (`sql/`, one statement per file) and the data contracts
(`data_contracts/`), in a folder per stage, input or published schema.

They are the subpackages `tokenledger.sql` and `tokenledger.data_contracts` (pyproject.toml maps the checkout's
top-level `sql/` and `data_contracts/` to them), read through `importlib.resources`: the same call finds them in a
checkout installed editable and in site-packages. A statement or contract is named by its file's stem alone, which
is unique across the folders, so moving a file between folders changes no caller.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

SQL_PACKAGE = "tokenledger.sql"
CONTRACTS_PACKAGE = "tokenledger.data_contracts"
CONTRACT_SUFFIX = ".odcs.yaml"


@cache
def _index(package: str, suffix: str) -> dict[str, Path]:
    """Every file of `package` (its folders included) ending in `suffix`, by its name without the suffix."""
    root = files(package)
    found: dict[str, Path] = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                if not entry.name.startswith(("_", ".")):
                    stack.append(entry)
            elif entry.name.endswith(suffix):
                name = entry.name.removesuffix(suffix)
                if name in found:
                    raise RuntimeError(f"{package} holds two files named {entry.name}: {found[name]} and {entry}")
                # A wheel installs as files, so every resource is a path on disk (not a zip member).
                found[name] = Path(str(entry))
    return found


def sql_file(name: str) -> Path:
    """The file of the statement `name` (sql/<stage>/<name>.sql)."""
    try:
        return _index(SQL_PACKAGE, ".sql")[name]
    except KeyError:
        raise KeyError(f"no statement sql/**/{name}.sql in {SQL_PACKAGE}") from None


def contract_file(contract_id: str) -> Path:
    """The file of the contract `contract_id` (data_contracts/<folder>/<contract_id>.odcs.yaml)."""
    try:
        return _index(CONTRACTS_PACKAGE, CONTRACT_SUFFIX)[contract_id]
    except KeyError:
        raise KeyError(f"no contract data_contracts/**/{contract_id}{CONTRACT_SUFFIX} in {CONTRACTS_PACKAGE}") from None


def contract_ids() -> list[str]:
    """Every contract shipped, sorted."""
    return sorted(_index(CONTRACTS_PACKAGE, CONTRACT_SUFFIX))


def shown(path: Path) -> str:
    """`path` as the checkout names it (sql/ingest/x.sql, data_contracts/core/y.odcs.yaml), for messages and docs."""
    for package, top in ((SQL_PACKAGE, "sql"), (CONTRACTS_PACKAGE, "data_contracts")):
        root = Path(str(files(package)))
        if path.is_relative_to(root):
            return f"{top}/{path.relative_to(root).as_posix()}"
    return str(path)
