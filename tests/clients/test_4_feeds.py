"""The pull feeds and the TAXII server, read by the clients analysts use: stix2-validator
(strict) and the stix2 library on the bundle, taxii2-client on the TAXII server, a poller
that resumes from X-TAXII-Date-Added-Last as OpenCTI's connector does, feedparser on the
RSS feed, and jsonschema with the published JSON Feed 1.1 schema on the JSON Feed."""

import json
import os
import pathlib
import secrets
import subprocess
import time

import feedparser
import jsonschema
import pytest
import requests
import stix2
from stix2validator import ValidationOptions, validate_string
from taxii2client.v21 import ApiRoot, Collection, Server, as_pages

TAXII = "application/taxii+json;version=2.1"
HERE = pathlib.Path(__file__).parent


def current_records(env):
    """The records the feeds present: the newest version of each family in records.jsonl."""
    r = env.get("/public/hash-of-day")
    assert r.status_code == 200, r.text
    return r.json()["hashes"]


@pytest.fixture(scope="module")
def bundle(env):
    r = env.get("/public/feed/stix")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/stix+json;version=2.1"
    return r.text


@pytest.fixture(scope="module")
def collection(env):
    server = Server(env.url + "/taxii2/")
    assert server.api_roots, "discovery lists an API root"
    root = server.api_roots[0]
    assert isinstance(root, ApiRoot)
    cols = root.collections
    assert len(cols) == 1
    return cols[0]


def test_bundle_passes_strict_validation(bundle):
    # The bundle is one object to the validator: its results hold every object's findings.
    results = validate_string(bundle, ValidationOptions(version="2.1", strict=True))
    findings = results.as_dict()
    assert results.is_valid, json.dumps(findings, indent=1)
    assert results.errors == []
    assert findings.get("warnings", []) == [], json.dumps(findings, indent=1)


def test_bundle_content(env, bundle):
    objects = json.loads(bundle)["objects"]
    records = current_records(env)
    indicators = [o for o in objects if o["type"] == "indicator"]
    assert len(indicators) == len(records)
    for o in indicators:
        assert o["indicator_types"] == ["benign"]
        assert o["pattern_type"] == "stix"
        assert o["created"].endswith("Z") and len(o["created"]) == len("2026-01-01T00:00:00.000Z")
    by_sha256 = {r["hash_sha256"]: r for r in records}
    for o in objects:
        if o["type"] == "file":
            assert all(v == v.lower() for v in o["hashes"].values())
            assert o["hashes"]["SHA-256"] in by_sha256
    kinds = {o["type"] for o in objects}
    assert {"identity", "marking-definition", "file", "software", "relationship"} <= kinds
    tlp = [o for o in objects if o["type"] == "marking-definition"]
    assert tlp[0]["name"] == "TLP:CLEAR"


def test_sco_ids_are_the_deterministic_ids_stix2_computes(bundle):
    scos = [o for o in json.loads(bundle)["objects"] if o["type"] in ("file", "software")]
    assert scos
    for o in scos:
        props = {k: v for k, v in o.items() if k not in ("id", "type")}
        remade = stix2.v21.File(**props) if o["type"] == "file" else stix2.v21.Software(**props)
        assert remade.id == o["id"], (o, remade.id)


def test_taxii2_client_walks_the_server(env, collection, bundle):
    assert isinstance(collection, Collection)
    assert collection.can_read and not collection.can_write
    # Several pages.
    objects = []
    pages = 0
    for envelope in as_pages(collection.get_objects, per_request=5):
        pages += 1
        objects.extend(envelope.get("objects", []))
    assert pages >= 3
    ids = [o["id"] for o in objects]
    assert len(ids) == len(set(ids))
    assert set(ids) == {o["id"] for o in json.loads(bundle)["objects"]}

    manifest = []
    for page in as_pages(collection.get_manifest, per_request=5):
        manifest.extend(page.get("objects", []))
    assert [m["id"] for m in manifest] == ids
    assert all(m["media_type"] == "application/stix+json;version=2.1" for m in manifest)

    indicator = next(o for o in objects if o["type"] == "indicator")
    one = collection.get_object(indicator["id"])
    assert one["objects"][0] == indicator
    versions = collection.object_versions(indicator["id"])
    assert len(versions["versions"]) == 1

    # Each match[...] filter.
    only = collection.get_objects(type="indicator")
    assert {o["type"] for o in only["objects"]} == {"indicator"}
    pair = collection.get_objects(type=["file", "software"])
    assert {o["type"] for o in pair["objects"]} == {"file", "software"}
    by_id = collection.get_objects(id=indicator["id"])
    assert [o["id"] for o in by_id["objects"]] == [indicator["id"]]
    by_version = collection.get_objects(id=indicator["id"], version=indicator["modified"])
    assert [o["id"] for o in by_version["objects"]] == [indicator["id"]]
    assert "objects" not in collection.get_objects(id=indicator["id"], version="2001-01-01T00:00:00.000Z")
    assert len(collection.get_objects(spec_version="2.1", limit=1000)["objects"]) == len(ids)
    assert "objects" not in collection.get_objects(spec_version="2.0")


