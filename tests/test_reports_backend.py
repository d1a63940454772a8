"""`import dsprof.reports` leaves the user's matplotlib backend alone (a notebook keeps its own)."""

import subprocess
import sys

SCRIPT = """
import matplotlib
matplotlib.use("svg")
import dsprof.reports, dsprof.cli
import pandas as pd
from dsprof.reports import prediction_figure
fig = prediction_figure(pd.DataFrame({"model": ["a"], "predicted_ms": [1.0], "measured_ms": [1.2]}))
fig.savefig(sys.argv[1], dpi=50)
import matplotlib.pyplot as plt
print(matplotlib.get_backend(), len(plt.get_fignums()))
"""


def test_importing_reports_keeps_the_backend_and_figures_save_without_pyplot(tmp_path):
    png = tmp_path / "p.png"
    run = subprocess.run([sys.executable, "-c", "import sys" + SCRIPT, str(png)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["svg", "0"]  # backend as the user chose it; no figure registered with pyplot
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
