"""Fixtures shared by every room's tests: real databases (a SQLite file, a real PostgreSQL server)."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, make_url, text

from empeval.server.store import make_engine
from tests import empty_store_template, route_builders

empty_store_template.install(lambda engine, real_upgrade: process_sample_templates().recreate_at_head(
    engine, real_upgrade))
route_builders.install()  # the suite makes thousands of apps from the same routes: see tests/route_builders.py

REPO = Path(__file__).resolve().parents[1]
FULL_ED = Path(os.environ.get("EMPEVAL_FULL_ED", REPO.parent / "shared" / "data" / "empatheticdialogues"))
SAMPLE_ED = REPO / "server" / "data" / "ed_sample"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    for candidate in reversed(candidates):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


#: Free space a memory-backed folder must have to hold the test cluster (its databases, at most a few hundred MB
#: at once, and its WAL up to max_wal_size).
MEMORY_FOLDER_NEEDS = 3 * 2**30


def _memory_folder() -> str | None:
    """/dev/shm when it is a writable memory file system with room for the test cluster, else None (the system's
    temporary folder). Each test creates and drops a database: on the 2-core machine's ext4 disk (mounted with
    `discard`) that cost the server 2-3 times the CPU it costs in memory (40 PostgreSQL tests of the annotation
    API: 15.8-23.8 s of server CPU against 6.5-7.9 s, 39-46 s against 25-30 s of wall). PostgreSQL still runs
    for real and writes every file; only where the files live changes (fsync is off for the test cluster either
    way)."""
    folder = Path("/dev/shm")
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    if not os.access(folder, os.W_OK) or stats.f_bavail * stats.f_frsize < MEMORY_FOLDER_NEEDS:
        return None
    return str(folder)


#: A cluster folder without a postmaster.pid younger than this may be one another session is still making.
STALE_AFTER_S = 600

# The tests' own files (tmp_path and tmp_path_factory: SQLite stores, exports, reports, trained models) go to a
# session folder in memory too, when /dev/shm has room: each SQLite commit of a store on the ext4 disk (synchronous
# FULL, mounted with `discard`) waited for its fsync and cost the kernel's journal CPU that no test process is
# charged for. 236 SQLite tests of the annotation API and the store: 47.6-51.5 s of wall and 43.9-48.0 s of the
# machine's CPU on disk, 41.9-44.4 s and 38.8-41.7 s in memory (2026-12-04). SQLite still writes and syncs every file
# (synchronous=FULL holds, tests/store/test_durability.py); only where the files live changes, as for PostgreSQL's
# cluster. A green session removes its folder (it held 2.4 GB of RAM); a failed one keeps it for inspection until
# the next session finds its process gone.
MEMORY_BASETEMP_NEEDS = 6 * 2**30
MEMORY_BASETEMP_PREFIX = "empeval-pytest-"
_MEMORY_BASETEMP = pytest.StashKey[Path]()
_PASSED = pytest.StashKey[bool]()


def memory_basetemp(folder: Path) -> Path:
    """This session's base folder under `folder` (empeval-pytest-UID/session-PID), made after removing the session
    folders whose process has ended."""
    root = folder / f"{MEMORY_BASETEMP_PREFIX}{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    for session in root.glob("session-*"):
        pid = session.name.removeprefix("session-")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(session, ignore_errors=True)
    return root / f"session-{os.getpid()}"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Before pytest makes its temporary folders: this session's go to memory (memory_basetemp) unless --basetemp
    names a folder, /dev/shm lacks room, or this is an xdist worker (it gets a folder of its controller's)."""
    if hasattr(config, "workerinput") or config.option.basetemp:
        return
    memory = _memory_folder()
    if memory is None:
        return
    stats = os.statvfs(memory)
    if stats.f_bavail * stats.f_frsize < MEMORY_BASETEMP_NEEDS:
        return
    config.option.basetemp = str(memory_basetemp(Path(memory)))
    config.stash[_MEMORY_BASETEMP] = Path(config.option.basetemp)


def pytest_unconfigure(config):
    """A session that passed removes its folder in memory (a failed one's stays for inspection)."""
    folder = config.stash.get(_MEMORY_BASETEMP, None)
    if folder is not None and config.stash.get(_PASSED, False):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_PASSED] = exitstatus == 0


