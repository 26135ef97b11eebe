//! Second factors and sign-in: TOTP, recovery codes and passkeys of the caller
//! (`/api/v1/admin/mfa/*`), and the sign-in routes that need no session
//! (`/api/v1/admin/auth/*`), which answer a console session token.
//!
//! Enrolment routes work in a session that has not passed a second factor yet (that is how
//! a first sign-in enrols); removing a factor or making recovery codes needs one. Once the
//! caller's subject has a passkey or TOTP, a raw key (or key token) alone may change none of
//! its factors: enrolling another, removing a passkey and making recovery codes need a
//! session that passed a second factor or the current TOTP code as `code` (`auth::mfa::Proof`),
//! else `403 MFA_REQUIRED`.
//! Impersonation sessions reach none of them: staff never enrol or use a customer's factors.

use auth::Principal;
use auth::mfa::Proof;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use model::Error;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::{SessionToken, timestamp};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{JsonBody, RawBody, decode_json};
use crate::routing::{Api, ImpersonationPolicy, RouteRule};
use crate::services::sessions::{PENDING_COOKIE, session_for_subject};

pub(crate) fn routes(api: Api) -> Api {
    let own = RouteRule::any_account().impersonation(ImpersonationPolicy::Refused);
    let enrol = own.without_second_factor();
    api.route(routes!(passkey_begin), enrol)
        .route(routes!(passkey_complete), enrol)
        .route(routes!(list_passkeys), enrol)
        .route(routes!(delete_passkey), own)
        .route(routes!(status), enrol)
        .route(routes!(totp_enroll), enrol)
        .route(routes!(totp_verify), enrol)
        .route(routes!(totp_disable), own)
        .route(routes!(recovery_generate), own)
        .route(routes!(sign_in_passkey_begin), RouteRule::public())
        .route(routes!(sign_in_passkey_complete), RouteRule::public())
        .route(routes!(sign_in_recovery), RouteRule::public())
        .route(routes!(sign_in_totp), RouteRule::public())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PasskeyBegin {
    /// A name for the passkey, shown in its list.
    pub display_name: String,
    /// The current TOTP code: needed (unless the session passed a second factor) when the
    /// caller already has a passkey or TOTP.
    pub code: Option<String>,
}

/// The optional body of a factor change: `{}`, or the current TOTP code, which a raw key
/// needs once its holder has a second factor.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProofBody {
    /// The current TOTP code (6 digits).
    pub code: Option<String>,
}

/// `{}`, `{code}` or no body at all.
fn proof_body(body: &[u8]) -> Result<ProofBody, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ProofBody::default());
    }
    decode_json(body)
}

/// A passkey as registered.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PasskeyJson {
    pub passkey_id: String,
    pub display_name: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PasskeyList {
    pub results: Vec<PasskeyJson>,
    pub total: usize,
}

impl From<&store::users::PasskeyRow> for PasskeyJson {
    fn from(p: &store::users::PasskeyRow) -> Self {
        Self {
            passkey_id: p.passkey_id.clone(),
            display_name: p.display_name.clone(),
            created_at: timestamp(p.created_at),
            last_used_at: p.last_used_at.map(timestamp),
        }
    }
}

