"""Pure functions from traces to Plotly figures. No model, no Streamlit."""
