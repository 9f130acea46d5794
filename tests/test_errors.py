"""One exception root: every error class of ours derives from server.errors.EmpevalError (or is analysis's,
which imports nothing of ours and is mapped by name), and the CLI maps each kind to its exit code."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import click
import pytest
from click.testing import CliRunner

import empeval
from empeval.cli import cli
from empeval.cli.common import FOREIGN_EXIT_CODES, EmpevalGroup, exit_code_of
from empeval.server.errors import BadInput, Conflict, EmpevalError, Forbidden, NotFound, Unavailable

# Run by the crowd virtualenv's Python only (they import Mephisto).
CROWD_ONLY = {"empeval.tasks.crowd.runner", "empeval.tasks.crowd.mephisto_compat"}


def _our_exception_classes() -> list[type[BaseException]]:
    found = []
    for package in (empeval,):
        for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            name = module_info.name
            if (name in CROWD_ONLY or ".migrations" in name or name.endswith("__main__")
                    or name.startswith("empeval.analysis.")):  # analysis's errors are mapped by name
                continue
            module = importlib.import_module(module_info.name)
            found += [value for value in vars(module).values()
                      if inspect.isclass(value) and issubclass(value, BaseException)
                      and value.__module__ == module.__name__]
    return found


def test_every_error_class_of_ours_derives_from_the_one_root():
    classes = _our_exception_classes()
    assert len(classes) >= 15
    strays = [f"{c.__module__}.{c.__qualname__}" for c in classes
              if not issubclass(c, EmpevalError) and c not in FOREIGN_EXIT_CODES]
    assert strays == []


@pytest.mark.parametrize(("error", "code", "status"), [
    (BadInput("x"), 2, 400), (NotFound("x"), 2, 404), (Forbidden("x"), 2, 403), (Conflict("x"), 3, 409),
    (Unavailable("x"), 4, 502), (EmpevalError("x"), 1, 500)])
def test_each_kind_has_its_exit_code_and_status(error, code, status):
    assert exit_code_of(error) == code and error.http_status == status


def test_errors_of_modules_that_import_nothing_of_ours_are_mapped_and_anything_else_is_unexpected():
    for foreign, code in FOREIGN_EXIT_CODES.items():
        assert exit_code_of(foreign("bad file")) == code == 2
    assert exit_code_of(KeyError("a bug")) is None


@pytest.mark.parametrize(("error", "code"), [(NotFound("no study named 'x'"), 2), (Conflict("differs"), 3),
                                             (Unavailable("download failed"), 4)])
def test_the_root_group_turns_an_error_of_any_command_into_its_exit_code(error, code):
    group = EmpevalGroup("empeval")

    @group.group()
    def room() -> None:
        """A nested group, as `empeval crowd` or `empeval data` are."""

    @room.command()
    def act() -> None:
        raise error

    result = CliRunner().invoke(group, ["room", "act"])
    assert result.exit_code == code
    assert f"error: {error.message}" in result.output


def test_an_unexpected_error_still_shows_its_traceback():
    group = EmpevalGroup("empeval")

    @group.command()
    def act() -> None:
        raise KeyError("a bug")

    result = CliRunner().invoke(group, ["act"])
    assert result.exit_code == 1 and isinstance(result.exception, KeyError)


def test_the_empeval_command_is_that_group():
    assert isinstance(cli, EmpevalGroup) and isinstance(cli, click.Group)
