"""What the Python runtime inside Warden's sandboxes offers: run it inside a
sandbox and it imports every library of the table below and prints one JSON
object (`{"python": ..., "libraries": [...]}`) on stdout.

scripts/runtime_report.py runs it through warden-run to write
docs/runtime.md, and tests/daemon_test.cc sends it as a cell to a real
session (zygote-cloned, seccomp, read-only root, no network) to check that
every library imports there. Standard library only.

Each library is (import name, distribution name, Debian 12 package). The
Debian packages are in the Makefile's DEB_PACKAGES, so `make deps` installs
them; the test checks that the two lists agree.
"""

import importlib
import importlib.metadata
import json
import sys
import time

LIBRARIES = [
    # What Gemini's code execution and E2B's code-interpreter template
    # preinstall, wherever Debian 12 packages it.
    ("numpy", "numpy", "python3-numpy"),
    ("pandas", "pandas", "python3-pandas"),
    ("matplotlib", "matplotlib", "python3-matplotlib"),
    ("scipy", "scipy", "python3-scipy"),
    ("sklearn", "scikit-learn", "python3-sklearn"),
    ("sympy", "sympy", "python3-sympy"),
    ("seaborn", "seaborn", "python3-seaborn"),
    ("statsmodels", "statsmodels", "python3-statsmodels"),
    ("networkx", "networkx", "python3-networkx"),
    ("PIL", "Pillow", "python3-pil"),
    ("skimage", "scikit-image", "python3-skimage"),
    ("imageio", "imageio", "python3-imageio"),
    ("openpyxl", "openpyxl", "python3-openpyxl"),
    ("xlrd", "xlrd", "python3-xlrd"),
    ("xlsxwriter", "XlsxWriter", "python3-xlsxwriter"),
    ("odf", "odfpy", "python3-odf"),
    ("lxml", "lxml", "python3-lxml"),
    ("bs4", "beautifulsoup4", "python3-bs4"),
    ("html5lib", "html5lib", "python3-html5lib"),
    ("markdown", "Markdown", "python3-markdown"),
    ("tabulate", "tabulate", "python3-tabulate"),
    ("dateutil", "python-dateutil", "python3-dateutil"),
    ("pytz", "pytz", "python3-tz"),
    ("jinja2", "Jinja2", "python3-jinja2"),
    ("jsonschema", "jsonschema", "python3-jsonschema"),
    ("yaml", "PyYAML", "python3-yaml"),
    ("requests", "requests", "python3-requests"),
    ("aiohttp", "aiohttp", "python3-aiohttp"),
    ("tornado", "tornado", "python3-tornado"),
    ("reportlab", "reportlab", "python3-reportlab"),
    ("docx", "python-docx", "python3-docx"),
    ("pypdf", "pypdf", "python3-pypdf"),
    ("PyPDF2", "PyPDF2", "python3-pypdf2"),
    ("joblib", "joblib", "python3-joblib"),
    ("toolz", "toolz", "python3-toolz"),
    ("mpmath", "mpmath", "python3-mpmath"),
    ("tqdm", "tqdm", "python3-tqdm"),
    ("plotly", "plotly", "python3-plotly"),
    ("xarray", "xarray", "python3-xarray"),
    ("nltk", "nltk", "python3-nltk"),
    ("soundfile", "soundfile", "python3-soundfile"),
    ("h5py", "h5py", "python3-h5py"),
    ("numexpr", "numexpr", "python3-numexpr"),
    # Session snapshots (hibernate, fork) serialise the namespace with it.
    ("dill", "dill", "python3-dill"),
    # IPython's display machinery (IPython.display), as in E2B's IPython
    # kernel: the Python kernel routes it to its own display_data.
    ("IPython", "ipython", "python3-ipython"),
    # Tools: pip installs from a pool's wheelhouse (docs/runtime.md).
    ("pip", "pip", "python3-pip"),
    ("wheel", "wheel", "python3-wheel"),
    ("setuptools", "setuptools", "python3-setuptools"),
    ("packaging", "packaging", "python3-packaging"),
]


def probe(libraries=LIBRARIES):
    """Imports each library in this process; returns one dict per library."""
    rows = []
    for module, dist, deb in libraries:
        row = {"module": module, "distribution": dist, "debian": deb}
        start = time.process_time()
        try:
            imported = importlib.import_module(module)
        except BaseException as exc:      # a library calling sys.exit() included
            row["ok"] = False
            row["error"] = "%s: %s" % (type(exc).__name__, exc)
        else:
            row["ok"] = True
            # CPU time: on a busy host the wall clock says little. Libraries
            # imported earlier (numpy first) are not counted again, and only
            # the top-level module is imported (some load the rest lazily).
            row["import_cpu_ms"] = round((time.process_time() - start) * 1000)
            row["version"] = _version(imported, dist)
        rows.append(row)
    return rows


def _version(module, dist):
    # Debian builds a few packages without their version in the metadata
    # (mpmath says 0.0.0, xarray 999): then the module's own word, if any.
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version not in (None, "999", "0.0.0"):
        return version
    own = getattr(module, "__version__", None)
    if isinstance(own, str) and own not in ("999", "0.0.0"):
        return own
    return "unknown (not recorded by Debian's build)"


def report():
    return {"python": "%d.%d.%d" % sys.version_info[:3], "libraries": probe()}


if __name__ == "__main__":
    json.dump(report(), sys.stdout, indent=1)
    sys.stdout.write("\n")
