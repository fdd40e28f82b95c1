"""Hostile trace files, built from two real traces (a decode and a beam search) by editing their JSON.

Each case is what a stranger could put in a shared file: markup and tracking pixels in text
fields, indices out of range, a beam tree with a missing parent or a cycle, lengths that
disagree, numbers like 1e400, facts of the wrong type, 100,000 nested arrays. `refused`
holds the cases the reader must refuse, each with words its message must contain (the
place and the problem); `accepted` holds files that are whole but carry hostile text, which
every page must show literally.

`PIXEL` is an address no test serves: a page that loads it has let file text become markup.
"""
from __future__ import annotations

import base64
import copy
import functools
import json
import zlib
from dataclasses import dataclass

PIXEL = "http://127.0.0.1:9/pixel"          # port 9 (discard): nothing answers, a browser test sees the request
MARKUP = f"![x]({PIXEL}-name.png) <img src='{PIXEL}-img.png'> **bold** $x$ [link](javascript:alert(1))"


@dataclass(frozen=True)
class Case:
    name: str
    payload: bytes
    words: tuple = ()         # all must appear in the message (refused cases)


def _dump(data) -> bytes:
    return json.dumps(data).encode()


def refused(greedy, beam) -> list:
    """Files the reader must refuse. greedy, beam: Trace objects of a real decode and a real beam search."""
    g, b = greedy.to_dict(), beam.to_dict()
    vocab = g["model_facts"]["vocab_size"]
    cases = []

    def case(name, base, edit, *words):
        data = copy.deepcopy(base)
        edit(data)
        cases.append(Case(name, _dump(data), words))

    def set_in(path, value):
        def edit(data):
            *parents, last = path
            for key in parents:
                data = data[key]
            data[last] = value
        return edit

    case("no-steps", g, set_in(["steps"], []), "no steps")
    case("empty-candidates", g, set_in(["steps", 1, "candidates"], []), "step 2", "no candidates")
    case("empty-chosen", g, set_in(["steps", 2, "chosen_ids"], []), "step 3", "0 chosen tokens")
    case("chosen-outside-vocab", g, set_in(["steps", 3, "chosen_ids"], [999_999_999]),
         "step 4", "999999999", f"vocabulary of {vocab:,}")
    case("negative-token", g, set_in(["steps", 0, "candidates", 0, "token_id"], -4), "step 1, candidate 1", "-4")
    case("candidate-outside-vocab", g, set_in(["steps", 1, "candidates", 2, "token_id"], vocab),
         "step 2, candidate 3", "outside the vocabulary")
    case("sequence-outside-vocab", g, set_in(["sequences", 0, "token_ids", 0], vocab + 7), "sequence 1", "outside")
    case("prompt-outside-vocab", g, set_in(["prompt_token_ids", 0], vocab + 5), "prompt token 1", "outside")
    case("negative-step-index", g, set_in(["steps", 0, "index"], -1), "step 1", "index is -1")
    case("repeated-step-index", g, set_in(["steps", 2, "index"], 1), "step 3", "index is 1")
    case("sequence-longer-than-steps", g, lambda d: d["sequences"][0]["token_ids"].append(1),
         "sequence 1", "steps")
    case("steps-longer-than-sequence", g, lambda d: d["sequences"][0]["token_ids"].pop(), "sequence 1", "steps")
    case("sequence-disagrees", g, lambda d: d["sequences"][0]["token_ids"].__setitem__(
        1, (d["steps"][1]["chosen_ids"][0] + 1) % vocab), "sequence 1, token 2", "step 2 chose")
    case("more-steps-than-max", g, set_in(["config", "max_new_tokens"], 2), "steps", "max_new_tokens")
    case("huge-number", g, lambda d: None, "finite")           # payload replaced below
    cases[-1] = Case("huge-number", _dump(g).replace(b'"entropy": ', b'"entropy": 1e400, "x": ', 1), ("finite",))
    case("inf-in-facts", g, set_in(["timings", "total_s"], 0.0), "finite")
    cases[-1] = Case("inf-in-facts", cases[-1].payload.replace(b'"total_s": 0.0', b'"total_s": -1e999'), ("finite",))
    case("overflowing-logprob", b, set_in(["nodes", 3, "logprob"], 1e300), "node 3", "logprob")
    case("probability-above-one", g, set_in(["steps", 0, "candidates", 0, "prob"], 7.5), "prob", "between 0 and 1")
    case("fact-wrong-type-layers", g, set_in(["model_facts", "layers"], f"![x]({PIXEL}-layers.png)"),
         "layers", "whole number")
    case("fact-wrong-type-parameters", g, set_in(["model_facts", "parameters"], {"many": True}), "parameters")
    case("fact-wrong-type-vocab", g, set_in(["model_facts", "vocab_size"], "49152"), "vocab_size")
    case("text-wrong-type", g, set_in(["steps", 0, "candidates", 1, "text"], {"$ne": 1}),
         "step 1, candidate 2, text", "expected text")
    case("kept-not-bool", g, set_in(["steps", 0, "candidates", 0, "kept"], "no"), "kept", "true or false")
    case("missing-field", g, lambda d: d["steps"][2]["candidates"][0].pop("logit"), "step 3, candidate 1",
         "'logit' is missing")
    case("missing-parent", b, set_in(["nodes", 5, "parent"], 999), "node 5", "parent 999")
    case("self-parent", b, lambda d: d["nodes"][5].__setitem__("parent", d["nodes"][5]["id"]), "node 5", "parent")
    case("cycle", b, _cycle, "parent")
    case("two-roots", b, set_in(["nodes", 4, "parent"], None), "roots")
    case("node-beyond-steps", b, set_in(["nodes", 4, "step"], 10**9), "node 4", "step")
    case("duplicate-node-id", b, lambda d: d["nodes"][3].__setitem__("id", d["nodes"][2]["id"]), "twice")
    case("running-beam-missing", b, set_in(["steps", 0, "beam_node_ids"], [999]), "step 1", "999")
    case("sequence-node-missing", b, set_in(["sequences", 0, "node_id"], 4242), "sequence 1", "4242")
    case("beam-path-disagrees", b, lambda d: d["sequences"][0]["token_ids"].reverse() or
         d["sequences"][0]["token_ids"].append(1), "sequence 1", "beam path")
    case("beam-no-steps", b, set_in(["steps"], []), "no steps")
    case("too-many-nodes", b, lambda d: d["nodes"].extend(
        dict(d["nodes"][1], id=10_000 + i) for i in range(5000)), "nodes")
    case("huge-fact", g, set_in(["model_facts", "parameters"], 10**400), "parameters", "digits")
    case("huge-kv-fact", g, set_in(["model_facts", "kv_bytes_per_token"], 2**64), "kv_bytes_per_token", "digits")
    case("huge-in-findings", g, lambda d: d["findings"].__setitem__("x", [1, 10**400]), "findings", "digits")
    case("huge-node-length", b, set_in(["nodes", 3, "length"], 10**400), "nodes[3]", "digits")
    case("node-longer-than-its-step", b, set_in(["nodes", 3, "length"], 10**6), "node 3", "length")
    case("prompt-flood", g, lambda d: d.__setitem__("prompt_token_ids", [1] * 40_000), "40,000 tokens")
    case("stage-count-huge", g, _with_stage(kept_count=2**63), "step 1, stage 1", "kept_count")
    case("stage-count-negative", g, _with_stage(cut_count=-3), "step 1, stage 1", "cut_count")
    case("stage-top-outside-vocab", g, _with_stage(top_id=vocab), "step 1, stage 1", "outside the vocabulary")
    case("stage-mass-above-one", g, _with_stage(removed_mass=7.0), "step 1, stage 1", "removed_mass")
    case("stage-prob-above-one", g, _with_stage(top_prob=9.0), "step 1, stage 1", "top_prob")
    case("stage-probs-flood", g, _with_stage(probs=[0.5] * 100_000), "step 1, stage 1", "100,000 probs")
    case("stage-unknown", g, _with_stage(name="![x](http://127.0.0.1:9/pixel-stage.png)"), "step 1, stage 1",
         "is not one of")
    case("stage-cut-outside-vocab", g, _with_stage(cut=[{"token_id": vocab + 1, "text": "x", "prob": 0.1}]),
         "cut token 1", "outside")
    case("lone-surrogate", g, lambda d: None, "surrogate")
    cases[-1] = Case("lone-surrogate", _dump(g).replace(b'"prompt": "', b'"prompt": "\\ud800', 1), ("surrogate",))
    cases.append(Case("deep-nesting", b"[" * 100_000 + b"]" * 100_000, ("nested",)))
    cases.append(Case("deep-findings", _dump(dict(g, findings={"x": json.loads("[" * 40 + "]" * 40)})), ("nested",)))
    cases.append(Case("container-flood", _dump(dict(g, findings={"x": [[] for _ in range(600_000)]})),
                      ("objects and arrays",)))
    cases.append(Case("not-utf8", b'{"schema": "decodescope.trace/1", "prompt": "\xff\xfe"}', ("UTF-8",)))
    cases.append(Case("latin1", _dump(g).replace(b'"prompt": "', '"prompt": "caf\xe9 '.encode("latin-1"), 1),
                      ("UTF-8",)))
    # valid but heavy: a refusal quotes a short prefix of a long value, never the value whole
    long_text = "A" * 1_000_000
    case("long-status", b, set_in(["nodes", 3, "status"], long_text), "node", "status", "'AAAA")
    case("long-fact", g, set_in(["model_facts", "architecture"], long_text), "model_facts", "1,000,000 characters")
    case("long-config-value", g, set_in(["config", "strategy"], long_text), "strategy", "'AAAA")
    case("long-config-key", g, lambda d: d["config"].__setitem__(long_text, 1), "config", "characters")
    case("long-model-name", g, set_in(["model"], long_text), "model", "1,000,000 characters")
    case("long-version", g, set_in(["versions", "torch"], long_text), "versions", "characters")
    case("numbers-flood-in-findings", g, lambda d: d["findings"].__setitem__("x", list(range(300_000))),
         "findings", "values")
    case("deep-versions", g, set_in(["versions", "x"], json.loads("[" * 15 + "]" * 15)), "versions", "nested")
    case("surrogate-in-an-unread-field", g, lambda d: None, "surrogate")
    cases[-1] = Case("surrogate-in-an-unread-field",
                     _dump(g).replace(b'{', b'{"note": "\\udc80 is fine, \udc80 is not", ', 1), ("surrogate",))
    return cases


