"""A home's name is checked before anything is read or written (issue 56, item 7): an s3:// home whose bucket S3
could not hold, or whose prefix S3 would keep as written (`x/../y` is a folder named `..`, not `y`), is refused in
one line naming the part and the rule; the commands the messages suggest are shell-quoted, so a home with a space
pastes as it is."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tokenledger.errors import ConfigError
from tokenledger.storage.layout import HomeLayout
from tokenledger.storage.remote import RemoteHome

BUCKET_RULE = ("is not a bucket name (3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with "
               "a letter or digit): give the bucket's name as S3 lists it, s3://bucket/prefix")
CHARACTERS_RULE = ("which S3 keys should not (or a reader would take as a pattern): use letters, digits and - _ . / "
                   "in the prefix")


@pytest.mark.parametrize(("url", "said"), [
    ("s3://ledger/x/../y", "the prefix 'x/../y' has a '..' segment, which S3 keeps as a folder of that name: write "
                           "the prefix as the folders it names, e.g. s3://ledger/x/y"),
    ("s3://ledger/./prod", "the prefix './prod' has a '.' segment, which S3 keeps as a folder of that name: write the "
                           "prefix as the folders it names, e.g. s3://ledger/prod"),
    ("s3://ledger/a//b", "the prefix 'a//b' has an empty segment (//), which S3 keeps as a folder of that name: write "
                         "the prefix as the folders it names, e.g. s3://ledger/a/b"),
    ("s3://ledger//prod", "the prefix '/prod' has an empty segment (//), which S3 keeps as a folder of that name: "
                          "write the prefix as the folders it names, e.g. s3://ledger/prod"),
    ("s3://Ledger/prod", f"'Ledger' {BUCKET_RULE}"),
    ("s3://ab/prod", f"'ab' {BUCKET_RULE}"),
    ("s3://led..ger/prod", f"'led..ger' {BUCKET_RULE}"),
    ("s3://ledger_prod/x", f"'ledger_prod' {BUCKET_RULE}"),
    ("s3://-ledger/x", f"'-ledger' {BUCKET_RULE}"),
    ("s3:///prod", f"'' {BUCKET_RULE}"),
    ("s3://ledger/prod*", f"the prefix 'prod*' holds '*', {CHARACTERS_RULE}"),
    ("s3://ledger/day=[1]", f"the prefix 'day=[1]' holds '[', ']', {CHARACTERS_RULE}"),
    ("s3://ledger/prod?v=1", f"the prefix 'prod?v=1' holds '?', {CHARACTERS_RULE}"),
    ("s3://ledger/a\\b", f"the prefix 'a\\\\b' holds '\\\\', {CHARACTERS_RULE}"),
    ("s3://ledger/tab\there", f"the prefix 'tab\\there' holds '\\t', {CHARACTERS_RULE}"),
])
def test_a_bucket_or_prefix_s3_would_not_hold_as_written_is_refused_naming_the_rule(url: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        HomeLayout.of(url)  # before any client is made or any file is written
    assert str(refused.value) == f"TOKENLEDGER_HOME={url!r}: {said}"


@pytest.mark.parametrize(("url", "bucket", "prefix", "shown"), [
    ("s3://ledger", "ledger", "", "s3://ledger"),
    ("s3://ledger/", "ledger", "", "s3://ledger"),
    ("S3://ledger/prod/", "ledger", "prod", "s3://ledger/prod"),
    ("s3://my.ledger-1/team a/prod", "my.ledger-1", "team a/prod", "s3://my.ledger-1/team a/prod"),
    ("s3://abc/x.y_z-1/2026", "abc", "x.y_z-1/2026", "s3://abc/x.y_z-1/2026"),
])
def test_a_well_formed_home_is_taken_as_named(url: str, bucket: str, prefix: str, shown: str) -> None:
    home = RemoteHome.parse(url)
    assert (home.bucket, home.prefix, home.url) == (bucket, prefix, shown)
    assert home.where("raw/gateway") == (f"s3://{bucket}/{prefix}/raw/gateway" if prefix
                                         else f"s3://{bucket}/raw/gateway")


def test_the_commands_a_message_suggests_are_shell_quoted(tmp_path: Path) -> None:
    from tokenledger.cli import summarize_warning

    home = tmp_path / "team ledger's home"
    with pytest.raises(ConfigError) as missing:
        HomeLayout.of(home).check()
    assert f"(`tokenledger generate --home {shlex.quote(str(home))} ...` writes a sample one)" in str(missing.value)
    assert shlex.split(shlex.quote(str(home))) == [str(home)]  # the quoted form pastes back to the folder
    entries = "; ".join(f"2026-11-{d} gateway: 8 row(s) quarantined (status 8)" for d in range(16, 23))
    said = summarize_warning(f"quality/ingest_reconciliation_daily:quarantine_empty: {entries}", home)
    assert said.endswith(f'All of it: tokenledger sql --home {shlex.quote(str(home))} "SELECT * FROM '
                         'quality.quarantine".'), said
