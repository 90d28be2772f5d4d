"""The thread that owns an :class:`~aiinfra.infer.engine.core.Engine` inside the server.

HTTP handler threads never touch the engine: they put requests on an intake queue
and wait on a queue of their own. The engine thread admits queued requests, calls
:meth:`~aiinfra.infer.engine.core.Engine.step` while work is left and puts every new
token on its request's queue; if a step raises, or the loop stops, every request
still running gets an error event, so no accepted request is lost silently.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any

from aiinfra.infer.engine.core import Engine


class EngineLoop:
    """The thread that owns the engine; handlers talk to it through queues.

    Args:
        engine: the engine to drive.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._intake: queue.Queue[tuple[str, Any, Any, Any]] = queue.Queue()
        self._out: dict[str, queue.Queue[tuple[str, Any, Any]]] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def submit(self, prompt: list[int], params: Any) -> tuple[str, queue.Queue]:
        """Queue a request and return its id and its queue of events.

        The events are ``("token", token_id, finish_reason)`` and, if the request
        fails, one ``("error", message, None)``.
        """
        request_id = uuid.uuid4().hex
        events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        if not self.thread.is_alive():
            events.put(("error", "the engine is not running", None))
        else:
            self._intake.put(("add", request_id, prompt, (params, events)))
        return request_id, events

    def abort(self, request_id: str) -> None:
        """Stop a request whose client went away."""
        self._intake.put(("abort", request_id, None, None))

    def _fail_all(self, message: str) -> None:
        for request_id, events in list(self._out.items()):
            events.put(("error", message, None))
            self.engine.abort(request_id)
        self._out.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            idle = not self.engine.has_unfinished()
            try:
                item = (
                    self._intake.get(timeout=0.05)
                    if idle
                    else self._intake.get_nowait()
                )
            except queue.Empty:
                item = None
            while item is not None:
                self._take(item)
                try:
                    item = self._intake.get_nowait()
                except queue.Empty:
                    item = None
            if not self.engine.has_unfinished():
                continue
            try:
                outputs = self.engine.step()
            except Exception as exc:  # a failed step ends every request, loudly
                self._fail_all(f"the engine failed: {type(exc).__name__}: {exc}")
                continue
            for out in outputs:
                events = self._out.get(out.request_id)
                if events is not None:
                    events.put(("token", out.token, out.finish_reason))
                    if out.finish_reason is not None:
                        del self._out[out.request_id]
        self._fail_all("the server is shutting down")
        while not self._intake.empty():  # requests that came in while stopping
            kind, _, _, extra = self._intake.get_nowait()
            if kind == "add":
                extra[1].put(("error", "the server is shutting down", None))

    def _take(self, item: tuple[str, Any, Any, Any]) -> None:
        kind, request_id, prompt, extra = item
        if kind == "abort":
            self._out.pop(request_id, None)
            self.engine.abort(request_id)
            return
        params, events = extra
        try:
            self.engine.add_request(prompt, params, request_id)
        except Exception as exc:  # checked before, so unexpected: answer, go on
            events.put(("error", f"request refused: {exc}", None))
            return
        self._out[request_id] = events

    def start(self) -> None:
        """Start the engine thread."""
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread; requests still running get an error event."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)
