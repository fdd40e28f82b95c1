"""The command line's sampler settings: one flag per engine-specific sampler, the order of the chain, and the
lines `--stages` prints for each stage (its label, and the state a stateful stage carried at that step).

Each flag is a DecodeConfig field (`--typical-p` is `typical_p`); DecodeConfig.validate checks the ranges and
refuses a setting the chosen order's engine does not have. The error then names the flag as typed.
"""
from __future__ import annotations

from engine.config import ENGINE_ONLY, LLAMA_CPP_SAMPLERS, SAMPLER_ORDERS, DecodeConfig
from engine.errors import ConfigError

ORDER_WORDS = {"transformers": "transformers'", "llama.cpp": "llama.cpp's", "vllm": "vLLM's"}

# (field, metavar, help): the engines that have a setting are added to its help from ENGINE_ONLY
SAMPLER_FLAGS = (
    ("typical_p", "P", "locally typical sampling: keep the tokens whose surprise is closest to the entropy, up to "
                       "mass P (1: off)"),
    ("epsilon_cutoff", "E", "epsilon-sampling: drop tokens less likely than E (0: off)"),
    ("eta_cutoff", "E", "eta-sampling: drop tokens less likely than min(E, sqrt(E) * exp(-entropy)) (0: off)"),
    ("top_h", "H", "top-h: keep the smallest set of likely tokens whose entropy stays within H times the "
                   "distribution's (0: off)"),
    ("no_repeat_ngram_size", "N", "forbid a token that would repeat an N-gram already in the text (0: off)"),
    ("presence_penalty", "A", "subtract A from the logit of every token seen in the penalty window (0: off)"),
    ("frequency_penalty", "A", "subtract A times its count from the logit of every token seen in the window (0: off)"),
    ("penalty_last_n", "N", "the repetition, presence and frequency penalties see the last N tokens "
                            "(-1: the whole context, 0: none)"),
    ("dry_multiplier", "M", "DRY: penalise the token that would extend a repeated run; M scales the penalty (0: off)"),
    ("dry_base", "B", "DRY: the penalty grows as B ** (run length - allowed length)"),
    ("dry_allowed_length", "N", "DRY: repeated runs this long go unpunished"),
    ("dry_penalty_last_n", "N", "DRY: tokens it looks back over (-1: the whole context)"),
    ("dry_sequence_breakers", "JSON", "DRY: a JSON list of strings a repeated run may not cross"),
    ("top_n_sigma", "N", "top-n-sigma: keep the logits within N standard deviations of the top one (0: off)"),
    ("xtc_probability", "P", "XTC: the chance, each step, that it removes the top choices (0: off)"),
    ("xtc_threshold", "T", "XTC: it removes every token at least T likely except the least likely of them"),
    ("dynatemp_range", "R", "dynamic temperature: the temperature moves within T +- R with the entropy (0: off)"),
    ("dynatemp_exponent", "X", "dynamic temperature: how sharply it follows the entropy"),
    ("mirostat", "V", "mirostat version 1 or 2 (0: off); replaces the chain with temperature, then mirostat"),
    ("mirostat_tau", "TAU", "mirostat: the surprise it aims at, in bits"),
    ("mirostat_eta", "ETA", "mirostat: how fast mu follows the surprise it measures"),
    ("samplers", "LIST", "a custom order of llama.cpp's chain, ';'-separated, from " + ";".join(LLAMA_CPP_SAMPLERS)
                         + " (default: %(default)r, its own order)"),
)
FLAGS = {name: "--" + name.replace("_", "-") for name, _, _ in SAMPLER_FLAGS}
FLAGS["sampler_order"] = "--sampler-order"

# the stages' names as the table prints them
STAGE_LABELS = {"repetition_penalty": "penalty", "no_repeat_ngram": "no-repeat-ngram", "penalties": "penalties",
                "dry": "DRY", "grammar": "grammar", "temperature": "temperature", "top_h": "top-h",
                "top_n_sigma": "top-n-sigma", "top_k": "top-k", "typical_p": "typical-p", "top_p": "top-p",
                "min_p": "min-p", "xtc": "XTC >=", "epsilon": "epsilon", "eta": "eta", "mirostat": "mirostat tau"}
# the state a stage records (engine.trace.Stage.state), as the table names it
STATE_LABELS = {"mu": "mu", "mu_next": "mu next", "draw": "draw", "fired": "fired", "run": "run",
                "penalised": "tokens penalised", "temperature": "temperature", "window": "window"}


