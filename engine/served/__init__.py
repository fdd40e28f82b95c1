"""A model behind an OpenAI-compatible server (vLLM, llama.cpp): the client with its checks and one-line
errors (client.py), a decode traced from the server's top-N (decode.py), and teacher forcing from the
prompt's log-probabilities (teacher.py)."""
from .client import ServedError, Server, TopN, check_url

__all__ = ["ServedError", "Server", "TopN", "check_url"]
