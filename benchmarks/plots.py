"""SVG charts without dependencies: a line chart and a grouped bar chart.

The benchmarks draw with these when run with `--plot DIR` (`retrieval`,
`search_throughput`, `fairness`); `python -m benchmarks.readme_plots` draws the charts
kept in benchmarks/plots/ through the same functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
WIDTH, HEIGHT = 780, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 210, 44, 78  # margins; the legend sits in the right one
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    colour: str = ""  # empty: the palette's colour for the series' place
    dashed: bool = False


def ticks(low: float, high: float, count: int = 7) -> list[float]:
    """Round values from at or below `low` to at or above `high`, about `count` steps apart."""
    raw = ((high - low) or abs(high) or 1.0) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.floor(low / step + 1e-9) * step
    steps = math.ceil((high - first) / step - 1e-9)
    return [round(first + i * step, 10) for i in range(max(1, steps) + 1)]


def _text(x: float, y: float, words: str, size: int = 12, anchor: str = "middle") -> str:
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else size + 2}">{escape(line)}</tspan>'
        for i, line in enumerate(words.split("\n"))
    )
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">{spans}</text>'


def _frame(
    title: str, note: str, x_label: str, y_label: str, y_ticks: Sequence[float]
) -> tuple[list[str], Callable[[float], float]]:
    """The chart's background, title, note, y axis with its grid; and the y mapping."""
    low, high = y_ticks[0], y_ticks[-1]

    def to_y(value: float) -> float:
        return TOP + PLOT_H * (1 - (value - low) / ((high - low) or 1.0))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}"'
        f' viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        _text(LEFT + PLOT_W / 2, 26, title, 15),
        _text(LEFT, HEIGHT - 10, note, 10, "start"),
        _text(LEFT + PLOT_W / 2, TOP + PLOT_H + 44, x_label) if x_label else "",
        f'<g transform="translate(16 {TOP + PLOT_H / 2:.1f}) rotate(-90)">'
        f"{_text(0, 0, y_label)}</g>",
    ]
    for tick in y_ticks:
        y = to_y(tick)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        parts.append(_text(LEFT - 6, y + 4, f"{tick:g}", 11, "end"))
    parts.append(
        f'<polyline points="{LEFT},{TOP} {LEFT},{TOP + PLOT_H} {LEFT + PLOT_W},{TOP + PLOT_H}"'
        ' fill="none" stroke="#333"/>'
    )
    return parts, to_y


def _colour(series: Series, index: int) -> str:
    return series.colour or PALETTE[index % len(PALETTE)]


def _legend(parts: list[str], series: Sequence[Series], bars: int = 0) -> None:
    """A swatch and a name per series, the first `bars` of them as bars, the rest as lines."""
    x = LEFT + PLOT_W + 16
    for i, one in enumerate(series):
        y = TOP + 8 + 18 * i
        colour, dash = _colour(one, i), ' stroke-dasharray="6 3"' if one.dashed else ""
        if i < bars:
            parts.append(f'<rect x="{x}" y="{y - 6}" width="18" height="10" fill="{colour}"/>')
        else:
            parts.append(
                f'<line x1="{x}" x2="{x + 22}" y1="{y}" y2="{y}" stroke="{colour}"'
                f' stroke-width="2"{dash}/>'
            )
        parts.append(_text(x + 28, y + 4, one.name, 11, "start"))


def _write(path: Path, parts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*parts, "</svg>"]) + "\n", encoding="utf-8")
    return path


def line_chart(
    path: Path,
    title: str,
    x: Sequence[float],
    series: Sequence[Series],
    *,
    x_label: str = "",
    y_label: str = "",
    note: str = "",
    even_x: bool = False,
    y_low: float | None = 0.0,
) -> Path:
    """A line per series over `x` (evenly spaced and each labelled if `even_x`), a dot at
    each point up to 20 of them; y from `y_low` (None: from the data) to the data's top."""
    values = [v for one in series for v in one.values]
    y_ticks = ticks(min(values) if y_low is None else y_low, max(values))
    parts, to_y = _frame(title, note, x_label, y_label, y_ticks)
    if even_x:
        positions = [LEFT + PLOT_W * (i + 0.5) / len(x) for i in range(len(x))]
        labelled = list(zip(positions, x, strict=True))
    else:
        x_ticks = ticks(min(x), max(x))
        span = (x_ticks[-1] - x_ticks[0]) or 1.0
        positions = [LEFT + PLOT_W * (v - x_ticks[0]) / span for v in x]
        labelled = [(LEFT + PLOT_W * (t - x_ticks[0]) / span, t) for t in x_ticks]
    for position, value in labelled:
        parts.append(_text(position, TOP + PLOT_H + 18, f"{value:g}", 11))
    for i, one in enumerate(series):
        colour, dash = _colour(one, i), ' stroke-dasharray="6 3"' if one.dashed else ""
        points = " ".join(
            f"{px:.1f},{to_y(v):.1f}" for px, v in zip(positions, one.values, strict=True)
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        if len(x) <= 20:
            parts += [
                f'<circle cx="{px:.1f}" cy="{to_y(v):.1f}" r="3" fill="{colour}"/>'
                for px, v in zip(positions, one.values, strict=True)
            ]
    _legend(parts, series)
    return _write(path, parts)


def bar_chart(
    path: Path,
    title: str,
    groups: Sequence[str],
    series: Sequence[Series],
    *,
    references: Mapping[str, float] | None = None,
    y_label: str = "",
    note: str = "",
) -> Path:
    """A group of bars (one per series, its value printed on it) per entry of `groups`
    ("\\n" breaks a label), and a dashed line at each of `references`, named in the legend."""
    lines = dict(references or {})
    y_ticks = ticks(0.0, max([v for one in series for v in one.values] + list(lines.values())))
    parts, to_y = _frame(title, note, "", y_label, y_ticks)
    slot = PLOT_W / len(groups)
    width = slot * 0.8 / len(series)
    for g, group in enumerate(groups):
        parts.append(_text(LEFT + slot * (g + 0.5), TOP + PLOT_H + 18, group, 11))
        for i, one in enumerate(series):
            x, top = LEFT + slot * (g + 0.1) + width * i, to_y(one.values[g])
            parts.append(
                f'<rect x="{x:.1f}" y="{top:.1f}" width="{width:.1f}"'
                f' height="{TOP + PLOT_H - top:.1f}" fill="{_colour(one, i)}"/>'
            )
            parts.append(_text(x + width / 2, top - 4, f"{one.values[g]:g}", 10))
    for y in map(to_y, lines.values()):
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333"'
            ' stroke-dasharray="6 3"/>'
        )
    _legend(parts, [*series, *(Series(name, (), "#333", True) for name in lines)], len(series))
    return _write(path, parts)
