"""The figures of `pelab pretrained`: MiniLM's position table beside a sinusoidal one of the same size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pelab.pretrained import positions as pa
from pelab.weights.minilm import load_tables

KEYS = {"MiniLM learned": "minilm", "sinusoidal": "sinusoidal"}


def draw(out: Path, numbers: dict) -> list[Path]:
    """The figures, side by side with sinusoidal; the probes' curves come from ``numbers`` (``measure``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from pelab import plots

    position = pa.as_array(load_tables().position)
    tables = {"MiniLM learned": position, "sinusoidal": pa.sinusoidal_like(position)}
    L, D = position.shape
    files = []

    def save(fig: Figure, name: str, tight: bool = True) -> None:
        files.append(plots.save(fig, out / name, tight=tight))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), dpi=110)
    for ax, (name, table) in zip(axes, tables.items(), strict=True):
        xy, share = pa.pca_2d(table)
        sc = ax.scatter(xy[:, 0], xy[:, 1], c=np.arange(L), cmap="viridis", s=8)
        ax.plot(xy[:, 0], xy[:, 1], lw=0.3, color="grey", alpha=0.5)
        ax.set_title(f"{name}: {L} positions, PCA (PC1 {100 * share[0]:.0f}%, PC2 {100 * share[1]:.0f}%)")
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
    fig.colorbar(sc, ax=axes, label="position", fraction=0.03)
    save(fig, "positions_pca.png", tight=False)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), dpi=110)
    for ax, (name, table) in zip(axes, tables.items(), strict=True):
        im = ax.imshow(pa.cosine_similarity(table), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(f"{name}: cosine similarity of positions")
        ax.set_xlabel("position")
        ax.set_ylabel("position")
    fig.colorbar(im, ax=axes, fraction=0.03)
    save(fig, "positions_similarity.png", tight=False)

    fig, axes = plt.subplots(2, 2, figsize=(12, 7), dpi=110)
    for col, (name, table) in enumerate(tables.items()):
        lim = float(np.quantile(np.abs(table), 0.99))  # a learned table's few outliers would wash out the rest
        axes[0, col].imshow(table, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        axes[0, col].set_title(f"{name} ({L} positions x {D} dimensions)")
        axes[0, col].set_xlabel("dimension")
        axes[0, col].set_ylabel("position")
        axes[1, col].bar(np.arange(D), table.std(0), width=1.0)
        axes[1, col].set_title("standard deviation over positions, per dimension")
        axes[1, col].set_xlabel("dimension")
    save(fig, "positions_dimensions.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    r = pa.LINEARITY_RANK
    for name, key, field, style in (
        ("MiniLM", "minilm", "residual", "-o"),
        ("MiniLM, shuffled positions", "minilm", "shuffled_residual", ":o"),
        (f"MiniLM, top {r} directions", "minilm", "rank_residual", "-s"),
        (f"MiniLM, top {r} directions, shuffled", "minilm", "rank_shuffled_residual", ":s"),
        ("sinusoidal", "sinusoidal", "residual", "-^"),
    ):
        rows = numbers["linearity"][key]
        ks = [row["k"] for row in rows]
        axes[0].plot(ks, [max(row[field], 1e-17) for row in rows], style, label=name)
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("offset k")
    axes[0].set_ylabel("relative residual, best linear PE(pos) -> PE(pos+k)")
    axes[0].legend(fontsize=7)
    axes[0].set_title("relative linearity (C11)")
    for name, key in KEYS.items():
        reg = numbers["positions"][key]["regression"]
        ranks = [k for k in reg if k != "all"]
        axes[1].plot([int(k) for k in ranks] + [D], [reg[k]["r2"] for k in [*ranks, "all"]], "-o", label=name)
    shuffled = numbers["positions"]["minilm"]["regression_shuffled"]["r2"]
    axes[1].axhline(shuffled, color="k", ls=":", label="MiniLM, shuffled positions")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("probe capacity: principal components used")
    axes[1].set_ylabel("cross-validated R² of position")
    axes[1].legend(fontsize=8)
    axes[1].set_title("absolute position from the vector (C16)")
    save(fig, "positions_probes.png")
    return files
