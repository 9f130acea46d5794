"""scripts/uv_install.py, the Makefile's installer: uv is given pip's package sources on this machine, so it picks
the packages pip would (here: the CPU build of torch that lies on disk, not the CUDA build a bare index offers)."""
from __future__ import annotations

import doctest
import importlib.util
import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "uv_install.py"


def _script_module():
    spec = importlib.util.spec_from_file_location("uv_install", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_its_examples_run():
    failures, tried = doctest.testmod(_script_module(), verbose=False, report=False)
    assert tried >= 4 and failures == 0


def test_a_later_pip_setting_wins_and_every_list_value_becomes_a_flag():
    module = _script_module()
    listing = ("global.extra-index-url='file:///a file:///b'\nglobal.find-links='/w1'\nglobal.constraint='/c.txt'\n"
               "global.index-url='https://example.org/simple'\n:env:.find-links='/w2 /w3'\n"
               ":env:.no-index='true'\n:env:.default-timeout='180'\nnot a setting\n")
    flags, env = module.uv_flags(module.pip_settings(listing))
    pairs = list(zip(flags[:-1:2], flags[1::2], strict=True))
    assert pairs[:2] == [("--index-strategy", "unsafe-best-match"), ("--index-url", "https://example.org/simple")]
    assert ("--find-links", "/w2") in pairs and ("--find-links", "/w3") in pairs
    assert ("--find-links", "/w1") not in pairs
    assert ("--extra-index-url", "file:///a") in pairs and ("--extra-index-url", "file:///b") in pairs
    assert ("--constraint", "/c.txt") in pairs
    assert flags[-1] == "--no-index"
    assert env == {"UV_HTTP_TIMEOUT": "180"}


def test_uv_through_the_script_resolves_torch_as_pip_does():
    python = sys.executable
    pip = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                          "--report", "-", "torch==2.13.0"], capture_output=True, text=True, check=True, timeout=120)
    pip_version = json.loads(pip.stdout)["install"][0]["metadata"]["version"]
    uv = subprocess.run([python, str(SCRIPT), "--python", python, "--dry-run", "--no-deps",
                         "--reinstall-package", "torch", "torch==2.13.0"], capture_output=True, text=True,
                        timeout=120)
    assert uv.returncode == 0, uv.stderr
    assert f"+ torch=={pip_version}\n" in uv.stderr + uv.stdout
