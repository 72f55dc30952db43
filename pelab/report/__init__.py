"""Presenting results: terminal tables now; the full report builds on the same numbers."""
