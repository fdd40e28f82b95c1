"""DecodeScope: the frame every page shares (page config, sidebar, navigation)."""
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from ui import url_memory
from ui.i18n import t
from ui.landing import landing
from ui.present import presentation_controls, sidebar_state
from ui.settings import address, link_notes, one_address_write
from ui.tour import guided_tour

HERE = Path(__file__).resolve().parent
# (file in pages/, text key of its title, icon); a page appears once its file exists.
PAGES = [
    ("step_by_step.py", "nav.step_by_step", "👣"),
    ("beam_tree.py", "nav.beam_tree", "🌳"),
    ("compare.py", "nav.compare", "⚖️"),
    ("expected_embedding.py", "nav.expected_embedding", "🧪"),
    ("teacher_forcing.py", "nav.teacher_forcing", "🎓"),
    ("kv_cache.py", "nav.kv_cache", "🗄️"),
    ("structured.py", "nav.structured", "🧩"),
    ("speculative.py", "nav.speculative", "🏎️"),
    ("answers.py", "nav.answers", "🧮"),
    ("reproduce.py", "nav.reproduce", "🎲"),
    ("interview.py", "nav.interview", "💬"),
]


def _start() -> None:
    """The root address: a landing that says what the app is, with a link to each page at its own address
    (/<file stem>). An address at the root that carries settings (an old link) opens the first page with them."""
    if set(address()) - set(url_memory.INTERFACE_KEYS):
        st.switch_page(pages[0], query_params=address())
    landing([(p, p.url_path) for p in pages])


# Every address write of a run goes out as one, at its end: the browser adds a history entry for each write.
with one_address_write():
    url_memory.restore_interface()      # language, presentation mode and tour survive a page switch
    st.set_page_config(page_title="DecodeScope", page_icon="🔎", layout="wide",
                       initial_sidebar_state=sidebar_state())
    pages = [st.Page(str(HERE / "pages" / name), title=t(key), icon=icon, url_path=name[:-3])
             for name, key, icon in PAGES if (HERE / "pages" / name).is_file()]
    # Streamlit serves the default page at "/" only; a hidden start page keeps /step_by_step a real address.
    page = st.navigation([st.Page(_start, title="DecodeScope", url_path="start", default=True, visibility="hidden"),
                          *pages])
    url_memory.restore_settings(page.url_path)
    try:
        guided_tour(corner=presentation_controls())      # in presentation mode the tour folds into a corner button
        page.run()
    finally:
        url_memory.remember()
        try:
            for note in link_notes():      # what the address asked that no control could take as written
                st.toast(note, icon="🔗")
        except ScriptControlException:     # a run that Stop or another click interrupted draws nothing more
            pass
