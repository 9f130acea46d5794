"""Invite links: signed, expiring, bound to one study; printed by the CLI."""
import time

import pytest
from click.testing import CliRunner

from entry.cli import cli
from server.annotation.secrets import InvalidInvite, make_invite, read_invite


def test_an_invite_carries_its_annotator_and_study_and_expires():
    token = make_invite("k" * 40, annotator_id=7, study="pilot", days=1)
    assert read_invite("k" * 40, token) == (7, "pilot")
    with pytest.raises(InvalidInvite, match="expired"):
        read_invite("k" * 40, token, now=time.time() + 2 * 86400)


def test_an_altered_or_foreign_invite_is_refused():
    token = make_invite("k" * 40, annotator_id=7, study="pilot")
    with pytest.raises(InvalidInvite, match="not valid"):
        read_invite("k" * 40, token[:-2] + ("A" if token[-1] != "A" else "B") + token[-1])
    with pytest.raises(InvalidInvite, match="not valid"):
        read_invite("another installation's key", token)


def test_cli_prints_one_link_per_annotator_and_the_same_person_stays_one_annotator(study_engine):
    url = study_engine.url.render_as_string(hide_password=False)
    first = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "ann", "ben", "--study", "pilot",
                                     "--base-url", "http://127.0.0.1:8000"])
    assert first.exit_code == 0, first.output
    lines = first.output.strip().splitlines()
    assert [l.split("\t")[0] for l in lines] == ["ann", "ben"]
    assert all(l.split("\t")[1].startswith("http://127.0.0.1:8000/annotate/") for l in lines)
    again = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "ann", "--study", "pilot"])
    from server.annotation.secrets import secret_key
    ids = {read_invite(secret_key(study_engine), l.split("/annotate/")[1])[0]
           for l in (lines[0], again.output.strip())}
    assert len(ids) == 1
    unknown = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "x", "--study", "nope"])
    assert unknown.exit_code == 2 and "no study named 'nope'" in unknown.output
