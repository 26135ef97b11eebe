//! Platform administration by staff: the run-time settings (limits, refresh schedule,
//! role labels), vendors (enable, disable, refresh now), the fixed roles, and the platform
//! administrators (owner only).

use auth::Principal;
use auth::staff::CurrentSettings;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use model::staff::{LimitOverrides, SettingsChange};
use model::{Error, Permission, PlatformSettings, Role, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::api::{KeyJson, NewKeyJson};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::JsonBody;
use crate::routing::{Api, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    let settings = RouteRule::private(Permission::PlatformSettings, Tier::Enterprise);
    let owner = RouteRule::private(Permission::PlatformAdmin, Tier::Enterprise);
    api.route(routes!(get_settings), settings)
        .route(routes!(change_settings), settings)
        .route(routes!(list_vendors), settings)
        .route(routes!(enable_vendor), settings)
        .route(routes!(disable_vendor), settings)
        .route(routes!(refresh_vendor), settings)
        .route(routes!(list_roles), settings)
        .route(routes!(list_platform_admins), owner)
        .route(routes!(add_platform_admin), owner)
        .route(routes!(remove_platform_admin), owner)
}

/// Per-minute limits in force (configuration with staff overrides applied).
#[derive(Debug, Serialize, ToSchema)]
pub struct LimitsJson {
    pub hash_of_day_per_ip: u32,
    pub public_per_ip: u32,
    pub token_per_key: u32,
    pub authenticated_per_key: u32,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsJson {
    /// The limits in force.
    pub limits: LimitsJson,
    /// Only the staff overrides (absent = configured value).
    #[schema(value_type = Object)]
    pub limit_overrides: LimitOverrides,
    /// UTC time of day of the daily vendor refresh; null = off.
    pub daily_refresh_at: Option<String>,
    /// Vendors the scheduled refresh skips by staff decision.
    pub disabled_vendors: Vec<String>,
    /// Display label of every role.
    pub role_labels: std::collections::BTreeMap<String, String>,
    pub updated_at: Option<String>,
    /// Key id of whoever changed the settings last.
    pub updated_by: Option<String>,
}

fn settings_json(state: &AppState, current: &CurrentSettings) -> SettingsJson {
    let s: &PlatformSettings = &current.settings;
    let limits = state.settings.limits.with_overrides(&s.limits);
    SettingsJson {
        limits: LimitsJson {
            hash_of_day_per_ip: limits.hash_of_day_per_ip,
            public_per_ip: limits.public_per_ip,
            token_per_key: limits.token_per_key,
            authenticated_per_key: limits.authenticated_per_key,
        },
        limit_overrides: s.limits.clone(),
        daily_refresh_at: s
            .daily_refresh_at
            .or(state.settings.jobs.daily_refresh)
            .map(|t| t.format("%H:%M:%S").to_string()),
        disabled_vendors: s.disabled_vendors.iter().cloned().collect(),
        role_labels: Role::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), s.label(*r).to_string()))
            .collect(),
        updated_at: current.updated_at.map(timestamp),
        updated_by: current.updated_by.clone(),
    }
}

/// The platform settings in force.
#[utoipa::path(get, path = "/api/v1/admin/settings", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = SettingsJson), (status = 403, body = ErrorBody)))]
pub(crate) async fn get_settings(State(state): State<AppState>) -> ApiResult<Json<SettingsJson>> {
    let current = state.admin.current_settings().await?;
    Ok(Json(settings_json(&state, &current)))
}

/// A change to the platform settings; what it names replaces the current value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "only its schema is used: the route documents it, `model::PlatformSettings` applies the change"
)]
pub(crate) struct SettingsPatch {
    /// Per-minute limits to override: `hash_of_day_per_ip`, `public_per_ip`,
    /// `token_per_key`, `authenticated_per_key` (1 to 1,000,000).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub limits: Option<serde_json::Value>,
    /// `HH:MM:SS` UTC, or null to return to the configured time.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub daily_refresh_at: Option<serde_json::Value>,
    /// Customer role name -> display label (1-40 characters; empty restores the default).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub role_labels: Option<serde_json::Value>,
}

