//! Account administration: keys, role grants, suspension, the audit log and usage.
//!
//! Every admin route calls [`Admin`]. It decides who may do what to which key or account
//! (the rank rules of [`crate::grants`] plus the rules below), writes an audit row for
//! every action, allowed or refused, and drops the credential cache after every change so
//! that the change holds from the very next request.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use model::TenantKind;
use model::{Clock, Error, PlatformSettings, Role, Tier};
use store::admin::{AuditEntry, AuditQuery, AuditRow, GrantRow, KeyInfo};
use store::{KeyPrincipal, NewApiKey, Store};

use crate::Principal;
use crate::credentials::Credentials;
use crate::grants::{Grant, KeyTarget, check_expiry, effective_roles};
use crate::usage::{Usage, month_start};

/// Days in a usage report's daily series, today included.
pub const USAGE_DAYS: i64 = 30;

/// The administration service.
pub struct Admin {
    store: Arc<dyn Store>,
    credentials: Arc<Credentials>,
    usage: Arc<Usage>,
    clock: Arc<dyn Clock>,
    /// The platform settings in force on this replica (see [`Admin::reload_settings`]).
    settings: ArcSwap<PlatformSettings>,
}

/// A key as administrators see it, with its effective roles at `as_of`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedKey {
    pub info: KeyInfo,
    /// Primary role plus the grants active at `as_of`.
    pub roles: Vec<Role>,
    pub as_of: DateTime<Utc>,
}

impl ManagedKey {
    pub(crate) fn new(info: KeyInfo, as_of: DateTime<Utc>) -> Self {
        let grants: Vec<Grant> = info.grants.iter().map(Grant::from).collect();
        let roles = effective_roles(info.role, &grants, as_of);
        Self { info, roles, as_of }
    }

    /// False once the grant's expiry has passed.
    pub fn grant_active(&self, grant: &GrantRow) -> bool {
        grant.expires_at.is_none_or(|at| at > self.as_of)
    }
}

/// A key just issued or reissued. `key` is shown this once; `Debug` hides it.
pub struct NewKey {
    pub key_id: String,
    pub key: String,
    pub team_id: String,
    pub role: Role,
    pub label: String,
    pub created_at: DateTime<Utc>,
}

impl fmt::Debug for NewKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewKey")
            .field("key_id", &self.key_id)
            .field("key", &"<redacted>")
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("label", &self.label)
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// An account's usage this month and over the last [`USAGE_DAYS`] days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageSummary {
    /// First day of the month (UTC).
    pub month: NaiveDate,
    pub total: u64,
    /// None = unlimited.
    pub quota: Option<u64>,
    pub tier: Tier,
    /// `<METHOD> <route>` -> requests this month.
    pub by_endpoint: BTreeMap<String, u64>,
    /// Oldest first, today included, days without requests as 0.
    pub daily: Vec<(NaiveDate, u64)>,
}

/// The key an action is aimed at, with its effective roles now.
struct Target {
    key: KeyPrincipal,
    roles: Vec<Role>,
}

impl Target {
    fn as_key_target(&self) -> KeyTarget<'_> {
        KeyTarget {
            key_id: &self.key.key_id,
            team_id: &self.key.team_id,
            tenant_kind: self.key.tenant_kind,
            roles: &self.roles,
        }
    }
}

impl Admin {
    pub fn new(
        store: Arc<dyn Store>,
        credentials: Arc<Credentials>,
        usage: Arc<Usage>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            credentials,
            usage,
            clock,
            settings: ArcSwap::default(),
        }
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The platform settings in force on this replica: limits, schedules, vendors, labels.
    pub fn platform_settings(&self) -> Arc<PlatformSettings> {
        self.settings.load_full()
    }

    pub(crate) fn set_platform_settings(&self, settings: Arc<PlatformSettings>) {
        self.settings.store(settings);
    }

    /// Keys of `team_id` (staff only) or of the caller's account. Reads are not audited.
    pub async fn list_keys(
        &self,
        actor: &Principal,
        team_id: Option<&str>,
    ) -> Result<Vec<ManagedKey>, Error> {
        let team = team_id.unwrap_or(&actor.team_id);
        actor.can_manage_team(team)?;
        let now = self.clock.now();
        let keys = self.store.list_keys(Some(team)).await?;
        Ok(keys.into_iter().map(|k| ManagedKey::new(k, now)).collect())
    }

