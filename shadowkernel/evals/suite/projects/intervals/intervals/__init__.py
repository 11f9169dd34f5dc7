"""Closed intervals [start, end] of numbers."""
