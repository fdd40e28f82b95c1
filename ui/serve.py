"""Start the app's server with its first model already loading, so the first visit does not pay for it.

    python -m ui.serve [streamlit run options]     (what `make run` does)

`streamlit run app.py` runs nothing until a browser opens the app: the first visitor waited for the
libraries to import and the model to load. Here the load starts in the background as the server starts,
in the same process, into the same shared store the pages read (ui.shared_model).
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"


def _warm() -> None:
    """Load the first model, and meanwhile import what a page's first run would (the figures and the ui
    modules): seconds a first visit no longer waits for. Then compute Whole answers' default run (the page's
    longest first open) for the first visitor, once the model is there."""
    from ui.shared_model import load_early      # torch, transformers, the engine: imported here, not by a visit

    loading = load_early()
    import figures
    import ui

    for package in (figures, ui):
        for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if module.name != "ui.serve":
                importlib.import_module(module.name)
    if loading is not None:
        loading.join()
        _answers_default()


def _answers_default() -> None:
    """Whole answers' run on its default settings, shared with the sessions that will open it (ui.answers_run)."""
    from engine import DecodeScopeError
    from ui.answers_run import warm_default
    from ui.demo import DEFAULT_PROMPT
    from ui.shared_model import loaded_model

    lm = loaded_model("")
    if lm is None:                              # the load failed: the first visit says why
        return
    try:
        warm_default(lm, DEFAULT_PROMPT)
    except DecodeScopeError:                    # the page computes it itself, and names any problem
        pass


def main(argv: list) -> int:
    from streamlit.web import cli

    from streamlit.runtime.pages_manager import PagesManager

    # app.py is the frame of every page: never Streamlit's old pages/ mode, not even for a first visit that
    # comes before app.py ran (ui.i18n switches it off on its first import, which here happens before the
    # server runs anything)
    PagesManager.uses_pages_directory = False
    threading.Thread(target=_warm, name="warm", daemon=True).start()      # the server answers meanwhile
    return cli.main(["run", str(APP), *argv], prog_name="streamlit", standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
