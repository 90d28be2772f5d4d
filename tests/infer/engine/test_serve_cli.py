"""``aiinfra serve`` as a newcomer meets it: one-line errors, a clean stop.

Ground truth: the exit status and the stderr lines a user sees (no traceback), and
the server's answer to the ``openai`` client before it is stopped with SIGTERM.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiinfra.cli import main

openai = pytest.importorskip("openai")


def run(argv, capsys):
    code = main(["serve", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize(
    ("model", "match"),
    [
        ("/no/such/checkpoint", "does not exist"),
        ("llama-3-8b", "preset"),
        ("Llama-3-8B", "--model tiny"),
    ],
)
def test_a_model_that_cannot_be_served_is_one_line(capsys, model, match):
    code, err = run(["--model", model], capsys)
    assert code == 2 and len(err) == 1 and match in err[0]
    assert err[0].startswith("aiinfra serve: error:")


def test_an_empty_directory_and_a_busy_port_are_one_line(capsys, tmp_path):
    code, err = run(["--model", str(tmp_path)], capsys)
    assert (code, len(err)) == (2, 1) and "no config.json" in err[0]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = run(["--port", str(port)], capsys)
    assert (code, len(err)) == (2, 1)
    assert f"port {port} on 127.0.0.1 is in use" in err[0] and "--port" in err[0]


def test_start_up_says_random_and_how_to_stop_and_sigterm_stops_cleanly():
    env = os.environ | {"PYTHONPATH": str(Path(__file__).parents[3] / "reference")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiinfra.cli", "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stderr.readline()  # the start-up line
        assert "random model" in line and "Ctrl-C stops it" in line
        base_url = line.split(" at ")[1].split(";")[0]
        client = openai.OpenAI(base_url=base_url, api_key="-", max_retries=0)
        r = client.completions.create(model="tiny", prompt="a", max_tokens=2)
        assert r.usage.completion_tokens == 2
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in rest and "stopping" in rest
