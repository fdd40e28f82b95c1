"""Helpers the served-model tests share."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

START_WAIT_S = 300      # a loaded 2-core machine can take minutes to map the file; not a time limit on the code


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# llama.cpp computes in quantised arithmetic (4-bit weights, 8-bit activations), transformers in float32 on
# the same weights de-quantised: their log-probabilities agree to this many nats. Measured here: 0.006 on
# " Paris", 0.064 on " the", 0.17 on a second newline, 0.36 on "." eight tokens into a reference.
QUANTISED_CLOSE = 0.5


class ServerFailed(RuntimeError):
    """The llama.cpp server exited, or did not answer, while starting."""


@contextlib.contextmanager
def running_llama_server(n_ctx: int = 512):
    """A llama.cpp server (llama-cpp-python's) on the bundled SmolLM2 GGUF at 127.0.0.1 on a free port; yields
    its base URL and stops it afterwards. A small context keeps its per-request work small: it turns the
    logits of every context row into log-probabilities for each answer."""
    from engine.model import bundled_gguf_path

    port = free_port()
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"decodescope-llama-{port}.log"), "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2", "--verbose", "false"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_WAIT_S
    try:
        while True:
            if process.poll() is not None:
                raise ServerFailed(f"the llama.cpp server exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerFailed(f"the llama.cpp server did not start within {START_WAIT_S} s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
