"""Sweeps: Optuna studies whose trials are runs — best trial, parallel coordinates, param
importances, the trials table, stop and continue."""

import streamlit as st

from estimator_workbench.ui import session, sweep_view

st.title("Sweeps")
session.get_launcher()  # reap finished runners and start queued runs
sweep_view.sweeps_page()
