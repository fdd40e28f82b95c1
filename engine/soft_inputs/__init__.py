"""Feeding back more than a token id, as 2025's published code forms the vector, measured on a real model.

Four rules beside the id, p^T E and Gumbel-softmax of engine.decoding.decoder and engine.inside.embedding:
  - Soft Thinking: the chain (temperature, top-k, top-p, min-p), then the top `soft_top_k` renormalised,
    sum w_i E[i] fed and the argmax emitted; optional Gumbel-softmax and Dirichlet noise; Cold Stop on the
    entropy switches the run to ids;
  - Mixture of Inputs: an id y is sampled as usual, and a blend of y with the top-20 prior is fed;
  - the hidden state (Coconut without its training): the last position's final hidden state fed as is;
  - the multi-token mean (CoT2's sampling): the mean embedding of K ids drawn from p.
Each keeps one sequence and one KV row per step, like greedy decoding.

The modules, in the order data flows:
  rules.py     the rules themselves, on tensors: weights over token ids, the fed vector, Cold Stop, cost counts;
  decoder.py   `SoftInputDecoder`, a Decoder whose choice is a rule; it records per step the fed ids and
               weights, the emitted id and the measures (measures.py);
  measures.py  one step's measures: nearest tokens, cosine and norm against the emitted token, participation;
  lanes.py     several rules on one prompt and seed, stepped in turn so each can be shown as it runs;
  probes.py    on demand at one step: is the mixture read as its top token, and the gap between the next
               distribution of the mixture and the mixture of next distributions;
  scores.py    after a run: perplexity of the emitted text by one teacher-forced pass, repetition, cost;
  cli.py       the `decode` flags of the rules and the table of what each step fed (no PyTorch).
No Streamlit; records are frozen dataclasses of plain values.
"""
