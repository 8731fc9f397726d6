"""A TCP proxy on 127.0.0.1 in front of the object store, for the faults a restart cannot give: moto
keeps its state in memory, so a stopped and restarted store is an empty one, while a real bucket
keeps what it had. Clients use the proxy's port as the endpoint; the proxy can then

- `cut()`: drop every open connection and refuse new ones (the store went away mid-upload); it says how
  many of them were moving bytes at that moment, so a fault can prove it landed;
- `resume()`: accept again (the store is back, with everything it had before the cut);
- `throttle(bytes_per_s)`: pass at most that many bytes per second each way (slow storage);
- `answer(status)`: answer every new request with that HTTP status and an empty body, as a store in
  trouble does (`answer(None)` passes requests through again).

It runs in threads of the calling process and never listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

_CHUNK = 64 * 1024


class FaultProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._open: set[socket.socket] = set()
        self._last_bytes_at: dict[socket.socket, float] = {}  # connection -> when it last carried bytes
        self._lock = threading.Lock()
        self._bytes_per_s: float | None = None
        self._status: int | None = None
        self._closed = False
        self.bytes_passed = 0
        self._listen()

    def _listen(self) -> None:
        # The same port again after a cut, so clients configured with it reconnect when it is back.
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), name="fault-proxy-accept", daemon=True).start()

    def cut(self, busy_within_s: float = 1.0) -> int:
        """Drop every open connection and stop listening: new connections are refused. Returns how many
        dropped connections carried bytes within the last `busy_within_s` (transfers cut mid-way)."""
        # shutdown first: close() alone leaves the socket listening while a thread is blocked in accept().
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        busy = self.busy(busy_within_s)
        with self._lock:
            connections, self._open = self._open, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
                connection.close()
        return busy

    def busy(self, within_s: float = 1.0) -> int:
        """How many open connections carried bytes within the last `within_s` (transfers under way)."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for connection in self._open if now - self._last_bytes_at.get(connection, 0.0) < within_s)

    def resume(self) -> None:
        self._listen()

    def throttle(self, bytes_per_s: float | None) -> None:
        self._bytes_per_s = bytes_per_s

    def answer(self, status: int | None) -> None:
        self._status = status

    def close(self) -> None:
        self._closed = True
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._status is not None:
                threading.Thread(target=self._answer, args=(client, self._status), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _answer(self, client: socket.socket, status: int) -> None:
        """Each request on this connection gets `status` and no body (the connection then closes)."""
        with contextlib.suppress(OSError), client:
            client.settimeout(5)
            client.recv(_CHUNK)  # the request's head (and what of its body came with it)
            client.sendall(
                f"HTTP/1.1 {status} Store Trouble\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                limit = self._bytes_per_s
                if limit:
                    time.sleep(len(data) / limit)
                sink.sendall(data)
                self.bytes_passed += len(data)
                self._last_bytes_at[source] = self._last_bytes_at[sink] = time.monotonic()
        for end in (source, sink):
            self._last_bytes_at.pop(end, None)
            with contextlib.suppress(OSError):
                end.close()


@contextlib.contextmanager
def fault_proxy(target_port: int) -> Iterator[FaultProxy]:
    proxy = FaultProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()
