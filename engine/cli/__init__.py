"""The command line, `python -m engine COMMAND` (engine/__main__.py calls main.py).

main.py      the parser and the decode and lens commands;
files.py     a file the user names (prompt, grammar): bounded, UTF-8, one line per failure;
samplers.py  one flag per engine-specific sampler, and the chain's order;
grammar.py   --json-schema | --regex | --choices | --lark;
answers.py   the answers command (engine/answers);
output.py    what is written to standard output and to --json, with every way that can fail;
console.py   the `decodescope` command (`decodescope run` starts the app).
Other families keep their own command's module beside them (engine/lesson/cli.py).
"""
