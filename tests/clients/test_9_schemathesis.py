"""schemathesis over the server's own OpenAPI document: every operation, a bounded number of
deterministic examples (valid and invalid), checked for server errors (`not_a_server_error`)
and for responses that do not match the documented schema (`response_schema_conformance`).

Runs last (file order): it creates keys and touches accounts, which the earlier suites must
not see. Authenticated as the platform owner (X-API-Key), so that permission and tier checks
let the generated requests reach the handlers."""

import collections
import os
import re

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

URL = os.environ["KG_URL"].rstrip("/")
OWNER_KEY = os.environ["KG_OWNER_KEY"]
MAX_EXAMPLES = int(os.environ.get("KG_SCHEMATHESIS_EXAMPLES", "50"))
CHECKS = [not_a_server_error, response_schema_conformance]
HEADERS = {"X-API-Key": OWNER_KEY}
# Status codes seen per operation, to prove the run reached the handlers.
SEEN = collections.defaultdict(set)

HYPOTHESIS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def configure(schema):
    schema.config.update(base_url=URL, headers=HEADERS, request_timeout=30)
    schema.config.generation.update(
        modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
        max_examples=MAX_EXAMPLES,
        deterministic=True,
        database="none",
    )
    return schema


def run_case(case):
    response = case.call(headers=HEADERS)
    SEEN[f"{case.method.upper()} {case.path}"].add(response.status_code)
    case.validate_response(response, checks=CHECKS, headers=HEADERS)


# 1. The document exactly as the server serves it.
schema = configure(schemathesis.openapi.from_url(f"{URL}/api/v1/openapi.json", timeout=30))


@schema.parametrize()
@HYPOTHESIS
def test_api(case):
    run_case(case)


def parameter_defects(doc):
    """(operation, message) for every parameter declaration that contradicts its path."""
    defects = []
    for path, item in doc["paths"].items():
        variables = re.findall(r"\{([^}]+)\}", path)
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            name = f"{method.upper()} {path}"
            params = op.get("parameters", []) + item.get("parameters", [])
            declared = {p.get("name") for p in params if p.get("in") == "path"}
            for v in variables:
                if v not in declared:
                    defects.append((name, f"path variable {{{v}}} has no in:path parameter"))
            for p in params:
                if p.get("in") == "path" and p.get("name") not in variables:
                    defects.append((name, f"parameter {p.get('name')!r} is declared in:path but is not in the path"))
    return defects


SERVED_DOC = requests.get(f"{URL}/api/v1/openapi.json", timeout=30).json()


def _throwaway_key_id(role_grant=None):
    """A fresh analyst key on the free account (optionally with a grant), so that the
    requests that change a key do not touch the keys other tests use."""
    h = {**HEADERS, "Content-Type": "application/json"}
    r = requests.post(
        f"{URL}/api/v1/admin/keys",
        headers=h,
        json={"role": "analyst", "label": "schemathesis throwaway", "team_id": "clients-free"},
        timeout=30,
    )
    r.raise_for_status()
    key_id = r.json()["key_id"]
    if role_grant:
        g = requests.post(f"{URL}/api/v1/admin/keys/{key_id}/roles", headers=h, json={"role": role_grant}, timeout=30)
        assert g.status_code in (200, 201), g.text
    return key_id


# 2. Hand-written valid requests, validated by schemathesis the same way: random data rarely
# gets past the input checks of lookup, proofs or key issuance, so their success responses
# would otherwise never be checked against the document.
SERVED = configure(schemathesis.openapi.from_dict(SERVED_DOC))
PUTTY_081 = "f7defcfb0be592c22b52e30a2fc8ded519e5a972ae6194d9cbc7af66973b88d8"
PUTTY_080 = "3049dc530cb3e4ff07fdeba4129b32984e38817858686dedda7129a55a19f6cf"
PUTTY_081_MD5 = "d18567d9796b0779dae06393f488afad"


def _latest_log_date():
    return requests.get(f"{URL}/public/transparency", timeout=30).json()["roots"][0]["log_date"]