    /// Issues a key of `role` in `team_id` (staff only) or in the caller's account.
    /// `role` is parsed inside the audited action, so an unknown or removed role is
    /// logged as denied.
    pub async fn issue_key(
        &self,
        actor: &Principal,
        role: &str,
        label: Option<&str>,
        team_id: Option<&str>,
    ) -> Result<NewKey, Error> {
        let team = team_id.unwrap_or(&actor.team_id);
        let label = label.map_or_else(|| format!("{role} key"), str::to_string);
        self.audited(actor, "key.issue", team, async {
            let role: Role = role.parse()?;
            check_label(&label)?;
            actor.can_manage_team(team)?;
            let tenant = self
                .store
                .tenant(team)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no account {team:?}")))?;
            actor.can_give(role, team, tenant.kind)?;
            let issued = self.credentials.hasher().issue(team)?;
            let now = self.clock.now();
            self.store
                .insert_key(
                    NewApiKey {
                        key_id: issued.key_id.clone(),
                        team_id: team.to_string(),
                        key_hash: issued.key_hash,
                        role,
                        label: label.clone(),
                    },
                    now,
                )
                .await?;
            Ok(NewKey {
                key_id: issued.key_id,
                key: issued.key,
                team_id: team.to_string(),
                role,
                label: label.clone(),
                created_at: now,
            })
        })
        .await
    }

    /// Changes a key's label or primary role.
    pub async fn update_key(
        &self,
        actor: &Principal,
        key_id: &str,
        label: Option<&str>,
        role: Option<&str>,
    ) -> Result<ManagedKey, Error> {
        self.audited(actor, "key.update", key_id, async {
            let new_role: Option<Role> = role.map(str::parse).transpose()?;
            if let Some(label) = label {
                check_label(label)?;
            }
            let target = self.load_target(actor, key_id).await?;
            actor.can_alter(&target.as_key_target())?;
            if let Some(role) = new_role {
                check_primary_change(target.key.role, role)?;
                actor.can_give(role, &target.key.team_id, target.key.tenant_kind)?;
            }
            self.store.update_key(key_id, label, new_role).await?;
            self.managed_key(key_id, &target.key.team_id).await
        })
        .await
    }

    /// Revokes a key; it stops working at once, tokens included.
    pub async fn revoke_key(&self, actor: &Principal, key_id: &str) -> Result<(), Error> {
        self.audited(actor, "key.revoke", key_id, async {
            let target = self.load_target(actor, key_id).await?;
            actor.can_alter(&target.as_key_target())?;
            check_revocable(&target.roles)?;
            self.store.revoke_key(key_id, self.clock.now()).await
        })
        .await
    }

    /// Revokes a key and issues its replacement (same account, role, label and grants).
    pub async fn reissue_key(&self, actor: &Principal, key_id: &str) -> Result<NewKey, Error> {
        self.audited(actor, "key.reissue", key_id, async {
            let target = self.load_target(actor, key_id).await?;
            actor.can_alter(&target.as_key_target())?;
            let key = &target.key;
            let old = self.key_info(key_id, &key.team_id).await?;
            let issued = self.credentials.hasher().issue(&key.team_id)?;
            let now = self.clock.now();
            self.store
                .reissue_key(
                    key_id,
                    NewApiKey {
                        key_id: issued.key_id.clone(),
                        team_id: key.team_id.clone(),
                        key_hash: issued.key_hash,
                        role: key.role,
                        label: old.label.clone(),
                    },
                    now,
                )
                .await?;
            // The holder's second factors follow the key to its replacement.
            self.store
                .move_second_factors(
                    &crate::key_subject(key_id),
                    &crate::key_subject(&issued.key_id),
                )
                .await?;
            Ok(NewKey {
                key_id: issued.key_id,
                key: issued.key,
                team_id: key.team_id.clone(),
                role: key.role,
                label: old.label,
                created_at: now,
            })
        })
        .await
    }

