"""An S3-compatible object store on 127.0.0.1 that checks credentials: moto's server mode, signed.

Why moto: it is on PyPI (MinIO's server is not), it is a real HTTP S3 API (SigV4 signatures,
multipart uploads, the S3 error codes) that pyarrow, boto3, Ray Train and MLflow talk to as they
talk to AWS, and it starts in a third of a second. By default moto accepts any key; started with
`INITIAL_NO_AUTH_ACTION_COUNT` it enforces IAM like AWS, so wrong credentials and a read-only
policy are refused the way a real bucket refuses them. Its first three requests (unauthenticated by
that setting) make the admin user whose key everything else signs with. State is in memory: a
restarted store is empty, so faults that need a store to come back use `fault_proxy` in front of
it instead of a restart.

    python -m cluster.rehearsal.object_store --bucket audioscale-data --port 9000

runs one until Ctrl-C and prints the environment lines to paste into another shell.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from cluster.rehearsal.server_process import start_server, stop_group, wait_until_ready

REGION = "us-east-1"
START_TIMEOUT_S = 60.0
# The admin user's three set-up requests (create user, attach policy, create key) are the only
# unauthenticated ones the store accepts.
_UNAUTHENTICATED_SETUP_REQUESTS = 3
_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
# AWS authorises HeadBucket with s3:ListBucket; moto asks for an action of its own name, so both are here.
_READ_ONLY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket", "s3:HeadBucket"], "Resource": "*"}],
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclasses.dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": REGION,
        }


@dataclasses.dataclass(frozen=True)
class ObjectStore:
    """A running store: its endpoint, the admin's credentials, and a default bucket."""

    port: int
    admin: Credentials
    bucket: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def uri(self, path: str = "", *, bucket: str | None = None, port: int | None = None) -> str:
        """`s3://BUCKET/PATH?endpoint_override=...&scheme=http`, the form cluster/README.md gives;
        `port`: another port for the endpoint (a fault proxy in front of the store)."""
        key = f"{bucket or self.bucket}/{path.strip('/')}".rstrip("/")
        return f"s3://{key}?endpoint_override=127.0.0.1:{port or self.port}&scheme=http"

    def env(self) -> dict[str, str]:
        """The usual AWS variables for this store, plus MLflow's name for a custom S3 endpoint."""
        return {**self.admin.env(), "AWS_ENDPOINT_URL": self.endpoint, "MLFLOW_S3_ENDPOINT_URL": self.endpoint}

    def client(self, service: str = "s3", credentials: Credentials | None = None):
        import boto3

        credentials = credentials or self.admin
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def read_only_user(self, name: str = "reader") -> Credentials:
        """A user that may list and read every bucket but write none."""
        iam = self.client("iam")
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="read-only", PolicyDocument=json.dumps(_READ_ONLY))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return Credentials(key["AccessKeyId"], key["SecretAccessKey"])

    def keys(self, prefix: str = "", *, bucket: str | None = None) -> dict[str, int]:
        """{key: size} of every object under `prefix`."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket or self.bucket, Prefix=prefix)
        return {item["Key"]: item["Size"] for page in pages for item in page.get("Contents", [])}


def _make_admin(endpoint: str) -> Credentials:
    import boto3

    iam = boto3.client(
        "iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup", aws_secret_access_key="setup"
    )
    iam.create_user(UserName="admin")
    iam.put_user_policy(UserName="admin", PolicyName="everything", PolicyDocument=json.dumps(_ALLOW_ALL))
    key = iam.create_access_key(UserName="admin")["AccessKey"]
    return Credentials(key["AccessKeyId"], key["SecretAccessKey"])


@contextlib.contextmanager
def running_object_store(
    log_dir: Path, *, bucket: str = "audioscale-data", port: int | None = None
) -> Iterator[ObjectStore]:
    """A signed store on `port` (default: a free one) of 127.0.0.1 with `bucket` made; stopped (and
    emptied) on exit."""
    port = port or free_port()
    log_path = Path(log_dir) / "object-store.log"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_UNAUTHENTICATED_SETUP_REQUESTS)}
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = start_server(command, log_path, env=env)
    try:
        wait_until_ready(server, lambda: _listens(port), what="the object store", log_path=log_path,
                         timeout_s=START_TIMEOUT_S)  # fmt: skip
        store = ObjectStore(port=port, admin=_make_admin(f"http://127.0.0.1:{port}"), bucket=bucket)
        store.create_bucket(bucket)
        yield store
    finally:
        stop_group(server)


def _listens(port: int) -> bool:
    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.rehearsal.object_store", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--bucket", default="audioscale-data", help="bucket to create (default: %(default)s)")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--log-dir", default=".", help="folder for object-store.log (default: the current one)")
    args = parser.parse_args(argv)
    with running_object_store(Path(args.log_dir), bucket=args.bucket, port=args.port) as store:
        print(f"S3-compatible store at {store.endpoint}, bucket {store.bucket!r}; in another shell:")
        for name, value in store.env().items():
            print(f"export {name}={value}")
        print(f"then use URIs like {store.uri('shards/default')}  (Ctrl-C stops the store and empties it)")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
