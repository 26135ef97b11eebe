"""Shared fixtures: the running server started and seeded by run.sh, described by env vars."""

import json
import os
import pathlib

import pytest
import requests

REQUIRED = (
    "KG_URL",
    "KG_DATA_DIR",
    "KG_RECORDS",
    "KG_OWNER_KEY",
    "KG_BASIC_ANALYST_KEY",
    "KG_TEAMS_ADMIN_KEY",
    "KG_ENTERPRISE_ADMIN_KEY",
)


def pytest_configure(config):
    missing = [v for v in REQUIRED if not os.environ.get(v)]
    if missing:
        raise pytest.UsageError(
            "tests/clients needs a running, seeded server: use tests/clients/run.sh "
            f"(missing {', '.join(missing)})"
        )


class Env:
    def __init__(self):
        self.url = os.environ["KG_URL"].rstrip("/")
        self.data_dir = pathlib.Path(os.environ["KG_DATA_DIR"])
        self.owner_key = os.environ["KG_OWNER_KEY"]
        self.basic_analyst_key = os.environ["KG_BASIC_ANALYST_KEY"]
        self.teams_admin_key = os.environ["KG_TEAMS_ADMIN_KEY"]
        self.enterprise_admin_key = os.environ["KG_ENTERPRISE_ADMIN_KEY"]
        self.free_analyst_key = os.environ.get("KG_FREE_ANALYST_KEY")
        with open(os.environ["KG_RECORDS"], encoding="utf-8") as f:
            self.records = [json.loads(line) for line in f if line.strip()]

    def get(self, path, **kw):
        kw.setdefault("timeout", 30)
        return requests.get(self.url + path, **kw)

    def post(self, path, **kw):
        kw.setdefault("timeout", 30)
        return requests.post(self.url + path, **kw)

    def delete(self, path, **kw):
        kw.setdefault("timeout", 30)
        return requests.delete(self.url + path, **kw)


@pytest.fixture(scope="session")
def env():
    return Env()
