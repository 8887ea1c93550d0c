"""Final-state pictures of the dashboard and the optimize panel (matplotlib, monospace text).

Pure functions of the traits the widgets send to the browser, so the picture saved in
the notebook shows what the live view showed when it stopped changing. Each returns the
picture as ``image/png`` (SVG too where small) with its figures as ``text/plain``; the
``text/html`` they also return serves ``to_html()`` and stays out of the notebook
(:class:`~labkit.views._keep.KeepsPicture`: a sanitizer would show it as source).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_bytes, fmt_time
from labkit.views._base import png_img
from labkit.views._keep import picture_bundle, png_b64, pre
from labkit.views._static import _figure, _png, _svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def dashboard_status(stats: dict[str, Any], status: str) -> str:
    """One line of progress and a table of the figures, as the live dashboard shows them."""
    head = progress_line(stats, status)
    loss = stats.get("loss")
    rate = stats.get("samples_per_s")
    rows = [
        ("loss", f"{loss:.4g}" if isinstance(loss, float) and math.isfinite(loss) else "-"),
        ("samples/s", f"{rate:.1f}" if rate is not None else "-"),
        ("step time", fmt_time(stats["step_time"]) if stats.get("step_time") else "-"),
        ("compute", fmt_time(stats["compute_time"]) if stats.get("compute_time") else "-"),
        ("data wait", fmt_time(stats["data_time"]) if stats.get("data_time") else "-"),
        ("memory", fmt_bytes(stats["memory"]) if stats.get("memory") else "-"),
        ("processes", str(stats.get("world_size") or 1)),
        ("elapsed", fmt_time(stats["elapsed_s"]) if stats.get("elapsed_s") else "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([head, *(f"{k:<{width}}  {v}" for k, v in rows)])


def progress_line(stats: dict[str, Any], status: str) -> str:
    """Where the fit stood when the picture was taken, saying when that was the end.

    A kept picture outlives its kernel, so it never reads as a live state: an ended fit
    says where it ended, one taken while running or before the first step says so.

    Example:
        >>> progress_line({"step": 446, "total_steps": 768, "epoch": 1, "max_epochs": 3},
        ...               "stopped")
        'stopped at step 446 of 768 · epoch 1 of 3'
    """
    step, total = stats.get("step") or 0, stats.get("total_steps")
    epoch, max_epochs = stats.get("epoch") or 0, stats.get("max_epochs")
    where = f"step {step}{f' of {total}' if total else ''}"
    where += f" · epoch {epoch}{f' of {max_epochs}' if max_epochs else ''}"
    if status in ("finished", "stopped", "failed"):
        return f"{status} at {where}"
    if status == "idle" or not step:
        return "starting (picture taken before the first step; the fit's end replaces it)"
    return f"{status} at {where} (picture taken while running; the fit's end replaces it)"


def curves_png(series: dict[str, dict[str, list[float]]], title: str, status: str = "") -> bytes:
    """Loss curves on the left, other metrics on the right; validation points marked; the
    ``status`` table (monospace) beside them when given, so the picture alone says it."""
    losses = sorted(k for k in series if k.endswith("_loss"))
    others = sorted(k for k in series if not k.endswith("_loss"))
    panels = [p for p in (losses, others) if p]
    side = 1 if status else 0
    fig = _figure(4.2 * len(panels) + 2.4 * side, 2.6)
    grid = fig.add_gridspec(1, len(panels) + side, width_ratios=[2.4] * side + [4.2] * len(panels))
    if status:
        box = fig.add_subplot(grid[0, 0])
        box.set_axis_off()
        box.text(
            0.0,
            1.0,
            status,
            family="monospace",
            fontsize=7,
            va="top",
            ha="left",
            transform=box.transAxes,
        )
    for i, keys in enumerate(panels):
        ax = fig.add_subplot(grid[0, i + side])
        for j, key in enumerate(keys):
            xs, ys = series[key]["x"], series[key]["y"]
            style: dict[str, Any] = {"marker": "o", "ms": 3} if key.startswith("val_") else {}
            ax.plot(xs, ys, color=COLORS[j % len(COLORS)], lw=1.2, label=key, **style)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _png(fig)


def dashboard_picture(
    series: dict[str, Any], stats: dict[str, Any], status: str, error: str, notes: list[str]
) -> dict[str, str]:
    """``text/html`` (status table, curves, error, notes) and ``image/png`` (curves)."""
    text = dashboard_status(stats, status)
    parts = [pre(text)]
    out: dict[str, str] = {}
    if any(series.get(k, {}).get("x") for k in series):
        png = curves_png(series, f"labkit fit: {status}", status=text)
        out["image/png"] = png_b64(png)
        parts.append(png_img(png, alt="training curves"))
    if error:
        parts.append(pre(f"error: {error}"))
    if notes:
        parts.append(pre("\n".join(f"- {n}" for n in notes)))
    out["text/html"] = f'<div class="lk-final" data-status="{status}">{"".join(parts)}</div>'
    return out


def speedup_text(row: dict[str, Any]) -> str:
    """A speed-up with its 95% interval, "within noise" when it spans 1.00x (as the panel's
    ``speedupText``).

    Example:
        >>> speedup_text({"speedup": 0.37, "speedup_low": 0.21, "speedup_high": 1.3,
        ...               "within_noise": True})
        '0.37x within noise (0.21x-1.30x)'
    """
    s, lo, hi = row.get("speedup"), row.get("speedup_low"), row.get("speedup_high")
    if s is None:
        return "-"
    if lo is None or hi is None:
        return f"{s:.2f}x"
    noise = " within noise" if row.get("within_noise") else ""
    return f"{s:.2f}x{noise} ({lo:.2f}x-{hi:.2f}x)"


def speedup_figure(rows: list[dict[str, Any]]) -> Figure:
    """Horizontal bars of each recipe's speed-up over fp32, each with its 95% interval
    (an error bar, and the figures beside the bar)."""
    ok = [r for r in rows if r.get("speedup") is not None and not r.get("error")]
    fig = _figure(6.5, 0.35 * max(len(ok), 2) + 0.8)
    ax = fig.add_subplot()
    speed = [r["speedup"] for r in ok]
    low = [max(0.0, r["speedup"] - (r.get("speedup_low") or r["speedup"])) for r in ok]
    high = [max(0.0, (r.get("speedup_high") or r["speedup"]) - r["speedup"]) for r in ok]
    err = [low, high]
    ax.barh(
        range(len(ok)),
        speed,
        xerr=err if ok else None,
        ecolor="#333",
        capsize=3,
        color=["#3b7dd8" if s >= 1 else "#d8703b" for s in speed],
    )
    ax.set_yticks(range(len(ok)), [r["label"] for r in ok], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="#555", lw=0.8)
    for i, r in enumerate(ok):
        end = max(r["speedup"], r.get("speedup_high") or 0.0)
        ax.text(end, i, f"  {speedup_text(r)}", va="center", fontsize=7)
    ax.set_xlim(0, max([1.0, *(max(r["speedup"], r.get("speedup_high") or 0) for r in ok)]) * 1.6)
    ax.set_title("speed-up over fp32 (step time), 95% intervals", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    return fig


def speedup_png(rows: list[dict[str, Any]]) -> bytes:
    """:func:`speedup_figure` as a PNG."""
    return _png(speedup_figure(rows))


def optimize_picture(
    recipe_label: str, comparison: Any, rows: list[dict[str, Any]], error: str
) -> dict[str, str]:
    """The measured table (monospace) and the speed-up bars; or the recipe when unmeasured."""
    if comparison is None:
        text = f"OptimizePanel: recipe {recipe_label} (not measured)"
        if error:
            text += f"\nerror: {error}"
        return {"text/html": f'<div class="lk-final">{pre(text)}</div>'}
    fig = speedup_figure(rows)
    png, text = _png(fig), comparison.summary()
    html_ = pre(text) + png_img(png, alt="speed-up")
    if error:
        html_ += pre(f"error: {error}")
        text += f"\nerror: {error}"
    out = picture_bundle(png, text, svg=_svg(fig))
    out["text/html"] = f'<div class="lk-final">{html_}</div>'
    return out