/// The caller's second factors.
#[derive(Debug, Serialize, ToSchema)]
pub struct MfaStatusJson {
    /// A passkey or an enabled TOTP: console sign-in asks for one of them.
    pub enrolled: bool,
    pub totp_enabled: bool,
    /// Registered passkeys.
    pub passkeys: usize,
    pub recovery_codes_remaining: u64,
    /// WebAuthn user handle (base64url): the `user_handle` hint of passkey sign-in.
    pub user_handle: String,
    /// The session the request came in passed a second factor (absent for raw keys and
    /// key tokens, which never need one).
    pub session_mfa: Option<bool>,
    /// Locked out after too many wrong codes, until then.
    pub locked_until: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TotpEnrollmentJson {
    /// Base32 seed (no padding), shown this once.
    pub secret: String,
    /// `otpauth://totp/…` URI for authenticator apps.
    pub otpauth_url: String,
    /// The URI as a QR code, SVG markup.
    pub qr_code_svg: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeBody {
    pub code: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Enrolled {
    pub enrolled: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Disabled {
    pub disabled: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RecoveryCodes {
    /// Ten single-use codes, `XXXX-XXXX-XXXX`, shown this once.
    pub codes: Vec<String>,
    pub count: usize,
    pub warning: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignInBegin {
    /// The `user_handle` of the MFA status: lists that principal's passkeys, for
    /// authenticators that cannot offer discoverable credentials.
    pub user_handle: Option<String>,
}

/// After enrolling or proving a factor, the session itself counts as having passed one.
async fn mark_session(state: &AppState, principal: &Principal) -> ApiResult<()> {
    if let Some(session) = &principal.session
        && !session.mfa
    {
        state.store.set_session_mfa(&session.session_id).await?;
    }
    Ok(())
}

/// Begin registering a passkey: WebAuthn credential-creation options.
#[utoipa::path(post, path = "/api/v1/admin/mfa/passkey/begin", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])), request_body = PasskeyBegin,
    responses((status = 200, description = "WebAuthn `CredentialCreationOptions` (`publicKey`)"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "`MFA_REQUIRED`: the caller has a second factor and neither a session that passed it nor a current `code`", body = ErrorBody)))]
pub(crate) async fn passkey_begin(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    JsonBody(body): JsonBody<PasskeyBegin>,
) -> ApiResult<Json<serde_json::Value>> {
    let name = body.display_name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(Error::bad_request("display_name must be 1-100 characters").into());
    }
    let user_name = format!("{}@{}", principal.key_id, principal.team_id);
    let options = state
        .mfa
        .passkey_register_begin(
            &principal.mfa_subject(),
            &user_name,
            name,
            Proof::of(&principal, body.code.as_deref()),
        )
        .await?;
    Ok(Json(options))
}

/// Finish registering a passkey with the authenticator's credential.
#[utoipa::path(post, path = "/api/v1/admin/mfa/passkey/complete", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    request_body(content = serde_json::Value, description = "The WebAuthn `PublicKeyCredential` from `navigator.credentials.create`"),
    responses((status = 200, body = PasskeyJson), (status = 400, body = ErrorBody),
        (status = 403, description = "`MFA_REQUIRED`: the caller gained a second factor after the ceremony began without proof", body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(crate) async fn passkey_complete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    JsonBody(credential): JsonBody<serde_json::Value>,
) -> ApiResult<Json<PasskeyJson>> {
    let row = state
        .mfa
        .passkey_register_complete(
            &principal.mfa_subject(),
            credential,
            Proof::of(&principal, None),
        )
        .await?;
    mark_session(&state, &principal).await?;
    Ok(Json(PasskeyJson::from(&row)))
}

/// The caller's passkeys.
#[utoipa::path(get, path = "/api/v1/admin/mfa/passkeys", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    responses((status = 200, body = PasskeyList), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_passkeys(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Json<PasskeyList>> {
    let rows = state.store.passkeys(&principal.mfa_subject()).await?;
    Ok(Json(PasskeyList {
        total: rows.len(),
        results: rows.iter().map(PasskeyJson::from).collect(),
    }))
}

/// Remove one of the caller's passkeys.
#[utoipa::path(delete, path = "/api/v1/admin/mfa/passkeys/{id}", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    params(("id" = String, Path, description = "passkey_id")),
    request_body(content = ProofBody, description = "Optional: `{code}` with the current TOTP code, for a caller without a session that passed a second factor"),
    responses((status = 204), (status = 403, description = "`MFA_REQUIRED`: neither a session that passed a second factor nor a current `code`", body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn delete_passkey(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> ApiResult<axum::http::StatusCode> {
    let body = proof_body(&body)?;
    if state
        .mfa
        .passkey_delete(
            &principal.mfa_subject(),
            &id,
            Proof::of(&principal, body.code.as_deref()),
        )
        .await?
    {
        Ok(axum::http::StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("no passkey {}", model::shown(&id))).into())
    }
}

/// The caller's second factors.
#[utoipa::path(get, path = "/api/v1/admin/mfa/status", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    responses((status = 200, body = MfaStatusJson), (status = 401, body = ErrorBody)))]
pub async fn status(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Json<MfaStatusJson>> {
    let status = state.mfa.status(&principal.mfa_subject()).await?;
    // Enrolment elsewhere counts for this session once it is seen.
    let session_mfa = principal.session.as_ref().map(|s| s.mfa);
    Ok(Json(MfaStatusJson {
        enrolled: status.enrolled,
        totp_enabled: status.totp_enabled,
        passkeys: status.passkeys,
        recovery_codes_remaining: status.recovery_codes_remaining,
        user_handle: status.user_handle,
        session_mfa,
        locked_until: status.locked_until.map(timestamp),
    }))
}

/// Start a TOTP enrolment: the seed, its otpauth URI and QR code (shown once). The body is
/// `{}` (or absent); once the caller has a passkey it needs a session that passed a second
/// factor.
#[utoipa::path(post, path = "/api/v1/admin/mfa/totp/enroll", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    request_body(content = ProofBody, description = "Optional: `{}`"),
    responses((status = 200, body = TotpEnrollmentJson),
        (status = 403, description = "`MFA_REQUIRED`: the caller has a passkey and no session that passed a second factor", body = ErrorBody),
        (status = 409, description = "TOTP is already enabled", body = ErrorBody)))]
pub async fn totp_enroll(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    RawBody(body): RawBody,
) -> ApiResult<Json<TotpEnrollmentJson>> {
    let body = proof_body(&body)?;
    let label = format!("{}@{}", principal.key_id, principal.team_id);
    let e = state
        .mfa
        .totp_enroll(
            &principal.mfa_subject(),
            &label,
            Proof::of(&principal, body.code.as_deref()),
        )
        .await?;
    Ok(Json(TotpEnrollmentJson {
        secret: e.secret,
        otpauth_url: e.otpauth_url,
        qr_code_svg: e.qr_code_svg,
    }))
}

/// Confirm a TOTP enrolment with a current code; TOTP is enabled from then on.
#[utoipa::path(post, path = "/api/v1/admin/mfa/totp/verify", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])), request_body = CodeBody,
    responses((status = 200, body = Enrolled), (status = 400, body = ErrorBody),
        (status = 401, description = "Wrong or reused code", body = ErrorBody),
        (status = 403, description = "`MFA_REQUIRED`: the caller has a passkey by now and no session that passed a second factor", body = ErrorBody),
        (status = 429, description = "Too many wrong codes: locked out", body = ErrorBody)))]
pub async fn totp_verify(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    JsonBody(body): JsonBody<CodeBody>,
) -> ApiResult<Json<Enrolled>> {
    state
        .mfa
        .totp_verify(
            &principal.mfa_subject(),
            &body.code,
            Proof::of(&principal, None),
        )
        .await?;
    mark_session(&state, &principal).await?;
    Ok(Json(Enrolled { enrolled: true }))
}

/// Disable TOTP with a current code.
#[utoipa::path(delete, path = "/api/v1/admin/mfa/totp", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])), request_body = CodeBody,
    responses((status = 200, body = Disabled), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn totp_disable(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    JsonBody(body): JsonBody<CodeBody>,
) -> ApiResult<Json<Disabled>> {
    state
        .mfa
        .totp_disable(&principal.mfa_subject(), &body.code)
        .await?;
    Ok(Json(Disabled { disabled: true }))
}

/// Ten new recovery codes; the earlier set stops working. Needs a session that passed a
/// second factor, or the current TOTP code as `code`: a key alone never makes them.
#[utoipa::path(post, path = "/api/v1/admin/mfa/recovery/generate", tag = "mfa",
    security(("api_key" = []), ("bearer" = [])),
    request_body(content = ProofBody, description = "`{}` in a session that passed a second factor, else `{code}` with the current TOTP code"),
    responses((status = 200, body = RecoveryCodes,
        headers(("X-Recovery-Codes-Remaining" = u64, description = "Unused codes (10)"))),
        (status = 400, description = "A malformed body or `code`, or no passkey or TOTP yet for the codes to stand in for", body = ErrorBody),
        (status = 401, description = "Wrong or reused `code`", body = ErrorBody),
        (status = 403, description = "`MFA_REQUIRED`: neither a session that passed a second factor nor a current `code`", body = ErrorBody),
        (status = 429, description = "Too many wrong codes: locked out", body = ErrorBody)))]
pub async fn recovery_generate(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let body = proof_body(&body)?;
    let codes = state
        .mfa
        .recovery_generate(
            &principal.mfa_subject(),
            Proof::of(&principal, body.code.as_deref()),
        )
        .await?;
    let count = codes.len();
    Ok(with_remaining(
        Json(RecoveryCodes {
            codes,
            count,
            warning: "Store these codes somewhere safe: each works once, they are shown only now, and generating new ones cancels these.".into(),
        }),
        count as u64,
    ))
}

fn with_remaining(body: impl IntoResponse, remaining: u64) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert("x-recovery-codes-remaining", HeaderValue::from(remaining));
    response
}