def remove_stale_clusters(folder: Path) -> list[Path]:
    """Remove the clusters a killed test session left in `folder` (in memory, they hold RAM until the machine
    restarts): each empeval-pg-* folder older than STALE_AFTER_S whose server is not running (its postmaster.pid
    names no live process, or it has none). A server still running is left alone, and so is any younger folder:
    another session may be making it, and initdb's bootstrap steps each leave a postmaster.pid naming a process
    that has ended (removing such a folder under initdb failed the other xdist worker's PostgreSQL start: "could not
    open file base/1/3394"). The folders removed."""
    removed = []
    for root in folder.glob("empeval-pg-*"):
        try:
            if time.time() - root.stat().st_mtime < STALE_AFTER_S:
                continue
        except OSError:
            continue
        pidfile = root / "data" / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None and Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1, run as the `postgres` user when we are root
    (PostgreSQL refuses to run as root)."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        memory = _memory_folder()
        if memory is not None:
            remove_stale_clusters(Path(memory))
        self.root = Path(tempfile.mkdtemp(prefix="empeval-pg-", dir=memory))
        self.datadir = self.root / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> None:
        command = [str(a) for a in args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def start(self) -> None:
        self._run(self.bindir / "initdb", "-D", self.datadir, "-A", "trust", "-U", "empeval", "-E", "UTF8", "--no-sync")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-o", options, "-l", self.root / "log", "-w", "start")

    def stop(self) -> None:
        try:
            if (self.datadir / "postmaster.pid").exists():  # a server that never started has nothing to stop
                self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://empeval@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="session")
def postgres_admin_url():
    """URL of a PostgreSQL server for tests: $EMPEVAL_TEST_POSTGRES_URL, else one this session starts."""
    if url := os.environ.get("EMPEVAL_TEST_POSTGRES_URL"):
        yield url
        return
    bindir = _postgres_bin()
    if bindir is None:
        reason = "PostgreSQL server binaries not found (make test installs them with apt-get: package postgresql)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = PostgresServer(bindir)
    try:
        server.start()
    except subprocess.CalledProcessError as error:
        server.stop()
        pytest.fail(f"could not start PostgreSQL: {error.stderr.decode(errors='replace')}")
    yield server.admin_url
    server.stop()


# Fixtures that fill their store_url with the sample (SampleTemplates.fill): for them postgres_url makes the database
# as a copy of the sample template at once. Each DROP DATABASE forces a checkpoint, and a CREATE copies every page
# of its template: an empty database created only to be dropped and made again by fill cost about a third of a
# PostgreSQL test's server time (41 such tests: 83 checkpoints, 72 CREATE DATABASE taking 10.9 s).
FILLED_FIXTURES = frozenset({"sample_engine"})


@pytest.fixture
def postgres_url(postgres_admin_url, request):
    """A fresh PostgreSQL database for one test, dropped afterwards: empty, or already the sample store's copy when
    the test takes one of FILLED_FIXTURES (whose fill then finds it made)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_admin_url.rsplit("/", 1)[0] + f"/{name}"
    admin = process_sample_templates().admin(url)
    if FILLED_FIXTURES & set(request.fixturenames):
        process_sample_templates().create_filled(url)
    else:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield url
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session", autouse=True)
def empeval_home(tmp_path_factory):
    """Secret files of stores without a folder of their own (PostgreSQL) go to a temporary EMPEVAL_HOME, not
    the home directory of whoever runs the tests."""
    home = tmp_path_factory.mktemp("empeval-home")
    previous = os.environ.get("EMPEVAL_HOME")
    os.environ["EMPEVAL_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("EMPEVAL_HOME", None)
    else:
        os.environ["EMPEVAL_HOME"] = previous


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request) -> str:
    """An empty database on each supported backend: a SQLite file, then a real PostgreSQL database."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def empty_store(store_url):
    """An engine on a store migrated to head with nothing in it, on each backend (a copy of the head template,
    tests/empty_store_template.py, which replaces `upgrade` once this module is imported: hence the late import)."""
    from empeval.server.store import upgrade

    engine = make_engine(store_url)
    upgrade(engine)
    yield engine
    engine.dispose()


class SampleTemplates:
    """Stores migrated to head by the real migrations and holding the bundled sample's test split imported by the
    real importer, built once per test session (per xdist worker) and backend, then copied into a test's empty
    database: the SQLite file is copied, the PostgreSQL database is recreated from the template (CREATE DATABASE
    ... TEMPLATE). Every test still starts from what `empeval db upgrade` and `empeval data import-ed` make; it
    only stops paying for them again: 0.3 s a test on SQLite, 0.5-1 s on PostgreSQL (measured on the 2-core
    machine), over some 540 tests."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._sqlite: Path | None = None
        self._admins: dict[str, Engine] = {}
        self._templates: dict[str, str] = {}  # PostgreSQL admin URL (head: + it for the empty head) -> template
        self._filled: set[str] = set()  # PostgreSQL databases created as a copy of the template (create_filled)

    @staticmethod
    def _build(url: str) -> None:
        from empeval.server.datasets.ed_csv import parse_ed_csv
        from empeval.server.datasets.importer import import_dialogues
        from empeval.server.store import upgrade

        engine = make_engine(url)
        try:
            upgrade(engine)
            import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
            empty_store_template.settle_wal(engine)
        finally:
            engine.dispose()

    def fill(self, url: str) -> None:
        """Make the empty database at `url` (a SQLite file not yet written, or a PostgreSQL database nobody is
        connected to) a copy of the sample store."""
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if self._sqlite is None:
                template = self.folder / "sample.db"
                self._build(f"sqlite:///{template}")
                self._sqlite = template
            shutil.copy(self._sqlite, parsed.database)  # permission bits too: the store's file is 0600
            return
        if url in self._filled:  # made as a copy of the template by postgres_url (FILLED_FIXTURES)
            return
        with self.admin(url).connect() as connection:
            connection.execute(text(f'DROP DATABASE "{parsed.database}"'))
        self.create_filled(url)

    def create_filled(self, url: str) -> None:
        """Create the PostgreSQL database at `url` (which must not exist) as a copy of the sample template."""
        parsed = make_url(url)
        admin = self.admin(url)
        admin_url = parsed.set(database="postgres").render_as_string(hide_password=False)
        template = self._templates.get(admin_url)
        if template is None:
            template = f"sample_{uuid.uuid4().hex[:12]}"
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{template}"'))
            self._build(parsed.set(database=template).render_as_string(hide_password=False))
            self._templates[admin_url] = template
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{parsed.database}" TEMPLATE "{template}"'))
        self._filled.add(url)

    def recreate_at_head(self, engine: Engine, real_upgrade) -> None:
        """Make the empty PostgreSQL database of `engine` again as a copy of its server's head template, a database
        `real_upgrade` (the real migrations) brought to head once (tests/empty_store_template.py). The engine's
        pooled connections are closed first; it opens new ones on the copy."""
        url = engine.url
        admin = self.admin(url.render_as_string(hide_password=False))
        admin_url = url.set(database="postgres").render_as_string(hide_password=False)
        key = f"head:{admin_url}"
        template = self._templates.get(key)
        if template is None:
            template = f"head_{uuid.uuid4().hex[:12]}"
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{template}"'))
            builder = make_engine(url.set(database=template).render_as_string(hide_password=False))
            try:
                real_upgrade(builder)
            finally:
                builder.dispose()
            self._templates[key] = template
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{url.database}" WITH (FORCE)'))
            connection.execute(text(f'CREATE DATABASE "{url.database}" TEMPLATE "{template}"'))

    def admin(self, url: str) -> Engine:
        """One AUTOCOMMIT engine on the server of `url` (its `postgres` database), kept for the session: the
        fixtures create and drop each test's database through it rather than through an engine of their own."""
        admin_url = make_url(url).set(database="postgres").render_as_string(hide_password=False)
        admin = self._admins.get(admin_url)
        if admin is None:
            admin = self._admins[admin_url] = make_engine(admin_url, isolation_level="AUTOCOMMIT")
        return admin

    def close(self) -> None:
        for key, template in self._templates.items():
            try:  # the session's own server may already be stopped; an outside one keeps no template
                with self._admins[key.removeprefix("head:")].connect() as connection:
                    connection.execute(text(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)'))
            except Exception:  # noqa: BLE001 - nothing to clean up on a server that is gone
                pass
        for admin in self._admins.values():
            admin.dispose()


_TEMPLATES: list[SampleTemplates] = []  # this process's, made at first use


def process_sample_templates() -> SampleTemplates:
    """This test process's SampleTemplates (one per xdist worker), for helpers that are not fixtures; the session
    fixture below hands out the same one and removes it at the end."""
    if not _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="empeval-sample-templates-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _TEMPLATES.append(SampleTemplates(folder))
    return _TEMPLATES[0]


def sample_store_copy(url: str) -> Engine:
    """An engine on a new store at `url` (a SQLite file not yet written, or an empty PostgreSQL database) that
    holds what `empeval db upgrade` and `empeval data import-ed` of the sample's test split make: a copy of the
    session's template (SampleTemplates), 0.005 s where migrating and importing anew cost 0.7-0.9 s."""
    process_sample_templates().fill(url)
    return make_engine(url)


@pytest.fixture(scope="session")
def sample_templates():
    templates = process_sample_templates()
    yield templates
    templates.close()
    _TEMPLATES.clear()


@pytest.fixture
def full_ed() -> Path:
    if not (FULL_ED / "test.csv").is_file():
        pytest.skip(f"full EmpatheticDialogues data not found at {FULL_ED} (set EMPEVAL_FULL_ED)")
    return FULL_ED


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory, worker_id) -> Path:
    """One embedding cache per test run, shared by the xdist workers (their base folders are siblings under one
    run folder), so MiniLM encodes the sample's candidates once a run, not once a worker: the encoder's lock file
    makes a worker that wants them while another encodes them wait and load its file (encoder.encode_cached)."""
    if worker_id == "master":
        return tmp_path_factory.mktemp("embedding-cache")
    shared = tmp_path_factory.getbasetemp().parent / "embedding-cache"
    shared.mkdir(exist_ok=True)
    return shared


# The files whose tests hold the crowd virtualenv (tests/crowd/conftest.py, fixture crowd_python): its runs take
# turns through a lock, so under `--dist loadfile` two of these files on the two workers at once left one worker
# waiting on the other's Mephisto run (the setups of the mock runs showed 15-37 s of waiting each in a loaded run).
CROWD_VENV_SCOPE = "tests/crowd (every file that holds the crowd virtualenv)"


def _holds_crowd_venv(rootdir: Path, path: str) -> bool:
    try:
        return "crowd_python" in (rootdir / path).read_text(encoding="utf-8")
    except OSError:
        return False


def pytest_collection_finish(session):
    """What collecting imported (torch, pandas, scipy, the app: some 376,000 objects a worker keeps to the end) is
    moved out of the garbage collector's way: each full collection walked all of it again. Measured on
    tests/analysis, 4 workers: 8.8 s of CPU in the collector, 5.8 s frozen."""
    gc.freeze()


def pytest_runtest_setup(item):
    empty_store_template.real_migrations_for(item)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, but the files that hold the crowd virtualenv are one unit of work, run one after the
    other by one worker (they would take turns through the lock anyway) while the other worker runs the rest."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    rootdir = Path(config.rootpath)
    crowd: dict[str, bool] = {}

    class CrowdFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope not in crowd:
                crowd[scope] = _holds_crowd_venv(rootdir, scope)
            return CROWD_VENV_SCOPE if crowd[scope] else scope

    return CrowdFilesTogether(config, log)


def _heavy_tests() -> frozenset[str]:
    """The node ids and files listed in tests/heavy_tests.txt (tests/heavy_list.py): marked `heavy` for `make
    test-fast`."""
    listed = Path(__file__).with_name("heavy_tests.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in listed if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config, items):
    """Files holding a test marked `slow` run first, those with fewest tests first (a file of one slow test is one
    long end-to-end run: the demo, a Mephisto run, a fresh install), then the others by their number of tests,
    most first. pytest-xdist's `--dist loadfile` hands files to the workers in this
    order when `--no-loadscope-reorder` is given (the Makefile gives it); its own order, most tests first, put
    the demo (one test, 88 s) last, and two full runs ended with one worker on it for minutes while the other
    idled. The order inside a file is unchanged."""
    heavy = _heavy_tests()
    for item in items:
        if item.nodeid in heavy or item.nodeid.split("::")[0] in heavy:  # a test, or a whole file
            item.add_marker(pytest.mark.heavy)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    counts: dict[Path, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    def rank(item) -> tuple[bool, int]:
        slow = item.path in slow_files
        return (not slow, counts[item.path] if slow else -counts[item.path])

    items.sort(key=rank)  # stable: the order inside a file is kept
