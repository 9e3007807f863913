"""What a matplotlib figure shows, as data: the `chart` of a plot.

Loaded by warden_kernel.py the first time a cell shows a figure. It reads
the figure's own objects (axes, lines, bar containers, wedges, collections,
box patches), never the rendered image, and answers a JSON-ready dict in the
shape E2B's code interpreter gives its `chart` (docs/api.md, "Charts"):

    {"type": "line" | "scatter" | "bar" | "pie" | "box_and_whisker"
             | "superchart" | "unknown",
     "title": str | None, "elements": [...],
     # two-dimensional charts:
     "x_label", "y_label", "x_unit", "y_unit": str | None,
     # line and scatter charts:
     "x_ticks", "y_ticks": [number | ISO date], "x_tick_labels", "y_tick_labels": [str],
     "x_scale", "y_scale": "linear" | "log" | "symlog" | "logit" | "datetime" | "categorical"}

elements: line and scatter {"label", "points": [[x, y], ...]}; bar {"label",
"group", "value"}; pie {"label", "angle" (degrees), "radius"}; box and
whisker {"label", "min", "first_quartile", "median", "third_quartile",
"max", "outliers"}; a superchart's elements are the charts of its axes.
A figure with several axes is a superchart; one whose axes hold no data has
no chart (None). Labels and units follow the category axis: for horizontal
bars and boxes, x_label names the categories.
"""

import datetime
import math
import re

import matplotlib
import matplotlib.category
import matplotlib.dates
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge
from matplotlib.text import Text

UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")   # "Time (s)", "Length [m]"


def figure_chart(figure):
    """The chart of a figure, or None when it shows nothing."""
    axes = figure.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if len(axes) > 1:
        title = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) is not None else ""
        return {"type": "superchart", "title": title or None,
                "elements": [axes_chart(ax) for ax in axes]}
    return axes_chart(axes[0])


def axes_chart(ax):
    kind = _kind(ax)
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    if kind == "unknown":
        return chart
    if kind == "pie":
        chart["elements"] = [{"label": w.get_label(), "angle": _round(abs(w.theta2 - w.theta1)),
                              "radius": _number(w.r)}
                             for w in ax.patches if isinstance(w, Wedge)]
        return chart
    chart.update(_labels(ax))
    if kind in ("line", "scatter"):
        chart.update(_ticks(ax, "x"))
        chart.update(_ticks(ax, "y"))
        chart["elements"] = _lines(ax) if kind == "line" else _scatters(ax)
    elif kind == "bar":
        chart["elements"] = _bars(ax, chart)
    else:
        chart["elements"] = _boxes(ax, chart)
    return chart


def _kind(ax):
    """What the axes draw, judged by the kinds of their artists (texts aside),
    the way E2B's code interpreter judges it."""
    # The axes' own furniture (spines, axis, background) is not among its
    # children; texts (annotations) are, and are no content.
    artists = [a for a in ax._children if not isinstance(a, Text)]
    if all(isinstance(a, Line2D) for a in artists):
        return "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_grid_line(a))]
    if all(isinstance(a, PathCollection) for a in artists):
        return "scatter"
    if all(isinstance(a, Wedge) for a in artists):
        return "pie"
    if all(isinstance(a, Rectangle) for a in artists):
        return "bar"
    return "unknown"


def _is_grid_line(line):
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def _labels(ax):
    out = {}
    for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        out[axis + "_label"] = label or None
        match = UNIT.search(label) if label else None
        out[axis + "_unit"] = (match.group(1) or match.group(2)) if match else None
    return out


def _swap_axes(chart):
    """Horizontal bars or boxes: x_* names the category axis."""
    for field in ("label", "unit"):
        chart["x_" + field], chart["y_" + field] = chart["y_" + field], chart["x_" + field]


def _axis(ax, name):
    return ax.xaxis if name == "x" else ax.yaxis


def _is_date_axis(axis):
    converter = getattr(axis, "converter", None)
    return isinstance(converter, (matplotlib.dates.DateConverter, matplotlib.dates._SwitchableDateConverter)) \
        or isinstance(axis.get_major_locator(), matplotlib.dates.DateLocator)


def _is_category_axis(axis):
    return isinstance(getattr(axis, "units", None), matplotlib.category.UnitData)


def _ticks(ax, name):
    axis = _axis(ax, name)
    locations = list(axis.get_majorticklocs())
    labels = [t.get_text() for t in axis.get_majorticklabels()]
    if _is_date_axis(axis):
        ticks = [matplotlib.dates.num2date(t).isoformat() for t in locations]
        scale = "datetime"
    else:
        ticks = [_number(t) for t in locations]
        scale = ax.get_xscale() if name == "x" else ax.get_yscale()
        if scale == "linear" and _is_category_axis(axis):
            scale = "categorical"
    return {name + "_ticks": ticks, name + "_tick_labels": labels, name + "_scale": scale}


