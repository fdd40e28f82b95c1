"""The Interview page's follow-up chain on reproducibility: why temperature 0 is not reproducible on a server,
what batch invariance is and costs, whether greedy speculative decoding is bitwise lossless, and why
deterministic is not correct. Each answer ends with a link that opens "Same prompt, another answer" on the
settings that show it."""
from __future__ import annotations

from ui.interview_chain import chain_card

# question -> the page's settings that demonstrate its answer
DEMOS = (
    {"rp_sizes": "1,2,4,8", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "bfloat16", "rp_invariant": "0",
     "rp_verify": "0", "max_new_tokens": "24"},
    {"rp_sizes": "1,2,4,8", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "float32", "rp_invariant": "1",
     "rp_verify": "0", "max_new_tokens": "12"},
    {"rp_sizes": "1", "rp_fill": "same", "rp_prefill": "whole", "rp_dtype": "float32", "rp_invariant": "0",
     "rp_verify": "4", "max_new_tokens": "16"},
    {"rp_sizes": "1,2,4", "rp_fill": "padded", "rp_prefill": "chunked", "rp_chunk": "4", "rp_dtype": "bfloat16",
     "rp_invariant": "1", "rp_verify": "0", "max_new_tokens": "24"},
)


def reproduce_chain(demo_params) -> None:
    """The card (ui.interview_chain): questions one after the other, each answer on demand with its demo link.
    demo_params: the Interview page's function that turns a page's settings into a link's query string."""
    chain_card("rp", "reproduce", DEMOS, demo_params)