def test_taxii_content_negotiation_and_errors(env, collection):
    r = env.get("/taxii2/", headers={"Accept": "application/json"})
    assert r.status_code == 406
    assert r.headers["Content-Type"] == TAXII
    body = r.json()
    assert body["http_status"] == "406" and body["title"]
    missing = env.get(f"/taxii2/knowngood/status/{secrets.token_hex(8)}/", headers={"Accept": TAXII})
    assert missing.status_code == 404
    assert missing.headers["Content-Type"] == TAXII
    write = env.post(
        f"/taxii2/knowngood/collections/{collection.id}/objects/",
        headers={"Accept": TAXII, "Content-Type": TAXII},
        data=json.dumps({"objects": []}),
    )
    assert write.status_code == 405
    assert write.json()["http_status"] == "405"


def test_conditional_requests(env):
    for path in ("/public/feed.json", "/public/feed.rss", "/public/feed/stix"):
        first = env.get(path)
        assert first.status_code == 200
        etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
        assert env.get(path, headers={"If-None-Match": etag}).status_code == 304
        assert env.get(path, headers={"If-Modified-Since": modified}).status_code == 304


def test_feedparser_reads_the_rss(env):
    r = env.get("/public/feed.rss")
    assert r.headers["Content-Type"] == "application/rss+xml"
    parsed = feedparser.parse(r.content)
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    assert parsed.version == "rss20"
    records = current_records(env)
    assert len(parsed.entries) == len(records)
    guids = {e.id for e in parsed.entries}
    assert guids == {f"knowngood-record-{r['id']}" for r in records}
    assert all(e.published_parsed for e in parsed.entries)


def test_the_json_feed_matches_the_published_schema(env):
    # feedparser's releases (6.0.x) read RSS and Atom only; the JSON Feed is checked against
    # the JSON Feed 1.1 schema the jsonfeed-schema project publishes (vendored, see schemas/).
    r = env.get("/public/feed.json")
    assert r.headers["Content-Type"] == "application/feed+json"
    schema = json.loads((HERE / "schemas" / "jsonfeed-1.1.schema.json").read_text(encoding="utf-8"))
    feed = r.json()
    jsonschema.validate(feed, schema, format_checker=jsonschema.FormatChecker())
    assert feed["version"] == "https://jsonfeed.org/version/1.1"
    records = current_records(env)
    assert {i["id"] for i in feed["items"]} == {r["id"] for r in records}
    for item in feed["items"]:
        assert item["date_published"] == item["_knowngood"]["valid_from"]


def import_records(env, count):
    """Records new files through the CLI, into the running server's database."""
    path = env.data_dir.parent / f"more-{secrets.token_hex(4)}.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            name = f"feedtool-{secrets.token_hex(4)}"
            f.write(json.dumps({
                "vendor": "Feed Test", "executable_name": f"{name}.exe", "version": "1.0",
                "platform": "windows", "arch": "amd64",
                "hash_sha256": secrets.token_hex(32), "hash_sha1": secrets.token_hex(20),
                "hash_md5": secrets.token_hex(16),
                "source_url": f"https://downloads.example.com/{name}/file",
                "download_verified": True, "sig_signer": None, "sig_issuer": None,
                "sig_serial": None, "sig_thumbprint": None,
            }) + "\n")
    subprocess.run(
        [os.environ["KG_BIN"], "admin", "import-records", str(path),
         "--data-dir", str(env.data_dir), "--config", os.environ["KG_CONFIG"]],
        check=True, capture_output=True, env={**os.environ, "RUST_LOG": "warn"},
    )


class OpenCtiLikePoller:
    """One page per run; the next run's added_after is the last X-TAXII-Date-Added-Last."""

    def __init__(self, env, collection_id):
        self.env = env
        self.path = f"/taxii2/knowngood/collections/{collection_id}/objects/"
        self.added_after = None
        self.seen = []

    def run(self):
        params = {"limit": 7}
        if self.added_after:
            params["added_after"] = self.added_after
        r = self.env.get(self.path, headers={"Accept": TAXII}, params=params)
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == TAXII
        objects = r.json().get("objects", [])
        if objects:
            assert "X-TAXII-Date-Added-First" in r.headers
        self.seen.extend(o["id"] for o in objects)
        if "X-TAXII-Date-Added-Last" in r.headers:
            self.added_after = r.headers["X-TAXII-Date-Added-Last"]
        return len(objects)

    def run_until_idle(self):
        while self.run():
            pass


def wait_for_objects(env, collection, at_least):
    for _ in range(50):
        n = len(collection.get_objects(limit=1000).get("objects", []))
        if n >= at_least:
            return n
        time.sleep(0.2)
    return n


def test_a_poller_following_date_added_last_sees_every_object_once(env, collection):
    poller = OpenCtiLikePoller(env, collection.id)
    poller.run()  # a first run, then records arrive between runs
    before = len(collection.get_objects(limit=1000)["objects"])
    import_records(env, 4)
    after = wait_for_objects(env, collection, before + 4 * 5)
    assert after == before + 4 * 5, "five objects per new record"
    poller.run_until_idle()
    import_records(env, 3)
    total = wait_for_objects(env, collection, after + 3 * 5)
    poller.run_until_idle()
    assert len(poller.seen) == len(set(poller.seen)), "no object twice"
    everything = {o["id"] for o in collection.get_objects(limit=1000)["objects"]}
    assert set(poller.seen) == everything, "every object"
    assert len(everything) == total