VALID_REQUESTS = {
    "lookup": ("POST", "/api/v1/intel/lookup", {}, {}, {"hashes": [PUTTY_081, PUTTY_081_MD5, "0" * 64]}),
    "lookup-historical": ("POST", "/api/v1/intel/lookup/historical", {}, {}, {"hashes": [PUTTY_080, PUTTY_081]}),
    "history": ("GET", "/api/v1/intel/history", {}, {"executable": "putty.exe", "limit": "10"}, None),
    "export-json": ("GET", "/api/v1/intel/export", {}, {"format": "json"}, None),
    "export-csv": ("GET", "/api/v1/intel/export", {}, {"format": "csv", "platform": "windows"}, None),
    "hash-of-day": ("GET", "/public/hash-of-day", {}, {"executable": "PUTTY.EXE"}, None),
    "day-root": ("GET", "/public/transparency/{date}", {"date": "<today>"}, {}, None),
    "proof": ("GET", "/public/transparency/{date}/proof", {"date": "<today>"}, {"sha256": PUTTY_081}, None),
    "consistency": ("GET", "/public/transparency/consistency", {}, {"first": "1", "second": "1"}, None),
    "issue-key": ("POST", "/api/v1/admin/keys", {}, {}, {"role": "auditor", "label": "st valid", "team_id": "clients-free"}),
    "grant-role": ("POST", "/api/v1/admin/keys/{key_id}/roles", {"key_id": "<new key>"}, {}, {"role": "auditor"}),
    "update-key": ("PATCH", "/api/v1/admin/keys/{key_id}", {"key_id": "<new key>"}, {}, {"label": "renamed"}),
    "audit": ("GET", "/api/v1/admin/audit", {}, {"limit": "5"}, None),
    "usage": ("GET", "/api/v1/admin/usage", {}, {}, None),
}


@pytest.mark.parametrize("name", sorted(VALID_REQUESTS))
def test_valid_request_conforms(name):
    method, path, path_params, query, body = VALID_REQUESTS[name]
    path_params = dict(path_params)
    for k, v in path_params.items():
        if v == "<today>":
            path_params[k] = _latest_log_date()
        elif v == "<new key>":
            path_params[k] = _throwaway_key_id()
    op = SERVED[path][method]
    kwargs = {"path_parameters": path_params, "query": query}
    if body is not None:
        kwargs.update(body=body, media_type="application/json")
    case = op.Case(**kwargs)
    response = case.call(headers=HEADERS)
    assert 200 <= response.status_code < 300, (name, response.status_code, response.text[:300])
    case.validate_response(response, checks=CHECKS, headers=HEADERS)


def test_openapi_parameters_match_the_paths():
    """OpenAPI 3.1 (4.8.12.1): a path parameter's name MUST match a template expression in
    the path, and every template expression needs its parameter."""
    defects = parameter_defects(SERVED_DOC)
    assert not defects, "\n".join(f"{op}: {msg}" for op, msg in defects)


def test_the_run_reached_the_handlers():
    """Not vacuous: the owner's requests were accepted, not all refused at the door."""
    must_succeed = [
        "GET /api/v1/intel/stats",
        "GET /api/v1/admin/keys",
        "GET /api/v1/admin/usage",
        "POST /api/v1/auth/token",
        "GET /public/hash-of-day",
        "GET /public/transparency",
        "GET /api/v1/intel/history",
        "GET /public/transparency/checkpoint",
    ]
    report = {op: sorted(codes) for op, codes in sorted(SEEN.items())}
    for op, codes in report.items():
        print(f"{op}: {codes}")  # shown with -s, or on failure
    for op in must_succeed:
        assert any(200 <= c < 300 for c in SEEN.get(op, ())), (op, report)


def test_owner_key_survived():
    """The run must leave the owner able to authenticate."""
    r = requests.get(f"{URL}/api/v1/admin/keys", headers=HEADERS, timeout=30)
    assert r.status_code == 200, r.text
