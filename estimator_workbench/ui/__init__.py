"""The Streamlit front end: the router (``app``), session state, forms, live fragments, panels,
tables, and figures (plotly, pure functions). Only this package and ``pages/`` import streamlit,
and ``figures`` and ``tables`` not even that (they are pure functions)."""