    /// Reissues the key the caller signed in with: any key holder may replace its own key
    /// (the console's Account page), whatever its role. The old key is revoked at once and
    /// the holder's second factors follow it to the replacement.
    pub async fn reissue_own_key(&self, actor: &Principal) -> Result<NewKey, Error> {
        self.audited(actor, "key.reissue", &actor.key_id, async {
            if actor.impersonation.is_some() {
                return Err(Error::Forbidden(
                    "an impersonation session cannot reissue the staff member's key".into(),
                ));
            }
            let key = self
                .store
                .key_by_id(&actor.key_id)
                .await?
                .filter(|k| k.team_id == actor.team_id && !k.revoked)
                .ok_or_else(|| Error::NotFound("no such key".into()))?;
            let old = self.key_info(&key.key_id, &key.team_id).await?;
            let issued = self.credentials.hasher().issue(&key.team_id)?;
            let now = self.clock.now();
            self.store
                .reissue_key(
                    &key.key_id,
                    NewApiKey {
                        key_id: issued.key_id.clone(),
                        team_id: key.team_id.clone(),
                        key_hash: issued.key_hash,
                        role: key.role,
                        label: old.label.clone(),
                    },
                    now,
                )
                .await?;
            self.store
                .move_second_factors(
                    &crate::key_subject(&key.key_id),
                    &crate::key_subject(&issued.key_id),
                )
                .await?;
            Ok(NewKey {
                key_id: issued.key_id,
                key: issued.key,
                team_id: key.team_id,
                role: key.role,
                label: old.label,
                created_at: now,
            })
        })
        .await
    }

