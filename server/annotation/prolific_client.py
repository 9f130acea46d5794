"""A small client of Prolific's researcher API: the submissions of a study, to find who returned or timed out.

`GET {api}/api/v1/studies/{study_id}/submissions/` with `Authorization: Token <token>` answers
`{"results": [{"participant_id": ..., "status": ...}, ...], "_links": {"next": {"href": ...}}}` (Prolific's API
reference, "List study submissions"); the client follows `next` links on the same host only, so the token is
never sent anywhere else. The token is read from the environment ($PROLIFIC_API_TOKEN), never from a file of
the repository: it carries the researcher's full permissions on Prolific.

Every failure is ProlificApiError (exit 4 on the command line) saying what Prolific answered and what to do.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

import requests

from empeval.server.annotation.prolific import GONE_STATUSES, PROLIFIC_ID
from empeval.server.errors import BadInput, Unavailable

API_URL = "https://api.prolific.com"
TOKEN_ENV = "PROLIFIC_API_TOKEN"
MAX_PAGES = 1000  # a study has at most a few thousand submissions; a loop of `next` links stops here


class ProlificApiError(Unavailable):
    """Prolific's API could not be reached or answered something other than the submissions asked for."""


class ProlificSubmission(NamedTuple):
    participant_id: str
    status: str  # upper case, '-' for '_' (Prolific writes TIMED-OUT)


def token_from_environment() -> str:
    """The API token in $PROLIFIC_API_TOKEN; BadInput saying where to get one when it is not set."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise BadInput(f"set ${TOKEN_ENV} to a Prolific API token (Prolific: Settings > API tokens); it is read "
                       "from the environment only, never from a file")
    return token


class ProlificClient:
    """Reads a study's submissions from Prolific's API (or any server at `api_url` that speaks it)."""

    def __init__(self, token: str, *, api_url: str = API_URL, timeout: float = 30.0, max_pages: int = MAX_PAGES):
        self.api_url = api_url.rstrip("/")
        self.timeout, self.max_pages = timeout, max_pages
        self._http = requests.Session()
        self._http.headers.update({"Authorization": f"Token {token}", "Accept": "application/json"})

    def submissions(self, study_id: str) -> list[ProlificSubmission]:
        """Every submission of the Prolific study `study_id`, all pages."""
        if not PROLIFIC_ID.fullmatch(study_id):
            raise BadInput(f"{study_id[:40]!r} is not a Prolific study id (24 characters 0-9, a-f)")
        return [self._submission(entry, i) for i, entry in enumerate(self._entries(study_id))]

    def departed(self, study_id: str) -> list[str]:
        """The participants of `study_id` whose submission was returned or timed out, each once, sorted."""
        return sorted({s.participant_id for s in self.submissions(study_id) if s.status in GONE_STATUSES})

    def _entries(self, study_id: str) -> Iterator[Any]:
        url: str | None = f"{self.api_url}/api/v1/studies/{study_id}/submissions/"
        for _ in range(self.max_pages):
            if url is None:
                return
            page = self._get(url)
            results = page.get("results")
            if not isinstance(results, list):
                raise ProlificApiError(f"Prolific's answer from {url} has no list of results; is --api-url "
                                       "Prolific's API?")
            yield from results
            url = self._next(url, page)
        raise ProlificApiError(f"Prolific's submissions ran past {self.max_pages} pages; stopped (a loop of next "
                               "links?)")

    def _get(self, url: str) -> dict[str, Any]:
        try:
            answer = self._http.get(url, timeout=self.timeout)
        except requests.RequestException as error:
            raise ProlificApiError(f"could not reach Prolific's API at {url}: {type(error).__name__}; check the "
                                   "network and try again") from None
        if answer.status_code in (401, 403):
            raise ProlificApiError(f"Prolific refused the API token (HTTP {answer.status_code}): check "
                                   f"${TOKEN_ENV} and that the token's workspace owns the study")
        if answer.status_code == 404:
            raise ProlificApiError(f"Prolific knows no such study ({url} answered 404): check the study file's "
                                   "recruitment.prolific_study_id")
        if answer.status_code != 200:
            raise ProlificApiError(f"Prolific's API answered HTTP {answer.status_code} for {url}; try again later")
        try:
            page = answer.json()
        except ValueError:
            raise ProlificApiError(f"Prolific's answer from {url} is not JSON") from None
        if not isinstance(page, dict):
            raise ProlificApiError(f"Prolific's answer from {url} is not a JSON object")
        return page

    def _next(self, url: str, page: dict[str, Any]) -> str | None:
        """The next page's URL, if any: only on the API's own host (the token goes nowhere else)."""
        links = page.get("_links")
        follow = links.get("next") if isinstance(links, dict) else None
        href = follow.get("href") if isinstance(follow, dict) else None
        if not href:
            return None
        if not isinstance(href, str):
            raise ProlificApiError(f"Prolific's answer from {url} has a next link that is not a URL")
        target = urljoin(url, href)
        own = urlsplit(self.api_url)
        if urlsplit(target)[:2] != own[:2]:
            raise ProlificApiError(f"Prolific's answer points the next page to {urlsplit(target).netloc}, not "
                                   f"{own.netloc}; stopped rather than send the API token there")
        return target

    @staticmethod
    def _submission(entry: Any, index: int) -> ProlificSubmission:
        if not isinstance(entry, dict):
            raise ProlificApiError(f"Prolific's submission #{index} is not an object")
        participant = entry.get("participant_id", entry.get("participant"))
        status = entry.get("status")
        if not isinstance(participant, str) or not PROLIFIC_ID.fullmatch(participant):
            raise ProlificApiError(f"Prolific's submission #{index} has no participant id of 24 characters 0-9, a-f")
        if not isinstance(status, str):
            raise ProlificApiError(f"Prolific's submission #{index} has no status")
        return ProlificSubmission(participant, status.strip().upper().replace("_", "-"))
