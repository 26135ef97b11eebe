//! Staff tooling on [`Admin`]: impersonation sessions, the platform settings, and the
//! platform administrators. Every change is audited like the rest of administration.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use model::{Error, ImpersonationMode, Permission, PlatformSettings, Role, TenantKind};
use store::admin::KeyInfo;
use store::staff::{ImpersonationSession, StoredSettings};

use crate::admin::{Admin, ManagedKey, NewKey};
use crate::{Credential, Principal};

/// Lifetime of an impersonation session.
pub const IMPERSONATION_TTL_MINUTES: i64 = 30;

/// Whom staff ask to act as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImpersonationTarget {
    /// A customer account, as its account_admin.
    Tenant(String),
    /// A user with their real membership role, in `account_id` when they have several.
    User {
        user_id: String,
        account_id: Option<String>,
    },
}

/// A session just started: its token is shown this once.
#[derive(Debug)]
pub struct StartedImpersonation {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub session: ImpersonationSession,
}

/// A platform administrator as the owner sees them.
#[derive(Debug, Clone)]
pub struct PlatformAdministrator {
    pub key: ManagedKey,
    /// `platform_owner` or `platform_admin`.
    pub role: Role,
}

/// The settings in force and who changed them last.
#[derive(Debug, Clone)]
pub struct CurrentSettings {
    pub settings: Arc<PlatformSettings>,
    pub updated_at: Option<DateTime<Utc>>,
    pub updated_by: Option<String>,
}

impl Admin {
    /// Starts an impersonation session for a staff JWT. Refused (and audited): a caller
    /// that is itself impersonating or holds a key rather than a token, its own team, an
    /// unknown account or user (404), a target holding platform roles, a suspended account.
    pub async fn impersonate(
        &self,
        actor: &Principal,
        target: &ImpersonationTarget,
        mode: ImpersonationMode,
    ) -> Result<StartedImpersonation, Error> {
        let (action, named) = match target {
            ImpersonationTarget::Tenant(team) => {
                (format!("impersonate.tenant.{mode}"), team.as_str())
            }
            ImpersonationTarget::User { user_id, .. } => {
                (format!("impersonate.user.{mode}"), user_id.as_str())
            }
        };
        self.audited(actor, &action, named, async {
            if actor.impersonation.is_some() {
                return Err(Error::Forbidden(
                    "impersonation cannot be chained: this session is itself an impersonation".into(),
                ));
            }
            if actor.credential != Credential::Jwt || actor.tenant_kind != TenantKind::Platform {
                return Err(Error::Forbidden(
                    "impersonation needs a staff JWT: exchange a platform key at /api/v1/auth/token".into(),
                ));
            }
            let (team, role, user_id) = match target {
                ImpersonationTarget::Tenant(team) => (team.clone(), Role::AccountAdmin, None),
                ImpersonationTarget::User {
                    user_id,
                    account_id,
                } => {
                    check_uuid("user_id", user_id)?;
                    let (team, role) = self.user_membership(user_id, account_id.as_deref()).await?;
                    (team, role, Some(user_id.clone()))
                }
            };
            let team = &team;
            crate::validate_team_id(team)?;
            if *team == actor.team_id {
                return Err(Error::Forbidden("you cannot impersonate your own team".into()));
            }
            let tenant = self
                .store()
                .tenant(team)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no account {team:?}")))?;
            if tenant.kind == TenantKind::Platform || self.holds_platform_role(team).await? {
                return Err(Error::Forbidden(format!(
                    "account {team:?} holds platform roles; staff are never impersonated"
                )));
            }
            if tenant.suspended {
                return Err(Error::Forbidden(format!(
                    "account {team:?} is suspended; reactivate it first"
                )));
            }
            let now = self.now();
            let session = ImpersonationSession {
                session_id: store::new_id(),
                actor_key_id: actor.key_id.clone(),
                actor_team_id: actor.team_id.clone(),
                team_id: team.clone(),
                user_id,
                mode,
                role,
                started_at: now,
                expires_at: now + Duration::minutes(IMPERSONATION_TTL_MINUTES),
                ended_at: None,
            };
            self.store().start_impersonation(&session).await?;
            let token = self.credentials().issue_impersonation_token(&session, tenant.tier)?;
            Ok(StartedImpersonation {
                token,
                expires_at: session.expires_at,
                session,
            })
        })
        .await
    }

