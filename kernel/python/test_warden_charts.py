"""Tests of warden_charts.py: the chart of each kind of matplotlib figure,
read from the figure's objects. Run with Debian's python3 (matplotlib):

    /usr/bin/python3 -m unittest kernel/python/test_warden_charts.py
"""

import datetime
import io
import json
import os
import sys
import tempfile
import unittest

os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="warden-mpl-"))
os.environ["MPLBACKEND"] = "Agg"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import warden_charts  # noqa: E402


class ChartTest(unittest.TestCase):
    def tearDown(self):
        plt.close("all")

    def chart(self, fig=None):
        fig = fig or plt.gcf()
        fig.savefig(io.BytesIO(), format="png")   # as the kernel does, before reading
        chart = warden_charts.figure_chart(fig)
        json.dumps(chart, allow_nan=False)         # always plain JSON
        return chart

    def test_bar_chart(self):
        plt.figure()
        plt.bar(["Author A", "Author B", "Author C"], [100, 200, 300], label="Books Sold")
        plt.xlabel("Authors")
        plt.ylabel("Books [count]")
        plt.title("Book Sales")
        chart = self.chart()
        self.assertEqual((chart["type"], chart["title"]), ("bar", "Book Sales"))
        self.assertEqual((chart["x_label"], chart["y_label"], chart["x_unit"], chart["y_unit"]),
                         ("Authors", "Books [count]", None, "count"))
        self.assertEqual([(e["label"], e["group"], e["value"]) for e in chart["elements"]],
                         [("Author A", "Books Sold", 100), ("Author B", "Books Sold", 200),
                          ("Author C", "Books Sold", 300)])

    def test_horizontal_bars_of_equal_length_and_unlabelled_groups(self):
        plt.figure()
        plt.barh(["p", "q"], [4, 4])
        plt.xlabel("Amount")
        plt.ylabel("Item")
        chart = self.chart()
        self.assertEqual(chart["type"], "bar")
        # x_* names the category axis.
        self.assertEqual((chart["x_label"], chart["y_label"]), ("Item", "Amount"))
        self.assertEqual([(e["label"], e["group"], e["value"]) for e in chart["elements"]],
                         [("p", "Group 0", 4), ("q", "Group 0", 4)])

    def test_line_chart_with_dates_and_units(self):
        dates = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(10)]
        plt.figure()
        plt.plot(dates, np.sin(np.arange(10)), label="sin(x)")
        plt.plot(dates, np.cos(np.arange(10)))
        plt.xlabel("Time (s)")
        plt.ylabel("Amplitude (Hz)")
        chart = self.chart()
        self.assertEqual(chart["type"], "line")
        self.assertEqual((chart["x_unit"], chart["y_unit"]), ("s", "Hz"))
        self.assertEqual((chart["x_scale"], chart["y_scale"]), ("datetime", "linear"))
        self.assertTrue(all(isinstance(t, str) for t in chart["x_ticks"]))
        datetime.datetime.fromisoformat(chart["x_ticks"][0])
        self.assertTrue(all(isinstance(t, float) for t in chart["y_ticks"]))
        self.assertEqual([e["label"] for e in chart["elements"]], ["sin(x)", "Line 1"])
        self.assertEqual(chart["elements"][0]["points"][0], ["2023-09-01", 0.0])
        self.assertEqual(len(chart["elements"][1]["points"]), 10)

    def test_log_and_categorical_scales(self):
        plt.figure()
        plt.plot([1, 2, 3], [10, 1000, 100000])
        plt.yscale("log")
        chart = self.chart()
        self.assertEqual((chart["x_scale"], chart["y_scale"]), ("linear", "log"))
        plt.close("all")
        plt.figure()
        plt.plot([1, 2, 3], ["A", "B", "C"])
        chart = self.chart()
        self.assertEqual((chart["x_scale"], chart["y_scale"]), ("linear", "categorical"))
        self.assertEqual(chart["elements"][0]["points"], [[1, "A"], [2, "B"], [3, "C"]])

    def test_grid_lines_are_no_lines(self):
        plt.figure()
        plt.plot([0, 1, 2], [1, 0, 1])
        plt.axhline(0.5)
        chart = self.chart()
        self.assertEqual(len(chart["elements"]), 1)

    def test_scatter_chart(self):
        plt.figure()
        plt.scatter([1, 2, 3], [4, 5, 6], label="Dataset 1")
        plt.scatter([7], [8], label="Dataset 2")
        chart = self.chart()
        self.assertEqual((chart["type"], chart["title"]), ("scatter", None))
        self.assertEqual([(e["label"], e["points"]) for e in chart["elements"]],
                         [("Dataset 1", [[1, 4], [2, 5], [3, 6]]), ("Dataset 2", [[7, 8]])])

    def test_pie_chart_angles_are_rounded(self):
        fig, ax = plt.subplots()
        ax.pie([90, 10], labels=["No", "No, in blue"], startangle=90, autopct="%1.1f%%")
        ax.set_title("Tomorrow")
        chart = self.chart(fig)
        self.assertEqual((chart["type"], chart["title"]), ("pie", "Tomorrow"))
        self.assertEqual([(e["label"], e["angle"], e["radius"]) for e in chart["elements"]],
                         [("No", 324, 1), ("No, in blue", 36, 1)])

    def test_box_and_whisker_chart(self):
        data = {"Class A": [85, 90, 78, 92, 88], "Class B": [95, 89, 76, 91, 84, 87],
                "Class C": [75, 82, 88, 79, 86]}
        for vertical in (True, False):
            with self.subTest(vertical=vertical):
                fig, ax = plt.subplots()
                ax.set_xlabel("Class" if vertical else "Score")
                ax.set_ylabel("Score" if vertical else "Class")
                ax.boxplot(data.values(), labels=data.keys(), patch_artist=True, vert=vertical)
                chart = self.chart(fig)
                self.assertEqual(chart["type"], "box_and_whisker")
                self.assertEqual((chart["x_label"], chart["y_label"]), ("Class", "Score"))
                self.assertEqual([e["label"] for e in chart["elements"]], list(data))
                self.assertEqual([e["outliers"] for e in chart["elements"]], [[], [76], []])
                self.assertEqual([e["min"] for e in chart["elements"]], [78, 84, 75])
                self.assertEqual([e["first_quartile"] for e in chart["elements"]], [85, 84.75, 79])
                self.assertEqual([e["median"] for e in chart["elements"]], [88, 88, 82])
                self.assertEqual([e["third_quartile"] for e in chart["elements"]], [90, 90.5, 86])
                self.assertEqual([e["max"] for e in chart["elements"]], [92, 95, 88])
                plt.close("all")

    def test_several_axes_make_a_superchart(self):
        fig, axs = plt.subplots(1, 2)
        fig.suptitle("Both")
        axs[0].plot([1, 2], [3, 4])
        axs[0].set_title("Line")
        axs[1].scatter([1], [2])
        chart = self.chart(fig)
        self.assertEqual((chart["type"], chart["title"]), ("superchart", "Both"))
        self.assertEqual([(c["type"], c["title"]) for c in chart["elements"]], [("line", "Line"), ("scatter", None)])

    def test_other_artists_are_unknown_and_a_blank_figure_has_no_chart(self):
        fig, ax = plt.subplots()
        ax.add_artist(plt.Circle((0, 0), 1, fill=False))
        ax.set_title("Circle")
        self.assertEqual(self.chart(fig), {"type": "unknown", "title": "Circle", "elements": []})
        plt.close("all")
        fig, ax = plt.subplots()
        self.assertIsNone(self.chart(fig))

    def test_nan_points_are_null(self):
        plt.figure()
        plt.plot([1, 2, 3], [1, float("nan"), 3])
        self.assertEqual(self.chart()["elements"][0]["points"][1], [2, None])


if __name__ == "__main__":
    unittest.main()
