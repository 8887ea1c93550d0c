"""WCAG contrast of every piece of text a labkit view draws, computed in the page.

For each visible element that holds text (HTML text, form controls, SVG ``<text>``) the
script takes the text colour (with the opacity of its ancestors) and the colour it is
painted on: the layers under the text's centre (``document.elementsFromPoint``), HTML
backgrounds and filled SVG shapes, composited from the page's background up. The ratio
is WCAG 2's ``(L1 + 0.05) / (L2 + 0.05)`` on relative luminance. Disabled controls are
exempt (WCAG 1.4.3 exempts inactive components).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_CONTRAST_JS = (Path(__file__).parent / "_contrast.js").read_text()


def text_contrast(locator) -> list[dict[str, Any]]:
    """Every visible text of the element ``locator`` with its WCAG contrast ratio."""
    locator.scroll_into_view_if_needed()
    return locator.evaluate(_CONTRAST_JS)


def luminance(rgb: list[int]) -> float:
    """WCAG relative luminance of an sRGB colour (0-255 channels), computed in Python."""

    def lin(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ratio(a: list[int], b: list[int]) -> float:
    """WCAG contrast ratio of two sRGB colours, computed in Python."""
    x, y = sorted((luminance(a), luminance(b)), reverse=True)
    return (x + 0.05) / (y + 0.05)


def css_luminance(color: str) -> float:
    """Luminance of a CSS colour as rgb()/rgba() or #rgb/#rrggbb; -1 when unreadable."""
    if color.startswith("#") and len(color) in (4, 7):
        digits = color[1:] if len(color) == 7 else "".join(c * 2 for c in color[1:])
        return luminance([int(digits[i : i + 2], 16) for i in (0, 2, 4)])
    values = re.findall(r"[\d.]+", color)
    return luminance([int(float(v)) for v in values[:3]]) if len(values) >= 3 else -1.0


def ink_for_theme(page, canvas, *, dark: bool) -> tuple[bool, str]:
    """Whether the ink a canvas last painted with (its ``data-ink``, a CSS colour) is the
    theme's: light on Dark, dark on Light, within 3 s of a switch (a canvas repaints once the
    theme's stylesheet has applied). Returns that and the last ink read."""
    ink = ""
    for _ in range(30):
        ink = canvas.get_attribute("data-ink") or ""
        lum = css_luminance(ink)
        if (lum > 0.5) if dark else (0 <= lum < 0.1):
            return True, ink
        page.wait_for_timeout(100)
    return False, ink
