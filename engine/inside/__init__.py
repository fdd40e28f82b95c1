"""Inside the model: what is fed back, what each layer would say, what the cache holds.

embedding.py  feeding back e = pᵀE (or a Gumbel-softmax sample) instead of a token id, and its cost;
teacher.py    teacher forcing vs free running, and scheduled sampling (exposure bias);
lens.py       the logit lens: the next-token candidates read out of every layer;
kv_trace.py   each beam's KV cache after every step, rebuilt from a trace alone.
"""
