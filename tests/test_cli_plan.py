"""`empeval plan` counts assignments as `empeval study create` plans them, control slots included: the same design
through both commands prints the same number of assignments and the same cost (Likert and pairwise, with and
without controls); controls that would round to zero slots exit 2 in plan as they do in study create. Real
SQLite files, the real CLI."""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from tests.annotation.conftest import CONTROLS, add_responses
from tests.conftest import sample_store_copy

SYSTEMS = ["sys-a", "sys-b", "sys-c"]


@pytest.fixture
def store(tmp_path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, SYSTEMS + CONTROLS, 60)
    engine.dispose()
    yield url


def created(url: str, tmp_path, *, name: str, count: int, systems: int, k: int, per_assignment: int,
            control_rate: float, pairwise: bool = False, reward: float = 0.5, fee: float = 0.2) -> tuple[int, str]:
    """(assignments, cost) as `empeval study create` prints them for the design."""
    names = ", ".join(f'"{s}"' for s in SYSTEMS[:systems])
    controls = ", ".join(f'"{c}"' for c in CONTROLS) if control_rate else ""
    text = "\n".join([
        f'name = "{name}"', "seed = 4", 'kind = "pairwise"' if pairwise else "",
        "[contexts]", 'split = "test"', f"count = {count}",
        "[systems]", f"names = [{names}]", f'anchor = "{SYSTEMS[0]}"' if pairwise else "",
        f"controls = [{controls}]",
        "[design]", f"{'judgments_per_pair' if pairwise else 'ratings_per_response'} = {k}",
        f"items_per_assignment = {per_assignment}", f"control_rate = {control_rate}",
        "[pay]", f"per_assignment = {reward}", 'currency = "USD"', f"platform_fee = {fee}", ""])
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["--database-url", url, "study", "create", str(path)])
    assert result.exit_code == 0, result.output
    assignments = re.search(r"(\d+) assignments", result.output)
    cost = re.search(r"([\d.]+) USD on a crowd platform", result.output)
    assert assignments and cost, result.output
    return int(assignments.group(1)), cost.group(1)


def planned(tmp_path, *, count: int, k: int, per_assignment: int, control_rate: float, systems: int = 0,
            pairs: int = 0, reward: float = 0.5, fee: float = 0.2) -> tuple[int, str]:
    """(assignments, cost) of `empeval plan`'s table row for the design."""
    args = ["plan", "--contexts", str(count), "--ks", str(k), "--items-per-assignment", str(per_assignment),
            "--control-rate", str(control_rate), "--reward", str(reward), "--fee", str(fee)]
    if pairs:
        args += ["--pairwise", "--pairs", str(pairs)]
    else:
        args += ["--systems", str(systems), "--replicates", "20", "--plot", str(tmp_path / "plan.png")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for line in result.output.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[:2] == [str(k), str(count)]:
            return int(fields[-2]), fields[-1]
    raise AssertionError(f"no table row for k={k}, contexts={count}:\n{result.output}")


@pytest.mark.parametrize("count, systems, k, per_assignment, control_rate", [
    (12, 3, 2, 5, 0.2),   # one control in five slots
    (30, 2, 3, 10, 0.1),  # the study file's default rate: the old plan said 18 assignments, study create 24
    (20, 3, 1, 6, 0.0),   # no controls: blocks of contexts still round up per system
])
def test_plan_and_study_create_agree_on_assignments_and_cost_for_a_likert_design(store, tmp_path, count, systems, k,
                                                                                  per_assignment, control_rate):
    design = dict(count=count, k=k, per_assignment=per_assignment, control_rate=control_rate)
    from_plan = planned(tmp_path, systems=systems, **design)
    from_create = created(store, tmp_path, name="likert", systems=systems, **design)
    assert from_plan == from_create


def test_plan_and_study_create_agree_on_assignments_and_cost_for_a_pairwise_design(store, tmp_path):
    design = dict(count=12, k=2, per_assignment=5, control_rate=0.2)
    from_create = created(store, tmp_path, name="ab", systems=3, pairwise=True, **design)  # sys-a vs b, vs c
    from_plan = planned(tmp_path, pairs=2, **design)
    assert from_plan == from_create


def test_plan_counts_the_control_slots_it_reports(tmp_path):
    with_controls = planned(tmp_path, systems=2, count=30, k=3, per_assignment=10, control_rate=0.1)
    without = planned(tmp_path, systems=2, count=30, k=3, per_assignment=10, control_rate=0.0)
    assert with_controls[0] == 24 and without[0] == 18


@pytest.mark.parametrize("pairwise", [False, True], ids=["likert", "pairwise"])
def test_plan_refuses_controls_that_round_to_zero_naming_both_options(tmp_path, pairwise):
    args = ["plan", "--items-per-assignment", "4", "--control-rate", "0.1", "--plot", str(tmp_path / "p.png")]
    result = CliRunner().invoke(cli, args + (["--pairwise"] if pairwise else []))
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "--control-rate 0.1 x --items-per-assignment 4" in message and "rounds to 0" in message
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("option, value", [("--control-rate", "1.2"), ("--control-rate", "-0.1"),
                                           ("--items-per-assignment", "0"), ("--systems", "0")])
def test_plan_refuses_impossible_sizes_naming_the_option(tmp_path, option, value):
    result = CliRunner().invoke(cli, ["plan", option, value, "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 2 and option in result.output


def test_pairwise_plan_sizes_assignments_as_study_create_would_accept_them(store, tmp_path):
    """The A/B design needs an even number of real pairs per assignment: left to its default (10 items, rate
    0.1, so 9 pairs) plan grows the size to 11 as the study file does; given, an odd one is refused naming both
    options; and the grown design agrees with `study create` on assignments and cost."""
    grown = CliRunner().invoke(cli, ["plan", "--pairwise", "--pairs", "2", "--ks", "2", "--contexts", "12"])
    assert grown.exit_code == 0, grown.output
    assert "assignments of 11 pairs, 1 of them control" in grown.output
    refused = CliRunner().invoke(cli, ["plan", "--pairwise", "--items-per-assignment", "10"])
    assert refused.exit_code == 2
    assert "--items-per-assignment" in refused.output and "--control-rate" in refused.output
    assert "9 pair judgments" in refused.output
    design = dict(count=12, k=2, per_assignment=11, control_rate=0.1)
    assert planned(tmp_path, pairs=2, **design) == created(store, tmp_path, name="ab11", systems=3, pairwise=True,
                                                           **design)
