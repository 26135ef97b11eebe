"""PyJWT against the token routes: issued tokens verify through the published JWKS, and
forged, expired, not-yet-valid, wrongly keyed, tampered and revoked tokens are refused."""

import base64
import hashlib
import hmac
import json
import time
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from jwt.algorithms import RSAAlgorithm

PROTECTED = "/api/v1/intel/stats"  # intel:stats, tier basic: open to the basic analyst


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_json(obj) -> str:
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


def unverified_parts(token):
    header_b64, payload_b64, sig_b64 = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return (
        json.loads(base64.urlsafe_b64decode(pad(header_b64))),
        json.loads(base64.urlsafe_b64decode(pad(payload_b64))),
        sig_b64,
    )


def issue_token(env, key):
    r = env.post("/api/v1/auth/token", headers={"X-API-Key": key, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 900
    assert isinstance(body["token"], str)
    return body["token"]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def assert_unauthorized(r):
    assert r.status_code == 401, f"expected 401, got {r.status_code}: {r.text}"
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    assert r.json()["error"] == "unauthorized", r.text


@pytest.fixture(scope="module")
def jwks_url(env):
    return env.url + "/.well-known/jwks.json"


@pytest.fixture(scope="module")
def jwks(env):
    r = env.get("/.well-known/jwks.json")
    assert r.status_code == 200
    return r.json()


@pytest.fixture(scope="module")
def jwk_client(jwks_url):
    return jwt.PyJWKClient(jwks_url, cache_keys=False)


@pytest.fixture(scope="module")
def private_pem(env):
    return (env.data_dir / "secrets" / "jwt-rsa.pem").read_bytes()


@pytest.fixture(scope="module")
def basic_token(env):
    return issue_token(env, env.basic_analyst_key)


def verify(jwk_client, token):
    signing_key = jwk_client.get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        signing_key.key,
        algorithms=["RS256"],
        options={"require": ["iss", "sub", "iat", "exp", "jti"], "verify_aud": False},
    )


def test_jwks_is_rs256_and_matches_the_signing_key(jwks, private_pem):
    assert jwks["keys"], jwks
    private = serialization.load_pem_private_key(private_pem, password=None)
    current = [k for k in jwks["keys"] if k["kty"] == "RSA"]
    assert current and all(k.get("kid") for k in current), jwks
    for k in current:
        assert k.get("alg", "RS256") == "RS256"
        assert k.get("use", "sig") == "sig"
        assert "d" not in k and "p" not in k, "private parameters published"
    published = {RSAAlgorithm.from_jwk(json.dumps(k)).public_numbers() for k in current}
    assert private.public_key().public_numbers() in published


def test_token_verifies_with_pyjwkclient(env, jwk_client, jwks, basic_token):
    header, _, _ = unverified_parts(basic_token)
    assert header["alg"] == "RS256"
    assert header["kid"] in {k["kid"] for k in jwks["keys"]}
    claims = verify(jwk_client, basic_token)
    assert isinstance(claims["iss"], str) and claims["iss"]
    assert claims["sub"] == "clients-basic"
    assert claims["role"] == "analyst"
    assert claims["roles"] == ["analyst"]
    assert claims["tier"] == "basic"
    assert isinstance(claims["iat"], int) and isinstance(claims["exp"], int)
    assert claims["exp"] - claims["iat"] == 900
    assert abs(claims["iat"] - time.time()) < 120
    assert isinstance(claims["jti"], str) and claims["jti"]
    assert "act" not in claims and "imp_mode" not in claims
    # And the server accepts it.
    r = env.get(PROTECTED, headers=bearer(basic_token))
    assert r.status_code == 200, r.text


def test_each_token_has_its_own_jti(env, jwk_client):
    a = verify(jwk_client, issue_token(env, env.basic_analyst_key))
    b = verify(jwk_client, issue_token(env, env.basic_analyst_key))
    assert a["jti"] != b["jti"]


def test_refresh_with_bearer(env, jwk_client, basic_token):
    old = verify(jwk_client, basic_token)
    r = env.post(
        "/api/v1/auth/refresh",
        headers={**bearer(basic_token), "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 900
    new = verify(jwk_client, body["token"])
    for claim in ("iss", "sub", "role", "roles", "tier"):
        assert new[claim] == old[claim], claim
    assert new["exp"] - new["iat"] == 900
    assert new["iat"] >= old["iat"]
    assert new["jti"] != old["jti"]
    assert env.get(PROTECTED, headers=bearer(body["token"])).status_code == 200


def test_refresh_needs_a_jwt(env):
    assert_unauthorized(env.post("/api/v1/auth/refresh", headers={"Content-Type": "application/json"}))
    assert_unauthorized(
        env.post("/api/v1/auth/refresh", headers={"Authorization": "Bearer not.a.jwt"})
    )


# --- forged tokens ---------------------------------------------------------------------------


def claims_like(env, jwk_client, basic_token, **overrides):
    claims = verify(jwk_client, basic_token)
    now = int(time.time())
    claims.update(iat=now, exp=now + 900, jti=str(uuid.uuid4()))
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def kid_of(token):
    return unverified_parts(token)[0]["kid"]


def sign_real(private_pem, claims, kid, algorithm="RS256"):
    return jwt.encode(claims, private_pem, algorithm=algorithm, headers={"kid": kid})


def assert_rejected(env, token):
    assert_unauthorized(env.get(PROTECTED, headers=bearer(token)))
    # A rejected token must not be exchangeable for a fresh one either.
    assert_unauthorized(
        env.post("/api/v1/auth/refresh", headers={**bearer(token), "Content-Type": "application/json"})
    )


def test_control_token_minted_with_the_real_key_is_accepted(env, jwk_client, basic_token, private_pem):
    """Positive control: the forgeries below differ from this token in one respect only."""
    token = sign_real(private_pem, claims_like(env, jwk_client, basic_token), kid_of(basic_token))
    r = env.get(PROTECTED, headers=bearer(token))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
def test_alg_none_is_rejected(env, jwk_client, basic_token, alg):
    claims = claims_like(env, jwk_client, basic_token)
    header = {"alg": alg, "typ": "JWT", "kid": kid_of(basic_token)}
    for signature in ("", unverified_parts(basic_token)[2]):
        assert_rejected(env, f"{b64url_json(header)}.{b64url_json(claims)}.{signature}")


def public_pems(jwks):
    pems = []
    for k in jwks["keys"]:
        public = RSAAlgorithm.from_jwk(json.dumps(k))
        for fmt in (serialization.PublicFormat.SubjectPublicKeyInfo, serialization.PublicFormat.PKCS1):
            pem = public.public_bytes(serialization.Encoding.PEM, fmt)
            pems += [pem, pem.rstrip(b"\n")]
    return pems


@pytest.mark.parametrize("alg,digest", [("HS256", hashlib.sha256), ("HS384", hashlib.sha384), ("HS512", hashlib.sha512)])
def test_hmac_signed_with_the_public_key_pem_is_rejected(env, jwk_client, jwks, basic_token, alg, digest):
    claims = claims_like(env, jwk_client, basic_token)
    header = {"alg": alg, "typ": "JWT", "kid": kid_of(basic_token)}
    signing_input = f"{b64url_json(header)}.{b64url_json(claims)}".encode()
    for secret in public_pems(jwks):
        sig = hmac.new(secret, signing_input, digest).digest()
        assert_rejected(env, f"{signing_input.decode()}.{b64url(sig)}")


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256"])
def test_other_rsa_algorithms_with_the_real_key_are_rejected(env, jwk_client, basic_token, private_pem, alg):
    claims = claims_like(env, jwk_client, basic_token)
    assert_rejected(env, sign_real(private_pem, claims, kid_of(basic_token), algorithm=alg))


def test_expired_token_is_rejected(env, jwk_client, basic_token, private_pem):
    now = int(time.time())
    claims = claims_like(env, jwk_client, basic_token, iat=now - 2000, exp=now - 1100)
    assert_rejected(env, sign_real(private_pem, claims, kid_of(basic_token)))


def test_not_yet_valid_token_is_rejected(env, jwk_client, basic_token, private_pem):
    now = int(time.time())
    claims = claims_like(env, jwk_client, basic_token, nbf=now + 600)
    assert_rejected(env, sign_real(private_pem, claims, kid_of(basic_token)))


def test_unknown_kid_is_rejected(env, jwk_client, basic_token, private_pem):
    claims = claims_like(env, jwk_client, basic_token)
    assert_rejected(env, sign_real(private_pem, claims, "no-such-kid"))


def test_token_signed_by_another_rsa_key_is_rejected(env, jwk_client, basic_token):
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = claims_like(env, jwk_client, basic_token)
    assert_rejected(env, jwt.encode(claims, other, algorithm="RS256", headers={"kid": kid_of(basic_token)}))


@pytest.mark.parametrize(
    "change",
    [
        {"role": "platform_owner", "roles": ["platform_owner"]},
        {"tier": "enterprise"},
        {"sub": "platform"},
        {"exp": 4102444800},
    ],
    ids=["role", "tier", "sub", "exp"],
)
def test_tampered_payload_is_rejected(env, basic_token, change):
    header_b64, payload_b64, sig_b64 = basic_token.split(".")
    claims = unverified_parts(basic_token)[1]
    claims.update(change)
    assert_rejected(env, f"{header_b64}.{b64url_json(claims)}.{sig_b64}")


def test_token_of_a_revoked_key_stops_working(env, jwk_client):
    admin = {"X-API-Key": env.teams_admin_key, "Content-Type": "application/json"}
    r = env.post("/api/v1/admin/keys", headers=admin, json={"role": "analyst", "label": "clients jwt revoke"})
    assert r.status_code == 201, r.text
    issued = r.json()
    assert issued["team_id"] == "clients-teams"
    token = issue_token(env, issued["key"])
    claims = verify(jwk_client, token)
    assert (claims["sub"], claims["role"], claims["tier"]) == ("clients-teams", "analyst", "teams")
    assert env.get(PROTECTED, headers=bearer(token)).status_code == 200

    r = env.delete(f"/api/v1/admin/keys/{issued['key_id']}", headers={"X-API-Key": env.teams_admin_key})
    assert r.status_code in (200, 204), r.text

    assert_rejected(env, token)
    assert_unauthorized(env.get(PROTECTED, headers={"X-API-Key": issued["key"]}))
    assert_unauthorized(env.post("/api/v1/auth/token", headers={"X-API-Key": issued["key"]}))
    # The admin's own key is untouched.
    assert env.get(PROTECTED, headers={"X-API-Key": env.teams_admin_key}).status_code == 200
