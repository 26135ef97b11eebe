//! JSON Web Tokens: RS256 only, with a `kid` naming the key that signed them.
//!
//! The first key signs; every key listed verifies, so the signing key can be rotated
//! without breaking tokens issued in the last 15 minutes: the old key stays in the
//! verification set (and in the JWKS) until its tokens have expired. Time checks use the
//! caller's clock rather than the library's, so they are testable.
//!
//! An RS256 signature check costs tens of microseconds, more than the rest of a request;
//! a client sends the same token until it expires, so tokens that verified are remembered
//! by their exact text (bounded, expired ones dropped first) and only their validity window
//! is checked again. A cached token is byte for byte one that passed every check, and the
//! verification keys never change in a running process.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::KeyPair;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use model::Error;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const ISSUER: &str = "knowngood";
/// Lifetime of every token but an impersonation session's (auth/token, auth/refresh and
/// the session tokens of sign-ins).
pub const TOKEN_TTL_SECS: i64 = 900;

/// The claims of every token the service issues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    /// Team id.
    pub sub: String,
    /// Primary role.
    pub role: String,
    /// Primary role plus active grants.
    pub roles: Vec<String>,
    pub tier: String,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub jti: String,
    /// Public id of the API key the token was exchanged for; revoking the key ends it.
    pub key_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imp_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imp_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfa: Option<bool>,
}

struct VerifyingKey {
    decoding: DecodingKey,
    jwk: serde_json::Value,
}

/// Verified tokens kept at most; beyond that expired ones go, then all.
const VERIFIED_CACHE_MAX: usize = 4096;

/// The signing key and every key that still verifies.
pub struct JwtKeys {
    signing_kid: String,
    encoding: EncodingKey,
    verifying: HashMap<String, VerifyingKey>,
    /// Tokens whose algorithm, key id, signature and issuer verified, by their text.
    verified: RwLock<HashMap<String, Arc<Claims>>>,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKeys")
            .field("signing_kid", &self.signing_kid)
            .field("kids", &self.verifying.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn invalid(reason: &str) -> Error {
    Error::Unauthorized(format!("invalid token: {reason}"))
}

impl JwtKeys {
    /// From PKCS#8 DER RSA private keys; the first signs.
    pub fn from_pkcs8(keys: &[Vec<u8>]) -> Result<Self, Error> {
        let mut verifying = HashMap::new();
        let mut signing = None;
        for der in keys {
            let pair = aws_lc_rs::rsa::KeyPair::from_pkcs8(der)
                .map_err(|_| Error::internal("JWT key is not an RSA PKCS#8 key"))?;
            let public = pair.public_key();
            let spki = public
                .as_der()
                .map_err(|_| Error::internal("cannot encode the JWT public key"))?;
            let kid = hex::encode(&Sha256::digest(spki.as_ref())[..8]);
            let n = public.modulus().big_endian_without_leading_zero().to_vec();
            let e = public.exponent().big_endian_without_leading_zero().to_vec();
            let jwk = serde_json::json!({
                "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
                "n": URL_SAFE_NO_PAD.encode(&n), "e": URL_SAFE_NO_PAD.encode(&e),
            });
            let decoding = DecodingKey::from_rsa_raw_components(&n, &e);
            if signing.is_none() {
                signing = Some((kid.clone(), EncodingKey::from_rsa_der(&pkcs1_of(&pair)?)));
            }
            verifying.insert(kid, VerifyingKey { decoding, jwk });
        }
        let (signing_kid, encoding) =
            signing.ok_or_else(|| Error::internal("no JWT signing key configured"))?;
        Ok(Self {
            signing_kid,
            encoding,
            verifying,
            verified: RwLock::default(),
        })
    }

    pub fn signing_kid(&self) -> &str {
        &self.signing_kid
    }

    /// The JWKS document: every key that verifies, signing key first.
    pub fn jwks(&self) -> serde_json::Value {
        let mut keys: Vec<&serde_json::Value> = vec![&self.verifying[&self.signing_kid].jwk];
        keys.extend(
            self.verifying
                .iter()
                .filter(|(kid, _)| **kid != self.signing_kid)
                .map(|(_, k)| &k.jwk),
        );
        serde_json::json!({ "keys": keys })
    }

    pub fn issue(&self, claims: &Claims) -> Result<String, Error> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.signing_kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| Error::internal_caused("signing a token failed", e))
    }

