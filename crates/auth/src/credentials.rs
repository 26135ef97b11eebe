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

use model::{Clock, Error, Permission, Role, TenantKind, Tier};
use store::staff::ImpersonationSession;
use store::{KeyPrincipal, Store};

use crate::grants::{Grant, effective_roles};
use crate::jwt::{Claims, ISSUER, JwtKeys, TOKEN_TTL_SECS};
use crate::{Credential, Impersonation, KeyHasher, Principal, parse_key};

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

    /// A fresh 15-minute token for the principal.
    pub fn issue_token(&self, p: &Principal) -> Result<String, Error> {
        let now = self.clock.now().timestamp();
        let roles: Vec<String> = p
            .roles
            .iter()
            .map(|r| Role::as_str(*r).to_string())
            .collect();
        self.jwt.issue(&Claims {
            iss: ISSUER.into(),
            sub: p.team_id.clone(),
            role: p.role.as_str().into(),
            roles,
            tier: p.tier.as_str().into(),
            iat: now,
            nbf: now,
            exp: now + TOKEN_TTL_SECS,
            jti: hex::encode(rand::random::<[u8; 16]>()),
            key_id: p.key_id.clone(),
            act: None,
            imp_mode: None,
            imp_uid: None,
            mfa: None,
        })
    }
}
