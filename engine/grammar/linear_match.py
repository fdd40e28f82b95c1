"""Whether a text matches a regular expression or a grammar from a user or a file, in time linear in the text.

Python's `re` backtracks: `(a+)+$` over "aaaa…ab" tries 2^n ways, and it holds the GIL while it does, so every
session of the server waits. The grammar library's matcher (llguidance) compiles a pattern lazily to an
automaton and reads the text one byte at a time, never going back; its own limits (lexer states, grammar size)
bound what one pattern may cost. Here it reads bytes: a vocabulary of the 256 byte values and an end token, so
any text is a list of tokens, and the match does not depend on any model's tokenizer.
"""
from __future__ import annotations

import functools

END = 256                     # the end-of-text token of the byte vocabulary


class _ByteTokens:
    """What llguidance asks of a tokenizer: each token's bytes, the end token, and a way to encode text."""

    eos_token_id = END
    bos_token_id = None
    tokens = [bytes([b]) for b in range(256)] + [b"<end>"]
    special_token_ids = [END]

    def __call__(self, text) -> list:
        return list(text if isinstance(text, bytes) else text.encode("utf-8"))


@functools.cache
def byte_tokenizer():
    from llguidance import LLTokenizer, TokenizerWrapper

    return LLTokenizer(TokenizerWrapper(_ByteTokens()), slices=[])


def grammar_matches(grammar: str, text: str) -> bool | None:
    """True when the whole `text` is one the grammar (llguidance's, e.g. from LLMatcher.grammar_from_regex) allows,
    False when it is not, None when the library refused the grammar or gave up on it (a limit reached)."""
    from llguidance import LLMatcher

    tokenizer = byte_tokenizer()
    if LLMatcher.validate_grammar(grammar, tokenizer):
        return None
    matcher = LLMatcher(tokenizer, grammar, log_level=0)
    if matcher.is_error():
        return None
    if matcher.consume_tokens(list(text.encode("utf-8", "surrogatepass"))):
        return matcher.is_accepting()
    error = matcher.get_error()
    return False if "doesn't satisfy the grammar" in error else None


def fullmatch(pattern: str, text: str) -> bool | None:
    """Whether `pattern` (the grammar library's regex syntax) matches the whole `text`; None: not a pattern it reads."""
    from llguidance import LLMatcher

    return grammar_matches(LLMatcher.grammar_from_regex(pattern), text)


def search(pattern: str, text: str) -> bool | None:
    """Whether `pattern` matches somewhere in `text`, as a JSON Schema 'pattern' does (unanchored unless it starts
    with ^ or ends with $); None: a pattern the matcher does not read, or an anchor whose reach is not the whole
    pattern (^a|b), which this does not try to work out."""
    from llguidance import LLMatcher

    if LLMatcher.validate_grammar(LLMatcher.grammar_from_regex(pattern), byte_tokenizer()):
        return None                              # not a pattern on its own: wrapping it could change its meaning
    core, start, end = pattern, pattern.startswith("^"), _ends_with_dollar(pattern)
    if start or end:
        if _top_level_bar(pattern):
            return None
        core = core[1 if start else 0:len(core) - 1 if end else len(core)]
    anything = "(?s:.*)"
    return fullmatch(("" if start else anything) + f"(?:{core})" + ("" if end else anything), text)


def _ends_with_dollar(pattern: str) -> bool:
    """The pattern ends with an unescaped $ (an even number of backslashes before it)."""
    if not pattern.endswith("$"):
        return False
    slashes = len(pattern[:-1]) - len(pattern[:-1].rstrip("\\"))
    return slashes % 2 == 0


def _top_level_bar(pattern: str) -> bool:
    """Whether `pattern` has a | outside any group and character class (then ^ or $ binds one branch only)."""
    depth, in_class, escaped = 0, False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False
