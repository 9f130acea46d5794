"""Runs `uv pip install ARGS...` from the package sources pip is configured with on this machine.

The Makefile installs the environments with uv, not pip: on 2 cores a fresh `.venv` took 89 s with pip and
about 50 s with uv (parallel downloads and unpacking; 2026-12-04). uv does not read pip's configuration, so
this reads it (`pip config list`: files, then PIP_* variables, the later winning) and passes on what decides
which packages come from where: the index, extra indexes, find-links folders, constraint files, `no-index`,
the CA bundle (as SSL_CERT_FILE) and the timeout. Indexes are searched as pip searches them, for the best
version across all of them (uv's `unsafe-best-match`; uv's own default stops at the first index that has the
name).

    python scripts/uv_install.py --python .venv/bin/python -e ".[backend,dev]"

Runs with the interpreter that has uv installed (`python -m uv`); `--python` names the environment to
install into.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys

# pip's list-valued options: their values are whitespace-separated.
_LIST_FLAGS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "--constraint"}


def pip_settings(listing: str) -> dict[str, str]:
    """The effective value of each pip setting in `pip config list` output (`scope.key='value'` lines, in
    pip's load order, so a later line overrides an earlier one for the same key).

    >>> pip_settings("global.find-links='/opt/a'\\n:env:.find-links='/opt/b'\\nglobal.cert='/c.pem'")
    {'find-links': '/opt/b', 'cert': '/c.pem'}
    """
    settings: dict[str, str] = {}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        if not sep or "." not in name:
            continue
        key = name.rsplit(".", 1)[1].strip()
        settings[key] = " ".join(shlex.split(value))
    return settings


def uv_flags(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The `uv pip install` flags and environment variables that give uv pip's package sources.

    >>> flags, env = uv_flags({"extra-index-url": "file:///a file:///b", "cert": "/c.pem", "no-index": "false"})
    >>> flags[2:]
    ['--extra-index-url', 'file:///a', '--extra-index-url', 'file:///b']
    >>> env
    {'SSL_CERT_FILE': '/c.pem'}
    """
    flags = ["--index-strategy", "unsafe-best-match"]
    if settings.get("index-url"):
        flags += ["--index-url", settings["index-url"]]
    for key, flag in _LIST_FLAGS.items():
        for value in settings.get(key, "").split():
            flags += [flag, value]
    if settings.get("no-index", "").lower() in {"1", "true", "yes", "on"}:
        flags.append("--no-index")
    env = {}
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("default-timeout") or settings.get("timeout"):
        env["UV_HTTP_TIMEOUT"] = settings.get("default-timeout") or settings["timeout"]
    return flags, env


def main(argv: list[str]) -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], check=True, capture_output=True,
                             text=True).stdout
    flags, env = uv_flags(pip_settings(listing))
    command = [sys.executable, "-m", "uv", "pip", "install", *flags, *argv]
    return subprocess.run(command, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
