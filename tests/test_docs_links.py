"""The documentation a clone holds is whole: every relative link resolves, every path an asset's description names
exists, nothing points outside the repository (`../shared/`, `spec/*.md`), and the generated reference
(docs/tables.md, the field lists of docs/inputs.md, the keys of docs/configuration.md) is what `python -m tools.docs`
writes today."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROJECT_ROOT
from tokenledger.catalog import TABLES
from tools import docs

DOC_FILES = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "CONTRIBUTING.md",
             *sorted((PROJECT_ROOT / "docs").glob("*.md")), *sorted((PROJECT_ROOT / "docs" / "adr").glob("*.md"))]
# Citations of the definitions that live outside a clone: the shared spec folder, or spec/<name>.md.
OUTSIDE = re.compile(r"\.\./shared/|(?<![\w/.-])spec/[\w-]+\.md")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
# A repository path an asset description names: docs/<file>.md or data_contracts/<file>.
_DESCRIBED_PATH = re.compile(r"(?<![\w/.-])((?:docs/[\w./-]+?\.md)|(?:data_contracts/[\w./-]*\w))(?![\w/-])")


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks (links there are examples, not links)."""
    return _FENCE.sub("", text)


def _links(text: str) -> list[str]:
    prose = _INLINE_CODE.sub("", _prose(text))
    return [m.group(1) for m in _LINK.finditer(prose)] + [m.group(1) for m in _REFERENCE.finditer(prose)]


@cache
def _anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives the headings of a Markdown file (duplicates numbered -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text()):
        out.add(m.group(1))
    return frozenset(out)


def _broken(doc: Path) -> list[str]:
    broken = []
    for target in _links(doc.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            continue
        part, _, anchor = target.partition("#")
        resolved = (doc.parent / part).resolve() if part else doc
        if not resolved.exists():
            broken.append(f"{target} (no {resolved})")
            continue
        try:
            resolved.relative_to(PROJECT_ROOT)
        except ValueError:
            broken.append(f"{target} (outside the repository)")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.relative_to(PROJECT_ROOT)})")
    return broken


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_relative_links_resolve(doc: Path):
    broken = _broken(doc)
    assert not broken, f"{doc.relative_to(PROJECT_ROOT)}: broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_docs_cite_only_the_repository(doc: Path):
    hits = [f"line {n}: {line.strip()}" for n, line in enumerate(doc.read_text().splitlines(), 1)
            if OUTSIDE.search(line)]
    assert not hits, f"{doc.relative_to(PROJECT_ROOT)} cites files a clone does not have:\n" + "\n".join(hits)


@cache
def _asset_descriptions() -> dict[str, str]:
    from tokenledger.pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    return {key.to_user_string(): graph.get(key).description or "" for key in graph.get_all_asset_keys()}


def test_asset_descriptions_name_existing_files():
    missing = []
    for asset, description in sorted(_asset_descriptions().items()):
        for path in _DESCRIBED_PATH.findall(description):
            if not (PROJECT_ROOT / path).exists():
                missing.append(f"{asset}: {path}")
    assert not missing, "asset descriptions name files the repository does not have:\n" + "\n".join(missing)


def test_asset_descriptions_cite_only_the_repository():
    outside = {asset: OUTSIDE.findall(text) for asset, text in _asset_descriptions().items() if OUTSIDE.search(text)}
    assert not outside, ("asset descriptions cite files a clone does not have (docs/metrics.md, docs/inputs.md and "
                         f"docs/tables.md hold them): {outside}")


