"""A sweep's report: heatmaps of a metric over two grid axes and an HTML page (matplotlib, Agg).

Reads the table ``rayrm sweep`` writes (``sweep.csv``: one row per cell and compared
policy, each metric's mean, ci95, min and max over the seeds) and writes to ``out``:

* per metric of ``rayrm.rm.runs.compare.conclusion_columns`` (and ``tasks_<baseline>_net``,
  shortened − lengthened, when the table has it) and per value of the axes
  beyond the first two: ``<metric>[-<axis>=<value>...].png``, one panel per compared
  policy, the first axis down and the second across, each cell the mean (percent) with
  its ±95% CI half-width; a diverging colour scale centred on 0 for per-job speedups,
  0..100% for shares of tasks;
* ``index.html``: the spec, the heatmaps and the table.
"""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rayrm.rm.runs.compare import conclusion_columns  # noqa: E402

MAX_FIGURES_PER_METRIC = 12


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text.replace("<=", "le").replace(">", "gt")).strip("_")


def heatmap(table: pd.DataFrame, metric: str, label: str, share: bool, rows: str | None, cols: str | None,
            title: str) -> plt.Figure:
    """One panel per policy of ``metric``'s mean over ``rows`` x ``cols`` (either may be None)."""
    policies = list(dict.fromkeys(table["policy"]))
    rvals = list(dict.fromkeys(table[rows])) if rows else [None]
    cvals = list(dict.fromkeys(table[cols])) if cols else [None]
    mean, ci = f"{metric}_mean", f"{metric}_ci95"
    grids = {}
    for p in policies:
        sub = table[table["policy"] == p]
        m = np.full((len(rvals), len(cvals)), np.nan)
        h = np.full_like(m, np.nan)
        for (i, r), (j, c) in itertools.product(enumerate(rvals), enumerate(cvals)):
            mask = np.ones(len(sub), dtype=bool)
            for axis, value in ((rows, r), (cols, c)):
                if axis:
                    mask &= (sub[axis] == value).to_numpy()
            hit = sub[mask]
            if len(hit):
                m[i, j], h[i, j] = hit[mean].iloc[0], hit[ci].iloc[0]
        grids[p] = (100 * m, 100 * h)
    if share:
        vmin, vmax, cmap = 0.0, 100.0, "viridis"
    else:
        top = max([np.nanmax(np.abs(m)) for m, _ in grids.values() if np.isfinite(m).any()] + [1.0])
        vmin, vmax, cmap = -top, top, "RdBu"
    fig, axes = plt.subplots(1, len(policies), figsize=(1.5 + len(policies) * (1.4 + 0.9 * len(cvals)),
                                                       2.2 + 0.6 * len(rvals)), squeeze=False,
                             layout="constrained")
    for ax, p in zip(axes[0], policies):
        m, h = grids[p]
        im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        for i, j in itertools.product(range(len(rvals)), range(len(cvals))):
            if np.isfinite(m[i, j]):
                text = f"{m[i, j]:.1f}" + (f"\n±{h[i, j]:.1f}" if np.isfinite(h[i, j]) else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if (m[i, j] < 50 if share else abs(m[i, j]) > 0.6 * vmax) else "black")
        ax.set_title(f"vs {p}", fontsize=9)
        ax.set_xticks(range(len(cvals)), [str(c) for c in cvals] if cols else [""], fontsize=8)
        ax.set_yticks(range(len(rvals)), [str(r) for r in rvals] if rows else [""], fontsize=8)
        ax.set_xlabel(cols or "", fontsize=8)
        ax.set_ylabel(rows or "", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=f"{label} (%)")
    fig.suptitle(title, fontsize=9)
    return fig


def write_report(table: pd.DataFrame, axes: list[str], baseline: str, out: str | Path, *,
                 title: str = "sweep", spec_text: str = "") -> Path:
    """Heatmaps of every conclusion metric and ``index.html`` into ``out``; returns the page."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows, cols = (axes + [None, None])[:2]
    rest = axes[2:]
    images = []
    if len(table):
        fixed = list(itertools.product(*(list(dict.fromkeys(table[a])) for a in rest)))[:MAX_FIGURES_PER_METRIC]
        net = [(f"tasks_{baseline}_net", f"{baseline} shortens - lengthens", False)]
        for col, label, share in net + conclusion_columns(baseline):
            if f"{col}_mean" not in table.columns:
                continue
            for values in fixed:
                sub = table
                for a, v in zip(rest, values):
                    sub = sub[sub[a] == v]
                where = ", ".join(f"{a}={v}" for a, v in zip(rest, values))
                what = f"{label}: mean over seeds" + (f" ({where})" if where else "")
                fig = heatmap(sub, col, label, share, rows, cols, f"{baseline} against each policy — {what}")
                name = _slug(col + "".join(f"-{a}={v}" for a, v in zip(rest, values))) + ".png"
                fig.savefig(out / name, dpi=110, bbox_inches="tight")
                plt.close(fig)
                images.append((name, what))
    page = out / "index.html"
    page.write_text(_html(title, spec_text, images, table))
    return page


def _html(title: str, spec_text: str, images: list[tuple[str, str]], table: pd.DataFrame) -> str:
    figs = "\n".join(f'<figure><img src="{html.escape(n)}" alt="{html.escape(w)}">'
                     f"<figcaption>{html.escape(w)}</figcaption></figure>" for n, w in images)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}</style>"
            f"</head><body><h1>{html.escape(title)}</h1><h2>Spec</h2><pre>{html.escape(spec_text)}</pre>"
            f"<h2>Heatmaps</h2>{figs or '<p>no finished cells yet</p>'}"
            f"<h2>sweep.csv</h2>{table.to_html(index=False, float_format=lambda v: f'{v:.4g}', na_rep='-')}"
            "</body></html>\n")
