"""An independent Python verifier of the transparency log (PyNaCl + hashlib): signed daily
roots, leaf hashes, RFC 9162 inclusion proofs and the C2SP checkpoint of the root log."""

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

PREFIX = "service-transparency-v1"
ZERO_ROOT = "0" * 64


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def node(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def leaf_hash(rec) -> bytes:
    fields = [rec["executable_name"], rec["hash_sha256"], rec["version"], rec["platform"], rec["arch"]]
    return sha256(b"\x00".join(f.encode("utf-8") for f in fields))


def mth(leaves):
    """RFC 9162 section 2.1.1 tree hash over already-hashed leaves (the service's leaves are
    unprefixed SHA-256 leaf hashes; interior nodes use the 0x01 prefix)."""
    n = len(leaves)
    if n == 0:
        return sha256(b"")
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node(mth(leaves[:k]), mth(leaves[k:]))


def root_from_inclusion_proof(leaf: bytes, index: int, size: int, path) -> bytes:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        raise ValueError("leaf index beyond the tree")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ValueError("audit path too long")
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("audit path too short")
    return r


def signed_message(root) -> bytes:
    return "\n".join(
        [PREFIX, root["log_date"], root["merkle_root"], str(root["entry_count"]), root["prev_root"]]
    ).encode("utf-8")


@pytest.fixture(scope="module")
def key_doc(env):
    r = env.get("/public/transparency/key")
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def verify_key(key_doc):
    raw = base64.b64decode(key_doc["public_key"], validate=True)
    assert len(raw) == 32
    return VerifyKey(raw)


@pytest.fixture(scope="module")
def index(env):
    r = env.get("/public/transparency")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["roots"], "run.sh published a root; none is listed"
    return body


@pytest.fixture(scope="module")
def day_root(env, index):
    log_date = index["roots"][0]["log_date"]  # newest first
    r = env.get(f"/public/transparency/{log_date}")
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def feed(env, day_root):
    r = env.get("/public/hash-of-day")
    assert r.status_code == 200, r.text
    body = r.json()
    if body["date"] != day_root["log_date"]:
        pytest.skip("the UTC day changed between publishing and testing")
    return body["hashes"]


def test_key_id_and_pem_match_the_raw_key(key_doc, index):
    raw = base64.b64decode(key_doc["public_key"], validate=True)
    assert key_doc["algorithm"] == "Ed25519"
    assert key_doc["key_id"] == hashlib.sha256(raw).digest()[:8].hex()
    pem = key_doc["public_key_pem"]
    assert pem.startswith("-----BEGIN PUBLIC KEY-----")
    loaded = serialization.load_pem_public_key(pem.encode())
    assert isinstance(loaded, Ed25519PublicKey)
    assert loaded.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw) == raw
    # The index page publishes the same key.
    assert (index["public_key"], index["public_key_pem"], index["key_id"]) == (
        key_doc["public_key"],
        key_doc["public_key_pem"],
        key_doc["key_id"],
    )
    assert key_doc["recipe"]["message_prefix"] == PREFIX


def test_public_key_is_the_one_derived_from_the_seed(env, key_doc):
    seed = bytes.fromhex((env.data_dir / "secrets" / "translog-ed25519.key").read_text().strip())
    derived = bytes(SigningKey(seed).verify_key)
    assert base64.b64decode(key_doc["public_key"]) == derived


def test_daily_root_signature(day_root, key_doc, verify_key, index):
    assert day_root == index["roots"][0]  # the day's page repeats the index entry
    assert day_root["key_id"] == key_doc["key_id"]
    for h in (day_root["merkle_root"], day_root["prev_root"]):
        assert len(h) == 64 and h == h.lower() and bytes.fromhex(h)
    sig = base64.b64decode(day_root["signature"], validate=True)
    assert len(sig) == 64
    verify_key.verify(signed_message(day_root), sig)  # raises BadSignatureError if wrong
    # Self-check of the verifier: any change to a signed field breaks the signature.
    for field, value in (("entry_count", day_root["entry_count"] + 1), ("prev_root", "f" * 64)):
        with pytest.raises(BadSignatureError):
            verify_key.verify(signed_message({**day_root, field: value}), sig)


def test_roots_chain(index, verify_key):
    roots = sorted(index["roots"], key=lambda r: r["log_date"])
    assert roots[0]["prev_root"] == ZERO_ROOT or len(roots) == 30
    for prev, cur in zip(roots, roots[1:]):
        assert cur["prev_root"] == prev["merkle_root"], cur["log_date"]
    for root in roots:
        verify_key.verify(signed_message(root), base64.b64decode(root["signature"]))


def test_root_recomputed_from_the_public_feed(day_root, feed, env):
    """The signed root is the RFC 9162 tree over the day's feed, leaves sorted bytewise and
    de-duplicated, and it covers exactly the seeded current records."""
    leaves = sorted({leaf_hash(rec) for rec in feed})
    assert day_root["entry_count"] == len(leaves)
    assert mth(leaves).hex() == day_root["merkle_root"]
    seeded_current = {}
    for rec in env.records:  # later lines of the same executable supersede earlier ones
        seeded_current[(rec["executable_name"], rec["platform"], rec["arch"])] = rec["hash_sha256"]
    assert {rec["hash_sha256"] for rec in feed} == set(seeded_current.values())