def add_sampler_arguments(parser) -> None:
    """The order of the chain and every engine-specific sampler's flag, defaults from DecodeConfig."""
    d = DecodeConfig()
    parser.add_argument("--sampler-order", default=d.sampler_order, choices=SAMPLER_ORDERS,
                        help="whose chain shapes the distribution, with that engine's rules for every name: "
                             "transformers (penalties on the whole context, temperature, top-k, top-p, min-p, "
                             "typical, epsilon, eta), llama.cpp (penalties on the last --penalty-last-n tokens, "
                             "DRY, top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature last) or vllm "
                             "(penalties on the output, temperature, min-p, top-k, top-p)")
    group = parser.add_argument_group("engine-specific samplers (each off by default; refused in an order "
                                      "whose engine lacks it)")
    for name, metavar, text in SAMPLER_FLAGS:
        default = getattr(d, name)
        kind = type(default)
        engines = engines_of(name)
        text += f" [{', '.join(engines)}]" if engines else ""
        group.add_argument(FLAGS[name], type=kind, default=default, metavar=metavar, help=text)


def engines_of(name: str) -> tuple:
    """The engines that have a sampler setting: ENGINE_ONLY's, or those of the stage it belongs to (dry_base is
    DRY's, penalty_last_n is llama.cpp's penalty window); () for a setting every engine has."""
    if name in ENGINE_ONLY:
        return ENGINE_ONLY[name]
    for prefix, owner in (("dry_", "dry_multiplier"), ("xtc_", "xtc_probability"), ("dynatemp_", "dynatemp_range"),
                          ("mirostat_", "mirostat"), ("penalty_last_n", "presence_penalty")):
        if name.startswith(prefix):
            return ENGINE_ONLY[owner] if owner != "presence_penalty" else ("llama.cpp",)
    return ()


def flagged(exc: ConfigError) -> ConfigError:
    """The error of a sampler setting, naming the flag the user typed (`--typical-p: ...`, not `typical_p: ...`);
    any other error as it is."""
    flag = FLAGS.get(exc.param)
    message = str(exc)
    if flag is None or not message.startswith(exc.param + ":"):
        return exc
    return ConfigError(exc.param, flag + message[len(exc.param):], exc.reason, **exc.values)


# llama.cpp's and vLLM's penalties stage: its settings, by word, config field and the value that is off
PENALTY_SETTINGS = (("repeat", "repetition_penalty", 1.0), ("frequency", "frequency_penalty", 0.0),
                    ("presence", "presence_penalty", 0.0))


def stage_label(stage, config=None) -> str:
    """'top-k 40', 'mirostat 2': the stage's name as the table prints it, and its setting. The penalties stage
    records the repeat penalty alone; with the step's config it names the settings that are on instead
    ('penalties: presence 0.5')."""
    if stage.name == "penalties" and config is not None:
        on = [f"{word} {getattr(config, field):g}" for word, field, off in PENALTY_SETTINGS
              if getattr(config, field, off) != off]
        if on:
            return "penalties: " + ", ".join(on)
    return f"{STAGE_LABELS.get(stage.name, stage.name)} {stage.value:g}"


def state_text(stage) -> str:
    """The state a stateful stage carried at this step, in one short phrase ('' for a stage without one):
    mirostat's mu before and after, XTC's draw and whether it fired, DRY's matched run, the temperature
    dynamic temperature chose, the penalties' window."""
    state = getattr(stage, "state", None) or {}
    if not isinstance(state, dict):
        return ""
    parts = []
    if "mu" in state and "mu_next" in state:
        parts.append(f"mu {_number(state['mu'])} -> {_number(state['mu_next'])}")
    for key, value in state.items():
        if key in ("mu", "mu_next") and "mu" in state and "mu_next" in state:
            continue
        if key == "fired" and value is False and "draw" not in state:
            parts.append("no draw")        # XTC off, or fewer than two tokens left
        elif isinstance(value, bool):
            parts.append(STATE_LABELS.get(key, str(key)) if value else f"not {STATE_LABELS.get(key, str(key))}")
        else:
            parts.append(f"{STATE_LABELS.get(key, str(key))} {_value(value)}")
    return ", ".join(parts)


def _value(value) -> str:
    if isinstance(value, (list, tuple)):
        shown = " ".join(_value(v) for v in list(value)[:3])
        return shown + (f" (+{len(value) - 3})" if len(value) > 3 else "")
    if isinstance(value, str):
        return repr(value)
    return _number(value)


def _number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)[:40]
    return f"{value:g}" if isinstance(value, int) else f"{value:.4g}"

