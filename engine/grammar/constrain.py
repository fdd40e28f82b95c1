"""Constrained decoding: a grammar removes, at every step, each token that cannot continue a valid output.

The grammar is compiled and walked by llguidance (JSON Schema, regular expression, a list of choices,
Lark): its matcher says which tokens may come next, as a bitmask over the vocabulary. `GrammarMask` is
a transformers logits processor built on it: it sets the score of every other token to -inf, and the
rest is renormalised by the softmax that follows. transformers runs such a processor after the
repetition penalty and before temperature / top-k / top-p / min-p, and so does this one.

A processor sees only `input_ids`, and beam search calls it on several hypotheses at once; so the mask
keeps one matcher per generated prefix (a hypothesis is a prefix), made by copying its parent's matcher
and feeding it the one new token. Each step records what the mask did (`grammar_record`): how many
tokens it allowed, the feasible mass Z_t (the probability the model gave the allowed tokens before the
mask), the best tokens it removed, and the mask itself, packed.
"""
from __future__ import annotations

import json
import weakref

import numpy as np
import torch
from transformers import LogitsProcessor

from engine.config import GRAMMAR_KINDS, MAX_CHOICES
from engine.errors import ConfigError
from engine.grammar.json_schema import JSON_PROBLEMS, OUTSIDE, check_output, parse_schema
from engine.grammar.linear_match import fullmatch
from engine.model import LoadedModel
from engine.tokens import unpaired_surrogate
from engine.trace import GrammarStep, StageToken
from engine.trace.mask import pack_mask

REMOVED_SHOWN = 10          # removed tokens recorded per step, most likely first
_TOKENIZERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _bad(message: str, reason: str, /, **values):
    """A grammar that cannot be used: the English sentence, and its reason and values for a page to translate."""
    raise ConfigError("grammar", f"grammar: {message}", reason, **values)


def parse_choices(text: str) -> list:
    """A choice list as the config holds it: a JSON list of non-empty strings."""
    try:
        choices = json.loads(text)
    except json.JSONDecodeError:
        choices = None
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        _bad("a choice list must be a JSON list of strings, like [\"yes\", \"no\"]", "choices_not_list")
    if any(unpaired_surrogate(c) is not None for c in choices):
        _bad("a choice holds an unpaired surrogate (a \\ud800-style escape that is not half of a character), "
             "which is not text", "choice_surrogate")
    if not choices or any(not c for c in choices):
        _bad("a choice list needs at least one choice, and no empty one", "choices_empty")
    if len(choices) > MAX_CHOICES:
        _bad(f"{len(choices)} choices; at most {MAX_CHOICES}", "choices_too_many", n=len(choices), most=MAX_CHOICES)
    return choices


def grammar_source(kind: str, text: str) -> str:
    """The llguidance grammar for (kind, text); raises ConfigError for text that is not of its kind."""
    from llguidance import LLMatcher

    if kind == "json_schema":
        # one fixed layout (", " and ": "), so a step's mask does not hinge on where the model puts spaces
        return LLMatcher.grammar_from_json_schema(
            parse_schema(text), overrides={"whitespace_flexible": False, "item_separator": ", ",
                                           "key_separator": ": "})
    if kind == "regex":
        return LLMatcher.grammar_from_regex(text)
    if kind == "choices":
        lark = "start: " + " | ".join(json.dumps(c) for c in parse_choices(text))
        return LLMatcher.grammar_from_lark(lark)
    if kind == "lark":
        return LLMatcher.grammar_from_lark(text)
    _bad(f"unknown kind '{kind[:40]}'; choose one of {', '.join(GRAMMAR_KINDS)}", "unknown_kind", kind=kind[:40],
         kinds=", ".join(GRAMMAR_KINDS))


def check_grammar(kind: str, text: str) -> None:
    """Refuse a grammar that cannot compile, before any model is loaded (the library reads it without
    a tokenizer); ConfigError names what is wrong."""
    from llguidance import LLMatcher

    problem = LLMatcher.validate_grammar(grammar_source(kind, text))
    if problem:
        _bad(first_line(problem), "refused", detail=first_line(problem))


def ll_tokenizer(lm: LoadedModel):
    """llguidance's view of the model's tokenizer (about a second to build; kept per tokenizer)."""
    import llguidance.hf

    tok = lm.tokenizer
    cached = _TOKENIZERS.get(tok)
    if cached is None or cached[0] != lm.facts.vocab_size:
        try:
            ll = llguidance.hf.from_tokenizer(tok, n_vocab=lm.facts.vocab_size, eos_token=list(lm.eos_token_ids))
        except ValueError as exc:      # a slow (Python) tokenizer
            raise ConfigError("grammar", f"grammar: this model's tokenizer cannot be read by the grammar "
                                         f"library ({exc})", "tokenizer", detail=str(exc)[:300]) from None
        cached = (lm.facts.vocab_size, ll)
        _TOKENIZERS[tok] = cached
    return cached[1]


