"""One test module per statistics module: every module ``analysis/stats/<package>/X.py`` has its
``tests/analysis/stats/<package>/test_X.py``, and every test module there is named ``test_X.py`` or
``test_X_<aspect>.py`` after a module of its folder's package. Test folders mirror the sub-packages and are
packages themselves, so that two test modules of one name in two folders (``test_agreement.py`` of stats and of
stats/ppi) are collected apart."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "analysis" / "stats"
TESTS = Path(__file__).resolve().parent
#: Test modules about the layout itself, named after no module.
META = {"test_layout.py"}


def _packages(root: Path) -> list[Path]:
    """``root`` and every folder under it holding an ``__init__.py``, as paths relative to ``root``."""
    return [p.parent.relative_to(root) for p in sorted(root.rglob("__init__.py")) if "__pycache__" not in p.parts]


def layout_problems(source: Path, tests: Path) -> list[str]:
    """What breaks the layout, one sentence each (empty when none does)."""
    problems = []
    packages = _packages(source)
    for package in packages:
        modules = sorted(p.stem for p in (source / package).glob("*.py") if p.name != "__init__.py")
        folder = tests / package
        for module in modules:
            if not (folder / f"test_{module}.py").is_file():
                problems.append(f"{(source / package / module).relative_to(source.parent)}.py has no test module "
                                f"{(folder / f'test_{module}.py').relative_to(tests.parent)}")
        for test in sorted(folder.glob("test_*.py")) if folder.is_dir() else []:
            if package == Path(".") and test.name in META:
                continue
            if not any(test.stem == f"test_{m}" or test.stem.startswith(f"test_{m}_") for m in modules):
                problems.append(f"{test.relative_to(tests.parent)} is named after no module of "
                                f"{(source / package).relative_to(source.parent)} (test_<module>[_<aspect>].py)")
        if folder.is_dir() and not (folder / "__init__.py").is_file():
            problems.append(f"{folder.relative_to(tests.parent)} has no __init__.py: its test modules would collide "
                            "by name with those of other folders")
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        if folder.relative_to(tests) not in packages:
            problems.append(f"{folder.relative_to(tests.parent)} mirrors no package of {source.name}")
    return problems


def test_every_statistics_module_has_its_test_module_and_every_test_module_its_statistics_module():
    assert {Path("."), Path("ppi")} <= set(_packages(SOURCE))  # the walk starts where the statistics are
    assert layout_problems(SOURCE, TESTS) == []


def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("", encoding="utf-8")


def test_the_layout_check_names_a_missing_test_module_a_stray_one_a_stray_folder_and_a_missing_init(tmp_path):
    source, tests = tmp_path / "src" / "stats", tmp_path / "tests" / "stats"
    _touch(source, "__init__.py", "power.py", "bootstrap.py", "ppi/__init__.py", "ppi/planner.py", "ppi/tables.py")
    _touch(tests, "__init__.py", "test_layout.py", "test_power.py", "test_power_pairwise.py", "test_powers.py",
           "test_bootstrap.py", "ppi/test_planner.py", "ppi/test_power.py", "extra/__init__.py")
    assert layout_problems(source, tests) == [
        "stats/test_powers.py is named after no module of stats (test_<module>[_<aspect>].py)",
        "stats/ppi/tables.py has no test module stats/ppi/test_tables.py",
        "stats/ppi/test_power.py is named after no module of stats/ppi (test_<module>[_<aspect>].py)",
        "stats/ppi has no __init__.py: its test modules would collide by name with those of other folders",
        "stats/extra mirrors no package of stats",
    ]
    _touch(tests, "ppi/__init__.py", "ppi/test_tables.py", "test_powers_and_more.py")
    (tests / "ppi" / "test_power.py").unlink()
    (tests / "test_powers.py").unlink()
    (tests / "extra" / "__init__.py").unlink()
    (tests / "extra").rmdir()
    assert layout_problems(source, tests) == [
        "stats/test_powers_and_more.py is named after no module of stats (test_<module>[_<aspect>].py)"]
    (tests / "test_powers_and_more.py").rename(tests / "test_power_and_more.py")
    assert layout_problems(source, tests) == []
