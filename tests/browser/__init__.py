"""Helpers for the browser tests: real Jupyter front ends driven by headless Chromium.

``servers`` starts JupyterLab 4 and Notebook 7 on 127.0.0.1 with isolated
config/data/runtime folders; ``frontend`` drives a notebook page through the app the
front end exposes as ``window.jupyterapp`` and measures the timeline's DOM in the page;
``scratch`` holds the small notebooks the tests write next to the teaching notebooks;
``fixtures`` shares one server per app and one Chromium between test modules.
"""
