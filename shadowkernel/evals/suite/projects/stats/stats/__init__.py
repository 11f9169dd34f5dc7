"""Descriptive statistics on lists of numbers."""
