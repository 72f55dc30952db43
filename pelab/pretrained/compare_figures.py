"""The side-by-side figures of `pelab pretrained --model ...`: every model, and a closed-form table of each size.

``compare_pca.png`` and ``compare_similarity.png`` (sequence models: the table's first two principal
components coloured by position, and cosine similarity of positions), ``compare_probes.png`` (C11's
residual inside the top directions against the offset, and C16's R² against probe capacity) and
``compare_patches.png`` (patch grids: each patch's position vector against every other patch's, as the
ViT and MAE papers draw it, beside the 2-D sin-cos table of the same grid).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pelab.pretrained import compare
from pelab.pretrained import positions as pa
from pelab.weights.hf import Model


def panels(n: int) -> tuple[int, int]:
    cols = min(n, 3)
    return -(-n // cols), cols


def patch_mosaic(table: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """(H*W, D) -> an (H*(H+1), W*(W+1)) image: tile (r, c) is patch (r, c)'s cosine similarity with every
    patch, NaN gutters between tiles."""
    H, W = grid
    sim = pa.cosine_similarity(table).reshape(H, W, H, W)
    out = np.full((H * (H + 1), W * (W + 1)), np.nan)
    for r in range(H):
        for c in range(W):
            out[r * (H + 1) : r * (H + 1) + H, c * (W + 1) : c * (W + 1) + W] = sim[r, c]
    return out


def draw(out: Path, models: list[Model], numbers: dict) -> list[Path]:
    """The figures for ``models`` (those ``hf.load`` returned) and ``numbers`` (``compare.side_by_side``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pelab import plots

    files: list[Path] = []
    seq = [m for m in models if m.grid is None]
    grids = [m for m in models if m.grid is not None]
    tables: dict[str, np.ndarray] = {}
    for m in seq:
        tables[m.name] = pa.as_array(m.position)
        key = compare.reference_key(m)
        if key not in tables:
            tables[key] = compare.reference_table(tuple(m.position.shape), None)
    if tables:
        rows, cols = panels(len(tables))
        fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4 * rows), dpi=100, squeeze=False)
        for ax, (name, t) in zip(axes.flat, tables.items(), strict=False):
            xy, share = pa.pca_2d(t)
            ax.scatter(xy[:, 0], xy[:, 1], c=np.arange(len(t)), cmap="viridis", s=6)
            ax.plot(xy[:, 0], xy[:, 1], lw=0.3, color="grey", alpha=0.5)
            ax.set_title(f"{name}: PC1 {100 * share[0]:.0f}%, PC2 {100 * share[1]:.0f}%", fontsize=9)
        for ax in list(axes.flat)[len(tables) :]:
            ax.axis("off")
        fig.suptitle("position vectors on their first two principal components (colour: position)")
        files.append(plots.save(fig, out / "compare_pca.png"))

        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.8 * rows), dpi=100, squeeze=False,
                                 layout="constrained")  # fmt: skip
        im = None
        for ax, (name, t) in zip(axes.flat, tables.items(), strict=False):
            im = ax.imshow(pa.cosine_similarity(t), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("position")
        for ax in list(axes.flat)[len(tables) :]:
            ax.axis("off")
        fig.suptitle("cosine similarity of position vectors")
        fig.colorbar(im, ax=axes, fraction=0.03)
        files.append(plots.save(fig, out / "compare_similarity.png", tight=False))

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), dpi=100)
        refs = numbers["references"]
        for m in seq:
            rows_ = numbers["models"][m.name]["linearity"]
            axes[0].plot([r["k"] for r in rows_], [max(r["rank_residual"], 1e-17) for r in rows_], "-o", label=m.name)
            reg = numbers["models"][m.name]["positions"]["regression"]
            ks = [k for k in reg if k != "all"]
            axes[1].plot([int(k) for k in ks] + [m.position.shape[1]], [reg[k]["r2"] for k in [*ks, "all"]], "-o",
                         label=m.name)  # fmt: skip
        for key, ref in refs.items():
            if key.startswith("sinusoidal") and ref is not None:
                rows_ = ref["linearity"]
                axes[0].plot([r["k"] for r in rows_], [max(r["rank_residual"], 1e-17) for r in rows_], "k:",
                             lw=1, label=key)  # fmt: skip
        axes[0].set_xscale("log", base=2)
        axes[0].set_yscale("log")
        axes[0].set_xlabel("offset k")
        axes[0].set_ylabel(f"relative residual in the top {pa.LINEARITY_RANK} directions")
        axes[0].set_title("best linear map PE(pos) -> PE(pos+k) (C11)")
        axes[0].legend(fontsize=7)
        axes[1].set_xscale("log", base=2)
        axes[1].set_xlabel("probe capacity: principal components used")
        axes[1].set_ylabel("cross-validated R² of position")
        axes[1].set_title("absolute position from the vector (C16)")
        axes[1].legend(fontsize=7)
        files.append(plots.save(fig, out / "compare_probes.png"))

    if grids:
        mosaics: dict[str, np.ndarray] = {}
        for m in grids:
            mosaics[m.name] = patch_mosaic(pa.as_array(m.position), m.grid)  # type: ignore[arg-type]
            key = compare.reference_key(m)
            ref = compare.reference_table(tuple(m.position.shape), m.grid)
            if key not in mosaics and ref is not None:
                mosaics[key] = patch_mosaic(ref, m.grid)  # type: ignore[arg-type]
        rows, cols = panels(len(mosaics))
        fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 4.2 * rows), dpi=110, squeeze=False,
                                 layout="constrained")  # fmt: skip
        cmap = plt.get_cmap("RdBu_r").with_extremes(bad="white")
        im = None
        for ax, (name, mosaic) in zip(axes.flat, mosaics.items(), strict=False):
            im = ax.imshow(mosaic, cmap=cmap, vmin=-1, vmax=1, interpolation="nearest")
            ax.set_title(name, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel("patch column (tile), other patch (inside)")
            ax.set_ylabel("patch row")
        for ax in list(axes.flat)[len(mosaics) :]:
            ax.axis("off")
        fig.suptitle("cosine similarity of each patch's position vector with every other patch's")
        fig.colorbar(im, ax=axes, fraction=0.03)
        files.append(plots.save(fig, out / "compare_patches.png", tight=False))
    return files
