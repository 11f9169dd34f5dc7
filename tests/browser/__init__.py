"""Helpers for the real-browser tests of the JupyterLab extension (tests/test_labextension_browser.py)."""
