"""The walkthrough notebook runs clean against a study export and reaches the simulated truth."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "analysis" / "notebooks"


@pytest.mark.slow
def test_walkthrough_notebook_runs_clean_on_an_export(simulated, tmp_path, monkeypatch):
    export = tmp_path / "study.csv"
    simulated.export.to_csv(export, index=False)
    monkeypatch.setenv("EMPEVAL_EXPORT", str(export))
    monkeypatch.setenv("EMPEVAL_N_BOOT", "200")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOKS / "study_walkthrough.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert f"ratings from {export}" in text
    assert f"{len(simulated.spammers)} of 15 annotators flagged" in text
    for criterion in ("empathy", "relevance", "fluency"):
        best, middle, worst = simulated.true_ranking(criterion)
        assert f"{criterion}: {best} (" in text
        line = next(line for line in text.splitlines() if line.startswith(f"{criterion}: "))
        assert line.index(best) < line.index(middle) < line.index(worst)
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == 3  # system means, score distributions, the judge's calibration
    # The model-assisted section: one PPI++ line per simulated system, each interval around the truth it prints.
    lines = [line for line in text.splitlines() if line.startswith("model-assisted: ")]
    assert [line.split()[1] for line in lines] == ["baseline", "gold", "moel"]
    for line in lines:
        low, high = (float(x) for x in line.split("[", 1)[1].split("]", 1)[0].split(", "))
        truth = float(line.split("(truth ", 1)[1].split(";", 1)[0])
        assert low <= truth <= high, line
        assert "biased" in line and "human-rated contexts instead of 60" in line
    ppi = {line.split()[1]: float(line.split()[3]) for line in lines}
    judge_alone = {line.split()[1]: float(line.split("judge alone ", 1)[1].split(",", 1)[0]) for line in lines}
    assert judge_alone["baseline"] > judge_alone["gold"] and ppi["gold"] > ppi["baseline"]  # the bias, corrected


def test_notebooks_are_stored_without_outputs():
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), path.name
