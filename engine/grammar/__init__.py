"""Structured output: a grammar removes, at every step, each token that cannot continue a valid output.

In the order data flows through them:
json_schema.py   a JSON Schema read within limits, and a decoded output checked against it;
linear_match.py  whether a text matches a user's pattern or grammar, in time linear in the text;
constrain.py     the grammar (schema, regex, choices, Lark) as a per-step token mask the decode applies.
"""
