"""Helpers the served-model tests share."""
from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# llama.cpp computes in quantised arithmetic (4-bit weights, 8-bit activations), transformers in float32 on
# the same weights de-quantised: their log-probabilities agree to this many nats. Measured here: 0.006 on
# " Paris", 0.064 on " the", 0.17 on a second newline, 0.36 on "." eight tokens into a reference.
QUANTISED_CLOSE = 0.5
