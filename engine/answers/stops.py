"""Where an answer ends: at an end token, or where its text first contains a stop string, as servers end a
completion (`stop` in vLLM and llama.cpp, `stop_strings` in transformers' `generate`).

A base model such as Gemma 3 270M almost never emits its end token; its answers end where a server's `stop`
would end them, at a newline or a 。. The text is searched as UTF-8 bytes, each token's exact bytes (byte-level
BPE's byte alphabet, SentencePiece's byte pieces): a stop string split across two tokens, or a character split
across byte tokens, is found where the decoded text shows it. Only the answer's own text is searched, never the
prompt's, as servers do.

After a prefix whose text is Y (which holds no stop string, or the prefix would have ended), a next token t ends
the answer when Y + bytes(t) contains a stop string. The answer is that text cut before the stop string's first
occurrence, as vLLM and llama.cpp return it (transformers' `stop_strings` keep it). The next tokens of one
prefix that leave the same text are one answer whose probability is their sum; the end token's answer is Y
itself and joins the tokens that leave Y. So a prefix's mass splits exactly into its answers (grouped by text),
its other next tokens, and nothing else: the ledger still adds up to 1.
"""
from __future__ import annotations

import weakref

import torch

from ..errors import ConfigError
from ..model.loaded import _BYTE_TOKEN, _byte_decoder, _looks_byte_level, bytes_display

MAX_STOPS = 8                 # stop strings in one list (vLLM and llama.cpp take lists of a few)
MAX_STOP_CHARS = 32           # characters in one stop string
PRESETS = {"none": (), "newline": ("\n",), "period": (".",), "cjk_period": ("。",),
           "newline_cjk_period": ("\n", "。")}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


# ---- the stop list: checked, written and read as text --------------------------------------------------
def check_stops(stops) -> tuple:
    """The stop strings as a tuple, each checked: 1 to MAX_STOP_CHARS characters of encodable text, at most
    MAX_STOPS of them; a repeated one counts once. ConfigError names what is wrong."""
    if isinstance(stops, str) or not isinstance(stops, list | tuple):
        raise ConfigError("stop", "stop: expected a list of stop strings")
    out: list = []
    for s in stops:
        if not isinstance(s, str) or not 1 <= len(s) <= MAX_STOP_CHARS:
            shown = escape(s)[:40] if isinstance(s, str) else type(s).__name__
            raise ConfigError("stop", f"stop: each stop string must have 1 to {MAX_STOP_CHARS} characters, "
                                      f"got '{shown}'")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError("stop", "stop: a stop string holds a character that is not text (a lone "
                                      "surrogate)") from None
        if s not in out:
            out.append(s)
    if len(out) > MAX_STOPS:
        raise ConfigError("stop", f"stop: at most {MAX_STOPS} stop strings, got {len(out)}")
    return tuple(out)


def unescape(text: str) -> str:
    r"""A stop string as typed: \n a newline, \t a tab, \r a carriage return, \\ a backslash; any other
    backslash stays as it is."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def escape(text: str) -> str:
    r"""A stop string as it is typed and shown: a newline as \n, a tab as \t, a backslash as \\."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def parse_stop_lines(text: str) -> tuple:
    """A typed list, one stop string a line (escapes as in `unescape`), blank lines skipped, checked."""
    return check_stops([unescape(line) for line in str(text).splitlines() if line != ""])


def stop_lines(stops) -> str:
    """The inverse of `parse_stop_lines`: one escaped stop string a line."""
    return "\n".join(escape(s) for s in stops)


def describe(stops) -> str:
    """One line for every place a number is shown: where the answers end."""
    if not stops:
        return "an answer ends at an end token"
    return "an answer ends at an end token or before a stop string: " + ", ".join(f"'{escape(s)}'" for s in stops)


