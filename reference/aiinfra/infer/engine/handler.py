"""One HTTP connection of the server: check the request, enqueue it, stream the answer.

:class:`Handler` runs in the connection's own thread. It refuses what it cannot serve
with a 4xx and an OpenAI error body (415 for a body that is not JSON, 413 for one too
large, 408 for one that does not arrive in time, 401 without the API key, 400 for a
field out of range, 404 and 405 for a wrong path or method), takes a place in the
engine's queue or answers 503 with ``Retry-After``, then waits on its request's
queue of events: a JSON answer at the end, or Server-Sent Events token by token.
"""

from __future__ import annotations

import codecs
import hmac
import json
import queue
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Protocol

from aiinfra.infer.engine.core import RequestError
from aiinfra.infer.engine.server_api import (
    BadRequest,
    completion_body,
    parse_request,
    token_bytes,
)

if TYPE_CHECKING:
    from aiinfra.infer.engine.loop import EngineLoop


class ServerSide(Protocol):
    """What a connection reads of its server (:class:`.server.InferenceServer`)."""

    loop: EngineLoop
    model_name: str
    created: int
    api_key: str | None
    quiet: bool
    max_body: int
    read_timeout: float

    def admit(self) -> bool:
        """Take a place in the admission queue; False when it is full."""
        ...

    def release(self) -> None:
        """Give the place back."""
        ...


WAIT_S = 1.0  # how often a waiting handler checks that the engine thread lives
RETRY_AFTER_S = 1  # what a 503 asks the client to wait


class Handler(BaseHTTPRequestHandler):
    """One connection's requests: validate, enqueue, wait for the engine's tokens."""

    server: ServerSide  # type: ignore[assignment]  # narrower than socketserver.BaseServer
    protocol_version = "HTTP/1.0"  # one request per connection; streams end at close

    def setup(self) -> None:
        """Bound every read of this connection by the server's read timeout."""
        self.timeout = self.server.read_timeout
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Log like the base class unless the server is quiet."""
        if not self.server.quiet:
            super().log_message(format, *args)

    def _json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, err: BadRequest) -> None:
        self._json(err.status, {"error": err.body()}, err.headers)

    def _authorized(self) -> bool:
        """Whether the request carries the API key (always, without one); else 401."""
        key = self.server.api_key
        if key is None:
            return True
        given = self.headers.get("Authorization") or ""
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode(), key.encode()
        ):
            return True
        self._error(
            BadRequest(
                "a valid API key is required: Authorization: Bearer <key>",
                None,
                401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        )
        return False

    def do_GET(self) -> None:  # noqa: N802
        """``/v1/models``; 405 for the POST paths; 404 otherwise."""
        if not self._authorized():
            return
        if self.path.rstrip("/") == "/v1/models":
            card = {
                "id": self.server.model_name,
                "object": "model",
                "owned_by": "aiinfra",
            }
            card["created"] = self.server.created
            self._json(200, {"object": "list", "data": [card]})
        else:
            self._error(_route_error(self.path, "GET"))

    def _not_allowed(self) -> None:
        self._error(_route_error(self.path, self.command))

    do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815

    def _body(self) -> bytes:
        """The body: JSON (else 415), not too long (413), not too slow (408)."""
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequest(
                f"Content-Type must be application/json, got {kind or 'none'!r:.40}",
                None,
                415,
            )
        text = self.headers.get("Content-Length") or "0"
        if not text.isdigit():
            raise BadRequest(f"Content-Length must be an int, got {text!r:.20}", None)
        if int(text) > self.server.max_body:
            raise BadRequest(
                f"the body must be <= {self.server.max_body} bytes, got {text}",
                None,
                413,
            )
        try:
            raw = self.rfile.read(int(text))
        except TimeoutError:
            raw = b""
        if len(raw) < int(text):
            self.close_connection = True
            raise BadRequest(
                f"the body ended after {len(raw)} of its {text} bytes (Content-Length) "
                f"or took longer than {self.server.read_timeout:g} s",
                None,
                408,
            )
        return raw

    def do_POST(self) -> None:  # noqa: N802
        """The two completion endpoints."""
        path = self.path.rstrip("/")
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._error(_route_error(self.path, "POST"))
            return
        if not self._authorized():
            return
        chat = path == "/v1/chat/completions"
        engine = self.server.loop.engine
        try:
            req = parse_request(
                self._body(), chat, self.server.model_name, engine.max_new_tokens
            )
            engine.check_request(req.prompt, req.params)
        except BadRequest as err:
            self._error(err)
            return
        except RequestError as err:
            self._error(BadRequest(str(err), err.param))
            return
        if not self.server.admit():  # the queue is full: come back later
            self._error(
                BadRequest(
                    "the server is at capacity; retry after "
                    f"{RETRY_AFTER_S} s (Retry-After)",
                    None,
                    503,
                    "server_error",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                )
            )
            return
        try:
            request_id, events = self.server.loop.submit(req.prompt, req.params)
            try:
                if req.stream:
                    self._stream(req, events)
                else:
                    self._complete(req, events)
            except OSError:  # the client went away (reset, broken pipe, timeout)
                self.server.loop.abort(request_id)
        finally:
            self.server.release()

    def _events(self, events: queue.Queue) -> Any:
        """Yield ``(token, finish_reason)``; raise RuntimeError on an error event."""
        while True:
            try:
                kind, value, finish = events.get(timeout=WAIT_S)
            except queue.Empty:
                if not self.server.loop.thread.is_alive():
                    raise RuntimeError("the engine thread stopped") from None
                continue
            if kind == "error":
                raise RuntimeError(value)
            yield value, finish
            if finish is not None:
                return

    def _complete(self, req: Any, events: queue.Queue) -> None:
        tokens, finish = [], None
        try:
            for token, reason in self._events(events):
                tokens.append(token)
                finish = reason
        except RuntimeError as exc:
            self._error(BadRequest(str(exc), None, 500, "server_error"))
            return
        shown = tokens[:-1] if finish == "stop" else tokens
        text = b"".join(token_bytes(t) for t in shown).decode("utf-8", "replace")
        self._json(200, completion_body(req, self.server, text, finish, len(tokens)))

    def _send_event(self, body: dict[str, Any] | str) -> None:
        data = body if isinstance(body, str) else json.dumps(body)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def _stream(self, req: Any, events: queue.Queue) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        n = 0
        try:
            for token, finish in self._events(events):
                n += 1
                piece = b"" if finish == "stop" else token_bytes(token)
                text = decoder.decode(piece, final=finish is not None)
                if text or finish is not None:
                    self._send_event(
                        completion_body(req, self.server, text, finish, n, True)
                    )
        except RuntimeError as exc:
            self._send_event(
                {"error": BadRequest(str(exc), None, 500, "server_error").body()}
            )
        self._send_event("[DONE]")


def _route_error(path: str, method: str) -> BadRequest:
    known = {
        "/v1/models": "GET",
        "/v1/completions": "POST",
        "/v1/chat/completions": "POST",
    }
    allowed = known.get(path.rstrip("/"))
    if allowed is None:
        return BadRequest(
            f"unknown path {path!r}; this server has {sorted(known)}", None, 404
        )
    return BadRequest(f"{path} takes {allowed}, not {method}", None, 405)
