"""Which websocket handshakes name an earlier session: only those get the note that the page was opened again."""
from ui.reconnect import _named_session


def test_a_first_visit_names_no_session_a_reconnect_does():
    assert not _named_session("")
    assert not _named_session("streamlit")
    assert not _named_session("streamlit, 2|abc|def|123")                 # the XSRF token alone: a first visit
    assert not _named_session("streamlit, 2|abc|def|123, ")               # an empty third entry
    assert _named_session("streamlit, 2|abc|def|123, 6b1c0f0e-5a7d-4c1e-9d8e-0c4a5f3b2e11")
    assert _named_session("streamlit, , 6b1c0f0e")                          # no XSRF token, a session all the same
