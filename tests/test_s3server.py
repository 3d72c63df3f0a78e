"""The local S3 server (tests/s3server.py), and the primitive an object-storage home would commit with.

Issue 43 item 5: on object storage there is no rename and no flock, so a day would be published by writing its
files under new keys and then swapping one small pointer object with a conditional put: `If-None-Match: *` to
create it (fails with 412 if it exists), `If-Match: <etag>` to replace exactly the version one read (fails with
412 if anyone replaced it since). These tests show the server honours both, that of two publishers swapping the
same pointer one loses and must re-read, and that under a real race exactly one wins. (This is moto's behaviour;
AWS S3 has honoured both headers on PutObject since August and November 2024, and may also answer a concurrent
conditional write with 409 ConditionalRequestConflict, which a committer treats as a loss too.)
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import botocore.exceptions
import pytest

from tests.s3server import S3Server, s3_server_fixture  # noqa: F401  (the fixture `s3_server`)

POINTER = "home/.published/current.json"


def _error(exc: botocore.exceptions.ClientError) -> tuple[int, str]:
    return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]


def _lost(exc: botocore.exceptions.ClientError) -> bool:
    """A conditional put that lost: 412 (the condition did not hold) or 409 (a concurrent conditional write)."""
    return _error(exc)[0] in (409, 412)


def test_the_server_stores_what_boto3_and_pyarrow_write(s3_server: S3Server) -> None:
    client = s3_server.client()
    client.put_object(Bucket=s3_server.bucket, Key="roundtrip/a.txt", Body=b"from boto3")
    with s3_server.arrow_fs().open_output_stream(f"{s3_server.bucket}/roundtrip/b.txt") as out:
        out.write(b"from pyarrow")
    with s3_server.arrow_fs().open_input_stream(f"{s3_server.bucket}/roundtrip/a.txt") as f:
        assert f.read() == b"from boto3"
    assert client.get_object(Bucket=s3_server.bucket, Key="roundtrip/b.txt")["Body"].read() == b"from pyarrow"
    assert s3_server.host == "127.0.0.1"


def test_if_none_match_creates_a_key_once(s3_server: S3Server) -> None:
    client, key = s3_server.client(), "conditional/create-once"
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as second:
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert _error(second.value) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"first"


def test_if_match_replaces_only_the_version_read(s3_server: S3Server) -> None:
    client, key = s3_server.client(), "conditional/compare-and-swap"
    first = client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v1")["ETag"]
    second = client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v2", IfMatch=first)["ETag"]
    assert second != first
    with pytest.raises(botocore.exceptions.ClientError) as stale:
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"v3 from a stale read", IfMatch=first)
    assert _error(stale.value) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"v2"
    with pytest.raises(botocore.exceptions.ClientError) as missing:
        client.put_object(Bucket=s3_server.bucket, Key="conditional/never-written", Body=b"x", IfMatch=first)
    assert _error(missing.value) == (404, "NoSuchKey")


def _read_pointer(client, bucket: str) -> tuple[dict, str | None]:
    try:
        got = client.get_object(Bucket=bucket, Key=POINTER)
    except client.exceptions.NoSuchKey:
        return {"version": 0, "days": {}}, None
    return json.loads(got["Body"].read()), got["ETag"]


def _swap(client, bucket: str, pointer: dict, etag: str | None) -> None:
    """Replace the pointer if it is still the one read (create it if none was)."""
    condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    client.put_object(Bucket=bucket, Key=POINTER, Body=json.dumps(pointer).encode(), **condition)


def test_of_two_publishers_swapping_one_pointer_the_second_loses_and_rereads(
        s3_server: S3Server) -> None:
    client, bucket = s3_server.client(), s3_server.bucket
    # Both runs read the same published state (no pointer yet) and stage their day under keys of their own.
    state_a, etag_a = _read_pointer(client, bucket)
    state_b, etag_b = _read_pointer(client, bucket)
    for run, day in (("run-a", "2026-11-16"), ("run-b", "2026-11-17")):
        client.put_object(Bucket=bucket, Key=f"home/.published/staged/{run}/{day}/data.parquet", Body=run.encode())
    _swap(client, bucket, {"version": 1, "days": {"2026-11-16": "run-a"}}, etag_a)
    with pytest.raises(botocore.exceptions.ClientError) as lost:
        _swap(client, bucket, {"version": 1, "days": {"2026-11-17": "run-b"}}, etag_b)
    assert _lost(lost.value)
    # The loser re-reads, merges its day into what is published now, and swaps against the new etag.
    state_b, etag_b = _read_pointer(client, bucket)
    assert state_b == {"version": 1, "days": {"2026-11-16": "run-a"}}
    _swap(client, bucket, {"version": 2, "days": {**state_b["days"], "2026-11-17": "run-b"}}, etag_b)
    # A writer still holding the first etag loses again: nothing is ever overwritten blind.
    with pytest.raises(botocore.exceptions.ClientError) as stale:
        _swap(client, bucket, {"version": 2, "days": {"2026-11-16": "run-a-again"}}, etag_a)
    assert _lost(stale.value)
    assert _read_pointer(client, bucket)[0] == {"version": 2, "days": {"2026-11-16": "run-a", "2026-11-17": "run-b"}}


def test_under_a_race_exactly_one_conditional_put_wins(s3_server: S3Server) -> None:
    racers, key = 8, "conditional/race"
    clients = [s3_server.client() for _ in range(racers)]
    for trial in range(10):
        etag = clients[0].put_object(Bucket=s3_server.bucket, Key=key, Body=f"base {trial}".encode())["ETag"]
        barrier = threading.Barrier(racers)

        def put(i: int, etag: str = etag, barrier: threading.Barrier = barrier) -> int:
            barrier.wait()
            try:
                clients[i].put_object(Bucket=s3_server.bucket, Key=key, Body=f"racer {i}".encode(), IfMatch=etag)
            except botocore.exceptions.ClientError as exc:
                assert _lost(exc), exc
                return 0
            return 1

        with ThreadPoolExecutor(racers) as pool:
            assert sum(pool.map(put, range(racers))) == 1, f"trial {trial}"
        assert clients[0].get_object(Bucket=s3_server.bucket, Key=key)["Body"].read().startswith(b"racer ")
