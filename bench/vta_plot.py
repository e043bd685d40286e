"""Tiny plotting for the VTA benches: matplotlib when installed, else a plain PNG drawn with
Pillow (lines and markers on linear or log axes, a legend), so the figures exist either way."""

from __future__ import annotations

import math
from collections.abc import Sequence

Series = tuple[str, Sequence[float], Sequence[float], str]  # (label, xs, ys, "line" | "points")
COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]


def plot(path: str, series: Sequence[Series], title: str, xlabel: str, ylabel: str,
         logx: bool = False, logy: bool = False, notes: Sequence[tuple[float, float, str]] = ()
         ) -> str:
    """Write the figure to ``path``; returns which backend drew it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _pil(path, series, title, xlabel, ylabel, logx, logy, notes)
        return "pillow"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, xs, ys, kind in series:
        if kind == "line":
            ax.plot(xs, ys, label=label)
        else:
            ax.scatter(xs, ys, label=label)
    for x, y, t in notes:
        ax.annotate(t, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return "matplotlib"


def _pil(path: str, series: Sequence[Series], title: str, xlabel: str, ylabel: str,
         logx: bool, logy: bool, notes: Sequence[tuple[float, float, str]]) -> None:
    from PIL import Image, ImageDraw

    w, h, left, right, top, bottom = 840, 540, 80, 20, 40, 60
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    fx = math.log10 if logx else float
    fy = math.log10 if logy else float
    xs = [fx(x) for _, sx, _, _ in series for x in sx]
    ys = [fy(y) for _, _, sy, _ in series for y in sy]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    pad = 0.05 * (y1 - y0)
    y0, y1 = y0 - pad, y1 + pad

    def px(x: float, y: float) -> tuple[float, float]:
        return (left + (fx(x) - x0) / (x1 - x0) * (w - left - right),
                h - bottom - (fy(y) - y0) / (y1 - y0) * (h - top - bottom))
    d.rectangle([left, top, w - right, h - bottom], outline="black")
    for k in range(5):  # ticks
        tx = x0 + k * (x1 - x0) / 4
        ty = y0 + k * (y1 - y0) / 4
        vx = 10 ** tx if logx else tx
        vy = 10 ** ty if logy else ty
        X = left + k * (w - left - right) / 4
        Y = h - bottom - k * (h - top - bottom) / 4
        d.text((X - 15, h - bottom + 5), f"{vx:.3g}", fill="black")
        d.text((5, Y - 5), f"{vy:.3g}", fill="black")
    for i, (label, sx, sy, kind) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        pts = [px(x, y) for x, y in zip(sx, sy)]
        if kind == "line":
            d.line(pts, fill=c, width=2)
        else:
            for X, Y in pts:
                d.ellipse([X - 4, Y - 4, X + 4, Y + 4], outline=c, fill=c)
        ly = h - bottom - 20 - 16 * (len(series) - 1 - i)
        d.rectangle([w - right - 300, ly, w - right - 290, ly + 10], fill=c)
        d.text((w - right - 285, ly - 2), label, fill="black")
    for x, y, t in notes:
        X, Y = px(x, y)
        d.text((X + 4, Y - 12), t, fill="black")
    d.text((left, 12), title, fill="black")
    d.text(((w - len(xlabel) * 6) // 2, h - 25), xlabel + (" (log)" if logx else ""), fill="black")
    d.text((5, top - 20), ylabel + (" (log)" if logy else ""), fill="black")
    img.save(path)
