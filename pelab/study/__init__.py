"""Studies: a grid of runs (grid.py), run somewhere (backends.py), stored (store.py), summarised (stats.py)."""
