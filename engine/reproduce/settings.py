"""What one study of reproducibility runs: the batch sizes, how the batch is filled, how the prompt is prefilled,
the precision, the batch-invariant switch, greedy or seeded sampling. Checked whole before any model loads, each
bad value named in one sentence."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import ConfigError, quoted

FILLS = ("same", "padded")
DTYPES = ("float32", "bfloat16")
MAX_BATCH = 64               # rows in one batch: the prompt and up to 63 fillers
MAX_BATCH_SIZES = 8          # batch sizes in one study
MAX_NEW_TOKENS = 256         # every run decodes this many tokens at most (each batch size is one more run)
MAX_PROMPT_TOKENS = 512      # the prompt is repeated in every row of every batch
MAX_CHUNK = 2048
MAX_VERIFY = 16              # tokens scored in one verify pass
MAX_TEMPERATURE = 100.0
MIN_TEMPERATURE = 1e-3


def parse_prefill(text: str) -> int:
    """'whole' -> 0 (the prompt in one pass), 'stepwise' -> 1 (one token a pass), 'chunked:C' -> C; a ConfigError
    naming the value otherwise."""
    value = str(text).strip()
    if value == "whole":
        return 0
    if value == "stepwise":
        return 1
    kind, _, size = value.partition(":")
    if kind == "chunked" and size.isdigit() and size.isascii():
        chunk = int(size)
        if 1 <= chunk <= MAX_CHUNK:
            return chunk
        raise ConfigError("prefill", f"prefill: the chunk size must be between 1 and {MAX_CHUNK}, got {chunk}")
    raise ConfigError("prefill", f"prefill: expected whole, stepwise or chunked:C (C tokens a pass), got "
                                 f"{quoted(text)}")


def prefill_name(chunk: int) -> str:
    return "whole" if chunk == 0 else "stepwise" if chunk == 1 else f"chunked:{chunk}"


def parse_batch_sizes(text: str) -> tuple:
    """'1,2,4,8' -> (1, 2, 4, 8): whole numbers between 1 and MAX_BATCH, at most MAX_BATCH_SIZES, no repeats."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(not p for p in parts):
        raise ConfigError("batch_sizes", f"batch sizes: expected whole numbers separated by commas, such as "
                                         f"1,2,4,8; got {quoted(text)}")
    sizes = []
    for part in parts:
        if not (part.isascii() and part.isdigit()):
            raise ConfigError("batch_sizes", f"batch sizes: {quoted(part)} is not a whole number")
        sizes.append(int(part))
    return check_batch_sizes(sizes)


def check_batch_sizes(sizes) -> tuple:
    sizes = tuple(sizes)
    if not sizes:
        raise ConfigError("batch_sizes", "batch sizes: give at least one, such as 1,2,4,8")
    if len(sizes) > MAX_BATCH_SIZES:
        raise ConfigError("batch_sizes", f"batch sizes: at most {MAX_BATCH_SIZES}, got {len(sizes)}")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_BATCH:
            raise ConfigError("batch_sizes", f"batch sizes: each must be between 1 and {MAX_BATCH}, got "
                                             f"{quoted(size)}")
    if len(set(sizes)) != len(sizes):
        raise ConfigError("batch_sizes", "batch sizes: a size is named twice")
    return sizes


@dataclass(frozen=True)
class StudySettings:
    """One study: the prompt decoded alone (the reference, whole prefill, one-token steps) and then once per batch
    size with these settings. temperature 0 is greedy; above 0, seeded sampling by the Gumbel-max trick."""
    max_new_tokens: int = 32
    batch_sizes: tuple = (1, 2, 4, 8)
    fill: str = "same"
    prefill: str = "whole"
    dtype: str = "float32"
    invariant: bool = False
    verify: int = 0                 # K > 0: one more run, alone, in K-token verify passes
    temperature: float = 0.0
    seed: int = 0
    chat: bool = False

    @property
    def chunk(self) -> int:
        return parse_prefill(self.prefill)

    def replace(self, **changes) -> "StudySettings":
        return replace(self, **changes)

    def validate(self) -> "StudySettings":
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise ConfigError("max_new_tokens", f"max new tokens: must be between 1 and {MAX_NEW_TOKENS}, got "
                                                f"{quoted(self.max_new_tokens)}")
        check_batch_sizes(self.batch_sizes)
        if self.fill not in FILLS:
            raise ConfigError("fill", f"fill: expected same or padded, got {quoted(self.fill)}")
        parse_prefill(self.prefill)
        if self.dtype not in DTYPES:
            raise ConfigError("dtype", f"dtype: expected float32 or bfloat16, got {quoted(self.dtype)}")
        if isinstance(self.verify, bool) or not isinstance(self.verify, int) or not 0 <= self.verify <= MAX_VERIFY:
            raise ConfigError("verify", f"verify: must be between 0 (off) and {MAX_VERIFY} tokens a pass, got "
                                        f"{quoted(self.verify)}")
        t = self.temperature
        if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t) or t < 0 \
                or (t > 0 and not MIN_TEMPERATURE <= t <= MAX_TEMPERATURE):
            raise ConfigError("temperature", f"temperature: must be 0 (greedy) or between {MIN_TEMPERATURE:g} and "
                                             f"{MAX_TEMPERATURE:g}, got {quoted(t)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError("seed", f"seed: must be a whole number from 0 to 2^63 - 1, got {quoted(self.seed)}")
        return self
