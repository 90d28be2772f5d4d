"""OpenAI request and response bodies of :mod:`aiinfra.infer.engine.server`, checked.

:func:`parse_request` turns the JSON body of ``/v1/completions`` or
``/v1/chat/completions`` into token ids and
:class:`~aiinfra.infer.engine.core.SamplingParams`, or raises :class:`BadRequest`
naming the field and the rule it breaks; :func:`completion_body` writes the answer
(or one streamed chunk) in the OpenAI shape. Tokens are bytes: ``encode`` is UTF-8,
a token id ``>= 256`` (a model with a larger vocabulary) shows as U+FFFD.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiinfra.infer.engine.core import RequestError, SamplingParams
from aiinfra.infer.engine.scheduler import SEED_MAX, SEED_MIN

ROLES = ("system", "user", "assistant")
MAX_TOKENS_DEFAULT = 16  # OpenAI's default for /v1/completions
_MISSING = object()


class BadRequest(Exception):
    """A request the server refuses: HTTP ``status`` and an OpenAI error body.

    Args:
        message: what is wrong, naming the field and the rule.
        param: the offending field, or ``None``.
        status: the HTTP status (400 unless said).
        kind: the OpenAI error ``type``.
        headers: more response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(
        self,
        message: str,
        param: str | None,
        status: int = 400,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.kind = message, param, status, kind
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """``{"message", "type", "param", "code"}``."""
        return {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": None,
        }


@dataclass(frozen=True)
class ParsedRequest:
    """A valid request: its prompt ids, how to decode, and how to answer."""

    prompt: list[int]
    params: SamplingParams
    stream: bool
    chat: bool
    request_id: str


def encode(text: str, param: str = "prompt") -> list[int]:
    r"""Token ids of ``text``: its UTF-8 bytes.

    Raises:
        BadRequest: ``text`` holds a lone surrogate (JSON's ``"\ud800"`` escape
            decodes to one, which is no Unicode text), naming ``param``.
    """
    try:
        return list(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BadRequest(
            f"{param} must be Unicode text; it holds a lone surrogate "
            f"{text[exc.start]!r} at character {exc.start}",
            param,
        ) from None


def token_bytes(token: int) -> bytes:
    """The bytes of one token id (U+FFFD beyond the byte vocabulary)."""
    return bytes([token]) if 0 <= token < 256 else "\ufffd".encode()


def chat_prompt(messages: list[dict[str, str]]) -> str:
    r"""The chat template: ``<|role|>\ncontent\n`` per message, then the reply's.

    The reply's tag is ``<|assistant|>\n``; the model continues from there.
    """
    turns = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
    return turns + "<|assistant|>\n"


def _get(
    body: dict[str, Any], name: str, kinds: tuple[type, ...], default: Any, what: str
) -> Any:
    value = body.get(name)
    if value is None:
        if default is _MISSING:
            raise BadRequest(f"missing required field {name!r} ({what})", name)
        return default
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise BadRequest(f"{name} must be {what}, got {json.dumps(value)[:40]}", name)
    return value


def _messages(body: dict[str, Any]) -> list[dict[str, str]]:
    messages = _get(body, "messages", (list,), _MISSING, "a non-empty list")
    if not messages:
        raise BadRequest("messages must be a non-empty list, got []", "messages")
    for i, m in enumerate(messages):
        if (
            not isinstance(m, dict)
            or m.get("role") not in ROLES
            or not isinstance(m.get("content"), str)
        ):
            raise BadRequest(
                f"messages[{i}] must be {{'role': one of {ROLES}, 'content': a "
                f"string}}, got {json.dumps(m)[:60]}",
                "messages",
            )
    return messages


def _prompt(body: dict[str, Any]) -> list[int]:
    prompt = _get(
        body, "prompt", (str, list), _MISSING, "a string or a list of token ids"
    )
    if isinstance(prompt, list):
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            raise BadRequest(
                "prompt must be one string or one list of token ids (ints); "
                "batches of prompts are not served",
                "prompt",
            )
        ids = list(prompt)
    else:
        ids = encode(prompt, "prompt")
    if not ids:
        raise BadRequest(
            "prompt must not be empty (no token to continue from)", "prompt"
        )
    return ids


def parse_request(
    raw: bytes,
    chat: bool,
    model_name: str,
    context_left: Callable[[int], int] | None = None,
) -> ParsedRequest:
    """Check a request body and turn it into a :class:`ParsedRequest`.

    Args:
        raw: the HTTP body.
        chat: whether it came to ``/v1/chat/completions``.
        model_name: the one model served.
        context_left: the most tokens a prompt of ``n`` tokens can generate, the
            default ``max_tokens`` of a chat (OpenAI's); without it, 16.

    Raises:
        BadRequest: malformed JSON, a missing or ill-typed field, a value out of
            range (named; ``seed`` must fit 64 bits), text with a lone surrogate,
            ``n != 1``, ``stop`` strings, or an unknown model (404).
    """
    try:
        body = json.loads(raw or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}", None) from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", None)
    model = _get(body, "model", (str,), _MISSING, "a string")
    if model != model_name:
        raise BadRequest(
            f"model {model!r} is not served here; use {model_name!r}", "model", 404
        )
    prompt = encode(chat_prompt(_messages(body)), "messages") if chat else _prompt(body)
    limit_name = (
        "max_completion_tokens"
        if chat and "max_completion_tokens" in body
        else "max_tokens"
    )
    # OpenAI: a completion stops at 16 tokens unless told; a chat runs to the end of
    # the context.
    default = (
        max(1, context_left(len(prompt)))
        if chat and context_left is not None
        else MAX_TOKENS_DEFAULT
    )
    max_tokens = _get(body, limit_name, (int,), default, "an int >= 1")
    temperature = _get(body, "temperature", (int, float), 1.0, "a number in [0, 2]")
    top_p = _get(body, "top_p", (int, float), 1.0, "a number in (0, 1]")
    n = _get(body, "n", (int,), 1, "1")
    seed = _get(body, "seed", (int,), None, "an int")
    stream = _get(body, "stream", (bool,), False, "true or false")
    stop_ids = _get(body, "stop_token_ids", (list,), [], "a list of token ids")
    if n != 1:
        raise BadRequest(f"n must be 1 (one choice per request), got {n}", "n")
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        raise BadRequest(
            f"seed must be an int in [{SEED_MIN}, {SEED_MAX}] (64 bits), got "
            f"{str(seed)[:30]}",
            "seed",
        )
    if not 0 <= temperature <= 2:
        raise BadRequest(
            f"temperature must be in [0, 2], got {temperature}", "temperature"
        )
    if body.get("stop") not in (None, [], ""):
        raise BadRequest("stop strings are not supported; use stop_token_ids", "stop")
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in stop_ids):
        raise BadRequest("stop_token_ids must be a list of ints", "stop_token_ids")
    try:
        params = SamplingParams(
            max_tokens, float(temperature), float(top_p), None, seed, tuple(stop_ids)
        )
    except RequestError as err:
        raise BadRequest(
            str(err), limit_name if err.param == "max_tokens" else err.param
        ) from None
    prefix = "chatcmpl-" if chat else "cmpl-"
    return ParsedRequest(prompt, params, stream, chat, prefix + str(time.time_ns()))


def completion_body(
    req: ParsedRequest,
    server: Any,
    text: str,
    finish: str | None,
    n_tokens: int,
    chunk: bool = False,
) -> dict[str, Any]:
    """The answer to ``req``, or with ``chunk`` one streamed piece of it.

    Args:
        req: the request.
        server: has ``model_name``.
        text: the (new) text.
        finish: ``"length"``, ``"stop"`` or ``None`` while streaming.
        n_tokens: completion tokens so far.
        chunk: a Server-Sent Events chunk rather than the whole answer.
    """
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if not req.chat:
        choice["text"], kind = text, "text_completion"
    elif chunk:
        choice["delta"], kind = (
            {"role": "assistant", "content": text},
            "chat.completion.chunk",
        )
    else:
        choice["message"], kind = (
            {"role": "assistant", "content": text},
            "chat.completion",
        )
    body = {
        "id": req.request_id,
        "object": kind,
        "created": int(time.time()),
        "model": server.model_name,
        "choices": [choice],
    }
    if not chunk or finish is not None:
        p = len(req.prompt)
        body["usage"] = {
            "prompt_tokens": p,
            "completion_tokens": n_tokens,
            "total_tokens": p + n_tokens,
        }
    return body
