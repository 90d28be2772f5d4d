r"""An OpenAI-compatible HTTP server in front of the inference engine.

``POST /v1/completions`` and ``POST /v1/chat/completions`` take the OpenAI request
bodies (``stream`` answers with Server-Sent Events, ``data: {...}`` then
``data: [DONE]``); ``GET /v1/models`` lists the one model. The standard library's
threaded HTTP server gives each connection a thread; the threads only validate and
enqueue, and one :class:`~aiinfra.infer.engine.loop.EngineLoop` thread owns the
engine, so every accepted request ends with its last token or an error event
(:mod:`.handler` is the connection's side).
The tokenizer is the models' byte vocabulary (token ``i`` < 256 is byte ``i`` of
the UTF-8 text); a chat is rendered as
``<|role|>\ncontent\n`` per message, then ``<|assistant|>\n``. A request the server
cannot serve gets a 4xx status and ``{"error": {"message", "type", "param"}}``.

Under load no client is refused at the socket: the listen backlog holds
:data:`BACKLOG` connections, and at most ``max_pending`` requests wait or run in the
engine; one more is answered at once with 503 and ``Retry-After`` (what OpenAI's
clients retry on) instead of a refused or dropped connection. A body must be
``application/json`` (415: a web page cannot post one cross-origin without a
preflight), at most ``max_body`` bytes (413), and arrive within ``read_timeout``
seconds (408, the connection closed); with ``api_key`` every request needs
``Authorization: Bearer <key>`` (401).
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer

from aiinfra.infer.engine.core import Engine
from aiinfra.infer.engine.handler import Handler
from aiinfra.infer.engine.loop import EngineLoop

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
MAX_BODY = 1 << 20  # bytes of a request body
BACKLOG = 1024  # connections the kernel queues before accept (Python's default: 5)
MAX_PENDING = 1024  # requests waiting or running in the engine at once
READ_TIMEOUT_S = 10.0  # for the request line, headers and body of a connection


def check_host(host: str, allow_remote: bool = False) -> None:
    """Refuse to listen beyond this machine unless asked to.

    Raises:
        ValueError: ``host`` is not a loopback name and ``allow_remote`` is false.
    """
    if host not in LOCAL_HOSTS and not allow_remote:
        raise ValueError(
            f"host must be one of {LOCAL_HOSTS} (the server has no authentication), "
            f"got {host!r}; pass allow_remote to listen on other interfaces"
        )


class InferenceServer(ThreadingHTTPServer):
    """The HTTP server; :meth:`start` runs it and its engine in daemon threads.

    Args:
        engine: the engine to serve.
        host: the address to bind (loopback unless ``allow_remote``).
        port: the port; 0 picks a free one (see :attr:`port`).
        model_name: the name clients pass as ``model``.
        allow_remote: allow a host other than loopback.
        quiet: do not log each request to stderr.
        api_key: if set, the Bearer token every request must carry.
        max_pending: requests waiting or running at once; more get 503.
        max_body: bytes of a request body; more get 413.
        read_timeout: seconds to receive a request; a slower one gets 408.

    Raises:
        ValueError: see :func:`check_host`; a limit that is not positive.
        OSError: the address is in use (``errno.EADDRINUSE``).
    """

    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(
        self,
        engine: Engine,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "aiinfra",
        allow_remote: bool = False,
        quiet: bool = False,
        *,
        api_key: str | None = None,
        max_pending: int = MAX_PENDING,
        max_body: int = MAX_BODY,
        read_timeout: float = READ_TIMEOUT_S,
    ) -> None:
        check_host(host, allow_remote)
        for name, value in (
            ("max_pending", max_pending),
            ("max_body", max_body),
            ("read_timeout", read_timeout),
        ):
            if isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if api_key is not None and not api_key:
            raise ValueError("api_key must be a non-empty string or None")
        super().__init__((host, port), Handler)
        self.loop, self.model_name, self.quiet = EngineLoop(engine), model_name, quiet
        self.api_key, self.max_body, self.read_timeout = api_key, max_body, read_timeout
        self.created = int(time.time())
        self._thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(max_pending)
        self.num_refused = 0  # requests answered 503 because the queue was full

    def admit(self) -> bool:
        """Take a place in the engine's queue; False when all are taken."""
        if self._slots.acquire(blocking=False):
            return True
        self.num_refused += 1
        return False

    def release(self) -> None:
        """Give a place back (the request ended, however)."""
        self._slots.release()

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``, what an OpenAI client takes as ``base_url``."""
        return f"http://{self.server_address[0]}:{self.port}/v1"

    def start(self) -> None:
        """Serve in background threads (engine and HTTP)."""
        self.loop.start()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, end running requests with an error event, close the socket."""
        self.shutdown()
        self.server_close()
        self.loop.stop()