# ---- each token's bytes ----------------------------------------------------------------------------------
_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def token_bytes(tokenizer, vocab_size: int) -> list:
    """bytes per token id, as the tokenizer's decode writes them (special tokens as their text): byte-level
    BPE through its byte alphabet, SentencePiece pieces with '▁' as a space and <0xNN> as the byte NN.
    Worked out once per tokenizer."""
    cached = _TABLES.get(tokenizer)
    if cached is not None and len(cached) == vocab_size:
        return cached
    n = min(vocab_size, len(tokenizer))
    tokens = tokenizer.convert_ids_to_tokens(list(range(n)))
    special = set(getattr(tokenizer, "all_special_tokens", [])) | set(tokenizer.get_added_vocab().keys())
    decoder = _byte_decoder()
    byte_level = _looks_byte_level(tokenizer, tokens, decoder)
    table = []
    for tok in tokens:
        if tok is None:
            table.append(b"")
        elif tok in special:
            table.append(tok.encode("utf-8"))
        elif byte_level and all(ch in decoder for ch in tok):
            table.append(bytes(decoder[ch] for ch in tok))
        elif _BYTE_TOKEN.fullmatch(tok):
            table.append(bytes([int(_BYTE_TOKEN.fullmatch(tok).group(1), 16)]))
        else:
            table.append(tok.replace("▁", " ").encode("utf-8"))
    table.extend(b"" for _ in range(n, vocab_size))
    try:
        _TABLES[tokenizer] = table
    except TypeError:          # a tokenizer that cannot be weakly referenced is worked out each time
        pass
    return table


_KNOWN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()    # tokenizer -> {(vocab, ends, stops): scan}
MAX_KNOWN = 8


def _weakable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


# ---- the endings after one prefix --------------------------------------------------------------------------
class Ending:
    """What ends the answer after one prefix: which next tokens end it (`mask`), and the answers they make,
    grouped by text (`keys`, `probs`: each answer's probability given the prefix, float64)."""

    def __init__(self, mask: torch.Tensor, keys: list, probs: torch.Tensor, stopped: torch.Tensor, group_of):
        self.mask = mask              # [V] bool: the tokens that end the answer here
        self.keys = keys              # per group: the answer's text as bytes (None: the prefix's own text)
        self.probs = probs            # [G] float64: each group's probability given the prefix
        self.stopped = stopped        # [G] bool: a stop string (not only an end token) ends some of it
        self.group_of = group_of      # token id -> its group's index (for a token in `mask`)

    @property
    def total(self) -> float:
        return float(self.probs.sum())