def _lines(ax):
    out = []
    for i, line in enumerate(ax.get_lines()):
        if _is_grid_line(line):
            continue
        label = line.get_label()
        if label.startswith("_child"):
            label = "Line %s" % label[len("_child"):]
        out.append({"label": label,
                    "points": [[_value(x), _value(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]})
    return out


def _scatters(ax):
    out = []
    for collection in ax.collections:
        offsets = collection.get_offsets()
        out.append({"label": collection.get_label(),
                    "points": [[_number(x), _number(y)] for x, y in offsets]})
    return out


def _bars(ax, chart):
    out = []
    horizontal = False
    for container in ax.containers:
        group = container.get_label() or ""
        if group.startswith("_container"):
            group = "Group %s" % group[len("_container"):]
        horizontal = getattr(container, "orientation", None) == "horizontal"
        axis = ax.yaxis if horizontal else ax.xaxis
        for rect in container:
            if horizontal:
                center, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
            else:
                center, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
            out.append({"label": _category(axis, center), "group": group, "value": _number(value)})
    if horizontal:
        _swap_axes(chart)
    return out


def _category(axis, position):
    """The name the category axis gives `position`: the category there, or
    the tick label there, or the number itself."""
    units = getattr(axis, "units", None)
    if isinstance(units, matplotlib.category.UnitData):
        for name, value in units._mapping.items():
            if math.isclose(value, position, abs_tol=1e-9):
                return str(name)
    for location, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels()):
        if math.isclose(location, position, abs_tol=1e-9) and label.get_text():
            return label.get_text()
    return "%g" % position


def _boxes(ax, chart):
    """Box plots (boxplot(patch_artist=True)): each box's quartiles from its
    patch, median, whiskers and outliers from the lines inside its span."""
    patches = [p for p in ax.patches if isinstance(p, PathPatch)]
    if not patches:
        return []
    spans = []
    for patch in patches:
        vertices = patch.get_path().vertices
        spans.append((min(vertices[:, 0]), max(vertices[:, 0]), min(vertices[:, 1]), max(vertices[:, 1])))
    # Vertical boxes share a width; horizontal ones a height.
    widths = {round(s[1] - s[0], 9) for s in spans}
    heights = {round(s[3] - s[2], 9) for s in spans}
    horizontal = len(heights) == 1 and len(widths) > 1
    if horizontal:
        spans = [(s[2], s[3], s[0], s[1]) for s in spans]
        _swap_axes(chart)
    category_axis = ax.yaxis if horizontal else ax.xaxis
    out = []
    for lo, hi, q1, q3 in spans:
        box = {"label": _category(category_axis, (lo + hi) / 2), "min": _round(q1),
               "first_quartile": _round(q1), "median": None, "third_quartile": _round(q3),
               "max": _round(q3), "outliers": []}
        for line in ax.get_lines():
            xs, ys = list(line.get_xdata()), list(line.get_ydata())
            if horizontal:
                xs, ys = ys, xs
            if not xs or not all(lo - 1e-9 <= x <= hi + 1e-9 for x in xs):
                continue
            if line.get_linestyle() == "None":       # the fliers: markers only
                box["outliers"].extend(_round(y) for y in ys)
                continue
            if len(xs) != 2:
                continue
            y0, y1 = _round(ys[0]), _round(ys[1])
            if y0 == y1:
                if q1 <= y0 <= q3 and xs[0] != xs[1] and box["median"] is None and _spans(xs, lo, hi):
                    box["median"] = y0
                continue
            low, high = min(y0, y1), max(y0, y1)
            if math.isclose(high, q1) or high <= q1:
                box["min"] = min(box["min"], low)
            elif math.isclose(low, q3) or low >= q3:
                box["max"] = max(box["max"], high)
        if box["median"] is None:
            box["median"] = _round((q1 + q3) / 2)
        out.append(box)
    return out


def _spans(xs, lo, hi):
    # The median line runs across the whole box; caps are narrower.
    return math.isclose(min(xs), lo, abs_tol=1e-9) and math.isclose(max(xs), hi, abs_tol=1e-9)


def _round(x):
    """Rounded as E2B rounds: to 8 decimal places of the number's magnitude
    (8 - its exponent significant digits), so 323.99999 degrees is 324."""
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    digits = max(1, 8 - math.floor(math.log10(abs(x))))
    return float("%.*g" % (digits, x))


def _number(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    return x if math.isfinite(x) else None


def _value(x):
    """A data point as JSON: dates as ISO text, numbers as numbers."""
    if isinstance(x, (datetime.date, datetime.datetime)):
        return x.isoformat()
    numpy = matplotlib.dates.np
    if isinstance(x, numpy.datetime64):
        return str(x.astype("datetime64[s]"))
    if isinstance(x, str):
        return x
    return _number(x)
