"""`empeval data fetch-ed` against an archive served from 127.0.0.1 (the official URL is not reachable here)."""

import http.server
import tarfile
import threading
from functools import partial

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.datasets.summary import summarize
from empeval.server.store import ensure_schema, make_engine
from tests.conftest import SAMPLE_ED


@pytest.fixture
def archive_server(tmp_path):
    """Serves empatheticdialogues.tar.gz (built like the official one: a top folder with three CSVs)."""
    root = tmp_path / "www"
    root.mkdir()
    with tarfile.open(root / "empatheticdialogues.tar.gz", "w:gz") as tar:
        for split in ("train", "valid", "test"):
            source = SAMPLE_ED / ("train.csv" if split == "train" else "test.csv")
            if split == "valid":  # a distinct valid split: the sample's test conversations, renamed
                renamed = tmp_path / "valid.csv"
                lines = source.read_text().splitlines(keepends=True)
                renamed.write_text(lines[0] + "".join(line.replace("hit:", "val:", 1) for line in lines[1:]))
                source = renamed
            tar.add(source, arcname=f"empatheticdialogues/{split}.csv")
    (root / "broken.tar.gz").write_bytes(b"this is not a tarball")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_fetch_downloads_unpacks_and_imports_all_three_splits(archive_server, sqlite_url, tmp_path):
    keep = tmp_path / "kept"
    result = CliRunner().invoke(
        cli,
        [
            "--database-url",
            sqlite_url,
            "data",
            "fetch-ed",
            "--url",
            f"{archive_server}/empatheticdialogues.tar.gz",
            "--keep",
            str(keep),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = {r.split: r.dialogues for r in summarize(make_engine(sqlite_url))}
    assert rows == {"train": 1600, "valid": 320, "test": 320}
    assert (keep / "empatheticdialogues.tar.gz").is_file()


@pytest.mark.parametrize("path, message", [("missing.tar.gz", "404"), ("broken.tar.gz", "not a readable tar")])
def test_fetch_failure_is_reported_with_exit_code_4_and_imports_nothing(archive_server, sqlite_url, path, message):
    result = CliRunner().invoke(
        cli, ["--database-url", sqlite_url, "data", "fetch-ed", "--url", f"{archive_server}/{path}"]
    )
    assert result.exit_code == 4
    assert message in result.output
    engine = make_engine(sqlite_url)
    ensure_schema(engine)
    assert summarize(engine) == []
