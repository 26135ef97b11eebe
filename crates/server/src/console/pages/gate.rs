//! What the pages over the API's tier-gated services share: the access check that says
//! plainly what is missing, plain error sentences, and CSV fields.

use super::*;

/// The principal of a page that needs `permission` on `tier` (and a passed second factor,
/// as every intel page). A role or tier that lacks it gets a page that says which, and who
/// can change it, instead of the API's terse refusal.
pub(super) fn gated<'a>(
    state: &AppState,
    ctx: &'a Ctx,
    permission: Permission,
    tier: Tier,
    title: &str,
) -> Result<&'a Principal, Response> {
    let principal = signed_in(ctx, true)?;
    let text = if !principal.has(permission) {
        format!(
            "Your role ({}) does not include {title} (permission {}). An account admin can give you a role that does.",
            principal.role.as_str(),
            permission.as_str()
        )
    } else if principal.tier < tier {
        format!(
            "{title} comes with the {} tier and above; account {} is on the {} tier. Ask your account admin or the service's operators to move the account to {}.",
            tier.as_str(),
            principal.team_id,
            principal.tier.as_str(),
            tier.as_str()
        )
    } else {
        return Ok(principal);
    };
    let body = html! {
        div data-gated { (message("error", &text)) }
        p {
            "Go to " a href="/console/lookup" { "Lookup" } " or "
            a href="/console/account" { "Account" } "."
        }
    };
    Err(page(state, ctx, StatusCode::FORBIDDEN, title, body))
}

/// An error as a sentence on a page: its message without the kind (`bad request:`), and
/// nothing internal.
pub(super) fn plain(e: &Error) -> String {
    match e {
        Error::BadRequest(m)
        | Error::Unauthorized(m)
        | Error::Forbidden(m)
        | Error::NotFound(m)
        | Error::Conflict(m)
        | Error::PayloadTooLarge(m) => upper_first(m),
        Error::RateLimited { retry_after_secs } => {
            format!("Too many requests just now; try again in {retry_after_secs} seconds.")
        }
        Error::Internal { .. } => {
            tracing::error!(error = %e, "console: internal error");
            "Something went wrong on our side.".into()
        }
        other => upper_first(&other.to_string()),
    }
}

/// A sentence starts with a capital, unless it starts with a field name (`packages[1].name`).
fn upper_first(text: &str) -> String {
    let first = text.split(' ').next().unwrap_or_default();
    if !first.chars().all(|c| c.is_ascii_lowercase()) {
        return text.to_string();
    }
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A download: `body` as `content_type`, saved as `filename`.
pub(super) fn download(content_type: &'static str, filename: &str, body: String) -> Response {
    let disposition = format!("attachment; filename=\"{filename}\"");
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition)
                    .unwrap_or_else(|_| HeaderValue::from_static("attachment")),
            ),
        ],
        body,
    )
        .into_response()
}

/// `<td>` with the label a phone shows above the value when the table becomes cards.
pub(super) fn td(label: &str, content: impl maud::Render) -> Markup {
    html! { td data-label=(label) { (content) } }
}

/// A UTC time as the pages show it.
pub(super) fn when(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// Enforces a console route's [`ConsoleRule`] before its handler: the way to sign in, to
/// enrol a second factor, or the page saying which permission or tier is missing. What it
/// lets through carries the page's [`Signed`] context.
pub(super) async fn enforce(
    State(route): State<Arc<(AppState, ConsoleRule)>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (state, rule) = &*route;
    let need_mfa = match rule {
        ConsoleRule::Public => return next.run(request).await,
        ConsoleRule::SignedIn | ConsoleRule::SignedInScript => false,
        ConsoleRule::SecondFactor | ConsoleRule::Permission { .. } => true,
    };
    let ctx = ctx(state, request.headers()).await;
    if *rule == ConsoleRule::SignedInScript && ctx.principal.is_none() {
        return json_error(&Error::Unauthorized("sign in first".into()));
    }
    let principal = match signed_in(&ctx, need_mfa) {
        Ok(p) => p.clone(),
        Err(r) => return r,
    };
    if let ConsoleRule::Permission {
        permission,
        tier,
        title,
    } = *rule
    {
        let checked = match (permission, title) {
            (Some(permission), Some(title)) => {
                gated(state, &ctx, permission, tier, title).map(|_| ())
            }
            _ => allowed(state, &ctx, permission, tier).map(|_| ()),
        };
        if let Err(refusal) = checked {
            return refusal;
        }
    }
    request.extensions_mut().insert(Signed { ctx, principal });
    next.run(request).await
}

/// The page context and principal of a request its route's rule let through.
#[derive(Clone)]
pub(super) struct Signed {
    pub ctx: Ctx,
    pub principal: Principal,
}

impl axum::extract::FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &AppState,
    ) -> Result<Self, Response> {
        // Only a route declared with a signed-in rule has one.
        parts.extensions.get::<Signed>().cloned().ok_or_else(|| {
            json_error(&Error::internal(
                "a console handler that needs a session is declared without a rule that signs in",
            ))
        })
    }
}
