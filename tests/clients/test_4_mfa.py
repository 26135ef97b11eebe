"""pyotp and soft-webauthn against the second-factor routes: an invited user is refused with
MFA_REQUIRED until they enrol, an authenticator app (pyotp) enrols and signs in, and a
software passkey (soft-webauthn) registers and signs in; an authenticator that does not
verify its user is refused."""

import base64
import datetime

import pyotp
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2 import cbor
from fido2.utils import sha256
from soft_webauthn import SoftWebauthnDevice

STATS = "/api/v1/intel/stats"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def invited_session(env, role="analyst"):
    r = env.post(
        "/api/v1/admin/invites",
        headers={"X-API-Key": env.teams_admin_key},
        json={"role": role, "display_name": "Client test", "contact": "client@example.org"},
    )
    assert r.status_code == 201, r.text
    r = env.post("/api/v1/auth/invite", json={"code": r.json()["code"]})
    assert r.status_code == 200, r.text
    return r.json()["token"]


class VerifyingDevice(SoftWebauthnDevice):
    """soft-webauthn sets only "user present"; this device also reports "user verified"
    (as one that checked a PIN would), which the service requires."""

    def create(self, options, origin):
        cred = super().create(options, origin)
        attestation = cbor.decode(cred["response"]["attestationObject"])
        auth_data = bytearray(attestation["authData"])
        auth_data[32] |= 0x04
        attestation["authData"] = bytes(auth_data)
        cred["response"]["attestationObject"] = cbor.encode(attestation)
        return cred

    def get(self, options, origin):
        assertion = super().get(options, origin)
        auth_data = bytearray(assertion["response"]["authenticatorData"])
        auth_data[32] |= 0x04
        signed = bytes(auth_data) + sha256(assertion["response"]["clientDataJSON"])
        assertion["response"]["authenticatorData"] = bytes(auth_data)
        assertion["response"]["signature"] = self.private_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return assertion


def creation_options(json_options):
    pk = dict(json_options["publicKey"])
    pk["challenge"] = unb64url(pk["challenge"])
    pk["user"] = dict(pk["user"], id=unb64url(pk["user"]["id"]))
    return {"publicKey": pk}


def request_options(json_options):
    pk = dict(json_options["publicKey"])
    pk["challenge"] = unb64url(pk["challenge"])
    return {"publicKey": pk}


def credential_json(cred):
    return {
        "id": b64url(cred["rawId"]),
        "rawId": b64url(cred["rawId"]),
        "type": cred["type"],
        "response": {k: (b64url(v) if isinstance(v, bytes) else v) for k, v in cred["response"].items()},
    }


@pytest.fixture
def origin(env):
    # The service's default relying party is `localhost` on any port.
    return "http://localhost:" + env.url.rsplit(":", 1)[1]


def test_invited_user_enrols_totp_with_pyotp(env):
    token = invited_session(env)
    r = env.get(STATS, headers=bearer(token))
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "MFA_REQUIRED"

    r = env.post("/api/v1/admin/mfa/totp/enroll", headers=bearer(token), json={})
    assert r.status_code == 200, r.text
    enrolment = r.json()
    totp = pyotp.parse_uri(enrolment["otpauth_url"])
    assert totp.secret == enrolment["secret"]
    assert enrolment["qr_code_svg"].lstrip().startswith(("<?xml", "<svg"))
    code = totp.now()
    r = env.post("/api/v1/admin/mfa/totp/verify", headers=bearer(token), json={"code": code})
    assert r.status_code == 200, r.text
    assert r.json() == {"enrolled": True}
    assert env.get(STATS, headers=bearer(token)).status_code == 200
    # The same code a second time is a replay: turning TOTP off with it is refused.
    r = env.delete("/api/v1/admin/mfa/totp", headers=bearer(token), json={"code": code})
    assert r.status_code == 401, r.text


def test_key_signs_in_with_pyotp(env):
    key = env.enterprise_admin_key
    r = env.post("/api/v1/admin/mfa/totp/enroll", headers={"X-API-Key": key}, json={})
    assert r.status_code == 200, r.text
    totp = pyotp.TOTP(r.json()["secret"])
    now = totp.timecode(datetime.datetime.now())
    r = env.post("/api/v1/admin/mfa/totp/verify", headers={"X-API-Key": key}, json={"code": totp.now()})
    assert r.status_code == 200, r.text
    # The next step's code (within the one-step drift window) signs in.
    next_code = totp.generate_otp(now + 1)
    r = env.post("/api/v1/admin/auth/totp", headers={"X-API-Key": key}, json={"code": next_code})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["expires_at"]
    assert env.get(STATS, headers=bearer(body["token"])).status_code == 200


def test_soft_webauthn_passkey_registers_and_signs_in(env, origin):
    token = invited_session(env, "auditor")
    r = env.post("/api/v1/admin/mfa/passkey/begin", headers=bearer(token), json={"display_name": "soft"})
    assert r.status_code == 200, r.text
    device = VerifyingDevice()
    cred = device.create(creation_options(r.json()), origin)
    r = env.post("/api/v1/admin/mfa/passkey/complete", headers=bearer(token), json=credential_json(cred))
    assert r.status_code == 200, r.text
    assert r.json()["display_name"] == "soft"
    assert env.get(STATS, headers=bearer(token)).status_code == 200

    handle = env.get("/api/v1/admin/mfa/status", headers=bearer(token)).json()["user_handle"]
    r = env.post("/api/v1/admin/auth/passkey/begin", json={"user_handle": handle})
    assert r.status_code == 200, r.text
    assertion = device.get(request_options(r.json()), origin)
    r = env.post("/api/v1/admin/auth/passkey/complete", json=credential_json(assertion))
    assert r.status_code == 200, r.text
    assert env.get(STATS, headers=bearer(r.json()["token"])).status_code == 200


def test_authenticator_without_user_verification_is_refused(env, origin):
    token = invited_session(env)
    r = env.post("/api/v1/admin/mfa/passkey/begin", headers=bearer(token), json={"display_name": "no uv"})
    assert r.status_code == 200, r.text
    cred = SoftWebauthnDevice().create(creation_options(r.json()), origin)
    r = env.post("/api/v1/admin/mfa/passkey/complete", headers=bearer(token), json=credential_json(cred))
    assert r.status_code == 400, r.text
    assert env.get(STATS, headers=bearer(token)).json()["error"] == "MFA_REQUIRED"
