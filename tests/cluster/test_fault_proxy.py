"""The rehearsal's fault proxy in front of the real store: a cut store refuses, comes back with what
it had (a restarted moto would be empty), and a throttled one is slow by the set rate."""

from __future__ import annotations

import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from cluster.rehearsal.fault_proxy import fault_proxy
from cluster.rehearsal.object_store import REGION


def _client(store, port: int):
    return boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name=REGION,
        aws_access_key_id=store.admin.access_key_id, aws_secret_access_key=store.admin.secret_access_key,
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5),
    )  # fmt: skip


def test_a_cut_store_refuses_then_comes_back_with_what_it_had(object_store):
    with fault_proxy(object_store.port) as proxy:
        client = _client(object_store, proxy.port)
        client.put_object(Bucket=object_store.bucket, Key="proxy/before-cut", Body=b"kept")
        proxy.cut()
        with pytest.raises(EndpointConnectionError):
            client.put_object(Bucket=object_store.bucket, Key="proxy/during-cut", Body=b"lost")
        proxy.resume()
        body = client.get_object(Bucket=object_store.bucket, Key="proxy/before-cut")["Body"].read()
    assert body == b"kept"
    assert "proxy/during-cut" not in object_store.keys("proxy/")


def test_a_throttled_store_passes_bytes_at_the_set_rate(object_store):
    with fault_proxy(object_store.port) as proxy:
        client = _client(object_store, proxy.port)
        proxy.throttle(512 * 1024)
        started = time.monotonic()
        client.put_object(Bucket=object_store.bucket, Key="proxy/slow", Body=b"\0" * (512 * 1024))
        seconds = time.monotonic() - started
    assert 0.9 < seconds < 10, seconds  # 512 KB at 512 KB/s: about one second
    assert object_store.keys("proxy/slow")["proxy/slow"] == 512 * 1024
