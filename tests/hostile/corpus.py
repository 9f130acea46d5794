"""The hostile inputs, by class: each once found to make a route answer 500 or an importer end in a traceback.

Header values are what a server sees: bytes read as Latin-1, so a UTF-8 token arrives as mojibake ("Ã©").
"""
from __future__ import annotations

# Tokens with characters outside ASCII: hmac.compare_digest refuses to compare such a str (a 500 on every
# admin route, by header or by ?token=).
NON_ASCII_TOKENS = {
    "latin-1 letter": "é",
    "utf-8 read as latin-1": "Ã©tÃ© Ã\xa0 Paris",
    "c1 control": "\x85",
    "long": "ÿ" * 300,
}
NON_ASCII_QUERY_TOKENS = {"latin-1 letter": "é", "chinese": "密码", "emoji": "🔑"}

# Beyond INTEGER on PostgreSQL (2**31), beyond SQLite's 64-bit integers (2**63), beyond any machine integer.
HUGE_IDS = {"2**31": 2**31, "2**63 - 1": 2**63 - 1, "2**63": 2**63, "2**64": 2**64, "10**30": 10**30}

# Python's json recurses once per level: 50,000 levels raise RecursionError, in 100-300 KB (under the 1 MB cap).
DEEP_JSON = {
    "arrays": b"[" * 50_000 + b"]" * 50_000,
    "objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "inside a valid field": b'{"submission_id": "abcdefgh12", "ratings": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
}

# Unpaired UTF-16 surrogates: what a JSON "\ud800" escape becomes in Python; no driver can encode them.
LONE_SURROGATES = {"high": "\ud800", "low inside text": "fine \udfff words", "escaped byte": "name\udcff"}

# PostgreSQL refuses a NUL in any text, even as a query parameter; SQLite stores it.
NULS = {"alone": "\x00", "inside": "a\x00b"}

TOO_LONG = {"5,000 characters": "c" * 5000, "300 characters": "n" * 300}