/// Change the platform settings; every replica applies them within a second.
#[utoipa::path(patch, path = "/api/v1/admin/settings", tag = "admin", security(("api_key" = [])),
    request_body = SettingsPatch,
    responses((status = 200, body = SettingsJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn change_settings(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<Json<SettingsJson>> {
    let change: SettingsChange = serde_json::from_value(body)
        .map_err(|e| Error::bad_request(format!("settings change: {e}")))?;
    let current = state
        .admin
        .change_settings(&actor, "settings.change", |s| s.apply(change))
        .await?;
    Ok(Json(settings_json(&state, &current)))
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VendorJson {
    pub vendor: String,
    /// The scheduled refresh includes it.
    pub enabled: bool,
    /// Enabled by the deployment's configuration.
    pub configured_enabled: bool,
    /// Disabled by staff in the platform settings.
    pub disabled_by_staff: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VendorList {
    pub vendors: Vec<VendorJson>,
}

fn vendor_list(state: &AppState) -> VendorList {
    let platform = state.admin.platform_settings();
    let options = &state.settings.jobs.refresh;
    VendorList {
        vendors: jobs::refresh::vendor_ids()
            .into_iter()
            .map(|id| {
                let configured = options.configured_enabled(&id).unwrap_or(false);
                let disabled = platform.disabled_vendors.contains(&id);
                VendorJson {
                    enabled: configured && !disabled,
                    configured_enabled: configured,
                    disabled_by_staff: disabled,
                    vendor: id,
                }
            })
            .collect(),
    }
}

/// Every vendor channel and whether the scheduled refresh includes it (health and last
/// errors are on `/api/v1/admin/health`).
#[utoipa::path(get, path = "/api/v1/admin/vendors", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = VendorList), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_vendors(State(state): State<AppState>) -> Json<VendorList> {
    Json(vendor_list(&state))
}

async fn set_vendor(
    state: &AppState,
    actor: &Principal,
    vendor: &str,
    enabled: bool,
) -> ApiResult<Json<VendorList>> {
    let action = if enabled {
        "vendor.enable"
    } else {
        "vendor.disable"
    };
    let known = jobs::refresh::vendor_ids();
    state
        .admin
        .change_settings(actor, action, |s| {
            if !known.iter().any(|id| id == vendor) {
                return Err(Error::NotFound(format!(
                    "no vendor {}",
                    model::shown(vendor)
                )));
            }
            let mut next = s.clone();
            if enabled {
                next.disabled_vendors.remove(vendor);
            } else {
                next.disabled_vendors.insert(vendor.to_string());
            }
            Ok(next)
        })
        .await?;
    Ok(Json(vendor_list(state)))
}

/// Include a vendor in the scheduled refresh again (its configuration must enable it too).
#[utoipa::path(post, path = "/api/v1/admin/vendors/{vendor}/enable", tag = "admin", security(("api_key" = [])),
    params(("vendor" = String, Path, description = "Vendor id as listed by /api/v1/admin/vendors")),
    responses((status = 200, body = VendorList), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn enable_vendor(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(vendor): Path<String>,
) -> ApiResult<Json<VendorList>> {
    set_vendor(&state, &actor, &vendor, true).await
}

/// Leave a vendor out of the scheduled refresh on every replica; its records stay.
#[utoipa::path(post, path = "/api/v1/admin/vendors/{vendor}/disable", tag = "admin", security(("api_key" = [])),
    params(("vendor" = String, Path, description = "Vendor id as listed by /api/v1/admin/vendors")),
    responses((status = 200, body = VendorList), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn disable_vendor(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(vendor): Path<String>,
) -> ApiResult<Json<VendorList>> {
    set_vendor(&state, &actor, &vendor, false).await
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RefreshStarted {
    pub vendor: String,
    pub started_at: String,
}

/// Refresh one vendor now, in the background (one refresh of a vendor at a time across
/// replicas); its outcome shows on `/api/v1/admin/health`.
#[utoipa::path(post, path = "/api/v1/admin/vendors/{vendor}/refresh", tag = "admin", security(("api_key" = [])),
    params(("vendor" = String, Path, description = "Vendor id as listed by /api/v1/admin/vendors")),
    responses((status = 202, body = RefreshStarted), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the vendor is disabled or already refreshing")))]
pub(crate) async fn refresh_vendor(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(vendor): Path<String>,
) -> ApiResult<(StatusCode, Json<RefreshStarted>)> {
    let jobs = state.jobs.clone();
    state
        .admin
        .audited(&actor, "vendor.refresh", &vendor, async {
            jobs::refresh::refresh_now(&jobs, &vendor).await.map(drop)
        })
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RefreshStarted {
            vendor,
            started_at: timestamp(state.clock.now()),
        }),
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RoleJson {
    pub role: String,
    /// Display label in this deployment (customer roles can be renamed).
    pub label: String,
    /// `customer` or `platform`.
    pub kind: &'static str,
    /// 1 = lowest.
    pub rank: usize,
    /// Fixed; not editable.
    pub permissions: Vec<&'static str>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RoleList {
    pub roles: Vec<RoleJson>,
}

/// The roles, lowest rank first, with their fixed permission sets and display labels.
#[utoipa::path(get, path = "/api/v1/admin/roles", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = RoleList), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_roles(State(state): State<AppState>) -> Json<RoleList> {
    let platform = state.admin.platform_settings();
    Json(RoleList {
        roles: Role::ALL
            .iter()
            .enumerate()
            .map(|(i, r)| RoleJson {
                role: r.as_str().into(),
                label: platform.label(*r).into(),
                kind: if r.is_platform() {
                    "platform"
                } else {
                    "customer"
                },
                rank: i + 1,
                permissions: r.permissions().iter().map(|p| p.as_str()).collect(),
            })
            .collect(),
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PlatformAdminJson {
    /// `platform_owner` or `platform_admin`.
    pub role: String,
    pub key: KeyJson,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PlatformAdminList {
    pub results: Vec<PlatformAdminJson>,
    pub total: usize,
}

/// The platform's administrators and its owner (owner only).
#[utoipa::path(get, path = "/api/v1/admin/platform-admins", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = PlatformAdminList), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_platform_admins(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
) -> ApiResult<Json<PlatformAdminList>> {
    let admins = state.admin.platform_administrators(&actor).await?;
    Ok(Json(PlatformAdminList {
        total: admins.len(),
        results: admins
            .iter()
            .map(|a| PlatformAdminJson {
                role: a.role.as_str().into(),
                key: KeyJson::from(&a.key),
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewPlatformAdmin {
    #[serde(default)]
    pub label: Option<String>,
}

/// Add a platform administrator: a new platform key with the platform_admin role, shown
/// once (owner only).
#[utoipa::path(post, path = "/api/v1/admin/platform-admins", tag = "admin", security(("api_key" = [])),
    request_body = NewPlatformAdmin,
    responses((status = 201, body = NewKeyJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn add_platform_admin(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<NewPlatformAdmin>,
) -> ApiResult<(StatusCode, Json<NewKeyJson>)> {
    let key = state
        .admin
        .add_platform_administrator(&actor, body.label.as_deref())
        .await?;
    Ok((StatusCode::CREATED, Json(key.into())))
}

/// Remove a platform administrator: its key is revoked, or its platform_admin grant taken
/// away (owner only; the owner cannot be removed).
#[utoipa::path(delete, path = "/api/v1/admin/platform-admins/{key_id}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the administrator's key")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn remove_platform_admin(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
) -> ApiResult<StatusCode> {
    state
        .admin
        .remove_platform_administrator(&actor, &key_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