def proof_for(env, log_date, sha256_hex):
    return env.get(f"/public/transparency/{log_date}/proof", params={"sha256": sha256_hex})


def test_inclusion_proof_of_every_seeded_current_record(env, day_root, feed, verify_key):
    by_hash = {rec["hash_sha256"]: rec for rec in env.records}
    assert len(feed) >= 5
    for rec in feed:
        seeded = by_hash[rec["hash_sha256"]]
        r = proof_for(env, day_root["log_date"], rec["hash_sha256"].upper())
        assert r.status_code == 200, r.text
        proof = r.json()
        assert proof["log_date"] == day_root["log_date"]
        assert proof["sha256"] == rec["hash_sha256"]
        assert proof["merkle_root"] == day_root["merkle_root"]
        assert proof["tree_size"] == day_root["entry_count"]
        assert proof["verified"] is True and proof["root_matches"] is True
        # The leaf comes from the record as seeded, not from what the proof says.
        leaf = leaf_hash(seeded)
        assert proof["leaf_hash"] == leaf.hex()
        path = [bytes.fromhex(h) for h in proof["audit_path"]]
        root = root_from_inclusion_proof(leaf, proof["leaf_index"], proof["tree_size"], path)
        assert root.hex() == day_root["merkle_root"]
        # The signed root is what the path folds into.
        verify_key.verify(signed_message(day_root), base64.b64decode(day_root["signature"]))
        # Self-check of the verifier: a wrong leaf, a flipped path node or a wrong index fails.
        assert root_from_inclusion_proof(sha256(b"x"), proof["leaf_index"], proof["tree_size"], path) != root
        if path:
            bad = [bytes([path[0][0] ^ 1]) + path[0][1:]] + path[1:]
            assert root_from_inclusion_proof(leaf, proof["leaf_index"], proof["tree_size"], bad) != root


def test_proof_of_a_hash_outside_the_tree_is_404(env, day_root):
    superseded = next(r for r in env.records if r["executable_name"] == "putty.exe" and r["version"] == "0.80")
    for sha in (hashlib.sha256(b"never seeded").hexdigest(), superseded["hash_sha256"]):
        r = proof_for(env, day_root["log_date"], sha)
        assert r.status_code == 404, r.text
        assert r.json()["error"] == "not found"


def test_proof_rejects_a_malformed_hash(env, day_root):
    r = proof_for(env, day_root["log_date"], "xyz")
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "bad request"


# --- C2SP checkpoint ----------------------------------------------------------------------


def parse_signed_note(text: str):
    """C2SP signed-note: the text (lines ending in LF), a blank line, then signature lines
    '— <name> <base64(keyhash[4] || signature)>'."""
    assert text.endswith("\n")
    sep = text.rfind("\n\n")
    assert sep > 0, "no blank line before the signatures"
    body, sigs = text[: sep + 1], text[sep + 2 :]
    lines = sigs.split("\n")
    assert lines[-1] == ""
    signatures = []
    for line in lines[:-1]:
        assert line.startswith("\u2014 "), repr(line)
        name, b64 = line[2:].rsplit(" ", 1)
        signatures.append((name, base64.b64decode(b64, validate=True)))
    return body, signatures


def ed25519_note_key_hash(name: str, raw_public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + b"\x01" + raw_public_key).digest()[:4]


def test_checkpoint_signature_and_contents(env, key_doc, verify_key, index):
    r = env.get("/public/transparency/checkpoint")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    text = r.content.decode("utf-8")
    body, signatures = parse_signed_note(text)
    origin, size, root_b64, *extensions = body[:-1].split("\n")
    assert origin
    assert size.isdigit() and (size == "0" or not size.startswith("0")), size
    root_hash = base64.b64decode(root_b64, validate=True)
    assert len(root_hash) == 32

    raw = base64.b64decode(key_doc["public_key"])
    ours = [s for name, s in signatures if name == origin and s[:4] == ed25519_note_key_hash(origin, raw)]
    assert len(ours) == 1, f"no signature by the log key named {origin!r}: {signatures}"
    sig = ours[0][4:]
    assert len(sig) == 64
    verify_key.verify(body.encode("utf-8"), sig)
    with pytest.raises(BadSignatureError):
        verify_key.verify(body.replace(size, str(int(size) + 1), 1).encode(), sig)

    # The root log's leaves are the daily roots in date order; each leaf is SHA-256 of the
    # signed message, a line feed and the base64 signature (documented in the server's
    # transparency module). Recompute when every root fits in the index page.
    roots = sorted(index["roots"], key=lambda x: x["log_date"])
    assert int(size) >= len(roots)
    if int(size) == len(roots):
        leaves = [sha256(signed_message(x) + b"\n" + x["signature"].encode()) for x in roots]
        assert mth(leaves) == root_hash
