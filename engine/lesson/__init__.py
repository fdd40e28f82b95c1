"""A lesson anyone can open: one self-contained HTML file that steps through a recorded run (page.py), from the
lesson's view of the trace (view.py), with a teacher's title and notes (notes.py) and the plotly.js the app
uses (bundle.py); `python -m engine lesson` reads a saved trace and writes the file (cli.py)."""
from .notes import check_title, parse_notes
from .page import LANGUAGES, lesson_html

__all__ = ["LANGUAGES", "check_title", "lesson_html", "parse_notes"]
