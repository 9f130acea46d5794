"""`empeval study create` on a real SQLite file names only commands that work: `empeval generate` for a system
the model registry knows (and that command then makes the study possible), how to register a system it does not
know, the import command for a dataset not in the store; and a design whose control slots round to zero exits 2
naming design.control_rate and design.items_per_assignment, writing nothing."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.server.store import unit_of_work
from empeval.server.store.kinds.likert import AssignmentItem, StudyItem
from empeval.server.store.models import Assignment, Study
from tests.annotation.conftest import CONTROLS, add_responses
from tests.conftest import sample_store_copy


@pytest.fixture
def store(tmp_path) -> Iterator[tuple[str, object]]:
    """A SQLite file with the bundled sample's test split and stand-in systems sys-a, sys-b and the three
    controls answering its first 40 contexts: (URL, engine)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = sample_store_copy(url)
    add_responses(engine, ["sys-a", "sys-b", *CONTROLS], 40)
    yield url, engine
    engine.dispose()


def study_file(tmp_path: Path, *, name="s", systems=("sys-a", "sys-b"), controls=(), count=12, k=2,
               per_assignment=5, control_rate=None, dataset="empatheticdialogues", pairwise=False) -> Path:
    """A study file as a researcher writes it."""
    names = ", ".join(f'"{s}"' for s in systems)
    lines = [f'name = "{name}"', "seed = 3"]
    if pairwise:
        lines.append('kind = "pairwise"')
    lines += ["[contexts]", f'dataset = "{dataset}"', 'split = "test"', f"count = {count}", "[systems]",
              f"names = [{names}]"]
    if controls:
        lines.append("controls = [" + ", ".join(f'"{c}"' for c in controls) + "]")
    lines += ["[design]", f"{'judgments_per_pair' if pairwise else 'ratings_per_response'} = {k}",
              f"items_per_assignment = {per_assignment}"]
    if control_rate is not None:
        lines.append(f"control_rate = {control_rate}")
    lines += ["[pay]", "per_assignment = 0.5", 'currency = "USD"']
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def empeval(url: str, *args: str):
    return CliRunner().invoke(cli, ["--database-url", url, *args])


def studies(engine) -> int:
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count()).select_from(Study))


def backticked_commands(message: str) -> list[str]:
    return re.findall(r"`(empeval [^`]+)`", message)


def test_every_system_without_responses_is_named_at_once_with_one_command_that_generates_them(store, tmp_path):
    url, engine = store
    path = study_file(tmp_path, systems=("sys-a", "gold", "moel", "made-up"))
    refused = empeval(url, "study", "create", str(path))
    assert refused.exit_code == 2
    assert "3 systems 'gold', 'moel', 'made-up' have no responses yet" in refused.output
    commands = backticked_commands(refused.output)
    assert commands[0] == "empeval generate --systems gold,moel --split test", refused.output
    assert "'made-up' is not in the model registry" in refused.output
    assert studies(engine) == 0


def test_a_registered_system_without_responses_gets_the_generate_command_and_that_command_works(store, tmp_path):
    url, engine = store
    path = study_file(tmp_path, systems=("sys-a", "gold"))
    refused = empeval(url, "study", "create", str(path))
    assert refused.exit_code == 2
    assert "system 'gold' has no responses yet" in refused.output
    commands = backticked_commands(refused.output)
    assert commands == ["empeval generate --systems gold --split test"], refused.output
    generated = empeval(url, *commands[0].split()[1:])
    assert generated.exit_code == 0, generated.output
    created = empeval(url, "study", "create", str(path))
    assert created.exit_code == 0, created.output
    assert "study 's': 12 contexts x 2 systems" in created.output


def test_a_system_not_in_the_registry_is_told_how_to_register_it_not_given_a_generate_that_fails(store, tmp_path):
    url, engine = store
    path = study_file(tmp_path, systems=("sys-a", "my-model"))
    refused = empeval(url, "study", "create", str(path))
    assert refused.exit_code == 2 and studies(engine) == 0
    message = " ".join(refused.output.split())
    assert "'my-model' is not in the model registry" in message
    assert "[systems.my-model]" in message and 'kind = "http"' in message
    assert "`empeval generate --config YOUR_SYSTEMS.toml --systems my-model --split test`" in message
    # The command it no longer suggests is one generate refuses:
    assert "`empeval generate --systems my-model" not in message
    bare = empeval(url, "generate", "--systems", "my-model", "--split", "test")
    assert bare.exit_code == 2 and "unknown system(s) my-model" in bare.output


def test_a_config_registering_the_system_as_advised_makes_generate_accept_it(store, tmp_path):
    """The advice's `--config` form is a command generate accepts once the system is registered there (here as a
    gold system: the point is the name, not the model)."""
    url, engine = store
    config = tmp_path / "YOUR_SYSTEMS.toml"
    config.write_text('[systems.my-model]\nkind = "gold"\n', encoding="utf-8")
    done = empeval(url, "generate", "--config", str(config), "--systems", "my-model", "--split", "test",
                   "--limit", "3")
    assert done.exit_code == 0, done.output


