"""The analysis kinds come in the order of analysis/kinds/registered.py whatever a process imports first: the
ACUTE part imports the A/B part and so registers it early, and the default kind (the first, Likert) is what an
export file no kind recognises is read as. Checked in a fresh interpreter, where import order is the test's."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import empeval.analysis.kinds.acute.part  # registers pairwise, then acute, before anything else
from pathlib import Path
import tempfile
from empeval.analysis.report.study import export_kind
from empeval.analysis.kinds import analysis_kinds
print(",".join(kind.name for kind in analysis_kinds()))
unknown = Path(tempfile.mkdtemp()) / "other.csv"
unknown.write_text("a,b\\n1,2\\n", encoding="utf-8")
print(export_kind(unknown).name)
"""


def test_the_registry_order_is_registered_py_s_whatever_was_imported_first():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True)
    order, unknown_as = result.stdout.split()
    assert order.split(",") == ["likert", "pairwise", "best_worst", "chat", "acute"]
    assert unknown_as == "likert"
