//! The OpenAPI 3.1 document, generated from the registered routes (their handlers'
//! annotations and access rules), and a plain HTML page that renders it (no scripts, nothing fetched).

use axum::Json;
use axum::response::Html;
use serde_json::Value;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routing::{Access, Impersonation, LimitClass, ROUTES};
use crate::{api, error};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "knowngood",
        description = "Known-good hash verification: is this file the genuine vendor build?\n\n\
            Errors are `{\"error\": code, \"message\": detail}`. Routes under /api/v1/ need an \
            `X-API-Key` header or a `Bearer` JWT from /api/v1/auth/token; each operation's `x-permission` and `x-min-tier` say what the \
            key's role and account tier must allow."
    ),
    components(schemas(error::ErrorBody, api::ExportRow)),
    modifiers(&ApiKeyScheme),
    tags(
        (name = "public", description = "No credential needed"),
        (name = "intel", description = "Classification, history and export"),
        (name = "operations", description = "Liveness and readiness probes"),
        (name = "auth", description = "Token exchange and verification keys"),
        (name = "admin", description = "Keys, role grants, accounts, audit log, usage"),
        (name = "transparency", description = "Signed daily Merkle roots and proofs"),
        (name = "hashlookup", description = "CIRCL hashlookup-compatible lookups, the key in the path; served under the configured prefix (default /hashlookup/)"),
    )
)]
struct ApiDoc;

struct ApiKeyScheme;

impl Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The document as served, with each operation's permission and minimum tier from the
/// access table.
pub fn document() -> Value {
    DOCUMENT.clone()
}

/// Built once: the registrations do not change while the process runs.
static DOCUMENT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(build_document);

fn build_document() -> Value {
    let mut openapi = ApiDoc::openapi();
    let (paths, schemas) = crate::routes::api().openapi_parts();
    openapi.paths.merge(paths);
    crate::routing::add_schemas(
        openapi.components.get_or_insert_with(Default::default),
        schemas,
    );
    let mut doc = serde_json::to_value(openapi).unwrap_or_default();
    for route in ROUTES.iter() {
        let method = route.method.as_str().to_ascii_lowercase();
        let Some(op) = doc
            .pointer_mut(&format!(
                "/paths/{}/{method}",
                route.path.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if let Access::Authenticated {
            permission,
            min_tier,
        } = route.access
        {
            op.insert(
                "x-permission".into(),
                permission.map_or(Value::Null, |p| p.as_str().into()),
            );
            op.insert("x-min-tier".into(), min_tier.as_str().into());
            // What a staff impersonation session may do here.
            let sessions = match route.rule.impersonation {
                Impersonation::Allowed | Impersonation::Always => "allowed",
                Impersonation::ManageOnly => "manage-only",
                Impersonation::Refused => "refused",
            };
            op.insert("x-impersonation".into(), sessions.into());
            // OpenAPI has no scheme for a key in the path: say where it goes instead.
            if route.rule.key_in_path {
                op.insert(
                    "x-credential".into(),
                    "the API key as the {key} path parameter; no header".into(),
                );
            }
            // Every authenticated route can refuse the credential, and a gated one the
            // role or tier, whatever its handler's annotation lists.
            add_error_response(op, "401", "Credential missing or invalid");
            if permission.is_some() || min_tier > model::Tier::Free {
                add_error_response(
                    op,
                    "403",
                    "The key's role or the account's tier does not allow this",
                );
            }
            // Refused to impersonation sessions, or to a console session without its
            // second factor (`MFA_REQUIRED`), whatever the role.
            if route.rule.impersonation == Impersonation::Refused || route.rule.second_factor {
                add_error_response(
                    op,
                    "403",
                    "Refused to this session: an impersonation session, or MFA_REQUIRED for a session without its second factor",
                );
            }
        }
        if route.limit != LimitClass::None {
            add_error_response(
                op,
                "429",
                "Rate limit (or, for keys, monthly quota) exceeded; see Retry-After",
            );
        }
    }
    declare_retry_after(&mut doc);
    doc
}

/// Every `429` answer carries `Retry-After`, however the operation came to list it.
fn declare_retry_after(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let ops = paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|ops| ops.values_mut());
    for op in ops {
        if let Some(answer) = op
            .pointer_mut("/responses/429")
            .and_then(Value::as_object_mut)
        {
            let headers = answer
                .entry("headers")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(headers) = headers.as_object_mut() {
                headers.entry("Retry-After").or_insert_with(|| {
                    serde_json::json!({
                        "description": "Whole seconds until a request may succeed again (at least 1)",
                        "schema": {"type": "integer", "minimum": 1}
                    })
                });
            }
        }
    }
}

/// Adds an error response to an operation unless it already documents that status.
fn add_error_response(op: &mut serde_json::Map<String, Value>, status: &str, description: &str) {
    let Some(responses) = op
        .entry("responses")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
    else {
        return;
    };
    responses.entry(status).or_insert_with(|| {
        serde_json::json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        })
    });
}

/// This OpenAPI 3.1 document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "public",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json")))]
pub async fn openapi_json() -> Json<Value> {
    Json(document())
}

/// A readable page listing every operation, rendered from the document itself.
#[utoipa::path(get, path = "/api/v1/docs", tag = "public",
    responses((status = 200, description = "An HTML page listing every operation", content_type = "text/html")))]
pub async fn docs_page() -> Html<String> {
    let doc = document();
    let mut html = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>knowngood API</title><style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;\
         margin:2rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}\
         h2{margin-top:2rem;border-top:1px solid #ddd;padding-top:1rem}.m{font-weight:bold}\
         </style></head><body><h1>knowngood API</h1>\
         <p>Machine-readable: <a href=\"/api/v1/openapi.json\">/api/v1/openapi.json</a> (OpenAPI 3.1).</p>",
    );
    if let Some(text) = doc.pointer("/info/description").and_then(Value::as_str) {
        html.push_str(&format!("<p>{}</p>", escape(text)));
    }
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for (path, ops) in paths {
            let Some(ops) = ops.as_object() else { continue };
            for (method, op) in ops {
                let text = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or("");
                html.push_str(&format!(
                    "<h2><span class=\"m\">{}</span> <code>{}</code></h2><p>{}</p>",
                    escape(&method.to_uppercase()),
                    escape(path),
                    escape(text("summary")),
                ));
                if !text("x-min-tier").is_empty() {
                    html.push_str(&format!(
                        "<p>Needs permission <code>{}</code>, tier <code>{}</code> or above.</p>",
                        escape(text("x-permission")),
                        escape(text("x-min-tier"))
                    ));
                }
                if let Some(params) = op.get("parameters").and_then(Value::as_array) {
                    html.push_str("<ul>");
                    for p in params {
                        let f = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
                        html.push_str(&format!(
                            "<li><code>{}</code> ({}) {}</li>",
                            escape(f("name")),
                            escape(f("in")),
                            escape(f("description"))
                        ));
                    }
                    html.push_str("</ul>");
                }
            }
        }
    }
    html.push_str("</body></html>");
    Html(html)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