def test_a_study_of_registered_and_unregistered_systems_short_of_contexts_names_both_ways(store, tmp_path):
    url, engine = store
    path = study_file(tmp_path, systems=("sys-a", "sys-b"), count=41)
    refused = empeval(url, "study", "create", str(path))
    message = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "contexts.count is 41 but only 40" in message
    assert "'sys-a', 'sys-b' are not in the model registry" in message
    assert "`empeval generate --config YOUR_SYSTEMS.toml --systems sys-a,sys-b --split test`" in message


def test_a_dataset_not_in_the_store_gets_the_import_command_for_its_kind(store, tmp_path):
    url, engine = store
    refused = empeval(url, "study", "create", str(study_file(tmp_path, dataset="my-clinic")))
    assert refused.exit_code == 2
    assert "`empeval data import-jsonl PATH --dataset my-clinic`" in refused.output


@pytest.mark.parametrize("pairwise", [False, True], ids=["likert", "pairwise"])
@pytest.mark.parametrize("control_rate, per_assignment", [(0.1, 4), (0.125, 4), (0.05, 8)])
def test_controls_that_round_to_zero_exit_2_naming_both_fields_and_write_nothing(store, tmp_path, pairwise,
                                                                                   control_rate, per_assignment):
    url, engine = store
    path = study_file(tmp_path, controls=CONTROLS, control_rate=control_rate, per_assignment=per_assignment,
                      pairwise=pairwise)
    refused = empeval(url, "study", "create", str(path))
    assert refused.exit_code == 2, refused.output
    message = " ".join(refused.output.split())
    assert f"design.control_rate {control_rate:g} x design.items_per_assignment {per_assignment}" in message
    assert "rounds to 0" in message and "control-generic" in message
    assert "Traceback" not in refused.output and studies(engine) == 0


def test_the_items_per_assignment_the_refusal_suggests_puts_a_control_in_every_assignment(store, tmp_path):
    """(Likert: a pairwise design also wants its real slots even, another rule with its own message.)"""
    url, engine = store
    refused = empeval(url, "study", "create", str(study_file(tmp_path, controls=CONTROLS, control_rate=0.1,
                                                             per_assignment=4)))
    least = int(re.search(r"items_per_assignment to at least (\d+)", refused.output).group(1))
    assert least == 6  # 0.1 x 5 = 0.5 still rounds to 0 (to even)
    path = study_file(tmp_path, name="fixed", controls=CONTROLS, control_rate=0.1, per_assignment=least)
    created = empeval(url, "study", "create", str(path))
    assert created.exit_code == 0, created.output
    with unit_of_work(engine) as session:
        rows = session.execute(select(AssignmentItem.assignment_id, StudyItem.is_control)
                               .join(StudyItem, StudyItem.id == AssignmentItem.item_id)).all()
        assignments = session.scalar(select(func.count()).select_from(Assignment))
    controls = {}
    for assignment, is_control in rows:
        controls[assignment] = controls.get(assignment, 0) + int(is_control)
    assert len(controls) == assignments and set(controls.values()) == {1}


def test_controls_at_a_rate_that_gives_one_slot_are_kept(store, tmp_path):
    url, engine = store
    created = empeval(url, "study", "create", str(study_file(tmp_path, controls=CONTROLS, control_rate=0.2,
                                                             per_assignment=3)))  # 0.6 rounds to 1
    assert created.exit_code == 0, created.output
    assert "(+0 control items)" not in created.output


def test_a_local_study_costs_no_platform_fee_and_is_told_to_invite(store, tmp_path):
    url, _ = store
    done = empeval(url, "study", "create", str(study_file(tmp_path, name="local-one")))
    assert done.exit_code == 0, done.output
    assignments = int(re.search(r"(\d+) assignments", done.output).group(1))
    # 0.5 USD each to local raters, no fee; beside it what a crowd platform's default 20% fee would make it
    assert f"pay {assignments * 0.5:.2f} USD (local raters: no platform fee; {assignments * 0.6:.2f} USD on a crowd " \
           "platform with its 20% fee)" in done.output
    assert "including" not in done.output
    assert backticked_commands(done.output.split("next:")[1]) == [
        "empeval annotators invite NAME --study local-one", "empeval serve"]


def test_a_prolific_study_is_told_its_fee_and_to_make_its_link_not_to_invite(store, tmp_path):
    url, _ = store
    path = study_file(tmp_path, name="on-prolific")
    path.write_text(path.read_text() + 'platform_fee = 0.33\n[recruitment]\nplatform = "prolific"\n'
                    f'prolific_study_id = "{"a" * 24}"\ncompletion_code = "C1A2B3C4"\n', encoding="utf-8")
    done = empeval(url, "study", "create", str(path))
    assert done.exit_code == 0, done.output
    assignments = int(re.search(r"(\d+) assignments", done.output).group(1))
    assert f"cost {round(assignments * 0.5 * 1.33, 2):.2f} USD including the platform fee (33%)" in done.output
    next_commands = backticked_commands(done.output.split("next:")[1])
    assert next_commands == ["empeval prolific link on-prolific", "empeval serve"]
    assert empeval(url, "prolific", "link", "on-prolific").exit_code == 0  # the command it names works