    /// The account and role a user-scope session assumes: the user's real membership, in
    /// `account_id` when given (required when they belong to several accounts). A user with
    /// a membership in the platform tenant is staff and is never impersonated.
    async fn user_membership(
        &self,
        user_id: &str,
        account_id: Option<&str>,
    ) -> Result<(String, Role), Error> {
        let (_, memberships) = self
            .store()
            .user_with_memberships(user_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no user {user_id}")))?;
        if memberships
            .iter()
            .any(|m| m.tenant_kind == TenantKind::Platform || m.role.is_platform())
        {
            return Err(Error::Forbidden(format!(
                "user {user_id} is staff; staff are never impersonated"
            )));
        }
        let membership = match account_id {
            Some(account) => memberships
                .iter()
                .find(|m| crate::names_account(account, &m.team_id))
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "user {user_id} is not a member of account {account:?}"
                    ))
                })?,
            None => match memberships.as_slice() {
                [only] => only,
                [] => {
                    return Err(Error::NotFound(format!(
                        "user {user_id} belongs to no account"
                    )));
                }
                _ => {
                    return Err(Error::bad_request(format!(
                        "user {user_id} belongs to several accounts; name one with account_id"
                    )));
                }
            },
        };
        Ok((membership.team_id.clone(), membership.role))
    }

    /// Ends the caller's own impersonation session; its token stops working at once.
    pub async fn end_impersonation(&self, actor: &Principal) -> Result<(), Error> {
        let session = actor.impersonation.as_ref().map(|i| i.session_id.clone());
        self.audited(actor, "impersonate.end", &actor.team_id, async {
            let Some(session) = session else {
                return Err(Error::NotFound(
                    "no impersonation session to end: this credential is not one".into(),
                ));
            };
            if !self.store().end_impersonation(&session, self.now()).await? {
                return Err(Error::NotFound("no open impersonation session".into()));
            }
            Ok(())
        })
        .await
    }

    /// Whether any key of `team` holds a platform role now (primary or active grant).
    async fn holds_platform_role(&self, team: &str) -> Result<bool, Error> {
        let now = self.now();
        let keys = self.store().list_keys(Some(team)).await?;
        Ok(keys
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .any(|k| {
                ManagedKey::new(k, now)
                    .roles
                    .iter()
                    .any(|r| r.is_platform())
            }))
    }

    /// The platform settings in force (as of the last reload) and their last change.
    pub async fn current_settings(&self) -> Result<CurrentSettings, Error> {
        let stored = self.store().platform_settings().await?;
        Ok(CurrentSettings {
            settings: self.platform_settings(),
            updated_at: stored.as_ref().map(|s| s.updated_at),
            updated_by: stored.map(|s| s.updated_by),
        })
    }

    /// Applies a change to the platform settings, stores it (every replica picks it up
    /// within a poll) and applies it here at once.
    pub async fn change_settings(
        &self,
        actor: &Principal,
        action: &str,
        change: impl FnOnce(&PlatformSettings) -> Result<PlatformSettings, Error>,
    ) -> Result<CurrentSettings, Error> {
        self.audited(actor, action, "platform", async {
            let current = self.load_settings().await?;
            let next = change(&current)?;
            let document = serde_json::to_string(&next)
                .map_err(|e| Error::internal_caused("encoding settings", e))?;
            let now = self.now();
            self.store()
                .put_platform_settings(&StoredSettings {
                    document,
                    updated_at: now,
                    updated_by: actor.key_id.clone(),
                })
                .await?;
            let settings = Arc::new(next);
            self.set_platform_settings(settings.clone());
            Ok(CurrentSettings {
                settings,
                updated_at: Some(now),
                updated_by: Some(actor.key_id.clone()),
            })
        })
        .await
    }

    /// Re-reads the platform settings from the store (after another replica changed them).
    pub async fn reload_settings(&self) -> Result<(), Error> {
        let settings = self.load_settings().await?;
        self.set_platform_settings(Arc::new(settings));
        Ok(())
    }

    async fn load_settings(&self) -> Result<PlatformSettings, Error> {
        self.store().current_platform_settings().await
    }

    /// The platform's administrators: keys of the platform tenant whose roles include
    /// `platform_admin` or `platform_owner` (owner only).
    pub async fn platform_administrators(
        &self,
        actor: &Principal,
    ) -> Result<Vec<PlatformAdministrator>, Error> {
        check_owner(actor)?;
        let now = self.now();
        let keys: Vec<KeyInfo> = self.store().list_keys(Some(&actor.team_id)).await?;
        Ok(keys
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .filter_map(|k| {
                let key = ManagedKey::new(k, now);
                let role = key
                    .roles
                    .iter()
                    .copied()
                    .filter(|r| *r >= Role::PlatformAdmin)
                    .max()?;
                Some(PlatformAdministrator { key, role })
            })
            .collect())
    }

    /// A new platform administrator: a key of the platform tenant with the
    /// `platform_admin` role, shown once (owner only).
    pub async fn add_platform_administrator(
        &self,
        actor: &Principal,
        label: Option<&str>,
    ) -> Result<NewKey, Error> {
        check_owner(actor)?;
        let team = actor.team_id.clone();
        self.issue_key(actor, Role::PlatformAdmin.as_str(), label, Some(&team))
            .await
    }

    /// Removes a platform administrator: revokes the key when platform_admin is its primary
    /// role, or takes away its platform_admin grant (owner only; the owner stays).
    pub async fn remove_platform_administrator(
        &self,
        actor: &Principal,
        key_id: &str,
    ) -> Result<(), Error> {
        check_owner(actor)?;
        let admins = self.platform_administrators(actor).await?;
        let Some(admin) = admins.iter().find(|a| a.key.info.key_id == key_id) else {
            return Err(Error::NotFound(format!(
                "no platform administrator {}",
                model::shown(key_id)
            )));
        };
        if admin.role == Role::PlatformOwner {
            return Err(Error::Forbidden(
                "the platform owner cannot be removed".into(),
            ));
        }
        if admin.key.info.role == Role::PlatformAdmin {
            self.revoke_key(actor, key_id).await
        } else {
            self.revoke_role(actor, key_id, Role::PlatformAdmin.as_str())
                .await
        }
    }
}

/// Only the platform owner manages platform administrators (the route's permission says
/// so too; an impersonation session never holds it).
fn check_owner(actor: &Principal) -> Result<(), Error> {
    if actor.has(Permission::PlatformAdmin) && actor.impersonation.is_none() {
        Ok(())
    } else {
        Err(Error::Forbidden(
            "only the platform owner manages platform administrators".into(),
        ))
    }
}

/// A UUID in its canonical hyphenated form (any case): the only 36-character form
/// `uuid` parses.
fn check_uuid(field: &str, value: &str) -> Result<(), Error> {
    if value.len() == 36 && uuid::Uuid::parse_str(value).is_ok() {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "{field} {} is not a UUID",
            model::shown(value)
        )))
    }
}
