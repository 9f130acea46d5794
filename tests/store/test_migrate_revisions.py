"""The schema check every app and command make reads the revisions without alembic (server/store/migrate.py) and
answers as alembic does: the chain parsed from migrations/versions/*.py is alembic's, the recorded revision is
MigrationContext's, at base, half-way and at head, on SQLite and PostgreSQL. A process that opens a store at head
never loads alembic."""
from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from empeval.server.errors import Conflict
from empeval.server.store import make_engine, migrate, upgrade


def test_the_parsed_chain_is_alembics():
    scripts = ScriptDirectory(str(migrate.MIGRATIONS_DIR))
    walked = [script.revision for script in scripts.walk_revisions()][::-1]  # alembic walks newest first
    assert list(migrate.revision_chain()) == walked and len(walked) >= 15
    assert migrate.head_revision() == scripts.get_current_head()
    assert migrate.next_revision(None) == walked[0]
    for older, newer in zip(walked, walked[1:], strict=False):
        assert migrate.next_revision(older) == newer == scripts.get_revision(newer).revision
        assert scripts.get_revision(newer).down_revision == older
    assert migrate.next_revision(walked[-1]) is None
    assert migrate.next_revision("not-a-revision") is None


@pytest.mark.real_migrations
def test_the_recorded_revision_is_migration_contexts_at_base_half_way_and_head(store_url):
    engine = make_engine(store_url)
    try:
        for target in (None, migrate.revision_chain()[6], "head"):
            if target is not None:
                upgrade(engine, target)
            with engine.connect() as connection:
                alembics = MigrationContext.configure(connection).get_current_revision()
            assert migrate.current_revision(engine) == alembics
            assert alembics == {None: None, "head": migrate.head_revision()}.get(target, target)
    finally:
        engine.dispose()


def test_two_recorded_revisions_are_refused_naming_both(sqlite_url):
    engine = make_engine(sqlite_url)
    try:
        upgrade(engine)
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES ('0003')"))
        with pytest.raises(Conflict, match=rf"2 revisions \(0003, {migrate.head_revision()}\) in alembic_version"):
            migrate.current_revision(engine)
    finally:
        engine.dispose()


def _versions(folder, revisions: dict[str, str | None]) -> None:
    for revision, down in revisions.items():
        (folder / f"{revision}_step.py").write_text(f'"""step"""\nrevision = "{revision}"\ndown_revision = '
                                                    f'{down!r}\n\n\ndef upgrade():\n    pass\n', encoding="utf-8")


def test_a_fork_or_an_orphan_in_the_versions_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(migrate, "VERSIONS_DIR", tmp_path)
    try:
        _versions(tmp_path, {"a1": None, "b2": "a1", "c3": "b2"})
        (tmp_path / "__init__.py").write_text("", encoding="utf-8")  # a file without a revision is no revision
        migrate.revision_chain.cache_clear()
        assert migrate.revision_chain() == ("a1", "b2", "c3") and migrate.head_revision() == "c3"
        _versions(tmp_path, {"x9": "a1"})
        migrate.revision_chain.cache_clear()
        with pytest.raises(RuntimeError, match="both follow a1"):
            migrate.revision_chain()
        (tmp_path / "x9_step.py").unlink()
        _versions(tmp_path, {"z8": "missing"})
        migrate.revision_chain.cache_clear()
        with pytest.raises(RuntimeError, match="not reachable from the first: z8"):
            migrate.revision_chain()
    finally:
        migrate.revision_chain.cache_clear()


def test_a_process_that_opens_a_store_at_head_and_serves_it_never_loads_alembic(sqlite_url):
    engine = make_engine(sqlite_url)
    upgrade(engine)
    engine.dispose()
    probe = ("import sys; from empeval.wiring import make_app; from empeval.server.store import open_store; "
             "open_store(sys.argv[1]).dispose(); make_app(sys.argv[1]); "
             "print(sorted(m for m in ('alembic', 'mako', 'pygments') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, sqlite_url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
    behind_url = sqlite_url.replace(".db", "-behind.db")
    behind = make_engine(behind_url)
    try:
        upgrade(behind, migrate.revision_chain()[2])
        done = subprocess.run([sys.executable, "-c", probe, behind_url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "alembic" in done.stdout  # a store behind is upgraded: alembic is loaded then, and only then
        assert migrate.current_revision(behind) == migrate.head_revision()
    finally:
        behind.dispose()