def test_review_cites_only_the_repository():
    """The review's text (its templates are the strings of tokenledger/report/review.py) names docs/, never the spec."""
    source = (PROJECT_ROOT / "tokenledger" / "report" / "review.py").read_text()
    hits = [f"line {n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, "tokenledger/report/review.py cites files a clone does not have:\n" + "\n".join(hits)


def test_the_review_and_descriptions_cite_sections_that_exist():
    """A citation "docs/metrics.md, section N" names a numbered section of docs/metrics.md."""
    sections = {int(m.group(1)) for m in re.finditer(r"^## (\d+)\. ", (PROJECT_ROOT / "docs/metrics.md").read_text(),
                                                     re.MULTILINE)}
    texts = [*_asset_descriptions().values(), (PROJECT_ROOT / "tokenledger" / "report" / "review.py").read_text(),
             *(d.read_text() for d in DOC_FILES)]
    cited = set()
    for text in texts:
        for m in re.finditer(r"metrics\.md,?\s+sections?\s+([\d ,and-]+)", " ".join(text.split())):
            cited |= {int(n) for n in re.findall(r"\d+", m.group(1))}
    assert cited - sections == set()


def test_markdown_helpers_find_links_and_headings(tmp_path: Path):
    (tmp_path / "a.md").write_text("# A title\n\n## Two `words`\n\n## Two `words`\n\n```\n# not a heading\n```\n")
    text = "[x](a.md#two-words-1) [y](<a.md>) ![i](a.md \"t\") `[z](nowhere.md)`\n```\n[no](code.md)\n```\n"
    assert _links(text) == ["a.md#two-words-1", "a.md", "a.md"]
    assert _anchors(tmp_path / "a.md") == {"a-title", "two-words", "two-words-1"}
    assert OUTSIDE.search("see ../shared/spec/metrics.md") and OUTSIDE.search("(spec/metrics.md, section 2)")
    assert not OUTSIDE.search("docs/metrics.md, section 2")


def test_generated_reference_is_up_to_date():
    stale = [str(path.relative_to(PROJECT_ROOT)) for path, text in docs.outputs().items()
             if not path.is_file() or path.read_text() != text]
    assert stale == [], "run python -m tools.docs and commit the result"


def test_every_table_and_input_contract_is_in_the_reference():
    tables = (PROJECT_ROOT / "docs" / "tables.md").read_text()
    inputs = (PROJECT_ROOT / "docs" / "inputs.md").read_text()
    input_contracts = {t.contract for t in TABLES if t.contract}
    for path in sorted((PROJECT_ROOT / "data_contracts").glob("*.odcs.yaml")):
        cid = path.name.removesuffix(".odcs.yaml")
        schema, _, name = cid.partition("_")
        if schema in docs.SCHEMAS and cid not in input_contracts:
            assert f"`{schema}.{name}`" in tables, cid
        elif cid not in ("config", "whatif"):  # the configuration files: docs/configuration.md
            assert f"`{cid}`" in inputs, cid


CONFIGURATION_MD = PROJECT_ROOT / "docs" / "configuration.md"


def test_the_keys_of_the_configuration_are_up_to_date():
    """Each `<!-- BEGIN GENERATED: config <model> -->` block of docs/configuration.md is what its model and contract
    give (tokenledger/config/models.py, data_contracts/config/); the prose around the blocks is kept as written."""
    text = CONFIGURATION_MD.read_text()
    assert docs.render_configuration(text) == text, "run python -m tools.docs and commit docs/configuration.md"
    stale = text.replace("| `gpus_per_replica` | integer |", "| `gpus_per_replica` | number |", 1)
    assert stale != text and docs.render_configuration(stale) == text  # a hand edit of a block is written over


def test_every_config_model_has_its_keys_in_configuration_md():
    blocks = re.findall(r"<!-- BEGIN GENERATED: config (\w+) -->", CONFIGURATION_MD.read_text())
    assert sorted(blocks) == sorted(m.__name__ for m in docs.config_models())
    assert len(blocks) == len(set(blocks))


def test_a_block_naming_no_config_model_stops_the_generator():
    with pytest.raises(SystemExit, match="names config model Deploymnet"):
        docs.render_configuration("<!-- BEGIN GENERATED: config Deploymnet -->\n<!-- END GENERATED -->\n")


def _as_config_file(doc: object) -> tuple[str, object] | None:
    """The configuration file an example of docs/configuration.md is (or is a part of), and the example as that
    whole file; None for an example of another file (a load test's run.yaml)."""
    if isinstance(doc, list) and all(isinstance(d, dict) and "deployment_id" in d for d in doc):
        return "deployments.yaml", {"deployments": doc}
    if not isinstance(doc, dict):
        return None
    if "deployments" in doc:
        return "deployments.yaml", doc
    if "versions" in doc:
        return ("slo.yaml" if "slo_version" in doc["versions"][0] else "costs.yaml"), doc
    if "api_prices" in doc:
        return "costs.yaml", {"versions": [doc]}
    if doc and all(isinstance(v, dict) and "input_per_mtok" in v for v in doc.values()):
        return "costs.yaml", {"versions": [{"api_prices": doc}]}
    if {"scenarios", "models", "traces", "sampling"} & set(doc):
        return "whatif.yaml", doc
    return None


def test_the_examples_of_configuration_md_read_as_their_models():
    """Every YAML example of a configuration file (or of a part of one) in docs/configuration.md has the shape its
    model takes: no key the model does not know, entries nested as it says."""
    from tokenledger.config.messages import read_file
    from tokenledger.config.models import FILES
    from tokenledger.config.source import _LineLoader

    read = []
    for example in re.findall(r"^```yaml\n(.*?)^```", CONFIGURATION_MD.read_text(), re.DOTALL | re.MULTILINE):
        found = _as_config_file(yaml.load(example, Loader=_LineLoader))  # noqa: S506 - a safe loader
        if found is not None:
            name, doc = found
            read_file(FILES[name], doc, CONFIGURATION_MD)
            read.append(name)
    assert sorted(set(read)) == sorted(FILES) and len(read) >= 7, read