def refused_speculative(spec) -> list:
    """Speculative traces the reader must refuse. spec: a sampled speculative Trace whose first round has a
    kept draft followed by a rejected one (the cases edit rounds 1 and 2)."""
    d = spec.to_dict()
    vocab = d["model_facts"]["vocab_size"]
    cases = []

    def case(name, edit, *words):
        data = copy.deepcopy(d)
        edit(data)
        cases.append(Case(name, _dump(data), words))

    def draft(r, j, **changes):
        return lambda data: data["rounds"][r]["drafts"][j].update(changes)

    first = d["rounds"][0]["drafts"][0]
    case("draft-outside-vocab", draft(0, 0, token_id=vocab + 3), "round 1, draft 1", "outside the vocabulary")
    case("draft-q-above-one", draft(0, 0, q=4.0), "round 1, draft 1", "q", "between 0 and 1")
    case("draft-u-negative", draft(0, 1, u=-0.5), "round 1, draft 2", "u", "between 0 and 1")
    case("draft-decision-flipped", draft(0, 0, u=1.0, p=first["q"] / 2), "round 1, draft 1", "marked kept")
    case("draft-status-unknown", draft(0, 0, status="<b>maybe</b>"), "round 1, draft 1", "is not one of")
    case("drafts-out-of-order", lambda data: data["rounds"][0]["drafts"].reverse(), "round 1", "kept, then")
    case("too-many-drafts", lambda data: data["rounds"][0]["drafts"].extend([first] * 40), "round 1", "drafted")
    case("next-kind-wrong", lambda data: data["rounds"][0].update(next_kind="bonus"), "round 1", "corrected")
    case("next-outside-vocab", lambda data: data["rounds"][0].update(next_id=-2), "round 1", "next token")
    case("rounds-disagree-with-steps", lambda data: data["rounds"][0].update(
        next_id=(data["rounds"][0]["next_id"] + 1) % vocab), "rounds emit", "step")
    case("round-first-step-wrong", lambda data: data["rounds"][1].update(first_step=0), "round 2", "starts at step")
    case("round-index-wrong", lambda data: data["rounds"][1].update(index=7), "round 2", "index is 7")
    case("passes-flood", lambda data: data["rounds"][0].update(draft_passes=10**9), "round 1", "passes")
    case("pairs-flood", draft(0, 0, candidates=[first["candidates"][0]] * 1000), "round 1, draft 1", "1,000")
    case("residual-flood", draft(0, 1, residual=[{"token_id": 1, "text": "x", "prob": 0.1}] * 500),
         "round 1, draft 2", "residual")
    case("rounds-on-greedy", lambda data: data["config"].update(strategy="greedy", draft=""), "greedy")
    case("rounds-flood", lambda data: data["rounds"].extend([data["rounds"][-1]] * 100), "rounds for")
    case("missing-u", lambda data: data["rounds"][0]["drafts"][0].pop("u"), "round 1, draft 1", "'u' is missing")
    return cases


