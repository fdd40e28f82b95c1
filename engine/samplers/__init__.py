"""Samplers: how one step's logits become the distribution a token is drawn from, in each engine's order.

In the order data flows through them:
chain.py    a stage written after another engine's rules, and the state it carries from step to step;
llama.py    llama.cpp's samplers (penalties, DRY, top-nσ, XTC, mirostat, ...) as logits processors;
vllm.py     vLLM's V1 sampler's processors (its penalties count only the output);
order.py    the chain in transformers', llama.cpp's or vLLM's order, built from a DecodeConfig;
order_gap.py  where the same settings in different orders differ most in probability, not only in tokens kept;
shaping.py  the rule every decode uses: one step's logits through that chain;
stages.py   the same chain one stage at a time, with what each stage kept and dropped (the stage view).
"""
