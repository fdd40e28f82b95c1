"""`python -m engine ...`: the command line (engine/cli/main.py)."""
import sys

from engine.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