    /// Grants `role` to a key, permanently or until `expires_at` (at most 30 days ahead).
    pub async fn grant_role(
        &self,
        actor: &Principal,
        key_id: &str,
        role: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<ManagedKey, Error> {
        let action = format!("role.grant:{}", role_for_audit(role));
        self.audited(actor, &action, key_id, async {
            let role: Role = role.parse()?;
            let now = self.clock.now();
            check_expiry(expires_at, now)?;
            let target = self.load_target(actor, key_id).await?;
            if target.key.revoked {
                return Err(Error::NotFound("no such key".into()));
            }
            actor.can_alter(&target.as_key_target())?;
            actor.can_give(role, &target.key.team_id, target.key.tenant_kind)?;
            self.store
                .put_grant(
                    key_id,
                    &GrantRow {
                        role,
                        expires_at,
                        granted_by: actor.key_id.clone(),
                        granted_at: now,
                    },
                )
                .await?;
            self.managed_key(key_id, &target.key.team_id).await
        })
        .await
    }

    /// Revokes a granted role.
    pub async fn revoke_role(
        &self,
        actor: &Principal,
        key_id: &str,
        role: &str,
    ) -> Result<(), Error> {
        let action = format!("role.revoke:{}", role_for_audit(role));
        self.audited(actor, &action, key_id, async {
            let role: Role = role.parse()?;
            let target = self.load_target(actor, key_id).await?;
            actor.can_alter(&target.as_key_target())?;
            check_may_take(actor, role)?;
            if self.store.delete_grant(key_id, role).await? {
                Ok(())
            } else {
                Err(Error::NotFound(format!("the key holds no grant of {role}")))
            }
        })
        .await
    }

    /// Suspends an account (its keys and tokens stop working at once) or lifts the
    /// suspension.
    pub async fn set_suspended(
        &self,
        actor: &Principal,
        team_id: &str,
        suspended: bool,
    ) -> Result<(), Error> {
        let action = if suspended {
            "account.suspend"
        } else {
            "account.unsuspend"
        };
        self.audited(actor, action, team_id, async {
            crate::validate_team_id(team_id)?;
            let tenant = self
                .store
                .tenant(team_id)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no account {team_id:?}")))?;
            check_suspendable(tenant.kind)?;
            self.store.set_suspended(team_id, suspended).await
        })
        .await
    }

    /// The audit log entries matching `query`, newest first. Reads are not audited.
    pub async fn audit_log(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, Error> {
        self.store.audit_log(query).await
    }

    /// The caller's account usage: this month's total and per route, the last
    /// [`USAGE_DAYS`] days, the tier's quota.
    pub async fn usage(&self, actor: &Principal) -> Result<UsageSummary, Error> {
        // Counts wait in memory for the next batch; write them so the report is exact.
        self.usage.flush().await?;
        let today = self.clock.now().date_naive();
        let month = month_start(today);
        let by_endpoint: BTreeMap<String, u64> = self
            .store
            .usage_by_endpoint(&actor.team_id, month, today)
            .await?
            .into_iter()
            .collect();
        let first = today - Duration::days(USAGE_DAYS - 1);
        let counted: BTreeMap<NaiveDate, u64> = self
            .store
            .usage_daily(&actor.team_id, first, today)
            .await?
            .into_iter()
            .collect();
        let daily = (0..USAGE_DAYS)
            .map(|i| {
                let date = first + Duration::days(i);
                (date, counted.get(&date).copied().unwrap_or(0))
            })
            .collect();
        Ok(UsageSummary {
            month,
            total: by_endpoint.values().sum(),
            quota: self.usage.quota(actor.tier),
            tier: actor.tier,
            by_endpoint,
            daily,
        })
    }

    /// Runs an action and records it, whatever the outcome; a change drops the credential
    /// cache.
    pub async fn audited<T>(
        &self,
        actor: &Principal,
        action: &str,
        target: &str,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let result = work.await;
        if result.is_ok() {
            // The change is made even if the audit write below fails.
            self.credentials.invalidate();
        }
        let (outcome, mut detail) = audit_outcome(&result);
        if let Some(session) = &actor.impersonation {
            detail = impersonation_detail(actor, session, &detail);
        }
        let entry = AuditEntry {
            at: self.clock.now(),
            actor: actor.key_id.clone(),
            team_id: actor.team_id.clone(),
            action: action.into(),
            target: audit_target(target),
            outcome,
            detail,
        };
        if let Err(e) = self.store.append_audit(&entry).await {
            tracing::error!(error = %e, action, "could not write the audit log");
            // An action that cannot be audited must not be reported as done silently.
            if result.is_ok() {
                return Err(Error::internal("audit log unavailable"));
            }
        }
        result
    }

    /// The key an action targets, with its effective roles; keys the caller may not see
    /// are `NotFound`.
    async fn load_target(&self, actor: &Principal, key_id: &str) -> Result<Target, Error> {
        let key = self
            .store
            .key_by_id(key_id)
            .await?
            .ok_or_else(|| Error::NotFound("no such key".into()))?;
        actor.can_manage_team(&key.team_id)?;
        let grants: Vec<Grant> = self
            .store
            .grants(key_id)
            .await?
            .iter()
            .map(Grant::from)
            .collect();
        let roles = effective_roles(key.role, &grants, self.clock.now());
        Ok(Target { key, roles })
    }

    async fn key_info(&self, key_id: &str, team_id: &str) -> Result<KeyInfo, Error> {
        self.store
            .list_keys(Some(team_id))
            .await?
            .into_iter()
            .find(|k| k.key_id == key_id)
            .ok_or_else(|| Error::NotFound("no such key".into()))
    }

    async fn managed_key(&self, key_id: &str, team_id: &str) -> Result<ManagedKey, Error> {
        let info = self.key_info(key_id, team_id).await?;
        Ok(ManagedKey::new(info, self.clock.now()))
    }
}

/// The audit detail of an action done in an impersonation session: who acted, as whom.
pub fn impersonation_detail(
    actor: &Principal,
    session: &crate::Impersonation,
    detail: &str,
) -> String {
    let mut text = format!(
        "impersonation {} by {}/{} as {} ({})",
        session.session_id, session.actor_team_id, actor.key_id, actor.role, session.mode
    );
    if !detail.is_empty() {
        text.push_str(": ");
        text.push_str(detail);
    }
    text
}

/// A target as the audit log keeps it: a plain identifier as given, anything else (a
/// refused attempt with a malformed id) quoted, escaped and cut, so caller text can never
/// forge a line or flood the log.
fn audit_target(target: &str) -> String {
    let plain = (1..=64).contains(&target.len())
        && target
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if plain {
        target.to_string()
    } else {
        model::shown(target)
    }
}

/// The audit row's outcome (`ok` or `denied: <code>`) and detail (why, for refusals whose
/// message is meant for the caller; never internals).
fn audit_outcome<T>(result: &Result<T, Error>) -> (String, String) {
    match result {
        Ok(_) => ("ok".into(), String::new()),
        Err(e) => {
            let detail = match e {
                Error::Forbidden(m)
                | Error::NotFound(m)
                | Error::BadRequest(m)
                | Error::Conflict(m) => m.clone(),
                _ => String::new(),
            };
            (format!("denied: {}", e.code()), detail)
        }
    }
}

/// A requested role name as the audit log's action shows it: as given when it looks like a
/// role name (valid or removed), otherwise a placeholder, so callers cannot write arbitrary
/// text into the action column.
fn role_for_audit(name: &str) -> &str {
    if !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b' ')
    {
        name
    } else {
        "<invalid>"
    }
}

fn check_label(label: &str) -> Result<(), Error> {
    if label.chars().count() > 200 || label.chars().any(char::is_control) {
        return Err(Error::bad_request(
            "label must be at most 200 characters without control characters",
        ));
    }
    Ok(())
}

/// The platform owner's primary role never changes.
fn check_primary_change(current: Role, new: Role) -> Result<(), Error> {
    if current == Role::PlatformOwner && new != Role::PlatformOwner {
        return Err(Error::Forbidden(
            "the platform owner cannot be demoted".into(),
        ));
    }
    Ok(())
}

/// The owner's key is never revoked, only reissued, so the platform always has an owner.
fn check_revocable(roles: &[Role]) -> Result<(), Error> {
    if roles.contains(&Role::PlatformOwner) {
        return Err(Error::Forbidden(
            "the platform owner's key cannot be revoked; reissue it instead".into(),
        ));
    }
    Ok(())
}

/// Suspending the platform tenant would lock out every staff key.
fn check_suspendable(kind: TenantKind) -> Result<(), Error> {
    if kind == TenantKind::Platform {
        return Err(Error::Forbidden(
            "the platform tenant cannot be suspended".into(),
        ));
    }
    Ok(())
}

/// A grant can be taken away only by someone ranking at least as high as the role.
fn check_may_take(actor: &Principal, role: Role) -> Result<(), Error> {
    if role > actor.rank() {
        return Err(Error::Forbidden(format!(
            "{role} ranks above your {}",
            actor.rank()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::Credential;

    #[test]
    fn audit_targets_are_plain_ids_or_escaped_and_cut() {
        assert_eq!(audit_target("key_0123abcd"), "key_0123abcd");
        assert_eq!(audit_target("acme-soc"), "acme-soc");
        let forged = audit_target("acme\n2026-01-01 ok key.revoke");
        assert!(
            forged.starts_with('"') && forged.contains("\\n"),
            "{forged}"
        );
        let long = audit_target(&"t".repeat(60_000));
        assert!(
            long.chars().count() <= model::error::SHOWN_CHARS + 3,
            "{}",
            long.len()
        );
    }

    fn principal(key_id: &str, team: &str, kind: TenantKind, roles: &[Role]) -> Principal {
        Principal {
            key_id: key_id.into(),
            team_id: team.into(),
            tenant_kind: kind,
            role: roles[0],
            roles: roles.to_vec(),
            tier: Tier::Enterprise,
            credential: Credential::ApiKey,
            impersonation: None,
            session: None,
        }
    }

    fn target<'a>(
        key_id: &'a str,
        team: &'a str,
        kind: TenantKind,
        roles: &'a [Role],
    ) -> KeyTarget<'a> {
        KeyTarget {
            key_id,
            team_id: team,
            tenant_kind: kind,
            roles,
        }
    }

    fn forbidden<T: fmt::Debug>(r: Result<T, Error>) -> bool {
        matches!(r, Err(Error::Forbidden(_)))
    }

    #[test]
    fn altering_needs_own_key_strictly_lower_rank_or_staff() {
        use TenantKind::{Customer, Platform};
        let admin = principal("k_admin", "acme", Customer, &[Role::AccountAdmin]);
        let peer = [Role::AccountAdmin];
        let analyst = [Role::Analyst];
        // A peer would be locked out and its secret handed over.
        assert!(forbidden(
            admin.can_alter(&target("k_peer", "acme", Customer, &peer))
        ));
        // A grant of account_admin makes a peer too.
        let granted_peer = [Role::Analyst, Role::AccountAdmin];
        assert!(forbidden(admin.can_alter(&target(
            "k_peer",
            "acme",
            Customer,
            &granted_peer
        ))));
        assert!(
            admin
                .can_alter(&target("k_admin", "acme", Customer, &peer))
                .is_ok()
        );
        assert!(
            admin
                .can_alter(&target("k_an", "acme", Customer, &analyst))
                .is_ok()
        );
        assert!(matches!(
            admin.can_alter(&target("k_other", "globex", Customer, &analyst)),
            Err(Error::NotFound(_))
        ));

        let staff = principal("k_pa", "platform", Platform, &[Role::PlatformAdmin]);
        assert!(
            staff
                .can_alter(&target("k_peer", "acme", Customer, &peer))
                .is_ok()
        );
        assert!(
            staff
                .can_alter(&target(
                    "k_pa",
                    "platform",
                    Platform,
                    &[Role::PlatformAdmin]
                ))
                .is_ok()
        );
        assert!(forbidden(staff.can_alter(&target(
            "k_pa2",
            "platform",
            Platform,
            &[Role::PlatformAdmin]
        ))));
        assert!(forbidden(staff.can_alter(&target(
            "k_owner",
            "platform",
            Platform,
            &[Role::PlatformOwner]
        ))));

        let owner = principal("k_owner", "platform", Platform, &[Role::PlatformOwner]);
        assert!(
            owner
                .can_alter(&target(
                    "k_owner",
                    "platform",
                    Platform,
                    &[Role::PlatformOwner]
                ))
                .is_ok()
        );
        assert!(
            owner
                .can_alter(&target(
                    "k_pa",
                    "platform",
                    Platform,
                    &[Role::PlatformAdmin]
                ))
                .is_ok()
        );
        // A second owner key is the owner's alone.
        assert!(forbidden(owner.can_alter(&target(
            "k_owner2",
            "platform",
            Platform,
            &[Role::PlatformOwner]
        ))));
    }

    #[test]
    fn the_owner_is_never_demoted_or_revoked() {
        assert!(forbidden(check_primary_change(
            Role::PlatformOwner,
            Role::PlatformAdmin
        )));
        assert!(check_primary_change(Role::PlatformOwner, Role::PlatformOwner).is_ok());
        assert!(check_primary_change(Role::AccountAdmin, Role::Analyst).is_ok());
        assert!(forbidden(check_revocable(&[
            Role::Analyst,
            Role::PlatformOwner
        ])));
        assert!(check_revocable(&[Role::PlatformAdmin]).is_ok());
    }

    #[test]
    fn the_platform_tenant_is_never_suspended() {
        assert!(forbidden(check_suspendable(TenantKind::Platform)));
        assert!(check_suspendable(TenantKind::Customer).is_ok());
    }

    #[test]
    fn grants_above_the_caller_stay() {
        let admin = principal("k", "acme", TenantKind::Customer, &[Role::AccountAdmin]);
        assert!(check_may_take(&admin, Role::Auditor).is_ok());
        assert!(check_may_take(&admin, Role::AccountAdmin).is_ok());
        assert!(forbidden(check_may_take(&admin, Role::ClientLiaison)));
    }

    #[test]
    fn audit_rows_name_the_code_and_why() {
        assert_eq!(
            audit_outcome(&Ok::<(), Error>(())),
            ("ok".into(), String::new())
        );
        assert_eq!(
            audit_outcome::<()>(&Err(Error::Forbidden("no".into()))),
            ("denied: forbidden".into(), "no".into())
        );
        assert_eq!(
            audit_outcome::<()>(&Err(Error::NotFound("no such key".into()))),
            ("denied: not found".into(), "no such key".into())
        );
        // Internal details stay in the log file.
        assert_eq!(
            audit_outcome::<()>(&Err(Error::internal("db down at 10.0.0.3"))),
            ("denied: internal error".into(), String::new())
        );
    }

    #[test]
    fn audit_actions_hold_only_role_like_names() {
        assert_eq!(role_for_audit("auditor"), "auditor");
        assert_eq!(role_for_audit("senior responder"), "senior responder");
        assert_eq!(role_for_audit(""), "<invalid>");
        assert_eq!(role_for_audit("x\ny"), "<invalid>");
        assert_eq!(role_for_audit("Auditor"), "<invalid>");
        assert_eq!(role_for_audit(&"a".repeat(33)), "<invalid>");
    }

    #[test]
    fn labels_are_short_and_printable() {
        assert!(check_label("SIEM key").is_ok());
        assert!(check_label(&"é".repeat(200)).is_ok());
        assert!(check_label(&"a".repeat(201)).is_err());
        assert!(check_label("a\tb").is_err());
    }

    #[test]
    fn managed_keys_show_roles_and_grants_as_of_now() {
        let now = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).single().unwrap();
        let grant = |role, expires_at| GrantRow {
            role,
            expires_at,
            granted_by: "k_admin".into(),
            granted_at: now - Duration::days(1),
        };
        let info = KeyInfo {
            key_id: "k".into(),
            team_id: "acme".into(),
            role: Role::Analyst,
            label: "siem".into(),
            created_at: now - Duration::days(2),
            revoked_at: None,
            grants: vec![
                grant(Role::Auditor, Some(now + Duration::hours(1))),
                grant(Role::AccountAdmin, Some(now)),
            ],
        };
        let key = ManagedKey::new(info, now);
        assert_eq!(key.roles, [Role::Analyst, Role::Auditor]);
        assert!(key.grant_active(&key.info.grants[0]));
        assert!(!key.grant_active(&key.info.grants[1]));
    }
}
