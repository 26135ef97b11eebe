//! Turning a credential (API key or JWT) into a [`Principal`] without a database round trip
//! on the hot path.
//!
//! Keys are cached by their HMAC after the first use. Every change to keys, grants or
//! accounts moves the store's `auth_epoch`; changes made through this process drop the
//! cache at once, and [`Credentials::poll_epoch`] (run every half second by the server)
//! drops it when another replica changed something, so a revocation takes effect everywhere
//! within a second.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use model::{Clock, Error, Permission, Role, TenantKind, Tier};
use store::staff::ImpersonationSession;
use store::users::Session;
use store::{KeyPrincipal, Store};

use crate::grants::{Grant, effective_roles};
use crate::jwt::{Claims, ISSUER, JwtKeys, TOKEN_TTL_SECS};
use crate::{Credential, Impersonation, KeyHasher, Principal, SessionInfo, parse_key};

/// Lifetime of console and invited-user sessions. Their tokens live 15 minutes like every
/// other ([`TOKEN_TTL_SECS`]) and are refreshed within the session.
pub const SESSION_TTL_SECS: i64 = 12 * 3600;

/// The `key_id` of a user's principal (rate limits and audit name the user).
pub fn user_key_id(user_id: &str) -> String {
    format!("user:{user_id}")
}

struct CachedKey {
    key: KeyPrincipal,
    grants: Vec<Grant>,
}

#[derive(Default)]
struct Cache {
    by_hash: HashMap<String, Arc<CachedKey>>,
    hash_of_id: HashMap<String, String>,
}

pub struct Credentials {
    store: Arc<dyn Store>,
    hasher: KeyHasher,
    jwt: JwtKeys,
    clock: Arc<dyn Clock>,
    cache: RwLock<Cache>,
    /// Bumped whenever the cache is dropped, so a load that raced a change is not kept.
    generation: AtomicU64,
    seen_epoch: AtomicU64,
}

