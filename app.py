"""DecodeScope: the frame every page shares (page config, sidebar, navigation)."""
from pathlib import Path

import streamlit as st

from ui.i18n import t

st.set_page_config(page_title="DecodeScope", page_icon="🔎", layout="wide")

HERE = Path(__file__).resolve().parent
# (file in pages/, text key of its title, icon); a page appears once its file exists.
PAGES = [
    ("step_by_step.py", "nav.step_by_step", "👣"),
    ("beam_tree.py", "nav.beam_tree", "🌳"),
    ("compare.py", "nav.compare", "⚖️"),
    ("expected_embedding.py", "nav.expected_embedding", "🧪"),
    ("teacher_forcing.py", "nav.teacher_forcing", "🎓"),
    ("kv_cache.py", "nav.kv_cache", "🗄️"),
    ("interview.py", "nav.interview", "💬"),
]

pages = [st.Page(str(HERE / "pages" / name), title=t(key), icon=icon, url_path=name[:-3])
         for name, key, icon in PAGES if (HERE / "pages" / name).is_file()]
st.navigation(pages).run()
