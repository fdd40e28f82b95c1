"""The Structured output page's ready grammars, by kind and name; the Interview's demo links name them too."""
import json

# kind -> name -> the grammar's text ("custom", the user's own, is not one of them)
EXAMPLES = {
    "json_schema": {
        "city": json.dumps({"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 20}, "country": {"type": "string", "maxLength": 20}},
            "required": ["city", "country"], "additionalProperties": False}),
        "answer": json.dumps({"type": "object", "properties": {
            "answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
            "required": ["answer", "confidence"], "additionalProperties": False}),
        "person": json.dumps({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "languages": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
            "required": ["name", "age", "languages"], "additionalProperties": False}),
    },
    "regex": {"date": r"\d{4}-\d{2}-\d{2}", "yes_no": r" (Yes|No)\.", "phone": r"\(\d{3}\) \d{3}-\d{4}"},
    "choices": {"cities": json.dumps(["Paris", "London", "Berlin"]),
                "sentiment": json.dumps(["positive", "negative", "neutral"])},
    "lark": {"sum": 'start: NUM " + " NUM (" + " NUM)? " = " NUM\nNUM: /[0-9]{1,3}/'},
}

# kind -> name -> the new tokens the example needs to finish, with room to spare: measured on the bundled SmolLM2 with
# the demo prompt (greedy, sampling, beam search of 3; the most any took: person 34, city 15, answer 16, date 11,
# yes/no 5, phone 15, cities 3, sentiment 6, sum 19) and raised by half; the bundled Gemma on the Chinese demo prompt
# takes no more (person 29, city 22, sum 20). The sum has at most three terms: with any number of them Gemma never
# wrote the "=", and no length let it finish.
NEEDS = {
    "json_schema": {"city": 24, "answer": 24, "person": 52},
    "regex": {"date": 16, "yes_no": 8, "phone": 24},
    "choices": {"cities": 8, "sentiment": 12},
    "lark": {"sum": 24},
}