    /// Checks algorithm, key id, signature, issuer and validity window at `now`.
    pub fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<Claims, Error> {
        let cached = {
            let verified = self.verified.read().unwrap_or_else(|e| e.into_inner());
            verified.get(token).cloned()
        };
        if let Some(claims) = cached {
            check_window(&claims, now)?;
            return Ok((*claims).clone());
        }
        let claims = self.verify_signed(token)?;
        check_window(&claims, now)?;
        let mut verified = self.verified.write().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= VERIFIED_CACHE_MAX {
            let now = now.timestamp();
            verified.retain(|_, c| c.exp > now);
            if verified.len() >= VERIFIED_CACHE_MAX {
                verified.clear();
            }
        }
        verified.insert(token.to_string(), Arc::new(claims.clone()));
        Ok(claims)
    }

    /// Algorithm, key id, signature, issuer and `nbf`, but not `exp`: for the console's
    /// session cookie, whose session (which the caller checks) outlives its token.
    pub fn verify_ignoring_expiry(&self, token: &str, now: DateTime<Utc>) -> Result<Claims, Error> {
        let cached = {
            let verified = self.verified.read().unwrap_or_else(|e| e.into_inner());
            verified.get(token).cloned()
        };
        let claims = match cached {
            Some(claims) => (*claims).clone(),
            None => self.verify_signed(token)?,
        };
        let now = now.timestamp();
        if now < claims.nbf || now < claims.iat {
            return Err(invalid("not yet valid"));
        }
        Ok(claims)
    }

    /// Algorithm, key id, signature and issuer; not the validity window.
    fn verify_signed(&self, token: &str) -> Result<Claims, Error> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("malformed"))?;
        // Only RS256: refuses `none`, HS256 signed with the public key, and the rest.
        if header.alg != Algorithm::RS256 {
            return Err(invalid("algorithm must be RS256"));
        }
        let kid = header.kid.ok_or_else(|| invalid("no key id"))?;
        let key = self
            .verifying
            .get(&kid)
            .ok_or_else(|| invalid("unknown key id"))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims.clear();
        validation.set_issuer(&[ISSUER]);
        jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
            .map(|data| data.claims)
            .map_err(|_| invalid("signature or claims do not verify"))
    }
}

/// The validity window at `now`: from `nbf` (and `iat`) until before `exp`.
fn check_window(claims: &Claims, now: DateTime<Utc>) -> Result<(), Error> {
    let now = now.timestamp();
    if now >= claims.exp {
        return Err(invalid("expired"));
    }
    if now < claims.nbf || now < claims.iat {
        return Err(invalid("not yet valid"));
    }
    Ok(())
}

/// jsonwebtoken's RSA encoding key wants PKCS#1 DER.
fn pkcs1_of(pair: &aws_lc_rs::rsa::KeyPair) -> Result<Vec<u8>, Error> {
    use aws_lc_rs::encoding::Pkcs8V1Der;
    let pkcs8: Pkcs8V1Der = pair
        .as_der()
        .map_err(|_| Error::internal("cannot encode the JWT key"))?;
    pkcs8_to_pkcs1(pkcs8.as_ref()).ok_or_else(|| Error::internal("unexpected PKCS#8 layout"))
}

/// Extracts the PKCS#1 RSAPrivateKey from a PKCS#8 PrivateKeyInfo:
/// SEQUENCE { INTEGER version, SEQUENCE algorithm, OCTET STRING privateKey }.
fn pkcs8_to_pkcs1(der: &[u8]) -> Option<Vec<u8>> {
    fn read(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }
    let (0x30, body, _) = read(der)? else {
        return None;
    };
    let (0x02, _, body) = read(body)? else {
        return None;
    };
    let (0x30, _, body) = read(body)? else {
        return None;
    };
    let (0x04, key, _) = read(body)? else {
        return None;
    };
    Some(key.to_vec())
}

