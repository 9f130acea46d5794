"""Invite links: signed, expiring, bound to one study; printed by the CLI."""
import time

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.annotation.secrets import InvalidInvite, make_invite, read_invite


def test_an_invite_carries_its_annotator_and_study_and_expires():
    token = make_invite("k" * 40, annotator_id=7, study="pilot", days=1)
    assert read_invite("k" * 40, token) == (7, "pilot")
    with pytest.raises(InvalidInvite, match="expired"):
        read_invite("k" * 40, token, now=time.time() + 2 * 86400)


def _altered(text: str, index: int) -> str:
    """`text` with the character at `index` replaced by a different one (never the same character)."""
    return text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1:]


def test_an_altered_or_foreign_invite_is_refused_for_every_expiry(monkeypatch):
    # The expiry is part of the signed payload, so every expiry gives another token: check a range of them.
    # The first character of the signature and of the payload carry six full bits each (the last character
    # of unpadded base64 may not), so changing either always changes the decoded bytes.
    start = 1_800_000_000
    for offset in range(0, 20_000, 7):
        monkeypatch.setattr("empeval.server.annotation.secrets.time.time", lambda offset=offset: start + offset)
        token = make_invite("k" * 40, annotator_id=7, study="pilot", days=1)
        payload, signature = token.rsplit(".", 1)
        assert read_invite("k" * 40, token, now=start) == (7, "pilot")
        for altered in (f"{payload}.{_altered(signature, 0)}", f"{_altered(payload, 0)}.{signature}"):
            assert altered != token
            with pytest.raises(InvalidInvite, match="not valid"):
                read_invite("k" * 40, altered, now=start)
        with pytest.raises(InvalidInvite, match="not valid"):
            read_invite("another installation's key", token, now=start)


def test_cli_prints_one_link_per_annotator_and_the_same_person_stays_one_annotator(study_engine):
    url = study_engine.url.render_as_string(hide_password=False)
    first = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "ann", "ben", "--study", "pilot",
                                     "--base-url", "http://127.0.0.1:8000"])
    assert first.exit_code == 0, first.output
    lines = first.output.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["ann", "ben"]
    assert all(line.split("\t")[1].startswith("http://127.0.0.1:8000/annotate#") for line in lines)
    again = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "ann", "--study", "pilot"])
    from empeval.server.annotation.secrets import secret_key
    ids = {read_invite(secret_key(study_engine), line.split("/annotate#")[1])[0]
           for line in (lines[0], again.output.strip())}
    assert len(ids) == 1
    unknown = CliRunner().invoke(cli, ["--database-url", url, "annotators", "invite", "x", "--study", "nope"])
    assert unknown.exit_code == 2 and "no study named 'nope'" in unknown.output


def test_a_remembered_invite_is_checked_for_expiry_at_every_use_and_only_under_its_own_secret():
    # A verified token is remembered (secrets._verified_invite); what it may do still depends on when and where.
    token = make_invite("k" * 40, annotator_id=8, study="pilot", days=1)
    later = time.time() + 2 * 86400
    for now in (later, None, later, None):
        if now is None:
            assert read_invite("k" * 40, token) == (8, "pilot")
        else:
            with pytest.raises(InvalidInvite, match="expired"):
                read_invite("k" * 40, token, now=now)
    with pytest.raises(InvalidInvite, match="not valid"):
        read_invite("q" * 40, token)
