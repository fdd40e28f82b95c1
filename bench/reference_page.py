"""What opening a page costs with Streamlit alone: one bar chart the size of Step by step's, drawn by
Streamlit's own `st.plotly_chart`, with no model, no sidebar and nothing else on the page.

bench_browser.py opens it on its own server, in the same run as the app, so that the app's open is read
against what any Streamlit page with a Plotly chart costs on the same machine at the same load.
"""
import plotly.graph_objects as go
import streamlit as st

BARS = 20           # Step by step's candidates chart shows the top 20


def page() -> None:
    st.set_page_config(page_title="Reference", layout="wide")
    st.title("Reference")
    probs = [0.5 / (rank + 1) for rank in range(BARS)]
    fig = go.Figure(go.Bar(x=[f"token {rank}" for rank in range(BARS)], y=probs))
    fig.update_layout(height=460, title="One bar chart")
    st.plotly_chart(fig, key="reference_chart")


if __name__ == "__main__":         # streamlit run runs it as __main__; an import draws nothing
    page()
