"""Small server-side SVG charts: no JavaScript, no CDN, readable with scripts off."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString


def bar_chart(
    series: Sequence[tuple[str, int, int]],
    *,
    title: str,
    unit: str = "calls",
    highlight: str = "with 0 nodes",
    width: int = 480,
    height: int = 120,
    counts: bool = False,
) -> SafeString:
    """Bars of ``(label, total, highlighted)``: the highlighted part (rejections) drawn over
    the total (calls), one bar per label, with a text alternative for screen readers.
    ``counts`` (for a few bars): each bar's total written above it and its label under it,
    readable without hovering."""
    top = max((total for _, total, _ in series), default=0) or 1
    count = max(len(series), 1)
    slot = width / count
    bar = max(slot - 2, 1)
    pad = 12 if counts else 0  # room above the tallest bar for its count
    plot = height - 14 - pad
    bars = []
    for i, (label, total, highlighted) in enumerate(series):
        x = i * slot + 1
        h_total = plot * total / top
        h_high = plot * highlighted / top
        bars.append(
            (
                f"{x:.1f}",
                f"{pad + plot - h_total:.1f}",
                f"{bar:.1f}",
                f"{h_total:.1f}",
                f"{pad + plot - h_high:.1f}",
                f"{h_high:.1f}",
                f"{label}: {total} {unit}" + (f", {highlighted} {highlight}" if highlight else ""),
            )
        )
    shapes = format_html_join(
        "",
        '<g><title>{}</title><rect class="chart-total" x="{}" y="{}" width="{}" height="{}"/>'
        '<rect class="chart-high" x="{}" y="{}" width="{}" height="{}"/></g>',
        ((t, x, y, w, h, x, yh, w, hh) for x, y, w, h, yh, hh, t in bars),
    )
    if counts:
        middle = [f"{i * slot + 1 + bar / 2:.1f}" for i in range(len(series))]
        written = format_html_join(
            "",
            '<text x="{}" y="{}" class="chart-count" text-anchor="middle">{}</text>'
            '<text x="{}" y="{}" class="chart-axis" text-anchor="middle">{}</text>',
            (
                (m, f"{float(y) - 2:.1f}", total, m, height - 2, label)
                for m, (_, y, *_rest), (label, total, _) in zip(middle, bars, series, strict=True)
            ),
        )
        return format_html(
            '<svg class="console-chart" viewBox="0 0 {} {}" role="img" aria-label="{}">{}{}</svg>',
            width,
            height,
            title,
            shapes,
            written,
        )
    first = escape(series[0][0]) if series else ""
    last = escape(series[-1][0]) if series else ""
    return format_html(
        '<svg class="console-chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '{}<text x="0" y="{}" class="chart-axis">{}</text>'
        '<text x="{}" y="{}" class="chart-axis" text-anchor="end">{}</text></svg>',
        width,
        height,
        title,
        shapes,
        height - 2,
        first,
        width,
        height - 2,
        last,
    )
