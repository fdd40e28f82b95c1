"""Decoding: one forward pass per step, a strategy picks the next token(s), every step recorded.

In the order data flows through them:
kv.py       what the real KV cache holds, and what a shared-prefix cache would hold;
record.py   one step's tensors turned into plain records (candidates, fed-back vector, KV rows);
prefill.py  a long prompt read in parts, each a pass over the cache the parts before it left (and watched);
runner.py   the skeleton every decode shares: prefill, a pass per step, records, the trace;
decoder.py  one sequence: greedy, sampling, the expected embedding, Gumbel-softmax;
beam.py     beam search as transformers runs it, with every expansion recorded;
shared_prefix.py  many rows continuing one prompt over a single copy of its keys and values;
lanes.py    several single-sequence decodes of one prompt in one batch;
stepper.py  Step by step's state: decodes in progress, a cursor and branches;
rerank.py   a recorded beam search re-ranked under another length penalty, without decoding.
engine/strategies.py maps a DecodeConfig to the runner here (or speculative's).
"""
