"""Streamlit glue shared by every page: texts per language, the shared model, the sidebar settings."""
