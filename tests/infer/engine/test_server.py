"""The OpenAI-compatible server, driven by the ``openai`` client and by raw HTTP.

Ground truth: ``generate_greedy`` of the same model on the UTF-8 bytes of the
prompt (the chat template written out by hand), decoded as UTF-8 with replacement.
"""

import argparse
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import torch
from aiinfra.infer.engine.core import Engine
from aiinfra.infer.engine.server import InferenceServer
from aiinfra.infer.serve_cli import (
    ServeError,
    add_serve,
    load_model,
    run_serve,
    tiny_model,
)
from aiinfra.models.transformer import generate_greedy

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def model():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 32-wide model: threads only add synchronisation
    yield tiny_model(0)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def server(model):
    srv = InferenceServer(Engine(model, max_num_seqs=4), model_name="tiny", quiet=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(
        base_url=server.base_url, api_key="-", max_retries=0, timeout=60
    )


def expected(model, text, n):
    ids = list(text.encode())
    out = generate_greedy(model, torch.tensor([ids]), n)[0, len(ids) :].tolist()
    return bytes(out).decode("utf-8", "replace")


def test_completion_matches_greedy(server, client, model):
    r = client.completions.create(
        model="tiny", prompt="Hi", max_tokens=5, temperature=0
    )
    assert r.choices[0].text == expected(model, "Hi", 5)
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (2, 5)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    first = int(generate_greedy(model, torch.tensor([list(b"hi")]), 1)[0, -1])
    stop = {"stop_token_ids": [first], "temperature": 0}
    code, reply = call(server, "/v1/completions", OK | stop)
    assert (code, reply["choices"][0]["text"]) == (200, "")  # the stop token is hidden
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 1


def test_chat_matches_greedy_on_the_template(client, model):
    messages = [{"role": "system", "content": "Be"}, {"role": "user", "content": "ok"}]
    r = client.chat.completions.create(
        model="tiny", messages=messages, max_tokens=4, temperature=0
    )
    template = "<|system|>\nBe\n<|user|>\nok\n<|assistant|>\n"
    assert r.choices[0].message.content == expected(model, template, 4)
    assert r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens == len(template)


def test_streams_concatenate_to_the_whole_text(client):
    kw = {"model": "tiny", "max_tokens": 6, "temperature": 0}
    whole = client.completions.create(prompt="abc", **kw).choices[0].text
    chunks = list(client.completions.create(prompt="abc", stream=True, **kw))
    assert "".join(c.choices[0].text for c in chunks) == whole
    assert chunks[-1].choices[0].finish_reason == "length"
    msgs = [{"role": "user", "content": "x"}]
    whole = client.chat.completions.create(messages=msgs, **kw).choices[0].message
    chunks = list(client.chat.completions.create(messages=msgs, stream=True, **kw))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole.content
    assert len(chunks) >= 2  # the tokens came one event at a time


def test_concurrent_requests_all_complete(client, model):
    prompts = ["a", "bb", "ccc", "dddd", "eeeee", "f"]  # more than max_num_seqs
    results = {}

    def ask(p):
        r = client.completions.create(
            model="tiny", prompt=p, max_tokens=3, temperature=0
        )
        results[p] = r.choices[0].text

    threads = [threading.Thread(target=ask, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {p: expected(model, p, 3) for p in prompts}


def call(server, path, body=None, method="POST"):
    data = (
        body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    )
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


OK = {"model": "tiny", "prompt": "hi"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("path", "body", "status", "param", "match"),
    [
        ("/v1/completions", b"{not json", 400, None, "not valid JSON"),
        ("/v1/completions", {"prompt": "hi"}, 400, "model", "missing required field"),
        (
            "/v1/completions",
            {"model": "gpt-4", "prompt": "hi"},
            404,
            "model",
            "not served",
        ),
        ("/v1/completions", {"model": "tiny"}, 400, "prompt", "missing required field"),
        ("/v1/completions", OK | {"prompt": ""}, 400, "prompt", "must not be empty"),
        ("/v1/completions", OK | {"prompt": ["a", "b"]}, 400, "prompt", "one string"),
        ("/v1/completions", OK | {"max_tokens": 0}, 400, "max_tokens", ">= 1"),
        (
            "/v1/completions",
            OK | {"max_tokens": 255},
            400,
            "max_tokens",
            "> max_seq_len",
        ),
        ("/v1/completions", OK | {"max_tokens": "4"}, 400, "max_tokens", "an int"),
        ("/v1/completions", OK | {"temperature": -1}, 400, "temperature", "[0, 2]"),
        ("/v1/completions", OK | {"top_p": 0}, 400, "top_p", "in (0, 1]"),
        ("/v1/completions", OK | {"top_p": 1.5}, 400, "top_p", "in (0, 1]"),
        ("/v1/completions", OK | {"n": 2}, 400, "n", "must be 1"),
        ("/v1/completions", OK | {"prompt": "x" * 300}, 400, "prompt", "max_seq_len"),
        ("/v1/completions", OK | {"stop": ["\n"]}, 400, "stop", "not supported"),
        ("/v1/chat/completions", {"model": "tiny"}, 400, "messages", "missing"),
        ("/v1/chat/completions", CHAT | {"messages": []}, 400, "messages", "non-empty"),
        (
            "/v1/chat/completions",
            CHAT | {"messages": [{"role": "x"}]},
            400,
            "messages",
            "role",
        ),
        ("/v1/embeddings", OK, 404, None, "unknown path"),
    ],
)
def test_bad_requests_get_4xx(server, path, body, status, param, match):
    code, reply = call(server, path, body)
    assert code == status
    assert reply["error"]["param"] == param
    assert reply["error"]["type"] == "invalid_request_error"
    assert match in reply["error"]["message"]


def test_wrong_method_and_client_error(server, client):
    assert call(server, "/v1/completions", method="GET")[0] == 405
    assert call(server, "/v1/models", OK, method="DELETE")[0] == 405
    with pytest.raises(openai.BadRequestError, match="top_p must be in"):
        client.completions.create(model="tiny", prompt="a", top_p=2.0)
    assert call(server, "/v1/completions", OK | {"max_tokens": 1})[0] == 200  # alive


class FailingEngine(Engine):
    def step(self):
        raise RuntimeError("boom")


def test_a_failing_engine_answers_every_request(model):
    srv = InferenceServer(FailingEngine(model), model_name="tiny", quiet=True)
    srv.start()
    try:
        code, reply = call(srv, "/v1/completions", OK)
        assert code == 500 and "boom" in reply["error"]["message"]
        client = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        with pytest.raises(openai.APIError, match="boom"):
            list(client.completions.create(model="tiny", prompt="a", stream=True))
    finally:
        srv.stop()


def test_bad_host_and_model(model):
    with pytest.raises(ValueError, match="host must be one of"):
        InferenceServer(Engine(model), host="0.0.0.0")
    with pytest.raises(ServeError, match="'tiny' or a checkpoint directory"):
        load_model("/no/such/dir")


def raw(server, head, body=b""):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n" + head + b"\r\n" + body
        )
        return s.recv(200)


def test_client_gone_mid_stream_is_aborted(server):
    body = json.dumps(OK | {"max_tokens": 200, "stream": True}).encode()
    steps = server.loop.engine.num_steps
    assert b"text/event-stream" in raw(
        server, b"Content-Length: %d\r\n" % len(body), body
    )
    deadline = time.monotonic() + 20
    while server.loop.engine.has_unfinished() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.loop.engine.has_unfinished()
    assert server.loop.engine.num_steps - steps < 100  # stopped well before 200 tokens
    assert raw(server, b"Content-Length: abc\r\n").startswith(b"HTTP/1.0 400")
    assert raw(server, b"Content-Length: 9999999\r\n").startswith(b"HTTP/1.0 413")


def test_serve_flags_are_checked_before_serving():
    parser = argparse.ArgumentParser()
    add_serve(parser)
    args = parser.parse_args([])
    assert (args.host, args.port, args.model, args.max_num_seqs) == (
        "127.0.0.1",
        8000,
        "tiny",
        8,
    )
    assert args.no_prefix_caching is False
    assert parser.parse_args(["--no-prefix-caching"]).no_prefix_caching is True
    with pytest.raises(ValueError, match="allow_remote"):
        run_serve(parser.parse_args(["--host", "0.0.0.0"]))
    with pytest.raises(ValueError, match="--port must be <= 65535"):
        run_serve(parser.parse_args(["--port", "70000"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--num-blocks", "0"])


# Issue: bad input gets a 4xx, never a dropped connection or a 500; each bad request
# (raw HTTP, as a browser or a script sends it) is followed by a good one (the openai
# client), whose text must still be greedy's.
SURROGATE_PROMPT = b'{"model": "tiny", "prompt": "a\\ud800b"}'  # valid JSON escape
SURROGATE_CHAT = (
    b'{"model": "tiny", "messages": [{"role": "user", "content": "\\udfff"}]}'
)


def post(server, body, headers, path="/v1/completions", timeout=30):
    """A raw POST; the status, the headers and the JSON answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        head = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path.encode(), head))
        s.sendall(body)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), fields, json.loads(payload)


def good(client, model):
    r = client.completions.create(
        model="tiny", prompt="ok", max_tokens=3, temperature=0
    )
    assert r.choices[0].text == expected(model, "ok", 3)


def sized(body, kind="application/json"):
    return [("Content-Type", kind), ("Content-Length", str(len(body)))]


@pytest.mark.parametrize(
    ("body", "headers", "status", "param", "match"),
    [
        (SURROGATE_PROMPT, None, 400, "prompt", "lone surrogate"),
        (SURROGATE_CHAT, None, 400, "messages", "lone surrogate"),
        (
            json.dumps(OK | {"seed": 2**64}).encode(),
            None,
            400,
            "seed",
            "64 bits",
        ),
        (
            json.dumps(OK | {"seed": -(2**63) - 1}).encode(),
            None,
            400,
            "seed",
            "64 bits",
        ),
        (json.dumps(OK).encode(), "text/plain", 415, None, "application/json"),
        (json.dumps(OK).encode(), "", 415, None, "application/json"),
    ],
)
def test_bad_input_then_good(
    server, client, model, body, headers, status, param, match
):
    path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
    kind = "application/json" if headers is None else headers
    hdrs = sized(body, kind) if kind else [("Content-Length", str(len(body)))]
    code, _, reply = post(server, body, hdrs, path)
    assert (code, reply["error"]["param"]) == (status, param)
    assert match in reply["error"]["message"]
    good(client, model)


def test_seed_is_checked_before_queueing(model):
    from aiinfra.infer.engine.core import SamplingParams

    with pytest.raises(ValueError, match="seed must be None or an int"):
        SamplingParams(seed=2**64)
    assert SamplingParams(seed=2**64 - 1).seed == 2**64 - 1  # torch takes it


def test_short_body_times_out_and_the_server_still_serves(model):
    srv = InferenceServer(
        Engine(model), model_name="tiny", quiet=True, read_timeout=0.5
    )
    srv.start()
    try:
        client = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        start = time.monotonic()
        code, _, reply = post(srv, b'{"model"', sized(b"x" * 100), timeout=10)
        assert code == 408 and "Content-Length" in reply["error"]["message"]
        assert time.monotonic() - start < 5  # the worker did not hang
        good(client, model)
        assert call(srv, "/v1/completions", OK)[0] == 200
    finally:
        srv.stop()


def test_api_key_and_served_model_name(model):
    srv = InferenceServer(
        Engine(model), model_name="my-model", quiet=True, api_key="sekret"
    )
    srv.start()
    try:
        body = json.dumps(OK | {"model": "my-model"}).encode()
        for auth in ([], [("Authorization", "Bearer wrong")], [("Authorization", "x")]):
            code, fields, reply = post(srv, body, sized(body) + auth)
            assert code == 401 and fields["WWW-Authenticate"] == "Bearer"
            assert "API key" in reply["error"]["message"]
        client = openai.OpenAI(base_url=srv.base_url, api_key="sekret", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["my-model"]
        r = client.completions.create(
            model="my-model", prompt="ok", max_tokens=3, temperature=0
        )
        assert r.choices[0].text == expected(model, "ok", 3)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=srv.base_url, api_key="nope", max_retries=0
            ).models.list()
    finally:
        srv.stop()


def test_chat_runs_to_the_end_of_the_context_by_default(server, client, model):
    messages = [{"role": "user", "content": "hi"}]
    r = client.chat.completions.create(model="tiny", messages=messages, temperature=0)
    template = "<|user|>\nhi\n<|assistant|>\n"
    left = model.config.max_seq_len - len(template)  # OpenAI: to the context's end
    assert (r.usage.completion_tokens, r.choices[0].finish_reason) == (left, "length")
    r = client.completions.create(model="tiny", prompt="hi")
    assert r.usage.completion_tokens == 16  # completions keep OpenAI's 16


def test_a_full_queue_answers_503_with_retry_after(model):
    srv = InferenceServer(Engine(model), model_name="tiny", quiet=True, max_pending=1)
    srv.start()
    try:
        assert srv.admit()  # take the one place
        body = json.dumps(OK).encode()
        code, fields, reply = post(srv, body, sized(body))
        assert (code, fields["Retry-After"]) == (503, "1")
        assert "capacity" in reply["error"]["message"]
        srv.release()
        assert call(srv, "/v1/completions", OK)[0] == 200
        assert srv.num_refused == 1
    finally:
        srv.stop()