def first_line(message: str) -> str:
    """The library's message in one line: its first line, and the line saying what the error is, when there
    is one (it follows with the grammar and a dump of its state)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "the grammar library refused it"
    line = lines[0]
    detail = next((x[len("error:"):].strip() for x in lines[1:] if x.startswith("error:")), "")
    if detail:
        line = f"{line.rstrip(': ')}: {detail}"
    return line[:300]


class GrammarMask(LogitsProcessor):
    """The grammar as a logits processor: -inf for each token the grammar does not allow next.

    Rows of `input_ids` are the prompt (`prompt_len` tokens) plus a generated prefix; each prefix gets
    its own matcher and mask, cached, so that several beams, or the same step shown twice, cost one walk."""

    def __init__(self, lm: LoadedModel, kind: str, text: str, prompt_len: int):
        from llguidance import LLMatcher

        self.kind, self.text, self.prompt_len = kind, text, prompt_len
        self.vocab_size = lm.facts.vocab_size
        tokenizer = ll_tokenizer(lm)
        source = grammar_source(kind, text)
        problem = LLMatcher.validate_grammar(source, tokenizer)
        if problem:
            _bad(first_line(problem), "refused", detail=first_line(problem))
        root = LLMatcher(tokenizer, source, log_level=0)
        if root.is_error():
            _bad(first_line(root.get_error()), "refused", detail=first_line(root.get_error()))
        self._matchers = {(): root}
        self._masks: dict = {}
        first = self.allowed(())
        if root.is_error() or (not bool(first.any())):
            _bad("no text matches it (" + first_line(root.get_error()) + ")", "no_match",
                 detail=first_line(root.get_error()))
        if not root.is_accepting() and all(bool(first[i]) == (i in lm.eos_token_ids)
                                           for i in first.nonzero().flatten().tolist()):
            _bad("no text matches it: it cannot start and cannot be empty", "cannot_start")
        self.last_allowed: torch.Tensor | None = None     # [rows, V] bool, from the last call
        self.last_scores: torch.Tensor | None = None      # [rows, V] the scores that call received

    def matcher(self, prefix: tuple):
        """The matcher after `prefix`: the longest cached prefix, copied, fed the tokens after it."""
        known = len(prefix)
        while prefix[:known] not in self._matchers:
            known -= 1
        matcher = self._matchers[prefix[:known]]
        for n in range(known + 1, len(prefix) + 1):
            matcher = matcher.deep_copy()
            matcher.consume_token(prefix[n - 1])       # a token the grammar refuses leaves it in its error state
            self._matchers[prefix[:n]] = matcher
        return matcher

    def allowed(self, prefix: tuple) -> torch.Tensor:
        """[V] bool: the tokens the grammar allows after `prefix` (none once the prefix broke it)."""
        mask = self._masks.get(prefix)
        if mask is None:
            matcher = self.matcher(prefix)
            if matcher.is_error():
                parent = self._masks.get(prefix[:-1])
                if prefix and parent is not None and bool(parent[prefix[-1]]):    # allowed, yet it broke
                    why = first_line(matcher.get_error())
                    raise ConfigError("grammar", f"grammar: the grammar library gave up after {len(prefix)} "
                                                 f"tokens ({why}); simplify the grammar", "gave_up", n=len(prefix),
                                      detail=why)
                mask = torch.zeros(self.vocab_size, dtype=torch.bool)   # a hypothesis that left the grammar
            else:
                mask = unpack(matcher.compute_bitmask(), self.vocab_size)
                if not prefix and (matcher.is_error() or not bool(mask.any())):
                    why = first_line(matcher.get_error() or str(matcher.stop_reason()))
                    _bad(f"no text matches it ({why})", "no_match", detail=why)
                if matcher.is_error() or not bool(mask.any()):     # it ran out of its limits on this grammar
                    why = first_line(matcher.get_error()) if matcher.is_error() else str(matcher.stop_reason())
                    raise ConfigError("grammar", f"grammar: the grammar library gave up after {len(prefix)} "
                                                 f"tokens, allowing none to follow ({why}); simplify the grammar",
                                      "gave_up", n=len(prefix), detail=why)
            self._masks[prefix] = mask
        return mask

    def accepting(self, prefix: tuple) -> bool:
        """Whether the text of `prefix` is a whole match (the grammar may end here)."""
        matcher = self.matcher(prefix)
        return not matcher.is_error() and matcher.is_accepting()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        prefixes = [tuple(row[self.prompt_len:].tolist()) for row in input_ids]
        allowed = torch.stack([self.allowed(p) for p in prefixes]).to(scores.device)
        longest = max(len(p) for p in prefixes)
        for cache in (self._matchers, self._masks):       # older prefixes are never asked for again
            for key in [k for k in cache if 0 < len(k) < longest - 1]:
                del cache[key]
        self.last_allowed, self.last_scores = allowed, scores.detach().clone()
        return scores.masked_fill(~allowed, float("-inf"))


def unpack(bitmask: bytes, vocab_size: int) -> torch.Tensor:
    """llguidance's bitmask (one bit per token, little-endian 32-bit words) as [vocab_size] bool."""
    bits = np.unpackbits(np.frombuffer(bitmask, dtype=np.uint8), bitorder="little")[:vocab_size]
    return torch.from_numpy(bits.astype(bool))