CLAIMED_VOCAB = 10**9              # a vocabulary no model has: its mask is 125,000,000 bytes of bits


@functools.cache
def mask_bomb(inflated: int) -> str:
    """A mask as a trace holds one (zlib, base64) that inflates to `inflated` zero bytes: about 1,000 to 1."""
    deflate, chunk, parts = zlib.compressobj(9), bytes(1 << 20), []
    for start in range(0, inflated, len(chunk)):
        parts.append(deflate.compress(chunk[:inflated - start]))
    parts.append(deflate.flush())
    return base64.b64encode(b"".join(parts)).decode("ascii")


def schema_cases(address: str) -> dict:
    """JSON schemas a stranger could give (in a file, a flag, the page's box), each with the words of its one line.
    `address`: where a reference outside the schema points (a test listens there)."""
    deep = '{"items": ' * 200 + "{}" + "}" * 200
    return {
        "ref-http": ({"$ref": f"{address}/schema.json"}, "references outside the schema are not followed"),
        "ref-nested": ({"type": "object", "properties": {"a": {"$ref": f"{address}/a.json"}}},
                       "references outside the schema are not followed"),
        "ref-dynamic": ({"$dynamicRef": f"{address}/d.json"}, "references outside the schema are not followed"),
        "ref-file": ({"$ref": "file:///etc/passwd"}, "references outside the schema are not followed"),
        "ref-relative": ({"$ref": "other.json#/x"}, "references outside the schema are not followed"),
        "ref-urn": ({"$ref": "urn:example:thing"}, "references outside the schema are not followed"),
        "schema-true": (True, "true allows every JSON value"),
        "schema-false": (False, "false allows no value"),
        "schema-deep": (deep, "nested more than 64 levels"),
    }


