"""DecodeConfig: every knob of one decode, frozen so a trace can carry it and replay it.

The field names match the CLI flags (`--top-k` is `top_k`). `validate` checks the
ranges before any model work starts, raising ConfigError that names the parameter.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

from .errors import ConfigError, quoted

# the feed-back rules of engine.soft_inputs: Soft Thinking, Mixture of Inputs, the hidden state, the multi-token mean
SOFT_INPUT_STRATEGIES = ("soft-thinking", "mixture-of-inputs", "hidden-state", "multi-token-mean")
STRATEGIES = ("greedy", "sample", "beam", "soft", "gumbel", "speculative", *SOFT_INPUT_STRATEGIES)
# the stages a distribution passes through, in transformers' order (the recorded stage view, the trace check
# and the page's labels all read this)
# (llama.cpp's and vLLM's "penalties" stage applies repetition, frequency and presence together; dynamic temperature is
# the temperature stage with a range; mirostat truncates and carries μ)
STAGE_NAMES = ("repetition_penalty", "no_repeat_ngram", "penalties", "dry", "grammar", "temperature", "top_h",
               "top_n_sigma", "top_k", "typical_p", "top_p", "min_p", "xtc", "epsilon", "eta", "mirostat")
# the state a stateful stage records at each step (engine.trace.Stage.state), each entry's bounds
STAGE_STATE_KEYS = {"mirostat": {"mu": (-1e6, 1e6), "mu_next": (-1e6, 1e6)},
                    "xtc": {"draw": (0.0, 1.0), "fired": None},
                    "dry": {"run": (0, 1 << 20), "penalised": (0, 1 << 21)},
                    "temperature": {"temperature": (0.0, 1e6)},
                    "penalties": {"window": (0, 1 << 21)}}
# temperature, top-k, top-p and min-p shape these
WARPED_STRATEGIES = ("sample", "soft", "gumbel", "soft-thinking", "mixture-of-inputs", "multi-token-mean")
FEEDBACK_STRATEGIES = ("soft", "gumbel", *SOFT_INPUT_STRATEGIES)     # feed back a vector, not a token id
MAX_NEW_TOKENS = 1024
MAX_VOCAB = 2**20        # 1,048,576 tokens: the largest real vocabularies hold about 262,000; a file may claim no more
MAX_MODEL_NAME_BYTES = 255   # a model or draft model name: no longer than a file name may be
MAX_BEAMS = 32
MAX_TOP_N = 200
# a seed is 0..2**63 - 1 everywhere it is read (a flag, a link, a saved file): torch.Generator takes a signed 64-bit
# number, and the page's own widget offers a smaller range (0..2**31 - 1) inside this one
MAX_SEED = 2**63 - 1
GRAMMAR_KINDS = ("json_schema", "regex", "choices", "lark")
GRAMMAR_STRATEGIES = ("greedy", "sample", "beam")   # one token per step: the grammar's matcher can follow it
MAX_GRAMMAR_BYTES = 32_000                          # a bigger schema takes seconds to compile, per request
MAX_CHOICES = 256
SAMPLER_ORDERS = ("transformers", "llama.cpp", "vllm")   # each engine's default chain, with its rules for each name
# llama.cpp's sampler names, as its `--samplers` list writes them (a custom order, separated by ';')
LLAMA_CPP_SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")
MAX_SAMPLER_REPEATS = 2       # a --samplers list names each sampler at most this often (18 stages at most)
# the settings only some engines have: a config that sets one in another engine's order is refused, naming it
ENGINE_ONLY = {
    "typical_p": ("transformers", "llama.cpp"), "epsilon_cutoff": ("transformers",), "eta_cutoff": ("transformers",),
    "top_h": ("transformers",), "no_repeat_ngram_size": ("transformers",),
    "presence_penalty": ("llama.cpp", "vllm"), "frequency_penalty": ("llama.cpp", "vllm"),
    "dry_multiplier": ("llama.cpp",), "top_n_sigma": ("llama.cpp",), "xtc_probability": ("llama.cpp",),
    "dynatemp_range": ("llama.cpp",), "mirostat": ("llama.cpp",), "samplers": ("llama.cpp",),
}
DRY_BREAKERS = '["\\n", ":", "\\"", "*"]'       # llama.cpp's default DRY sequence breakers, as a JSON list
MAX_PENALTY_WINDOW = 1 << 20                      # penalty_last_n, dry_penalty_last_n: -1 = the whole context
MAX_DRAFT_TOKENS = 16
DRAFT_KINDS = ("early-exit", "prompt-lookup", "model")
VERIFY_MODES = ("greedy", "sample")     # how speculative decoding's target checks a draft
DEVICES = ("auto", "cpu", "cuda", "mps")                  # where a model runs (auto: a GPU when PyTorch sees one)
DTYPES = ("auto", "float32", "bfloat16", "float16")       # its precision (auto: by device)
MAX_NGRAM = 8
# whole answers (engine/answers): the continuation tree's and the samples' limits
MAX_ANSWER_DEPTH = 64       # tokens an answer may have
MAX_TREE_BUDGET = 5000      # expansions: rows of forward passes
MAX_TREE_BRANCH = 64        # children kept per node
MAX_TREE_BATCH = 64         # prefixes expanded by one forward pass
MAX_ANSWER_SAMPLES = 256
MBR_UTILITIES = ("exact", "text", "chrf", "edit")   # agreement's utilities (engine/answers/agreement.py)
DEFAULT_MBR_CANDIDATES = 16
MAX_MBR_CANDIDATES = 64
MIN_SCALE, MAX_SCALE = 1e-6, 1e6   # temperature, tau, repetition penalty: float32 logits scaled stay finite
MAX_LENGTH_PENALTY = 100.0          # 512 ** 100 is still a float
MAX_MOI_BETA = 1e6                  # mixture-of-inputs' beta: larger finite values are plain sampling to 6 digits;
                                    # inf is plain sampling exactly
MAX_MTM_K = 1024                    # multi-token-mean: ids drawn per step
MAX_COLD_STOP_STEPS = 1 << 20       # Cold Stop's L (the published runs use 256 to 1,024)


def seed_problem(seed) -> str:
    """Why `seed` is not a seed (after the name of whatever gave it), or '' when it is one."""
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED:
        return ""
    return f"must be a whole number from 0 to 2**63 - 1 ({MAX_SEED:,}), got {str(seed)[:40]}"


@dataclass(frozen=True)
class DecodeConfig:
    strategy: str = "greedy"          # one of STRATEGIES
    max_new_tokens: int = 32          # tokens to generate (1..1024)
    temperature: float = 1.0          # divides logits (sample, soft, gumbel)
    top_k: int = 0                    # keep the k most likely tokens; 0 = off
    top_p: float = 1.0                # keep the smallest set with this much mass; 1 = off
    min_p: float = 0.0                # drop tokens below min_p * p(top token); 0 = off
    repetition_penalty: float = 1.0   # >1 discourages tokens already in the context
    num_beams: int = 4                # beam width (beam)
    length_penalty: float = 1.0       # score = cum_logprob / length ** length_penalty
    early_stopping: bool = False      # stop once num_beams hypotheses are finished
    num_return_sequences: int = 1     # finished beams to return
    tau: float = 1.0                  # Gumbel-softmax temperature
    hard: bool = False                # straight-through: feed back the one-hot
    seed: int = 0                     # seeds the torch.Generator of every random draw
    top_n: int = 20                   # candidates recorded per step
    chat: bool = False                # wrap the prompt in the tokenizer's chat template
    grammar_kind: str = ""            # constrained decoding: json_schema | regex | choices | lark; "" = off
    grammar: str = ""                 # the schema, pattern, JSON list of choices or Lark grammar
    sampler_order: str = "transformers"  # or llama.cpp: top-k, top-p, min-p, then temperature
    # ---- the feed-back rules of engine.soft_inputs ---------------------------------------------------------
    soft_top_k: int = 10              # soft-thinking: the k heaviest tokens after the chain, renormalised (max_topk)
    cold_stop: str = ""               # soft-thinking: TAU:L, ids once L steps in a row had entropy < TAU nats; "" off
    soft_gumbel: float = 0.0          # soft-thinking: Gumbel-softmax temperature on the k weights; 0 = off
    soft_dirichlet: float = 0.0       # soft-thinking: Dirichlet noise, weights ~ Dir(alpha * p); 0 = off
    moi_beta: float = 1.0             # mixture-of-inputs: how much the sampled id outweighs p; inf = plain sampling
    mtm_k: int = 4                    # multi-token-mean: ids drawn from p per step, their embeddings averaged
    draft: str = ""                   # speculative: early-exit:L | prompt-lookup:N | model:NAME
    draft_tokens: int = 4             # speculative: tokens drafted per round (K, fixed)
    verify: str = "greedy"            # speculative: greedy (keep what the target would pick) | sample
    # ---- the samplers only some engines have (ENGINE_ONLY says which); each default is off -------------------
    typical_p: float = 1.0            # locally typical sampling: keep tokens whose surprise is near the entropy
    epsilon_cutoff: float = 0.0       # ε-sampling: drop tokens below ε (transformers)
    eta_cutoff: float = 0.0           # η-sampling: drop tokens below min(η, sqrt(η)·exp(-H)) (transformers)
    top_h: float = 0.0                # top-h: the smallest set whose entropy stays within top_h · H (transformers)
    no_repeat_ngram_size: int = 0     # forbid a token that would repeat an n-gram of the context (transformers)
    presence_penalty: float = 0.0     # logit -= presence when the token occurred (llama.cpp's window, vLLM's output)
    frequency_penalty: float = 0.0    # logit -= frequency · count
    penalty_last_n: int = 64          # llama.cpp: the penalties see the last n tokens; -1 = all, 0 = none
    dry_multiplier: float = 0.0       # DRY (llama.cpp): penalise the token that extends a repeated run; 0 = off
    dry_base: float = 1.75            # penalty = multiplier · base ** (run length - allowed length)
    dry_allowed_length: int = 2       # runs this long are not penalised
    dry_penalty_last_n: int = -1      # tokens DRY looks back over; -1 = the whole context
    dry_sequence_breakers: str = DRY_BREAKERS   # a JSON list of strings a repeated run may not cross
    top_n_sigma: float = 0.0          # top-nσ (llama.cpp): keep logits within n standard deviations of the top
    xtc_probability: float = 0.0      # XTC (llama.cpp): the chance, per step, that it removes the top choices
    xtc_threshold: float = 0.1        # XTC removes every token at or above it but the least likely of them
    dynatemp_range: float = 0.0       # dynamic temperature (llama.cpp): temperature ± range, by the entropy
    dynatemp_exponent: float = 1.0
    mirostat: int = 0                 # llama.cpp: 0 off, 1 or 2 (replaces the chain with temperature → mirostat)
    mirostat_tau: float = 5.0         # target surprise, in bits
    mirostat_eta: float = 0.1         # learning rate of μ
    samplers: str = ""                # llama.cpp's --samplers list, e.g. "top_k;min_p;temperature"; "" = default

    def replace(self, **changes) -> "DecodeConfig":
        return dataclasses.replace(self, **changes)

    def steps_key(self) -> tuple:
        """The settings that decide which steps a decode takes, one step at a time; for one sequence,
        the length is left out (a longer run takes the same first steps). Equal keys, equal steps."""
        if self.strategy == "beam":
            return dataclasses.astuple(self)     # the max length enters the beam scores' stopping test
        key = (self.strategy, self.chat, self.top_n, self.repetition_penalty, self.grammar_kind, self.grammar)
        if self.strategy == "speculative":
            key += (self.draft, self.draft_tokens, self.verify)
        key += self.sampler_key()
        if self.warped:
            key += (self.temperature, self.top_k, self.top_p, self.min_p, self.seed, self.sampler_order)
        if self.strategy == "gumbel":
            key += (self.tau, self.hard)
        if self.strategy in SOFT_INPUT_STRATEGIES:
            key += (self.soft_top_k, self.cold_stop, self.soft_gumbel, self.soft_dirichlet, self.moi_beta, self.mtm_k)
        return key

    def sampler_key(self) -> tuple:
        """The engine-specific sampler settings (the fields after `verify`), in field order."""
        names = [f.name for f in dataclasses.fields(self)]
        return tuple(getattr(self, name) for name in names[names.index("verify") + 1:])

    @property
    def warped(self) -> bool:
        """Whether temperature, top-k, top-p and min-p shape this decode's distributions."""
        return self.strategy in WARPED_STRATEGIES or (self.strategy == "speculative" and self.verify == "sample")

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        if values["moi_beta"] == math.inf:      # JSON has no infinity; from_dict reads "inf" back as one
            values["moi_beta"] = "inf"
        return values

    @classmethod
    def from_dict(cls, values: dict) -> "DecodeConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ConfigError(str(sorted(unknown)[0])[:40], f"unknown setting {quoted(sorted(unknown)[0])}")
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}
        clean = {}
        for key, value in values.items():
            kind = kinds[key]
            try:
                if kind == "bool":
                    if not isinstance(value, bool):
                        raise TypeError
                    clean[key] = value
                elif kind == "int":
                    if isinstance(value, bool):
                        raise TypeError
                    if not isinstance(value, int):      # 3.0 is fine; compare exactly, big seeds lose bits in float
                        if float(value) != int(value):
                            raise TypeError
                    clean[key] = int(value)
                    if abs(clean[key]) > 2**63 - 1:     # 1e300 is a whole number too; no setting passes 64 bits
                        raise ValueError
                elif kind == "float":
                    if isinstance(value, bool):
                        raise TypeError
                    clean[key] = float(value)
                else:
                    clean[key] = str(value)
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(key, f"{key} must be a {kind}, got {quoted(value)}") from None
        return cls(**clean)

    def validate(self, vocab_size: int | None = None) -> "DecodeConfig":
        """Raise ConfigError naming the first parameter out of range; return self."""
        def bad(param, message, reason="setting", **values):
            raise ConfigError(param, f"{param}: {message}", reason, name=param, detail=message, **values)

        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value) and not (f.name == "moi_beta"
                                                                                and value == math.inf):
                bad(f.name, f"must be a finite number, got {value}")
        if self.strategy not in STRATEGIES:
            bad("strategy", f"unknown strategy {quoted(self.strategy)}; choose one of {', '.join(STRATEGIES)}")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            bad("max_new_tokens", f"must be between 1 and {MAX_NEW_TOKENS}, got {self.max_new_tokens}")
        if self.temperature <= 0:
            bad("temperature",
                f"must be greater than 0, got {self.temperature} (use the greedy strategy for temperature 0)")
        for name in ("temperature", "tau", "repetition_penalty"):    # each divides or multiplies the logits
            value = getattr(self, name)
            if value > 0 and not MIN_SCALE <= value <= MAX_SCALE:
                bad(name, f"must be between {MIN_SCALE:g} and {MAX_SCALE:g}, got {value:g} (the logits scaled by "
                          "it would overflow or vanish)")
        if abs(self.length_penalty) > MAX_LENGTH_PENALTY:
            bad("length_penalty", f"must be between -{MAX_LENGTH_PENALTY:g} and {MAX_LENGTH_PENALTY:g}, got "
                                  f"{self.length_penalty:g} (length ** it would overflow)")
        if self.top_k < 0:
            bad("top_k", f"must be 0 (off) or a positive number of tokens, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            bad("top_p", f"must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            bad("min_p", f"must be in [0, 1], got {self.min_p}")
        if self.repetition_penalty <= 0:
            bad("repetition_penalty", f"must be greater than 0, got {self.repetition_penalty}")
        if not 1 <= self.num_beams <= MAX_BEAMS:
            bad("num_beams", f"must be between 1 and {MAX_BEAMS}, got {self.num_beams}")
        if self.strategy == "beam" and not 1 <= self.num_return_sequences <= self.num_beams:
            bad("num_return_sequences",
                f"must be between 1 and num_beams ({self.num_beams}), got {self.num_return_sequences}")
        if self.tau <= 0:
            bad("tau", f"must be greater than 0, got {self.tau}")
        if not 1 <= self.top_n <= MAX_TOP_N:
            bad("top_n", f"must be between 1 and {MAX_TOP_N}, got {self.top_n}")
        if not 0 <= self.seed <= MAX_SEED:
            bad("seed", seed_problem(self.seed))
        if self.sampler_order not in SAMPLER_ORDERS:
            bad("sampler_order",
                f"unknown order '{self.sampler_order[:40]}'; choose one of {', '.join(SAMPLER_ORDERS)}")
        self._validate_samplers(bad)
        self._validate_soft_inputs(bad)
        if self.grammar_kind or self.grammar:
            if self.grammar_kind not in GRAMMAR_KINDS:
                bad("grammar_kind",
                    f"unknown kind '{self.grammar_kind[:40]}'; choose one of {', '.join(GRAMMAR_KINDS)}")
            size = len(self.grammar.encode("utf-8", "surrogatepass"))
            if not 0 < size <= MAX_GRAMMAR_BYTES:
                raise ConfigError("grammar", f"grammar: is {size:,} bytes; a grammar is 1 to {MAX_GRAMMAR_BYTES:,} "
                                             "bytes", "size", size=f"{size:,}", most=f"{MAX_GRAMMAR_BYTES:,}")
            if self.strategy not in GRAMMAR_STRATEGIES:
                bad("grammar", f"constrains {', '.join(GRAMMAR_STRATEGIES)}; '{self.strategy}' feeds back no single "
                               "token for it to follow")
        self._validate_draft(bad)
        return self

    def _validate_samplers(self, bad) -> None:
        """The engine-specific samplers: each in range, and each only in an order whose engine has it."""
        for name in ("typical_p", "top_h"):
            if not 0 <= getattr(self, name) <= 1:
                bad(name, f"must be in [0, 1], got {getattr(self, name)}")
        for name in ("epsilon_cutoff", "eta_cutoff"):
            if not 0 <= getattr(self, name) < 1:
                bad(name, f"must be in [0, 1), got {getattr(self, name)}")
        if not 0 <= self.no_repeat_ngram_size <= 64:
            bad("no_repeat_ngram_size", f"must be 0 (off) to 64 tokens, got {self.no_repeat_ngram_size}")
        for name in ("presence_penalty", "frequency_penalty"):
            if abs(getattr(self, name)) > 100:
                bad(name, f"must be between -100 and 100, got {getattr(self, name):g}")
        for name in ("penalty_last_n", "dry_penalty_last_n"):
            if not -1 <= getattr(self, name) <= MAX_PENALTY_WINDOW:
                bad(name, f"must be -1 (the whole context), 0 (off) or a number of tokens up to "
                          f"{MAX_PENALTY_WINDOW:,}, got {getattr(self, name)}")
        if not 0 <= self.dry_multiplier <= 100:
            bad("dry_multiplier", f"must be between 0 (off) and 100, got {self.dry_multiplier:g}")
        if not 1 <= self.dry_base <= 8:
            bad("dry_base", f"must be between 1 and 8, got {self.dry_base:g}")
        if not 0 <= self.dry_allowed_length <= 64:
            bad("dry_allowed_length", f"must be between 0 and 64 tokens, got {self.dry_allowed_length}")
        if not 0 <= self.top_n_sigma <= 100:
            bad("top_n_sigma", f"must be 0 (off) or a positive number of standard deviations, got {self.top_n_sigma:g}")
        if not 0 <= self.xtc_probability <= 1:
            bad("xtc_probability", f"must be in [0, 1], got {self.xtc_probability}")
        if not 0 <= self.xtc_threshold <= 1:
            bad("xtc_threshold", f"must be in [0, 1], got {self.xtc_threshold}")
        if not 0 <= self.dynatemp_range <= 100:
            bad("dynatemp_range", f"must be between 0 (off) and 100, got {self.dynatemp_range:g}")
        if not 0 < self.dynatemp_exponent <= 100:
            bad("dynatemp_exponent", f"must be in (0, 100], got {self.dynatemp_exponent:g}")
        if self.mirostat not in (0, 1, 2):
            bad("mirostat", f"must be 0 (off), 1 or 2, got {self.mirostat}")
        if self.mirostat and self.strategy not in WARPED_STRATEGIES:
            bad("mirostat", f"draws one token per step from its own truncation, so it needs a sampling strategy "
                            f"({', '.join(WARPED_STRATEGIES)}), not {self.strategy}")
        if not 0 < self.mirostat_tau <= 100:
            bad("mirostat_tau", f"must be in (0, 100] bits, got {self.mirostat_tau:g}")
        if not 0 < self.mirostat_eta <= 1:
            bad("mirostat_eta", f"must be in (0, 1], got {self.mirostat_eta:g}")
        breakers = dry_breakers(self.dry_sequence_breakers)
        if breakers is None:
            bad("dry_sequence_breakers", "must be a JSON list of at most 64 strings of 1 to 40 characters, got "
                                         f"'{str(self.dry_sequence_breakers)[:40]}'", "dry_breakers",
                got=str(self.dry_sequence_breakers)[:40])
        if self.samplers:
            names = [name.strip() for name in self.samplers.split(";")]
            unknown = [name for name in names if name not in LLAMA_CPP_SAMPLERS]
            if unknown:
                bad("samplers", f"{quoted(unknown[0])} is not one of llama.cpp's samplers "
                                f"({';'.join(LLAMA_CPP_SAMPLERS)})")
            name, times = max(Counter(names).items(), key=lambda item: item[1])
            if times > MAX_SAMPLER_REPEATS:
                bad("samplers", f"'{name}' is listed {times:,} times; a sampler may be listed at most twice "
                                f"({len(names):,} names in all)")
        neutral = DecodeConfig()
        for name, engines in ENGINE_ONLY.items():
            if getattr(self, name) != getattr(neutral, name) and self.sampler_order not in engines:
                bad(name, f"the {self.sampler_order} order has no such sampler; it is in "
                          f"{' and '.join(engines)}: choose that order (--sampler-order)")

    def _validate_soft_inputs(self, bad) -> None:
        """The feed-back rules' settings (engine.soft_inputs), each in range, whichever strategy runs."""
        if not 1 <= self.soft_top_k <= MAX_VOCAB:
            bad("soft_top_k", f"must be between 1 and {MAX_VOCAB:,} tokens, got {self.soft_top_k}")
        cold_stop_spec(self.cold_stop)
        if self.soft_gumbel != 0 and not MIN_SCALE <= self.soft_gumbel <= 100:
            bad("soft_gumbel", f"must be 0 (off) or between {MIN_SCALE:g} and 100, got {self.soft_gumbel:g}")
        if self.soft_dirichlet != 0 and not 1e-3 <= self.soft_dirichlet <= MAX_SCALE:
            bad("soft_dirichlet", f"must be 0 (off) or between 0.001 and {MAX_SCALE:g}, got {self.soft_dirichlet:g}")
        if not (0 <= self.moi_beta <= MAX_MOI_BETA or self.moi_beta == math.inf):
            bad("moi_beta", f"must be between 0 and {MAX_MOI_BETA:g}, or inf (plain sampling), got {self.moi_beta:g}")
        if not 1 <= self.mtm_k <= MAX_MTM_K:
            bad("mtm_k", f"must be between 1 and {MAX_MTM_K:,} ids, got {self.mtm_k}")
        if self.strategy == "soft-thinking" and self.sampler_order != "transformers":
            bad("sampler_order", "soft-thinking applies its published chain (temperature, top-k, top-p, min-p); "
                                 "use the transformers order")

    def _validate_draft(self, bad) -> None:
        """The speculative settings: a draft only with the speculative strategy, and one that parses."""
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            bad("draft_tokens", f"must be between 1 and {MAX_DRAFT_TOKENS}, got {self.draft_tokens}")
        if self.verify not in VERIFY_MODES:
            bad("verify", f"must be greedy or sample, got '{str(self.verify)[:40]}'")
        if self.strategy != "speculative":
            if self.draft:
                why = {"beam": "beam search keeps several sequences, and a draft is checked against one",
                       "soft": "soft decoding feeds back vectors, and a draft is a list of token ids",
                       "gumbel": "gumbel decoding feeds back vectors, and a draft is a list of token ids"}
                bad("draft", why.get(self.strategy, "a draft is checked only by the strategy speculative") +
                    "; use the strategy speculative (with verify greedy or sample)")
            return
        draft_spec(self.draft)


def dry_breakers(text: str):
    """DRY's sequence breakers from their JSON list, or None when the text is not a list of 1 to 64 short
    strings (llama.cpp's server takes the same list)."""
    import json
    try:
        value = json.loads(text) if len(str(text)) <= 4000 else None
    except ValueError:
        return None
    if not isinstance(value, list) or len(value) > 64:
        return None
    if not all(isinstance(item, str) and 1 <= len(item) <= 40 for item in value):
        return None
    return value


def check_model_name(name: str, field: str = "model") -> None:
    """A model or draft model name no longer than a file name may be (MAX_MODEL_NAME_BYTES): a longer one is no
    folder, and the file system would refuse it with an error of its own. Raises ConfigError naming `field`."""
    size = len(str(name).encode("utf-8", "surrogatepass"))
    if size > MAX_MODEL_NAME_BYTES:
        raise ConfigError(field, f"{field}: a model name of {size:,} bytes ('{str(name)[:40]}…'); a name is at most "
                                 f"{MAX_MODEL_NAME_BYTES} bytes, the longest a file name may be")


def cold_stop_spec(spec: str) -> tuple | None:
    """Soft Thinking's Cold Stop from 'TAU:L' (entropy threshold in nats, steps in a row) -> (TAU, L); None for
    "" (off). Raises ConfigError naming 'cold_stop'."""
    text = str(spec).strip()
    if not text:
        return None
    tau_text, sep, steps_text = text.partition(":")
    try:
        tau, steps = float(tau_text), int(steps_text)
    except ValueError:
        tau = steps = None
    if not sep or tau is None or not math.isfinite(tau):
        raise ConfigError("cold_stop", f"cold_stop: '{text[:40]}' is not TAU:L; write an entropy threshold in nats "
                                       "and a number of steps, e.g. 0.1:4")
    if not 0 <= tau <= 20:
        raise ConfigError("cold_stop", f"cold_stop: the threshold TAU must be between 0 and 20 nats, got {tau:g}")
    if not 1 <= steps <= MAX_COLD_STOP_STEPS:
        raise ConfigError("cold_stop", f"cold_stop: L must be between 1 and {MAX_COLD_STOP_STEPS:,} steps, got {steps}")
    return tau, steps


def draft_spec(spec: str) -> tuple:
    """(kind, value) of a draft such as 'early-exit:2' -> ('early-exit', 2), 'model:NAME' -> ('model', 'NAME');
    raises ConfigError naming 'draft'."""
    kind, _, value = str(spec).partition(":")
    kind, value = kind.strip(), value.strip()
    if not spec or kind not in DRAFT_KINDS or not value:
        raise ConfigError("draft", f"draft: '{str(spec)[:60]}' is not a draft; write early-exit:L (the first L "
                                   "layers), prompt-lookup:N (an n-gram of up to N tokens) or model:NAME")
    if kind == "model":
        check_model_name(value, "draft")
        return kind, value
    try:
        number = int(value)
    except ValueError:
        raise ConfigError("draft", f"draft: {kind} needs a whole number after the colon, got '{value[:40]}'") from None
    if kind == "early-exit" and number < 1:
        raise ConfigError("draft", f"draft: early-exit needs at least 1 layer, got {number}")
    if kind == "prompt-lookup" and not 1 <= number <= MAX_NGRAM:
        raise ConfigError("draft", f"draft: prompt-lookup matches n-grams of 1 to {MAX_NGRAM} tokens, got {number}")
    return kind, number