class Endings:
    """The end tokens and the stop strings of one model, ready to say after any prefix which next tokens
    end the answer and which answers they make."""

    def __init__(self, lm, ends: tuple, stops: tuple = ()):
        self.ends = tuple(ends)
        self.end_index = torch.tensor(self.ends)
        self.stops = tuple(s.encode("utf-8") for s in check_stops(stops))
        self.vocab = lm.facts.vocab_size
        self._starting: dict = {}
        if not self.stops:
            return
        self.table = token_bytes(lm.tokenizer, self.vocab)
        known = _KNOWN.setdefault(lm.tokenizer, {}) if _weakable(lm.tokenizer) else {}
        key = (self.vocab, self.ends, self.stops)
        if key not in known:
            if len(known) >= MAX_KNOWN:          # a few stop lists per tokenizer: the oldest goes first
                known.pop(next(iter(known)))
            known[key] = self._scan()
        self.__dict__.update(known[key])

    def _scan(self) -> dict:
        """The tokens that hold a stop string themselves, grouped by their bytes before it (one pass over the
        vocabulary, kept per tokenizer and stop list: 262,144 tokens take about a second)."""
        ids, suffixes = [], []
        for token, raw in enumerate(self.table):
            cut = min((i for i in (raw.find(s) for s in self.stops) if i >= 0), default=-1)
            if cut >= 0 and token not in self.ends:
                ids.append(token)
                suffixes.append(raw[:cut])
        order = {s: g for g, s in enumerate(dict.fromkeys(suffixes))}
        inner_ids = torch.tensor(ids, dtype=torch.long)
        inner_gid = torch.tensor([order[s] for s in suffixes], dtype=torch.long)
        inner_mask = torch.zeros(self.vocab, dtype=torch.bool)
        inner_mask[inner_ids] = True
        return {"inner_ids": inner_ids,                  # tokens holding a stop string themselves
                "inner_gid": inner_gid,
                "inner_suffix": list(order),             # per group: the token's bytes before the stop string
                "inner_mask": inner_mask,
                "empty_group": order.get(b""),           # the group whose text is the prefix's own
                "_gid_of": dict(zip(ids, inner_gid.tolist())),
                "_starting": {}}                         # head bytes -> the tokens starting with them

    @property
    def stopping(self) -> bool:
        return bool(self.stops)

    def extend(self, text: bytes, token: int) -> bytes:
        """A prefix's text with one more token (only tracked with stop strings)."""
        return text + self.table[token] if self.stops else b""

    def _starting_with(self, head: bytes) -> torch.Tensor:
        """The ids of the tokens whose bytes start with `head` (worked out once per head)."""
        if head not in self._starting:
            self._starting[head] = torch.tensor([t for t, raw in enumerate(self.table)
                                                 if raw.startswith(head) and t not in self.ends], dtype=torch.long)
        return self._starting[head]

    def _across(self, text: bytes) -> list:
        """(cut, token ids): a stop string begun at the end of `text` and finished by the token, cut where it
        begins; each token with its earliest cut, earliest first."""
        found: dict = {}
        for stop in self.stops:
            for j in range(min(len(stop) - 1, len(text)), 0, -1):
                if text.endswith(stop[:j]):
                    cut = len(text) - j
                    found.setdefault(cut, []).append(self._starting_with(stop[j:]))
        return [(cut, torch.unique(torch.cat(found[cut]))) for cut in sorted(found)]

    def mask_after(self, text: bytes) -> torch.Tensor:
        """[V] bool: the next tokens that end the answer after a prefix whose text is `text`."""
        mask = self.inner_mask.clone() if self.stops else torch.zeros(self.vocab, dtype=torch.bool)
        mask[self.end_index] = True
        for _, ids in self._across(text) if self.stops else ():
            mask[ids] = True
        return mask

    def first_end(self, token_ids) -> int:
        """The index of the first token of `token_ids` that ends the answer (an end token, or one that completes
        a stop string), or -1."""
        text = b""
        for i, token in enumerate(token_ids):
            if token in self.ends or (self.stops and bool(self.mask_after(text)[token])):
                return i
            text = self.extend(text, token)
        return -1

    def after(self, text: bytes, logprobs: torch.Tensor) -> Ending:
        """The endings after a prefix whose text is `text` (its bytes; b"" without stop strings), from its
        next-token log-probabilities [V]."""
        p = logprobs.exp()
        end_p = p[self.end_index].sum()
        if not self.stops:
            mask = torch.zeros(self.vocab, dtype=torch.bool)
            mask[self.end_index] = True
            return Ending(mask, [None], end_p.reshape(1), torch.zeros(1, dtype=torch.bool),
                          lambda token: 0)
        mask = self.inner_mask.clone()
        mask[self.end_index] = True
        keys, sums, taken = [], [], torch.zeros(self.vocab, dtype=torch.bool)
        across: dict = {}
        for cut, ids in self._across(text):
            ids = ids[~taken[ids]]
            taken[ids] = True
            keys.append(text[:cut])
            sums.append(p[ids].sum())
            across.update(dict.fromkeys(ids.tolist(), len(keys) - 1))
        mask |= taken
        inner = torch.zeros(len(self.inner_suffix), dtype=p.dtype)
        inner.index_add_(0, self.inner_gid, p[self.inner_ids] * ~taken[self.inner_ids])
        base = len(keys)
        own = base + self.empty_group if self.empty_group is not None else base + len(self.inner_suffix)
        probs = torch.cat([torch.stack(sums) if sums else torch.zeros(0, dtype=p.dtype), inner,
                           torch.zeros(1 if self.empty_group is None else 0, dtype=p.dtype)])
        stopped = probs > 0
        probs[own] += end_p
        keys = _Keys(keys, text, self.inner_suffix, own)

        def group_of(token: int) -> int:
            if token in across:
                return across[token]
            if token in self._gid_of:
                return base + self._gid_of[token]
            return own
        return Ending(mask, keys, probs, stopped, group_of)


class _Keys:
    """The answers' texts after one prefix, built only for the groups asked for (there may be thousands)."""

    def __init__(self, across: list, text: bytes, suffixes: list, own: int):
        self.across, self.text, self.suffixes, self.own = across, text, suffixes, own

    def __getitem__(self, g: int):
        if g == self.own:
            return None
        if g < len(self.across):
            return self.across[g]
        return self.text + self.suffixes[g - len(self.across)]


def answer_text(key, own_text) -> str:
    """An answer's text: the prefix's own (as the tokenizer decodes it) when a token left it whole, else the
    bytes cut at the stop string, whole UTF-8 as text and stray bytes as <0xNN>."""
    return own_text() if key is None else bytes_display(key)
