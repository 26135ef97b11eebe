//! Credentials and authorization.
//!
//! API keys look like `<TEAM_ID>.<SECRET>`. The service keeps only
//! HMAC-SHA256(server secret, key) and the key's public `key_id`; the key itself is shown
//! once and never stored or logged. Authorization asks two questions of every request: does
//! the principal's effective permission set hold the route's permission, and is the
//! account's tier at least the route's minimum tier.

use std::fmt;

pub mod admin;
pub mod credentials;
pub mod grants;
pub mod jwt;
pub mod limits;
pub mod mfa;
pub mod staff;
pub mod usage;
pub mod users;

pub use grants::Grant;

use base64::Engine;
use hmac::{Hmac, Mac};
use model::TenantKind;
use model::{Error, ImpersonationMode, Permission, Role, Tier};
use sha2::Sha256;
use store::KeyPrincipal;
use subtle::ConstantTimeEq;

/// A freshly issued API key. Its `Debug` output hides the secret.
pub struct IssuedKey {
    pub key_id: String,
    /// The full key, to show once.
    pub key: String,
    /// What the store keeps.
    pub key_hash: String,
}

impl fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedKey")
            .field("key_id", &self.key_id)
            .field("key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// Hashes API keys with the server's HMAC secret.
#[derive(Clone)]
pub struct KeyHasher {
    secret: Vec<u8>,
}

impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHasher(<redacted>)")
    }
}

impl KeyHasher {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            secret: secret.to_vec(),
        }
    }

    /// Hex HMAC-SHA256 of the whole key.
    pub fn hash(&self, key: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(key.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// A 32-byte key for another purpose (`label`), derived from the secret.
    pub fn derive(&self, label: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(b"derive:");
        mac.update(label.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Issues a new key for a team: 32 random bytes, base64url without padding.
    pub fn issue(&self, team_id: &str) -> Result<IssuedKey, Error> {
        validate_team_id(team_id)?;
        let secret =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let key = format!("{team_id}.{secret}");
        Ok(IssuedKey {
            key_id: format!("key_{}", hex::encode(rand::random::<[u8; 8]>())),
            key_hash: self.hash(&key),
            key,
        })
    }
}

/// `[a-z0-9][a-z0-9-]{2,62}`
pub fn validate_team_id(team_id: &str) -> Result<(), Error> {
    let bytes = team_id.as_bytes();
    let ok = (3..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "team id {} must be 3-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
            model::shown(team_id)
        )))
    }
}

/// Namespace of account uuids (UUIDv5), fixed so every replica and release agrees.
const ACCOUNT_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6b6e_6f77_6e67_4f6f_a4e1_6163_636f_756e);

/// An account's uuid: derived from its team id (UUIDv5), so it never changes, needs no
/// storage and names the same account on every replica. The API accepts it wherever an
/// account is named by `account_id`, beside the team id.
pub fn account_uuid(team_id: &str) -> uuid::Uuid {
    uuid::Uuid::new_v5(&ACCOUNT_NAMESPACE, team_id.as_bytes())
}

/// Whether `account_id` names the account `team_id`: its team id or its uuid (any case).
pub fn names_account(account_id: &str, team_id: &str) -> bool {
    account_id == team_id
        || uuid::Uuid::parse_str(account_id).is_ok_and(|u| u == account_uuid(team_id))
}

/// Checks the shape of a presented key before any lookup: `<TEAM_ID>.<SECRET>`.
pub fn parse_key(key: &str) -> Result<&str, Error> {
    let invalid = || Error::Unauthorized("invalid API key".into());
    let (team, secret) = key.split_once('.').ok_or_else(invalid)?;
    validate_team_id(team).map_err(|_| invalid())?;
    if secret.len() < 43
        || !secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid());
    }
    Ok(team)
}

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    ApiKey,
    Jwt,
}

/// Who is calling, once a credential has been verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub key_id: String,
    pub team_id: String,
    pub tenant_kind: TenantKind,
    pub role: Role,
    /// Primary role plus active grants.
    pub roles: Vec<Role>,
    pub tier: Tier,
    pub credential: Credential,
    /// Set when staff act as this account: `key_id` is then the staff member's key.
    pub impersonation: Option<Impersonation>,
    /// Set for console and invited-user sessions (not for raw keys or key tokens).
    pub session: Option<SessionInfo>,
}

