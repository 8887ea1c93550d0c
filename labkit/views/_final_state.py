"""Final-state pictures of the dashboard and the optimize panel (matplotlib + monospace HTML).

Pure functions of the traits the widgets send to the browser, so the picture saved in
the notebook shows what the live view showed when it stopped changing.
"""

from __future__ import annotations

import math
from typing import Any

from labkit._format import fmt_bytes, fmt_time
from labkit.views._base import png_img
from labkit.views._keep import png_b64, pre
from labkit.views._static import _figure, _png

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def dashboard_status(stats: dict[str, Any], status: str) -> str:
    """One line of progress and a table of the figures, as the live dashboard shows them."""
    step, total = stats.get("step", 0), stats.get("total_steps")
    epoch, max_epochs = stats.get("epoch", 0), stats.get("max_epochs")
    head = f"{status}: step {step}{f'/{total}' if total else ''}"
    head += f" · epoch {epoch}{f'/{max_epochs}' if max_epochs else ''}"
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


def curves_png(series: dict[str, dict[str, list[float]]], title: str) -> bytes:
    """Loss curves on the left, other metrics on the right; validation points marked."""
    losses = sorted(k for k in series if k.endswith("_loss"))
    others = sorted(k for k in series if not k.endswith("_loss"))
    panels = [p for p in (losses, others) if p]
    fig = _figure(4.2 * len(panels), 2.6)
    for i, keys in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
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


def dashboard_picture(series: dict[str, Any], stats: dict[str, Any], status: str,
                      error: str, notes: list[str]) -> dict[str, str]:  # fmt: skip
    """``text/html`` (status table, curves, error, notes) and ``image/png`` (curves)."""
    text = dashboard_status(stats, status)
    parts = [pre(text)]
    out: dict[str, str] = {}
    if any(series.get(k, {}).get("x") for k in series):
        png = curves_png(series, f"labkit fit: {status}")
        out["image/png"] = png_b64(png)
        parts.append(png_img(png, alt="training curves"))
    if error:
        parts.append(pre(f"error: {error}"))
    if notes:
        parts.append(pre("\n".join(f"- {n}" for n in notes)))
    out["text/html"] = f'<div class="lk-final" data-status="{status}">{"".join(parts)}</div>'
    return out


def speedup_png(rows: list[dict[str, Any]]) -> bytes:
    """Horizontal bars of each recipe's speed-up over fp32."""
    ok = [r for r in rows if r.get("speedup") is not None and not r.get("error")]
    fig = _figure(5.5, 0.35 * max(len(ok), 2) + 0.8)
    ax = fig.add_subplot()
    ax.barh(range(len(ok)), [r["speedup"] for r in ok],
            color=["#3b7dd8" if r["speedup"] >= 1 else "#d8703b" for r in ok])  # fmt: skip
    ax.set_yticks(range(len(ok)), [r["label"] for r in ok], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="#555", lw=0.8)
    for i, r in enumerate(ok):
        ax.text(r["speedup"], i, f" {r['speedup']:.2f}x", va="center", fontsize=7)
    ax.set_title("speed-up over fp32 (step time)", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    return _png(fig)


def optimize_picture(recipe_label: str, comparison: Any, rows: list[dict[str, Any]],
                     error: str) -> dict[str, str]:  # fmt: skip
    """The measured table (monospace) and the speed-up bars; or the recipe when unmeasured."""
    if comparison is None:
        text = f"OptimizePanel: recipe {recipe_label} (not measured)"
        if error:
            text += f"\nerror: {error}"
        return {"text/html": f'<div class="lk-final">{pre(text)}</div>'}
    png = speedup_png(rows)
    html_ = pre(comparison.summary()) + png_img(png, alt="speed-up")
    if error:
        html_ += pre(f"error: {error}")
    return {"text/html": f'<div class="lk-final">{html_}</div>', "image/png": png_b64(png)}
