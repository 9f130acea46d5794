"""The one import name: the rooms stay at the repository's top level (entry/, server/, tasks/, analysis/,
training/) and install under `empeval` (entry/ is the package itself, the others its sub-packages). Metadata and
dependencies are in pyproject.toml; this file only maps the folders, listing every package (data folders included)
below each, so that a new module or folder in a room needs no line here."""
from setuptools import find_namespace_packages, setup

ROOMS = {"empeval": "entry", "empeval.server": "server", "empeval.tasks": "tasks", "empeval.analysis": "analysis",
         "empeval.training": "training"}
SKIP = ["*node_modules*", "*__pycache__*", "*.egg-info*", "webapp.src*"]

packages = []
for package, folder in ROOMS.items():
    packages += [package, *(f"{package}.{sub}" for sub in find_namespace_packages(folder, exclude=SKIP))]

setup(package_dir=ROOMS, packages=sorted(set(packages)))
