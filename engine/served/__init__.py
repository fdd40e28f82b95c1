"""A model behind an OpenAI-compatible server (vLLM, llama.cpp), in the order data flows: HTTP with one
deadline a request and bounded bodies (transport.py); the client with its checks and one-line errors
(client.py); the sampler settings in each server's spelling and those it ignores (samplers.py); whether its
numbers are raw or processed log-probabilities (numbers.py); a decode traced from the server's top-N
(decode.py); and teacher forcing from the prompt's log-probabilities (teacher.py)."""
from .client import ServedError, Server, TopN, check_url

__all__ = ["ServedError", "Server", "TopN", "check_url"]
