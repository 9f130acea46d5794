"""Runs in the crowd virtualenv: the real runner against Mephisto's real MTurk sandbox provider, with every
MTurk call answered offline.

    python sandbox_harness.py launch JOB_DIR
        a botocore `before-call.mturk` handler on the session Mephisto's datastore uses answers each
        operation (CreateHITWithHITType after $EMPEVAL_HARNESS_HIT_SECONDS); GetHIT mirrors Mephisto's own
        view of the unit (Assignable, Unassignable once a worker holds it, Reviewable once submitted), as
        MTurk would. Every call goes to JOB_DIR/mturk_calls.jsonl,
        created HITs to JOB_DIR/hits.json.
    python sandbox_harness.py review JOB_DIR ACTIONS EXPECTED
        the runner's review with botocore's Stubber on the MTurk client: EXPECTED is a JSON list of
        {"operation", "params", "response"} ("ANY" matches anything); exit 1 on any mismatch.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILE = "empeval-test"
HIT_SECONDS = float(os.environ.get("EMPEVAL_HARNESS_HIT_SECONDS", "0"))  # how long each CreateHIT call takes


def load_runner():
    spec = importlib.util.spec_from_file_location("runner", REPO / "tasks" / "crowd" / "runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner


class Http:
    status_code = 200
    headers: dict = {}


class OfflineMTurk:
    def __init__(self, job_dir: Path, db):
        self.job_dir, self.db = job_dir, db
        self.lock = threading.Lock()
        self.hits: list[dict] = []

    def hit_status(self, hit_id: str) -> str:
        from mephisto.data_model.unit import Unit

        datastore = self.db.get_datastore_for_provider("mturk_sandbox")
        with datastore.table_access_condition:
            row = datastore._get_connection().execute("SELECT unit_id FROM hits WHERE hit_id = ?", (hit_id,)).fetchone()
        if row is None or row["unit_id"] is None:
            return "Assignable"
        agent = Unit.get(self.db, row["unit_id"]).get_assigned_agent()
        if agent is not None and agent.get_status() in ("completed", "approved", "rejected", "soft_rejected"):
            return "Reviewable"
        return "Unassignable"

    def __call__(self, model, params, **kwargs):
        operation = model.name
        body = json.loads(params["body"]) if params.get("body") else {}
        with self.lock:
            with open(self.job_dir / "mturk_calls.jsonl", "a") as log:
                log.write(json.dumps({"operation": operation, "params": body}) + "\n")
            if operation == "CreateHITType":
                return Http(), {"HITTypeId": "HT-1"}
            if operation == "CreateHITWithHITType":
                time.sleep(HIT_SECONDS)  # MTurk takes its time; the run must not be called live before it answers
                url = body["Question"].split("<ExternalURL>")[1].split("</ExternalURL>")[0].replace("&amp;", "&")
                hit = {"HITId": f"HIT-{len(self.hits) + 1}", "HITTypeId": body["HITTypeId"], "url": url}
                self.hits.append(hit)
                (self.job_dir / "hits.json.tmp").write_text(json.dumps(self.hits))
                (self.job_dir / "hits.json.tmp").replace(self.job_dir / "hits.json")  # the test reads it meanwhile
                return Http(), {"HIT": {"HITId": hit["HITId"], "HITTypeId": hit["HITTypeId"], "HITGroupId": "G-1"}}
        if operation == "GetHIT":
            status = self.hit_status(body["HITId"])
            return Http(), {"HIT": {"HITId": body["HITId"], "HITStatus": status,
                                    "NumberOfAssignmentsAvailable": 1 if status == "Assignable" else 0,
                                    "NumberOfAssignmentsPending": 1 if status == "Unassignable" else 0,
                                    "NumberOfAssignmentsCompleted": 1 if status == "Reviewable" else 0}}
        if operation == "ListQualificationTypes":
            return Http(), {"NumResults": 0, "QualificationTypes": []}
        if operation == "CreateQualificationType":
            return Http(), {"QualificationType": {"QualificationTypeId": "QT-" + body["Name"], "Name": body["Name"]}}
        if operation == "GetAccountBalance":
            return Http(), {"AvailableBalance": "10000.00"}
        if operation == "ListHITs":
            return Http(), {"NumResults": 0, "HITs": []}
        return Http(), {}


def launch(job_dir: Path) -> int:
    runner = load_runner()

    def prepare_operator(operator):
        import boto3

        session = boto3.Session(profile_name=PROFILE, region_name="us-east-1")
        session.events.register("before-call.mturk", OfflineMTurk(job_dir, operator.db))
        operator.db.get_datastore_for_provider("mturk_sandbox").session_storage[PROFILE] = session

    return runner.launch(job_dir, prepare_operator=prepare_operator)


def review(job_dir: Path, actions_path: Path, expected_path: Path) -> int:
    import boto3
    from botocore.stub import ANY, Stubber

    runner = load_runner()
    expected = json.loads(expected_path.read_text())
    client = boto3.Session(profile_name=PROFILE, region_name="us-east-1").client(
        "mturk", region_name="us-east-1", endpoint_url="https://mturk-requester-sandbox.us-east-1.amazonaws.com")
    stubber = Stubber(client)
    for call in expected:
        params = {k: (ANY if v == "ANY" else v) for k, v in call["params"].items()}
        stubber.add_response(call["operation"], call.get("response", {}), params)
    stubber.activate()

    class StubbedSession:
        def client(self, *args, **kwargs):
            return client

    def prepare_db(db):
        db.get_datastore_for_provider("mturk_sandbox").session_storage[PROFILE] = StubbedSession()

    status = runner.review(job_dir, json.loads(actions_path.read_text()), prepare_db=prepare_db)
    stubber.assert_no_pending_responses()
    return status


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    command, job = sys.argv[1], Path(sys.argv[2]).resolve()
    sys.exit(launch(job) if command == "launch" else review(job, Path(sys.argv[3]), Path(sys.argv[4])))