def schema_text(schema) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


def refused_structured(constrained, address: str = PIXEL) -> list:
    """Constrained traces the reader must refuse. constrained: a Trace of a decode under a grammar (every step
    has a mask). The vocabulary's claim bounds every mask: a 250 KB file claiming a billion tokens, with a mask
    that inflates to 125 MB, is refused before any mask is inflated."""
    d = constrained.to_dict()
    vocab = d["model_facts"]["vocab_size"]
    cases = []

    def case(name, edit, *words):
        data = copy.deepcopy(d)
        edit(data)
        cases.append(Case(name, _dump(data), words))

    def grammar(i, **changes):
        return lambda data: data["steps"][i]["grammar"].update(changes)

    bomb = mask_bomb(CLAIMED_VOCAB // 8)

    def claim(data):
        data["model_facts"]["vocab_size"] = CLAIMED_VOCAB
        data["steps"][0]["grammar"]["mask"] = bomb

    case("vocab-claim-with-mask-bomb", claim, "vocab_size", "1,000,000,000", "1,048,576")
    case("vocab-claim-just-over", lambda data: data["model_facts"].update(vocab_size=2**20 + 1),
         "vocab_size", "1,048,577")
    case("mask-bomb", grammar(0, mask=mask_bomb(100_000_000)), "step 1, grammar", f"{vocab:,}")
    case("mask-not-base64", grammar(1, mask="not base64 ✓"), "step 2, grammar", "base64")
    case("mask-count-claim", grammar(0, allowed=10**9), "step 1, grammar", "1,000,000,000")
    case("mask-too-long", grammar(0, mask="A" * 300_000), "step 1", "mask", "300,000 characters")
    case("mask-removed-flood", grammar(0, removed=[{"token_id": 1, "text": "x", "prob": 0.0}] * 5000),
         "step 1, grammar", "5,000 removed tokens")
    case("prompt-flood-under-a-claimed-context", lambda data: data.update(
        prompt_token_ids=[1] * 140_000, model_facts=dict(data["model_facts"], context_length=10**9)),
        "140,000 tokens", "131,072")
    for name, (schema, words) in schema_cases(address).items():
        case(f"{name}-in-file", lambda data, s=schema: data["config"].update(grammar_kind="json_schema",
                                                                           grammar=schema_text(s)), words)
    return cases


def at_the_ceiling(constrained) -> bytes:
    """The heaviest constrained trace the reader accepts: 1,024 steps, each with a mask over a vocabulary of
    2**20 tokens (the ceiling), every one of them allowed. Reading it inflates 1,024 masks of 128 KiB."""
    d = constrained.to_dict()
    steps = 1024
    full = base64.b64encode(zlib.compress(b"\xff" * (2**20 // 8), 9)).decode("ascii")
    first = d["steps"][0]
    first["grammar"].update(mask=full, allowed=2**20, forced=False, removed=[])
    d["model_facts"]["vocab_size"] = 2**20
    d["config"]["max_new_tokens"] = steps
    d["steps"] = [dict(copy.deepcopy(first), index=i) for i in range(steps)]
    d["sequences"] = [dict(d["sequences"][0], token_ids=[first["chosen_ids"][0]] * steps, node_id=None)]
    return _dump(d)


def _with_stage(**changes):
    """An edit that gives step 1 a whole temperature stage (built from its candidates), then `changes`."""
    def edit(data):
        step = data["steps"][0]
        cands = step["candidates"]
        stage = dict(name="temperature", value=0.7, kept_count=len(cands), cut_count=0, removed_mass=0.0,
                     probs=[c["prob"] for c in cands], top_id=cands[0]["token_id"], top_text=cands[0]["text"],
                     top_prob=cands[0]["prob"], cut=[])
        stage.update(changes)
        step["stages"] = [stage]
    return edit


def _cycle(data) -> None:
    """Two nodes that are each other's parent, cut off from the root."""
    a, b = data["nodes"][5], data["nodes"][6]
    a["parent"], b["parent"] = b["id"], a["id"]


def accepted(greedy, beam) -> list:
    """Whole traces whose text fields carry markup and tracking pixels: loaded, and shown literally."""
    cases = []
    for name, base in (("markup-greedy", greedy.to_dict()), ("markup-beam", beam.to_dict())):
        data = copy.deepcopy(base)
        data["model"] = MARKUP
        data["prompt"] = MARKUP
        data["model_facts"]["name"] = f"![x]({PIXEL}-name.png)"
        data["model_facts"]["architecture"] = MARKUP
        for step in data["steps"]:
            for cand in step["candidates"]:
                cand["text"] = MARKUP
            step["chosen_texts"] = [MARKUP for _ in step["chosen_ids"]]
        for node in data["nodes"]:
            if node["parent"] is not None:
                node["text"] = MARKUP
        for seq in data["sequences"]:
            seq["text"] = MARKUP
        data["findings"] = {"note": MARKUP}
        cases.append(Case(name, _dump(data)))
    return cases


# ---- random damage, for the property tests ------------------------------------------------
OTHER_VALUES = [None, True, False, "", "text", "![x](" + PIXEL + "-prop.png)", 0, -1, 1.5, -0.5, 2**63, 2**64, 10**30,
                10**400, 1e300, [], [0], {}, {"a": 1}]
SCALES = [-1, 0, 2, 1000, 10**9, 1e300, -1e300, 1e-300]


def paths(value, prefix=()) -> list:
    """Every place in a JSON value: a tuple of keys and indices."""
    out = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            out += paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += paths(inner, prefix + (i,))
    return out


def mutate(data, path: tuple, op: str, other, scale):
    """Damage one place of `data` (a deep copy is made): delete it, duplicate it, give it another type,
    or scale it when it is a number. Returns the damaged copy."""
    data = copy.deepcopy(data)
    if not path:
        return other if op == "retype" else data
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    value = parent[last]
    if op == "delete":
        del parent[last]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(last, copy.deepcopy(value))
        else:                                  # a field takes a sibling's value
            siblings = [k for k in parent if k != last]
            if siblings:
                parent[last] = copy.deepcopy(parent[siblings[hash(last) % len(siblings)]])
    elif op == "retype":
        parent[last] = other
    elif op == "scale" and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            scaled = value * scale
        except OverflowError:                  # 10**400 * 1e300: past any float, so past what a file may hold
            scaled = value * int(scale)
        parent[last] = int(scaled) if isinstance(value, int) and isinstance(scale, int) else scaled
    return data


# ---- a listening socket: proof that nothing reaches out ----------------------------------------
class Listener:
    """A socket listening on 127.0.0.1 that counts the connections it is offered; `address` is its http:// URL.
    A schema whose $ref names it proves, with `connections == 0` once the block has ended, that no resolver
    reached out (a fetch connects before it sends anything; one still queued is counted at the end)."""

    def __init__(self):
        import socket
        import threading

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.settimeout(0.05)
        self.address = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except OSError:           # the 50 ms wait ran out, or the socket closed
                continue
            self.connections += 1
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._socket.setblocking(False)        # a connection still waiting in the queue counts too
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                break
            self.connections += 1
            conn.close()
        self._socket.close()