/// Begin a passkey sign-in: WebAuthn credential-request options.
#[utoipa::path(post, path = "/api/v1/admin/auth/passkey/begin", tag = "mfa",
    request_body = SignInBegin,
    responses((status = 200, description = "WebAuthn `CredentialRequestOptions` (`publicKey`); of the same shape whether or not the `user_handle` has passkeys"),
        (status = 400, body = ErrorBody)))]
pub(crate) async fn sign_in_passkey_begin(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> ApiResult<Json<serde_json::Value>> {
    let hint: SignInBegin = if body.iter().all(u8::is_ascii_whitespace) {
        SignInBegin::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))?
    };
    let options = state
        .mfa
        .passkey_sign_in_begin(hint.user_handle.as_deref())
        .await?;
    Ok(Json(options))
}

/// Finish a passkey sign-in: a console session token with the second factor passed.
#[utoipa::path(post, path = "/api/v1/admin/auth/passkey/complete", tag = "mfa",
    request_body(content = serde_json::Value, description = "The WebAuthn assertion from `navigator.credentials.get`"),
    responses((status = 200, body = SessionToken), (status = 401, body = ErrorBody)))]
pub(crate) async fn sign_in_passkey_complete(
    State(state): State<AppState>,
    JsonBody(assertion): JsonBody<serde_json::Value>,
) -> ApiResult<Json<SessionToken>> {
    let subject = state.mfa.passkey_sign_in_complete(assertion).await?;
    let (token, expires_at) = session_for_subject(&state, &subject).await?;
    Ok(Json(SessionToken {
        token,
        expires_at: timestamp(expires_at),
    }))
}

