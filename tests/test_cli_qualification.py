"""A study file with a [qualification], written as the README shows it: `empeval study create` says what raters pass
first, and `empeval crowd launch` refuses the study (crowd workers never take it; Mephisto onboards them) before
anything is started."""
from __future__ import annotations

from click.testing import CliRunner

from empeval.cli import cli
from tests.test_cli_study_create import store  # noqa: F401 - the fixture, used below

STUDY_FILE = '''name = "qual"
seed = 3
[contexts]
split = "test"
count = 6
[systems]
names = ["sys-a", "sys-b"]
[design]
ratings_per_response = 2
items_per_assignment = 3

[qualification]
min_correct = 1
attempts = 2
intro = "Two practice replies first."
[[qualification.items]]
context = ["I finally passed my driving test!"]
response = "Driving tests are held on weekdays."
answer = { empathy = [1, 2], relevance = [1, 3], fluency = [4, 5] }
feedback = "It states a fact and ignores her joy: low empathy, fluent English."
[[qualification.items]]
context = ["My grandmother passed away last night.", "Oh no, I am so sorry.", "We were very close."]
response = "That must be so painful."
answer = { empathy = [4, 5], relevance = [4, 5], fluency = [4, 5] }
feedback = "It names her loss."
'''


def test_study_create_says_what_raters_pass_first_and_the_crowd_refuses_the_study(store, tmp_path):  # noqa: F811
    url, _ = store
    path = tmp_path / "qual.toml"
    path.write_text(STUDY_FILE, encoding="utf-8")
    created = CliRunner().invoke(cli, ["--database-url", url, "study", "create", str(path)])
    assert created.exit_code == 0, created.output
    assert "raters first pass a qualification of 2 gold items (1 right to pass, 2 attempts)" in created.output
    launched = CliRunner().invoke(cli, ["--database-url", url, "crowd", "launch", "qual", "--provider", "mock"])
    assert launched.exit_code == 2, launched.output
    assert "has a [qualification], which is taken by local and Prolific raters only" in launched.output
