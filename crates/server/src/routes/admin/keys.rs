//! Account administration: keys, role grants, suspension, the audit log and usage.
//!
//! Every action here, allowed or refused, is written to the append-only audit log with the
//! caller, the target, the action and the outcome.

use std::collections::BTreeMap;

use auth::grants::{KeyTarget, check_expiry, effective_roles};
use auth::{Grant, Principal};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use model::{Error, Permission, Role, Tier};
use serde::{Deserialize, Serialize};
use store::access::{AuditEntry, GrantRow, KeyInfo};
use store::{KeyPrincipal, NewApiKey, TenantKind};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{JsonBody, QueryParams};
use crate::routing::{Api, Rule};

/// The administration routes and who may call them.
pub(crate) fn routes(api: Api) -> Api {
    use Permission as P;
    let keys = Rule::private(P::TenantManage, Tier::Teams);
    let platform = |p| Rule::private(p, Tier::Enterprise);
    api.route(routes!(usage), Rule::any_account())
        .route(routes!(list_keys), keys)
        .route(routes!(issue_key), keys)
        .route(routes!(update_key), keys)
        .route(routes!(revoke_key), keys)
        .route(routes!(reissue_key), keys)
        .route(routes!(grant_role), keys)
        .route(routes!(revoke_role), keys)
        .route(routes!(suspend), platform(P::PlatformKeys))
        .route(routes!(unsuspend), platform(P::PlatformKeys))
        .route(routes!(audit), platform(P::PlatformSettings))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GrantJson {
    pub role: String,
    /// Absent for a permanent grant.
    pub expires_at: Option<String>,
    pub granted_by: String,
    pub granted_at: String,
    /// False once `expires_at` has passed.
    pub active: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyJson {
    pub key_id: String,
    pub team_id: String,
    /// Primary role.
    pub role: String,
    /// Primary role plus active grants.
    pub roles: Vec<String>,
    pub label: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub grants: Vec<GrantJson>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub results: Vec<KeyJson>,
    pub total: usize,
}

/// A new key; `key` is shown this once and cannot be recovered.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewKeyJson {
    pub key_id: String,
    pub key: String,
    pub team_id: String,
    pub role: String,
    pub label: String,
    pub created_at: String,
}

fn key_json(k: &KeyInfo, now: DateTime<Utc>) -> KeyJson {
    let grants: Vec<Grant> = k
        .grants
        .iter()
        .map(|g| Grant {
            role: g.role,
            expires_at: g.expires_at,
        })
        .collect();
    KeyJson {
        key_id: k.key_id.clone(),
        team_id: k.team_id.clone(),
        role: k.role.as_str().into(),
        roles: effective_roles(k.role, &grants, now)
            .iter()
            .map(|r| r.as_str().to_string())
            .collect(),
        label: k.label.clone(),
        created_at: timestamp(k.created_at),
        revoked_at: k.revoked_at.map(timestamp),
        grants: k
            .grants
            .iter()
            .map(|g| GrantJson {
                role: g.role.as_str().into(),
                expires_at: g.expires_at.map(timestamp),
                granted_by: g.granted_by.clone(),
                granted_at: timestamp(g.granted_at),
                active: g.expires_at.is_none_or(|at| at > now),
            })
            .collect(),
    }
}

/// Runs an administrative action and records it, whatever the outcome.
async fn audited<T>(
    state: &AppState,
    actor: &Principal,
    action: &str,
    target: &str,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, ApiError> {
    let result = work.await;
    let outcome = match &result {
        Ok(_) => "ok".to_string(),
        Err(e) => format!("denied: {}", crate::error::status_and_code(e).1),
    };
    let detail = match &result {
        Err(
            Error::Forbidden(m) | Error::NotFound(m) | Error::BadRequest(m) | Error::Conflict(m),
        ) => m.clone(),
        _ => String::new(),
    };
    let entry = AuditEntry {
        at: state.clock.now(),
        actor: actor.key_id.clone(),
        team_id: actor.team_id.clone(),
        action: action.into(),
        target: target.into(),
        outcome,
        detail,
    };
    if let Err(e) = state.store.append_audit(&entry).await {
        tracing::error!(error = %e, action, "could not write the audit log");
        // An action that cannot be audited must not be reported as done silently.
        if result.is_ok() {
            return Err(Error::internal("audit log unavailable").into());
        }
    }
    result.map_err(ApiError::from)
}

/// The key an action targets, with its effective roles; keys the caller may not see are
/// `NotFound`.
async fn load_target(
    state: &AppState,
    actor: &Principal,
    key_id: &str,
) -> Result<(KeyPrincipal, Vec<Role>), Error> {
    let key = state
        .store
        .key_by_id(key_id)
        .await?
        .ok_or_else(|| Error::NotFound("no such key".into()))?;
    actor.can_manage_team(&key.team_id)?;
    let grants: Vec<Grant> = state
        .store
        .grants(key_id)
        .await?
        .into_iter()
        .map(|g| Grant {
            role: g.role,
            expires_at: g.expires_at,
        })
        .collect();
    let roles = effective_roles(key.role, &grants, state.clock.now());
    Ok((key, roles))
}

fn target<'a>(key: &'a KeyPrincipal, roles: &'a [Role]) -> KeyTarget<'a> {
    KeyTarget {
        key_id: &key.key_id,
        team_id: &key.team_id,
        tenant_kind: key.tenant_kind,
        roles,
    }
}

async fn key_info(state: &AppState, key_id: &str, team_id: &str) -> Result<KeyInfo, Error> {
    state
        .store
        .list_keys(Some(team_id))
        .await?
        .into_iter()
        .find(|k| k.key_id == key_id)
        .ok_or_else(|| Error::NotFound("no such key".into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Another account's keys (staff with platform:keys only); default your own.
    team_id: Option<String>,
}

/// Keys of your account (or, for staff, of any account).
#[utoipa::path(get, path = "/api/v1/admin/keys", tag = "admin", security(("api_key" = [])),
    params(ListParams),
    responses((status = 200, body = KeyList), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_keys(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    QueryParams(params): QueryParams<ListParams>,
) -> ApiResult<Json<KeyList>> {
    let team = params.team_id.unwrap_or_else(|| actor.team_id.clone());
    actor.can_manage_team(&team)?;
    let now = state.clock.now();
    let keys = state.store.list_keys(Some(&team)).await?;
    Ok(Json(KeyList {
        total: keys.len(),
        results: keys.iter().map(|k| key_json(k, now)).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueKey {
    /// analyst, auditor, account_admin (staff only), or a platform role (owner only).
    // A string, parsed inside the audited action, so that a removed or unknown role is
    // logged as denied rather than refused before the audit.
    #[schema(value_type = String)]
    pub role: String,
    #[serde(default)]
    pub label: Option<String>,
    /// Another account (staff only); default your own.
    #[serde(default)]
    pub team_id: Option<String>,
}

fn check_label(label: &str) -> Result<(), Error> {
    if label.chars().count() > 200 || label.chars().any(char::is_control) {
        return Err(Error::bad_request(
            "label must be at most 200 characters without control characters",
        ));
    }
    Ok(())
}

/// Issue a key. The response holds the key once.
#[utoipa::path(post, path = "/api/v1/admin/keys", tag = "admin", security(("api_key" = [])),
    request_body = IssueKey,
    responses((status = 201, body = NewKeyJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn issue_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<IssueKey>,
) -> ApiResult<(StatusCode, Json<NewKeyJson>)> {
    let team = body
        .team_id
        .clone()
        .unwrap_or_else(|| actor.team_id.clone());
    let label = body
        .label
        .clone()
        .unwrap_or_else(|| format!("{} key", body.role));
    let created = audited(&state, &actor, "key.issue", &team, async {
        let role: Role = body.role.parse()?;
        check_label(&label)?;
        actor.can_manage_team(&team)?;
        let tenant = state
            .store
            .tenant(&team)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no account {team:?}")))?;
        actor.can_give(role, &team, tenant.kind)?;
        let issued = state.credentials.hasher().issue(&team)?;
        let now = state.clock.now();
        state
            .store
            .insert_key(
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: team.clone(),
                    key_hash: issued.key_hash.clone(),
                    role,
                    label: label.clone(),
                },
                now,
            )
            .await?;
        Ok(NewKeyJson {
            key_id: issued.key_id,
            key: issued.key,
            team_id: team.clone(),
            role: role.as_str().into(),
            label: label.clone(),
            created_at: timestamp(now),
        })
    })
    .await?;
    state.credentials.invalidate();
    Ok((StatusCode::CREATED, Json(created)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateKey {
    #[serde(default)]
    pub label: Option<String>,
    /// New primary role.
    // Parsed inside the audited action (see `IssueKey::role`).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub role: Option<String>,
}

/// Change a key's label or primary role.
#[utoipa::path(patch, path = "/api/v1/admin/keys/{key_id}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    request_body = UpdateKey,
    responses((status = 200, body = KeyJson), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
    JsonBody(body): JsonBody<UpdateKey>,
) -> ApiResult<Json<KeyJson>> {
    let info = audited(&state, &actor, "key.update", &key_id, async {
        let new_role: Option<Role> = body.role.as_deref().map(str::parse).transpose()?;
        if let Some(label) = &body.label {
            check_label(label)?;
        }
        let (key, roles) = load_target(&state, &actor, &key_id).await?;
        actor.can_alter(&target(&key, &roles))?;
        if let Some(role) = new_role {
            if key.role == Role::PlatformOwner && role != Role::PlatformOwner {
                return Err(Error::Forbidden(
                    "the platform owner cannot be demoted".into(),
                ));
            }
            actor.can_give(role, &key.team_id, key.tenant_kind)?;
        }
        state
            .store
            .update_key(&key_id, body.label.as_deref(), new_role)
            .await?;
        key_info(&state, &key_id, &key.team_id).await
    })
    .await?;
    state.credentials.invalidate();
    Ok(Json(key_json(&info, state.clock.now())))
}

/// Revoke a key; it stops working at once, tokens included.
#[utoipa::path(delete, path = "/api/v1/admin/keys/{key_id}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
) -> ApiResult<StatusCode> {
    audited(&state, &actor, "key.revoke", &key_id, async {
        let (key, roles) = load_target(&state, &actor, &key_id).await?;
        actor.can_alter(&target(&key, &roles))?;
        if roles.contains(&Role::PlatformOwner) {
            return Err(Error::Forbidden(
                "the platform owner's key cannot be revoked; reissue it instead".into(),
            ));
        }
        state.store.revoke_key(&key_id, state.clock.now()).await
    })
    .await?;
    state.credentials.invalidate();
    Ok(StatusCode::NO_CONTENT)
}

/// Revoke a key and issue its replacement (same account, role, label and grants).
#[utoipa::path(post, path = "/api/v1/admin/keys/{key_id}/reissue", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    responses((status = 201, body = NewKeyJson), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn reissue_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
) -> ApiResult<(StatusCode, Json<NewKeyJson>)> {
    let created = audited(&state, &actor, "key.reissue", &key_id, async {
        let (key, roles) = load_target(&state, &actor, &key_id).await?;
        actor.can_alter(&target(&key, &roles))?;
        let old = key_info(&state, &key_id, &key.team_id).await?;
        let issued = state.credentials.hasher().issue(&key.team_id)?;
        let now = state.clock.now();
        state
            .store
            .reissue_key(
                &key_id,
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: key.team_id.clone(),
                    key_hash: issued.key_hash.clone(),
                    role: key.role,
                    label: old.label.clone(),
                },
                now,
            )
            .await?;
        Ok(NewKeyJson {
            key_id: issued.key_id,
            key: issued.key,
            team_id: key.team_id.clone(),
            role: key.role.as_str().into(),
            label: old.label,
            created_at: timestamp(now),
        })
    })
    .await?;
    state.credentials.invalidate();
    Ok((StatusCode::CREATED, Json(created)))
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRole {
    // Parsed inside the audited action (see `IssueKey::role`).
    #[schema(value_type = String)]
    pub role: String,
    /// RFC 3339; at most 30 days ahead. Absent = permanent.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Grant an additional role, permanent or until `expires_at`.
#[utoipa::path(post, path = "/api/v1/admin/keys/{key_id}/roles", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    request_body = GrantRole,
    responses((status = 200, body = KeyJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn grant_role(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
    JsonBody(body): JsonBody<GrantRole>,
) -> ApiResult<Json<KeyJson>> {
    let action = format!("role.grant:{}", role_for_audit(&body.role));
    let info = audited(&state, &actor, &action, &key_id, async {
        let role: Role = body.role.parse()?;
        let now = state.clock.now();
        check_expiry(body.expires_at, now)?;
        let (key, roles) = load_target(&state, &actor, &key_id).await?;
        if key.revoked {
            return Err(Error::NotFound("no such key".into()));
        }
        actor.can_alter(&target(&key, &roles))?;
        actor.can_give(role, &key.team_id, key.tenant_kind)?;
        state
            .store
            .put_grant(
                &key_id,
                &GrantRow {
                    role,
                    expires_at: body.expires_at,
                    granted_by: actor.key_id.clone(),
                    granted_at: now,
                },
            )
            .await?;
        key_info(&state, &key_id, &key.team_id).await
    })
    .await?;
    state.credentials.invalidate();
    Ok(Json(key_json(&info, state.clock.now())))
}

/// Revoke an additional role.
#[utoipa::path(delete, path = "/api/v1/admin/keys/{key_id}/roles/{role}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key"), ("role" = String, Path, description = "The granted role to revoke")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_role(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path((key_id, role)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let action = format!("role.revoke:{}", role_for_audit(&role));
    audited(&state, &actor, &action, &key_id, async {
        let role: Role = role.parse()?;
        let (key, roles) = load_target(&state, &actor, &key_id).await?;
        actor.can_alter(&target(&key, &roles))?;
        if role > actor.rank() {
            return Err(Error::Forbidden(format!(
                "{role} ranks above your {}",
                actor.rank()
            )));
        }
        if state.store.delete_grant(&key_id, role).await? {
            Ok(())
        } else {
            Err(Error::NotFound(format!("the key holds no grant of {role}")))
        }
    })
    .await?;
    state.credentials.invalidate();
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AccountState {
    pub team_id: String,
    pub suspended: bool,
}

async fn set_suspended(
    state: AppState,
    actor: Principal,
    team_id: String,
    suspended: bool,
) -> ApiResult<Json<AccountState>> {
    let action = if suspended {
        "account.suspend"
    } else {
        "account.unsuspend"
    };
    audited(&state, &actor, action, &team_id, async {
        let tenant = state
            .store
            .tenant(&team_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no account {team_id:?}")))?;
        if tenant.kind == TenantKind::Platform {
            return Err(Error::Forbidden(
                "the platform tenant cannot be suspended".into(),
            ));
        }
        state.store.set_suspended(&team_id, suspended).await
    })
    .await?;
    state.credentials.invalidate();
    Ok(Json(AccountState { team_id, suspended }))
}

/// Suspend an account: its keys and tokens stop working at once (staff).
#[utoipa::path(post, path = "/api/v1/admin/accounts/{team_id}/suspend", tag = "admin", security(("api_key" = [])),
    params(("team_id" = String, Path, description = "Team id of the account")),
    responses((status = 200, body = AccountState), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn suspend(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(team_id): Path<String>,
) -> ApiResult<Json<AccountState>> {
    set_suspended(state, actor, team_id, true).await
}

/// Lift a suspension (staff).
#[utoipa::path(post, path = "/api/v1/admin/accounts/{team_id}/unsuspend", tag = "admin", security(("api_key" = [])),
    params(("team_id" = String, Path, description = "Team id of the account")),
    responses((status = 200, body = AccountState), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn unsuspend(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(team_id): Path<String>,
) -> ApiResult<Json<AccountState>> {
    set_suspended(state, actor, team_id, false).await
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditJson {
    pub at: String,
    pub actor: String,
    pub team_id: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub results: Vec<AuditJson>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only actions by callers of this account.
    team_id: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

/// The audit log, newest first (read-only: nothing in the API edits it).
#[utoipa::path(get, path = "/api/v1/admin/audit", tag = "admin", security(("api_key" = [])),
    params(AuditParams),
    responses((status = 200, body = AuditPage), (status = 403, body = ErrorBody)))]
pub async fn audit(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    let limit = crate::routes::intel::parse_limit(params.limit.as_deref())?;
    let offset = crate::routes::intel::parse_offset(params.offset.as_deref())?;
    let page = state
        .store
        .audit_log(params.team_id.as_deref(), limit, offset)
        .await?;
    Ok(Json(AuditPage {
        results: page
            .items
            .into_iter()
            .map(|e| AuditJson {
                at: timestamp(e.at),
                actor: e.actor,
                team_id: e.team_id,
                action: e.action,
                target: e.target,
                outcome: e.outcome,
                detail: e.detail,
            })
            .collect(),
        total: page.total,
        limit,
        offset,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DailyCount {
    pub date: String,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    /// YYYY-MM (UTC).
    pub month: String,
    /// Authenticated requests of the account this month.
    pub total: u64,
    /// Monthly quota of the tier; null = unlimited.
    pub quota: Option<u64>,
    pub tier: String,
    /// `<METHOD> <route>` -> requests this month.
    pub by_endpoint: BTreeMap<String, u64>,
    /// The last 30 days, oldest first, today included.
    pub daily: Vec<DailyCount>,
}

/// Your account's usage: this month's total and per route, the last 30 days, the quota.
#[utoipa::path(get, path = "/api/v1/admin/usage", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = UsageReport), (status = 401, body = ErrorBody)))]
pub async fn usage(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
) -> ApiResult<Json<UsageReport>> {
    // Counts wait in memory for the next batch; write them so the report is exact.
    state.usage.flush().await?;
    let now = state.clock.now();
    let today = now.date_naive();
    let month = auth::usage::month_start(today);
    let by_endpoint: BTreeMap<String, u64> = state
        .store
        .usage_by_endpoint(&actor.team_id, month, today)
        .await?
        .into_iter()
        .collect();
    let first = today - Duration::days(29);
    let counted: BTreeMap<_, _> = state
        .store
        .usage_daily(&actor.team_id, first, today)
        .await?
        .into_iter()
        .collect();
    let daily = (0..30)
        .map(|i| {
            let date = first + Duration::days(i);
            DailyCount {
                date: date.to_string(),
                count: counted.get(&date).copied().unwrap_or(0),
            }
        })
        .collect();
    Ok(Json(UsageReport {
        month: month.format("%Y-%m").to_string(),
        total: by_endpoint.values().sum(),
        quota: state.usage.quota(actor.tier),
        tier: actor.tier.as_str().into(),
        by_endpoint,
        daily,
    }))
}
