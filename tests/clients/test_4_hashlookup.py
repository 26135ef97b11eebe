"""Analysts' existing tools, unmodified, against the real server:
PyHashlookup pointed at the hashlookup-compatible prefix (the key in its root URL), MISP's
hashlookup expansion module with `custom_API`, and flor (DCSO's Bloom filter reader) over
the bundle's exported filters."""

import json
import random
import uuid

import pytest
from flor import BloomFilter
from pyhashlookup import Hashlookup

from misp_modules.modules.expansion import hashlookup as misp_hashlookup


def current_records(env):
    """The seeded records still current: the newest version of each family."""
    latest = {}
    for r in env.records:
        family = (r["vendor"], r["executable_name"].replace(r["version"], "{v}"), r["platform"], r["arch"])
        latest[family] = r  # records.jsonl lists each family's versions oldest first
    return list(latest.values())


@pytest.fixture
def client(env):
    return Hashlookup(root_url=f"{env.url}/hashlookup/k/{env.basic_analyst_key}/")


def test_pyhashlookup_lookup_bulk_and_info(env, client):
    with_sha1 = [r for r in current_records(env) if r.get("hash_sha1")]
    assert with_sha1
    r = with_sha1[0]
    for answer in (
        client.lookup(r["hash_md5"]),
        client.lookup(r["hash_sha1"].upper()),
        client.lookup(r["hash_sha256"]),
    ):
        assert answer["SHA-256"] == r["hash_sha256"].upper()
        assert answer["SHA-1"] == r["hash_sha1"].upper()
        assert answer["MD5"] == r["hash_md5"].upper()
        assert answer["FileName"] == r["executable_name"]
        assert answer["hashlookup:trust"] > 50
        assert answer["knowngood:classification"] == "known_vendor_release"
    missing = client.lookup("0" * 40)
    assert missing == {"message": "Non existing SHA-1", "query": "0" * 40}

    sha1s = [x["hash_sha1"] for x in with_sha1] + ["f" * 40]
    found = client.lookup(sha1s)
    assert sorted(x["SHA-1"] for x in found) == sorted(s.upper() for s in sha1s[:-1])
    md5s = [x["hash_md5"] for x in with_sha1]
    assert len(client.md5_bulk_lookup(md5s)) == len(md5s)

    info = client.info()
    assert info["hashlookup-version"]
    assert int(info["knowngood-vendor-items"]) >= len(current_records(env))
    assert client.top() == {"exist": [], "nx": []}


def test_pyhashlookup_without_a_valid_key_is_refused(env):
    bad = Hashlookup(root_url=f"{env.url}/hashlookup/k/nobody.nothing/")
    answer = bad.lookup("0" * 40)
    assert answer["error"] == "unauthorized"


def misp_query(env, kind, value):
    query = {
        "module": "hashlookup",
        "attribute": {"type": kind, "value": value, "uuid": str(uuid.uuid4())},
        "config": {"custom_API": f"{env.url}/hashlookup/k/{env.basic_analyst_key}/"},
    }
    return misp_hashlookup.handler(json.dumps(query))


def test_misp_expansion_module(env):
    r = next(x for x in current_records(env) if x.get("hash_sha1"))
    result = misp_query(env, "sha1", r["hash_sha1"])
    assert "error" not in result, result
    objects = result["results"]["Object"]
    assert objects[0]["name"] == "hashlookup"
    values = {a["object_relation"]: a["value"] for a in objects[0]["Attribute"]}
    assert values["SHA-1"] == r["hash_sha1"].upper()
    assert values["MD5"] == r["hash_md5"].upper()
    assert values["FileName"] == r["executable_name"]
    result = misp_query(env, "md5", r["hash_md5"])
    assert "error" not in result, result
    assert misp_query(env, "sha1", "0" * 40) == {"error": "Non existing hash"}


def test_misp_expansion_module_on_a_record_without_sha1_or_md5(env):
    """A manifest-only record has a SHA-256 alone. hashlookup's records always carry a
    SHA-1 and the module reads that key unconditionally: the answer holds it as null,
    which the module skips, so the expansion still gives the file's object."""
    r = next(x for x in current_records(env) if not x.get("hash_sha1") and not x.get("hash_md5"))
    result = misp_query(env, "sha256", r["hash_sha256"])
    assert "error" not in result, result
    objects = result["results"]["Object"]
    assert objects[0]["name"] == "hashlookup"
    values = {a["object_relation"]: a["value"] for a in objects[0]["Attribute"]}
    assert values["SHA-256"] == r["hash_sha256"].upper()
    assert values["FileName"] == r["executable_name"]
    assert "SHA-1" not in values and "MD5" not in values, values
    # PyHashlookup sees the same record: SHA-1 null, no MD5.
    answer = Hashlookup(root_url=f"{env.url}/hashlookup/k/{env.basic_analyst_key}/").lookup(r["hash_sha256"])
    assert answer["SHA-256"] == r["hash_sha256"].upper()
    assert answer["SHA-1"] is None
    assert "MD5" not in answer


def download(env, tmp_path, name):
    resp = env.get(f"/public/bundle/{name}")
    assert resp.status_code == 200, resp.text
    path = tmp_path / name
    path.write_bytes(resp.content)
    return path


def test_flor_reads_the_exported_filters(env, tmp_path):
    manifest = env.get("/public/bundle/manifest.json").json()
    p = manifest["false_positive_rate"]
    current = current_records(env)
    filters = {}
    for algo in ("sha256", "sha1"):
        f = BloomFilter()
        with open(download(env, tmp_path, f"vendor-{algo}.bloom"), "rb") as fh:
            f.read(fh)
        assert f.p == p
        filters[algo] = f
    for r in current:
        assert r["hash_sha256"].upper().encode() in filters["sha256"], r["executable_name"]
        if r.get("hash_sha1"):
            assert r["hash_sha1"].upper().encode() in filters["sha1"], r["executable_name"]
    rng = random.Random(20261124)
    for algo, digits in (("sha256", 64), ("sha1", 40)):
        hits = sum(
            "".join(rng.choice("0123456789ABCDEF") for _ in range(digits)).encode() in filters[algo]
            for _ in range(10_000)
        )
        # At most the declared rate, with room for chance: 5x the expected count, and at
        # least 5 (the expected count at p = 0.0001 is one).
        assert hits <= max(5, 5 * p * 10_000), f"{algo}: {hits} false positives in 10,000"
