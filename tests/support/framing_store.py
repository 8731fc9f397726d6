"""An S3-compatible store that keeps the `aws-chunked` framing of uploads, as older MinIO, Ceph RGW and
other S3 clones do: an HTTP front on 127.0.0.1 to an unauthenticated moto, which passes every request
through but hands moto the framed body of an `aws-chunked` upload as if it were the plain object. What
pyarrow then reads back starts with the chunk header (`400\\r\\n...`), and Parquet files are unreadable.

    with framing_store(tmp_path) as (endpoint_port, bucket): ...
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from cluster.rehearsal.object_store import _listens, free_port
from cluster.rehearsal.server_process import start_server, stop_group, wait_until_ready

# What tells a store the body is framed; a store that ignores them keeps the framing.
_FRAMING_HEADERS = ("content-encoding", "x-amz-decoded-content-length", "x-amz-trailer", "x-amz-content-sha256")


class _Front(http.server.BaseHTTPRequestHandler):
    upstream_port = 0
    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        """The request's body, with HTTP's own chunked transfer encoding undone (the SDK streams uploads so)."""
        if "chunked" not in self.headers.get("Transfer-Encoding", ""):
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        while self.rfile.readline().strip():  # HTTP trailers, if any
            pass
        return body

    def _relay(self) -> None:
        body = self._body()
        dropped = ("host", "content-length", "transfer-encoding", "expect")
        headers = {key: value for key, value in self.headers.items() if key.lower() not in dropped}
        if "aws-chunked" in self.headers.get("Content-Encoding", ""):
            headers = {key: value for key, value in headers.items() if key.lower() not in _FRAMING_HEADERS}
        connection = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        connection.request(self.command, self.path, body=body, headers={**headers, "Content-Length": str(len(body))})
        response = connection.getresponse()
        payload = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(key, value)
        # A HEAD's length is the object's, not its (empty) body's.
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        connection.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

    def log_message(self, *args) -> None:  # quiet
        pass


@contextlib.contextmanager
def framing_store(log_dir: Path, *, bucket: str = "framing") -> Iterator[int]:
    """Yields the front's port; `bucket` exists. Any credentials are accepted."""
    moto_port = free_port()
    moto = start_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
                        Path(log_dir) / "framing-moto.log", env=dict(os.environ))  # fmt: skip
    try:
        wait_until_ready(moto, lambda: _listens(moto_port), what="moto", log_path=Path(log_dir) / "framing-moto.log",
                         timeout_s=60)  # fmt: skip
        handler = type("Front", (_Front,), {"upstream_port": moto_port})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.address_family = socket.AF_INET
        threading.Thread(target=server.serve_forever, daemon=True).start()
        connection = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=30)
        connection.request("PUT", f"/{bucket}", headers={"Content-Length": "0"})
        connection.getresponse().read()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
    finally:
        stop_group(moto)