/// Generates a new 2048-bit RSA key as PKCS#8 DER.
pub fn generate_rsa_pkcs8() -> Result<Vec<u8>, Error> {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
        .map_err(|_| Error::internal("RSA key generation failed"))?;
    let der: aws_lc_rs::encoding::Pkcs8V1Der = pair
        .as_der()
        .map_err(|_| Error::internal("RSA key encoding failed"))?;
    Ok(der.as_ref().to_vec())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn claims(now: i64) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: "acme".into(),
            role: "analyst".into(),
            roles: vec!["analyst".into()],
            tier: "basic".into(),
            iat: now,
            nbf: now,
            exp: now + TOKEN_TTL_SECS,
            jti: "j1".into(),
            key_id: "key_1".into(),
            act: None,
            imp_mode: None,
            imp_uid: None,
            mfa: None,
        }
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().unwrap()
    }

    #[test]
    fn issue_verify_expire_and_rotate() {
        let old = generate_rsa_pkcs8().unwrap();
        let new = generate_rsa_pkcs8().unwrap();
        let before = JwtKeys::from_pkcs8(std::slice::from_ref(&old)).unwrap();
        let t0 = 1_800_000_000;
        let token = before.issue(&claims(t0)).unwrap();
        assert_eq!(before.verify(&token, at(t0 + 10)).unwrap().sub, "acme");
        // Verified once, remembered: the window is still checked on every use.
        assert_eq!(before.verified.read().unwrap().len(), 1);
        assert_eq!(before.verify(&token, at(t0 + 11)).unwrap().sub, "acme");
        assert!(before.verify(&token, at(t0 + TOKEN_TTL_SECS)).is_err());
        assert!(before.verify(&token, at(t0 - 5)).is_err());
        // Refused tokens are not remembered.
        assert!(before.verify(&format!("{token}x"), at(t0 + 10)).is_err());
        assert_eq!(before.verified.read().unwrap().len(), 1);

        // After rotation the old token still verifies; the JWKS lists both keys.
        let after = JwtKeys::from_pkcs8(&[new, old]).unwrap();
        assert_ne!(after.signing_kid(), before.signing_kid());
        assert!(after.verify(&token, at(t0 + 10)).is_ok());
        assert_eq!(after.jwks()["keys"].as_array().unwrap().len(), 2);
        assert_eq!(after.jwks()["keys"][0]["kid"], after.signing_kid());

        // A key set without the old key refuses its tokens (unknown kid).
        let only_new = JwtKeys::from_pkcs8(&[generate_rsa_pkcs8().unwrap()]).unwrap();
        assert!(only_new.verify(&token, at(t0 + 10)).is_err());
    }

    #[test]
    fn a_session_handle_outlives_its_token_but_not_its_signature() {
        let keys = JwtKeys::from_pkcs8(&[generate_rsa_pkcs8().unwrap()]).unwrap();
        let t0 = 1_800_000_000;
        let token = keys.issue(&claims(t0)).unwrap();
        let later = at(t0 + 12 * 3600);
        assert!(keys.verify(&token, later).is_err());
        assert_eq!(
            keys.verify_ignoring_expiry(&token, later).unwrap().jti,
            "j1"
        );
        assert!(keys.verify_ignoring_expiry(&token, at(t0 - 5)).is_err());
        let parts: Vec<&str> = token.split('.').collect();
        let mut c = claims(t0);
        c.role = "platform_owner".into();
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap());
        let tampered = format!("{}.{body}.{}", parts[0], parts[2]);
        assert!(keys.verify_ignoring_expiry(&tampered, later).is_err());
    }

    #[test]
    fn refuses_none_and_tampered_tokens() {
        let keys = JwtKeys::from_pkcs8(&[generate_rsa_pkcs8().unwrap()]).unwrap();
        let t0 = 1_800_000_000;
        let token = keys.issue(&claims(t0)).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let forged = format!("{none_header}.{}.", parts[1]);
        assert!(keys.verify(&forged, at(t0 + 1)).is_err());
        let mut c = claims(t0);
        c.role = "platform_owner".into();
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap());
        let tampered = format!("{}.{body}.{}", parts[0], parts[2]);
        assert!(keys.verify(&tampered, at(t0 + 1)).is_err());
        assert!(keys.verify("garbage", at(t0 + 1)).is_err());
    }
}
