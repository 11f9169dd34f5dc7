"""A tiny stock keeper."""