/// The principal a second-factor sign-in is for: the console's pending sign-in cookie or
/// an `X-API-Key`; 401 with neither.
async fn sign_in_subject(state: &AppState, headers: &HeaderMap) -> ApiResult<String> {
    if let Some(key) = headers.get("x-api-key") {
        let key = key
            .to_str()
            .map_err(|_| Error::Unauthorized("invalid API key".into()))?;
        let principal = state.credentials.from_api_key(key).await?;
        return Ok(principal.mfa_subject());
    }
    if let Some(pending) = crate::console::cookie(headers, PENDING_COOKIE)
        && let Some(subject) = state.mfa.pending_subject(&pending).await?
    {
        return Ok(subject);
    }
    Err(Error::Unauthorized(
        "sign in with your key first (console) or send X-API-Key with the code".into(),
    )
    .into())
}

/// Second step of a sign-in with a TOTP code.
#[utoipa::path(post, path = "/api/v1/admin/auth/totp", tag = "mfa",
    request_body = CodeBody,
    responses((status = 200, body = SessionToken),
        (status = 401, description = "No pending sign-in or key, or a wrong or reused code", body = ErrorBody),
        (status = 429, description = "Too many wrong codes: locked out", body = ErrorBody)))]
pub(crate) async fn sign_in_totp(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<CodeBody>,
) -> ApiResult<Json<SessionToken>> {
    let subject = sign_in_subject(&state, &headers).await?;
    state.mfa.totp_sign_in(&subject, &body.code).await?;
    let (token, expires_at) = session_for_subject(&state, &subject).await?;
    if let Some(pending) = crate::console::cookie(&headers, PENDING_COOKIE) {
        state.mfa.end_pending(&pending).await?;
    }
    Ok(Json(SessionToken {
        token,
        expires_at: timestamp(expires_at),
    }))
}

/// Second step of a sign-in with a recovery code (used up).
#[utoipa::path(post, path = "/api/v1/admin/auth/recovery", tag = "mfa",
    request_body = CodeBody,
    responses((status = 200, body = SessionToken,
        headers(("X-Recovery-Codes-Remaining" = u64, description = "Unused codes left"))),
        (status = 401, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(crate) async fn sign_in_recovery(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<CodeBody>,
) -> ApiResult<Response> {
    let subject = sign_in_subject(&state, &headers).await?;
    let left = state.mfa.recovery_use(&subject, &body.code).await?;
    let (token, expires_at) = session_for_subject(&state, &subject).await?;
    if let Some(pending) = crate::console::cookie(&headers, PENDING_COOKIE) {
        state.mfa.end_pending(&pending).await?;
    }
    Ok(with_remaining(
        Json(SessionToken {
            token,
            expires_at: timestamp(expires_at),
        }),
        left,
    ))
}