/// The sign-in session behind a console or invited-user principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session (its token's `jti`).
    pub session_id: String,
    /// Whose second factors count: `key:<key_id>` or `user:<uuid>`.
    pub subject: String,
    /// The invited user signed in, if any (`key_id` is then `user:<uuid>`).
    pub user_id: Option<String>,
    /// The session passed or enrolled a second factor.
    pub mfa: bool,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

impl Principal {
    /// Whose second factors this principal enrols and uses.
    pub fn mfa_subject(&self) -> String {
        match &self.session {
            Some(s) => s.subject.clone(),
            None => key_subject(&self.key_id),
        }
    }
}

/// The second-factor subject of a key.
pub fn key_subject(key_id: &str) -> String {
    format!("key:{key_id}")
}

/// A staff impersonation session behind a principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// The session (its token's `jti`).
    pub session_id: String,
    /// The staff member's account.
    pub actor_team_id: String,
    pub mode: ImpersonationMode,
    /// The user acted as (user scope).
    pub user_id: Option<String>,
}

/// Checks a stored key against the presented one. The stored HMAC is compared in constant
/// time, even though it was found by value, so the comparison never depends on where two
/// hashes first differ.
pub fn verify_key_match(
    presented_hash: &str,
    stored: &KeyPrincipal,
    team_in_key: &str,
) -> Result<(), Error> {
    let matches: bool = presented_hash
        .as_bytes()
        .ct_eq(stored.key_hash.as_bytes())
        .into();
    if !matches || stored.team_id != team_in_key {
        return Err(Error::Unauthorized("invalid API key".into()));
    }
    Ok(())
}

impl Principal {
    pub fn has(&self, permission: Permission) -> bool {
        self.roles.iter().any(|r| r.has(permission))
    }

    /// Both the role and the tier must allow the request.
    pub fn authorize(&self, permission: Option<Permission>, min_tier: Tier) -> Result<(), Error> {
        if let Some(p) = permission
            && !self.has(p)
        {
            return Err(Error::Forbidden(format!(
                "role {} lacks permission {}",
                self.role,
                p.as_str()
            )));
        }
        if self.tier < min_tier {
            return Err(Error::Forbidden(format!(
                "tier {} is below the required tier {}",
                self.tier, min_tier
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_keys_parse_and_hash_stably() {
        let hasher = KeyHasher::new(b"s3cret");
        let k = hasher.issue("acme-corp").unwrap();
        assert!(k.key.starts_with("acme-corp."));
        assert_eq!(parse_key(&k.key).unwrap(), "acme-corp");
        assert_eq!(hasher.hash(&k.key), k.key_hash);
        assert_ne!(KeyHasher::new(b"other").hash(&k.key), k.key_hash);
        assert!(!format!("{k:?}").contains(&k.key));
    }

    #[test]
    fn malformed_keys_are_unauthorized() {
        for bad in ["", "nodot", "UPPER.abc", "ab.x", "acme.short", "acme.!!!!"] {
            assert!(
                matches!(parse_key(bad), Err(Error::Unauthorized(_))),
                "{bad}"
            );
        }
        assert!(validate_team_id("-abc").is_err());
        assert!(validate_team_id("ab").is_err());
    }

    #[test]
    fn role_and_tier_must_both_allow() {
        let p = Principal {
            key_id: "k".into(),
            team_id: "acme".into(),
            tenant_kind: TenantKind::Customer,
            role: Role::Analyst,
            roles: vec![Role::Analyst],
            tier: Tier::Basic,
            credential: Credential::ApiKey,
            impersonation: None,
            session: None,
        };
        assert!(
            p.authorize(Some(Permission::IntelLookup), Tier::Basic)
                .is_ok()
        );
        assert!(matches!(
            p.authorize(Some(Permission::IntelDownloads), Tier::Basic),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            p.authorize(Some(Permission::IntelLookup), Tier::Teams),
            Err(Error::Forbidden(_))
        ));
        assert!(p.authorize(None, Tier::Free).is_ok());
    }
}
