"""WCAG contrast of every piece of text a labkit view draws, computed in the page.

For each visible element that holds text (HTML text, form controls, SVG ``<text>``) the
script takes the text colour (with the opacity of its ancestors) and the colour it is
painted on: the layers under the text's centre (``document.elementsFromPoint``), HTML
backgrounds and filled SVG shapes, composited from the page's background up. The ratio
is WCAG 2's ``(L1 + 0.05) / (L2 + 0.05)`` on relative luminance. Disabled controls are
exempt (WCAG 1.4.3 exempts inactive components).
"""

from __future__ import annotations

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