def grammar_record(token_texts, received: torch.Tensor, allowed: torch.Tensor, accepting: bool) -> GrammarStep:
    """What the mask did at one step. received: [V] the scores it was given (logits or log-probs);
    allowed: [V] bool; accepting: whether the text after this step's token is a whole match."""
    probs = torch.softmax(received.float(), dim=-1)
    removed = probs.masked_fill(allowed, -1.0)
    count = int(allowed.sum())
    top = torch.topk(removed, k=min(REMOVED_SHOWN, int((~allowed).sum())))
    return GrammarStep(
        allowed=count, feasible_mass=float(probs[allowed].sum()), forced=count == 1, accepting=accepting,
        removed=[StageToken(int(i), token_texts[int(i)], float(p)) for p, i in zip(top.values, top.indices)],
        mask=pack_mask(allowed))


# each verdict in English, for the command line (a page says them in its reader's language from the same names)
VERDICT_WORDS = {
    "not_json": "not JSON ({message} at character {at})",
    "not_schema": "JSON, but not of the schema ({message})",
    "schema_unread": "JSON; the schema itself is not one jsonschema reads",
    "schema_mixed": "JSON; a schema with unevaluatedProperties and patternProperties is not checked a second time",
    "schema_unresolved": f"JSON; {OUTSIDE}",
    "schema_pattern_unread": "JSON; a pattern in the schema is not one the grammar library reads; not checked a "
                             "second time",
    "schema_recursion": "JSON; the schema refers to itself too deeply to check a second time",
    "schema_refused": "JSON; {message}",
    "schema_match": "JSON that matches the schema",
    "pattern_unread": "the grammar library does not read this pattern, or gave up on it; not checked a second time",
    "re_match": "the pattern matches the whole text",
    "re_no_match": "the pattern does not match the whole text",
    "choices_unread": "{message}",
    "choice": "one of the choices",
    "no_choice": "none of the choices",
    "lark": "a Lark grammar: the matcher accepted it",
}


def output_verdict(kind: str, text: str, output: str) -> tuple:
    """(valid, verdict, values) for a decoded output, checked a second time: JSON parsed and validated by
    jsonschema, a regex by the grammar library's matcher over the output's bytes, a choice by equality. A Lark
    grammar has no second checker here (valid None). No pattern from the user or a file reaches Python's re,
    which backtracks (engine.grammar.linear_match), and no schema reference reaches outside the schema
    (engine.grammar.json_schema). `verdict` names the reason (VERDICT_WORDS), `values` fill it in: a page says it in
    its reader's language."""
    if kind == "json_schema":
        try:
            value = json.loads(output)
        except json.JSONDecodeError as exc:
            return False, "not_json", {"problem": JSON_PROBLEMS.get(exc.msg, "other"), "message": exc.msg,
                                       "at": exc.pos + 1}
        try:
            schema = parse_schema(text)
        except ConfigError as exc:
            return None, "schema_refused", {"message": str(exc).removeprefix("grammar: "), "reason": exc.reason,
                                            **exc.values}
        return check_output(schema, value)
    if kind == "regex":
        ok = fullmatch(text, output)
        if ok is None:
            return None, "pattern_unread", {}
        return ok, "re_match" if ok else "re_no_match", {}
    if kind == "choices":
        try:
            ok = output in parse_choices(text)
        except ConfigError as exc:        # a file's list that is not one
            return None, "choices_unread", {"message": str(exc).removeprefix("grammar: "), "reason": exc.reason,
                                            **exc.values}
        return ok, "choice" if ok else "no_choice", {}
    return None, "lark", {}


def output_check(kind: str, text: str, output: str) -> tuple:
    """(valid, why) for a decoded output, `why` in English (see output_verdict)."""
    valid, verdict, values = output_verdict(kind, text, output)
    return valid, VERDICT_WORDS[verdict].format(**values)


STOP_WORDS = {"complete": "the grammar's text is whole",
              "max_tokens": "stopped at max_new_tokens before the grammar could end: the text is incomplete",
              "running": "the decode has not ended"}


def stop_reason(trace) -> str:
    """Why a constrained run ended: 'complete' (the grammar could end and did, or the text is a whole
    match), 'max_tokens' (the token budget ran out before the grammar could end) or 'running'.

    A beam search's steps record the best running beam, not the hypothesis it returns: that one ran out when
    it is as long as the budget and its text is not a whole match (checked as output_check checks it)."""
    steps = trace.steps
    if not steps or steps[-1].grammar is None:
        return "running"
    if trace.config.strategy == "beam":
        best = trace.best
        if len(best.token_ids) < trace.config.max_new_tokens:
            return "complete"           # it ended at the end-of-text token, which the grammar allows only at its end
        valid, _ = output_check(trace.config.grammar_kind, trace.config.grammar, best.text)
        return "complete" if valid else "max_tokens"
    if steps[-1].grammar.accepting:
        return "complete"
    return "max_tokens" if len(steps) >= trace.config.max_new_tokens else "running"