impl Credentials {
    pub fn new(
        store: Arc<dyn Store>,
        hasher: KeyHasher,
        jwt: JwtKeys,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            hasher,
            jwt,
            clock,
            cache: RwLock::default(),
            generation: AtomicU64::new(0),
            seen_epoch: AtomicU64::new(u64::MAX),
        }
    }

    pub fn hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    pub fn jwks(&self) -> serde_json::Value {
        self.jwt.jwks()
    }

    /// Forgets every cached key; the next request of each key reads the store again.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        *cache = Cache::default();
    }

    /// Drops the cache if the store's auth epoch moved since the last poll; true when it
    /// moved (the first poll always counts as a move).
    pub async fn poll_epoch(&self) -> Result<bool, Error> {
        let epoch = self.store.auth_epoch().await?;
        let moved = self.seen_epoch.swap(epoch, Ordering::AcqRel) != epoch;
        if moved {
            self.invalidate();
        }
        Ok(moved)
    }

    fn cached(&self, hash: &str) -> Option<Arc<CachedKey>> {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        cache.by_hash.get(hash).cloned()
    }

    fn cached_by_id(&self, key_id: &str) -> Option<Arc<CachedKey>> {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        let hash = cache.hash_of_id.get(key_id)?;
        cache.by_hash.get(hash).cloned()
    }

    async fn load(&self, key: KeyPrincipal, generation: u64) -> Result<Arc<CachedKey>, Error> {
        let grants = self
            .store
            .grants(&key.key_id)
            .await?
            .iter()
            .map(Grant::from)
            .collect();
        let entry = Arc::new(CachedKey { key, grants });
        if self.generation.load(Ordering::Acquire) == generation {
            let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
            cache
                .hash_of_id
                .insert(entry.key.key_id.clone(), entry.key.key_hash.clone());
            cache
                .by_hash
                .insert(entry.key.key_hash.clone(), entry.clone());
        }
        Ok(entry)
    }

    fn principal(&self, entry: &CachedKey, credential: Credential) -> Result<Principal, Error> {
        if entry.key.revoked {
            return Err(Error::Unauthorized("the key has been revoked".into()));
        }
        if entry.key.suspended {
            return Err(Error::Unauthorized("the account is suspended".into()));
        }
        Ok(Principal {
            key_id: entry.key.key_id.clone(),
            team_id: entry.key.team_id.clone(),
            tenant_kind: entry.key.tenant_kind,
            role: entry.key.role,
            roles: effective_roles(entry.key.role, &entry.grants, self.clock.now()),
            tier: entry.key.tier,
            credential,
            impersonation: None,
            session: None,
        })
    }

    /// The principal of an `X-API-Key`.
    pub async fn from_api_key(&self, key: &str) -> Result<Principal, Error> {
        let team = parse_key(key)?;
        let hash = self.hasher.hash(key);
        let entry = match self.cached(&hash) {
            Some(entry) => entry,
            None => {
                let generation = self.generation.load(Ordering::Acquire);
                let stored = self
                    .store
                    .key_by_hash(&hash)
                    .await?
                    .ok_or_else(|| Error::Unauthorized("invalid API key".into()))?;
                self.load(stored, generation).await?
            }
        };
        crate::verify_key_match(&hash, &entry.key, team)?;
        self.principal(&entry, Credential::ApiKey)
    }

    /// The principal of a bearer token: the token must verify, and its key must still be
    /// valid now (revocation and suspension end live tokens). Authorization uses the key's
    /// roles as they are now, so expired or revoked grants stop counting at once.
    pub async fn from_bearer(&self, token: &str) -> Result<Principal, Error> {
        let claims = self.jwt.verify(token, self.clock.now())?;
        if claims.mfa.is_some() {
            return self.in_session(&claims).await;
        }
        let entry = match self.cached_by_id(&claims.key_id) {
            Some(entry) => entry,
            None => {
                let generation = self.generation.load(Ordering::Acquire);
                let stored = self
                    .store
                    .key_by_id(&claims.key_id)
                    .await?
                    .ok_or_else(|| Error::Unauthorized("invalid token: unknown key".into()))?;
                self.load(stored, generation).await?
            }
        };
        if claims.act.is_some() {
            return self.impersonating(&claims, &entry).await;
        }
        if entry.key.team_id != claims.sub {
            return Err(Error::Unauthorized(
                "invalid token: subject mismatch".into(),
            ));
        }
        self.principal(&entry, Credential::Jwt)
    }

    /// The principal of the console's session cookie: a session token whose session is
    /// still open. The token itself may have expired (a token lives 15 minutes, a console
    /// sign-in 12 hours): as for every session token, the session row decides, read on every
    /// request, so signing out or the session's end stops the cookie at once. Key tokens and
    /// impersonation tokens are refused.
    pub async fn from_session_cookie(&self, token: &str) -> Result<Principal, Error> {
        let claims = self.jwt.verify_ignoring_expiry(token, self.clock.now())?;
        if claims.mfa.is_none() || claims.act.is_some() {
            return Err(Error::Unauthorized("not a session token".into()));
        }
        self.in_session(&claims).await
    }

    /// The principal of an impersonation session's token: the session must be open, the
    /// staff key still valid and still allowed to impersonate, and the account still
    /// active. Sessions are rare and short, so this reads the store on every request:
    /// ending a session or suspending the account stops it at once on every replica.
    async fn impersonating(
        &self,
        claims: &Claims,
        staff_key: &CachedKey,
    ) -> Result<Principal, Error> {
        let staff = self.principal(staff_key, Credential::Jwt)?;
        let ended = |why: &str| Error::Unauthorized(format!("impersonation session {why}"));
        let session = self
            .store
            .impersonation(&claims.jti)
            .await?
            .ok_or_else(|| ended("unknown"))?;
        if session.actor_key_id != staff.key_id || session.team_id != claims.sub {
            return Err(ended("does not match its token"));
        }
        if session.ended_at.is_some() || self.clock.now() >= session.expires_at {
            return Err(ended("has ended"));
        }
        if staff.tenant_kind != TenantKind::Platform || !staff.has(Permission::TenantImpersonate) {
            return Err(ended("ended: the staff key may no longer impersonate"));
        }
        let tenant = self
            .store
            .tenant(&session.team_id)
            .await?
            .ok_or_else(|| ended("ended: the account is gone"))?;
        if tenant.suspended {
            return Err(ended("ended: the account is suspended"));
        }
        Ok(Principal {
            key_id: staff.key_id,
            team_id: session.team_id,
            tenant_kind: tenant.kind,
            role: session.role,
            roles: vec![session.role],
            tier: tenant.tier,
            credential: Credential::Jwt,
            impersonation: Some(Impersonation {
                session_id: session.session_id,
                actor_team_id: staff.team_id,
                mode: session.mode,
                user_id: session.user_id,
            }),
            session: None,
        })
    }

    /// The token of a new impersonation session: acting as `session.team_id` with the
    /// session's role until it expires, naming the staff key in `act`.
    pub fn issue_impersonation_token(
        &self,
        session: &ImpersonationSession,
        tier: Tier,
    ) -> Result<String, Error> {
        let now = self.clock.now().timestamp();
        self.jwt.issue(&Claims {
            iss: ISSUER.into(),
            sub: session.team_id.clone(),
            role: session.role.as_str().into(),
            roles: vec![session.role.as_str().into()],
            tier: tier.as_str().into(),
            iat: now,
            nbf: now,
            exp: session.expires_at.timestamp(),
            jti: session.session_id.clone(),
            key_id: session.actor_key_id.clone(),
            act: Some(session.actor_key_id.clone()),
            imp_mode: Some(session.mode.as_str().into()),
            imp_uid: session.user_id.clone(),
            mfa: None,
        })
    }

    /// The cached (or freshly loaded) key with this id.
    async fn key_entry(&self, key_id: &str) -> Result<Arc<CachedKey>, Error> {
        if let Some(entry) = self.cached_by_id(key_id) {
            return Ok(entry);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let stored = self
            .store
            .key_by_id(key_id)
            .await?
            .ok_or_else(|| Error::Unauthorized("invalid token: unknown key".into()))?;
        self.load(stored, generation).await
    }

    /// The principal of a console or invited-user session token: the session must be open
    /// (not signed out, not expired); a user must still be active and a member of the
    /// account; a key must still be valid. Read on every request, so signing out ends the
    /// session at once on every replica.
    async fn in_session(&self, claims: &Claims) -> Result<Principal, Error> {
        let ended = |why: &str| Error::Unauthorized(format!("session {why}"));
        let session = self
            .store
            .session(&claims.jti)
            .await?
            .ok_or_else(|| ended("unknown"))?;
        if session.revoked_at.is_some() {
            return Err(ended("has been signed out"));
        }
        if self.clock.now() >= session.expires_at {
            return Err(ended("has expired"));
        }
        if session.team_id != claims.sub {
            return Err(ended("does not match its token"));
        }
        let info = SessionInfo {
            session_id: session.session_id.clone(),
            subject: session.subject.clone(),
            user_id: session.user_id.clone(),
            mfa: session.mfa,
            expires_at: session.expires_at,
        };
        if let Some(user_id) = &session.user_id {
            let (user, memberships) = self
                .store
                .user_with_memberships(user_id)
                .await?
                .ok_or_else(|| ended("ended: the user is gone"))?;
            if user.status != "active" {
                return Err(ended("ended: the user is disabled"));
            }
            let membership = memberships
                .into_iter()
                .find(|m| m.team_id == session.team_id)
                .ok_or_else(|| ended("ended: the user left the account"))?;
            if membership.suspended {
                return Err(Error::Unauthorized("the account is suspended".into()));
            }
            return Ok(Principal {
                key_id: user_key_id(user_id),
                team_id: membership.team_id,
                tenant_kind: membership.tenant_kind,
                role: membership.role,
                roles: vec![membership.role],
                tier: membership.tier,
                credential: Credential::Jwt,
                impersonation: None,
                session: Some(info),
            });
        }
        let key_id = session
            .key_id
            .as_deref()
            .ok_or_else(|| ended("names no key"))?;
        let entry = self.key_entry(key_id).await?;
        let mut principal = self.principal(&entry, Credential::Jwt)?;
        principal.session = Some(info);
        Ok(principal)
    }

    /// Opens a console session for a key (after its second factor when `mfa`): the token
    /// and when it expires (15 minutes; refreshed within the session's 12 hours).
    pub async fn key_session(
        &self,
        key_id: &str,
        mfa: bool,
    ) -> Result<(String, DateTime<Utc>), Error> {
        let entry = self.key_entry(key_id).await?;
        let principal = self.principal(&entry, Credential::Jwt)?;
        let session = Session {
            session_id: hex::encode(rand::random::<[u8; 16]>()),
            subject: crate::key_subject(key_id),
            key_id: Some(key_id.to_string()),
            user_id: None,
            team_id: principal.team_id.clone(),
            mfa,
            created_at: self.clock.now(),
            expires_at: self.clock.now() + chrono::Duration::seconds(SESSION_TTL_SECS),
            revoked_at: None,
        };
        self.open_session(principal, session).await
    }

    /// Opens a session for a user in `team_id` (required when they belong to several
    /// accounts; their only account otherwise): the token and when it expires.
    pub async fn user_session(
        &self,
        user_id: &str,
        team_id: Option<&str>,
        mfa: bool,
    ) -> Result<(String, DateTime<Utc>), Error> {
        let (user, memberships) = self
            .store
            .user_with_memberships(user_id)
            .await?
            .ok_or_else(|| Error::Unauthorized("unknown user".into()))?;
        if user.status != "active" {
            return Err(Error::Unauthorized("the user is disabled".into()));
        }
        let membership = match team_id {
            Some(team) => memberships
                .into_iter()
                .find(|m| m.team_id == team)
                .ok_or_else(|| Error::Forbidden(format!("not a member of account {team}")))?,
            None => memberships
                .into_iter()
                .next()
                .ok_or_else(|| Error::Forbidden("the user belongs to no account".into()))?,
        };
        if membership.suspended {
            return Err(Error::Forbidden(format!(
                "account {} is suspended",
                membership.team_id
            )));
        }
        let principal = Principal {
            key_id: user_key_id(user_id),
            team_id: membership.team_id.clone(),
            tenant_kind: membership.tenant_kind,
            role: membership.role,
            roles: vec![membership.role],
            tier: membership.tier,
            credential: Credential::Jwt,
            impersonation: None,
            session: None,
        };
        let session = Session {
            session_id: hex::encode(rand::random::<[u8; 16]>()),
            subject: format!("user:{user_id}"),
            key_id: None,
            user_id: Some(user_id.to_string()),
            team_id: membership.team_id,
            mfa,
            created_at: self.clock.now(),
            expires_at: self.clock.now() + chrono::Duration::seconds(SESSION_TTL_SECS),
            revoked_at: None,
        };
        self.open_session(principal, session).await
    }

    async fn open_session(
        &self,
        mut principal: Principal,
        session: Session,
    ) -> Result<(String, DateTime<Utc>), Error> {
        self.store.create_session(&session).await?;
        principal.session = Some(SessionInfo {
            session_id: session.session_id.clone(),
            subject: session.subject.clone(),
            user_id: session.user_id.clone(),
            mfa: session.mfa,
            expires_at: session.expires_at,
        });
        self.issue_token_until(&principal)
    }

    /// Signs a session out: its tokens stop working at once.
    pub async fn sign_out(&self, session_id: &str) -> Result<bool, Error> {
        self.store
            .revoke_session(session_id, self.clock.now())
            .await
    }

    /// A fresh 15-minute token for the principal; for a session principal, a token of the
    /// same session (its `jti`), never outliving the session.
    pub fn issue_token(&self, p: &Principal) -> Result<String, Error> {
        self.issue_token_until(p).map(|(token, _)| token)
    }

    /// [`Credentials::issue_token`], with the token's expiry.
    pub fn issue_token_until(&self, p: &Principal) -> Result<(String, DateTime<Utc>), Error> {
        let now = self.clock.now().timestamp();
        let roles: Vec<String> = p
            .roles
            .iter()
            .map(|r| Role::as_str(*r).to_string())
            .collect();
        let exp = p.session.as_ref().map_or(now + TOKEN_TTL_SECS, |s| {
            (now + TOKEN_TTL_SECS).min(s.expires_at.timestamp())
        });
        let token = self.jwt.issue(&Claims {
            iss: ISSUER.into(),
            sub: p.team_id.clone(),
            role: p.role.as_str().into(),
            roles,
            tier: p.tier.as_str().into(),
            iat: now,
            nbf: now,
            exp,
            jti: p.session.as_ref().map_or_else(
                || hex::encode(rand::random::<[u8; 16]>()),
                |s| s.session_id.clone(),
            ),
            key_id: p.key_id.clone(),
            act: None,
            imp_mode: None,
            imp_uid: None,
            mfa: p.session.as_ref().map(|s| s.mfa),
        })?;
        let expires_at = DateTime::from_timestamp(exp, 0)
            .ok_or_else(|| Error::internal("token expiry out of range"))?;
        Ok((token, expires_at))
    }
}
