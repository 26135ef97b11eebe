//! The OpenAPI 3.1 document, generated from the registered routes (their handlers'
//! annotations and access rules), and a plain HTML page that renders it (no scripts, nothing fetched).

use axum::Json;
use axum::response::Html;
use serde_json::Value;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routing::{Access, ImpersonationPolicy, LimitClass, ROUTES};
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
                ImpersonationPolicy::Allowed | ImpersonationPolicy::Always => "allowed",
                ImpersonationPolicy::ManageOnly => "manage-only",
                ImpersonationPolicy::Refused => "refused",
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
            if route.rule.impersonation == ImpersonationPolicy::Refused || route.rule.second_factor
            {
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
pub(crate) async fn openapi_json() -> Json<Value> {
    Json(document())
}

/// A readable page listing every operation, rendered from the document itself.
#[utoipa::path(get, path = "/api/v1/docs", tag = "public",
    responses((status = 200, description = "An HTML page listing every operation", content_type = "text/html")))]
pub async fn docs_page() -> Html<String> {
    Html(DOCS_PAGE.clone())
}

/// Built once, like the document it renders.
static DOCS_PAGE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| render_docs(&document()));

/// Who an operation is for, in the order the reference lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Audience {
    Public,
    Customer,
    Staff,
}

impl Audience {
    fn of(op: &Value) -> Self {
        match op.get("x-permission").map(|p| p.as_str()) {
            None => Audience::Public,
            Some(Some(p)) if p.starts_with("platform:") || p == "tenant:impersonate" => {
                Audience::Staff
            }
            Some(_) => Audience::Customer,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Audience::Public => "Public routes (no credential)",
            Audience::Customer => "Customer routes (an API key or a token)",
            Audience::Staff => "Staff routes (platform roles)",
        }
    }
}

/// The reference page's head, title and link to the machine-readable description.
const DOCS_HEAD: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>knowngood API reference</title><style>\
         body{font:15px/1.5 system-ui,sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}\
         code{background:#f3f3f3;padding:0 .2em;overflow-wrap:anywhere}\
         h2{margin-top:2.5rem;border-bottom:2px solid #ccc}h3{margin-top:2rem;border-top:1px solid #ddd;padding-top:1rem}\
         .m{font-weight:bold;font-family:monospace;margin-right:.4em}nav ul{columns:2 18rem}nav li{break-inside:avoid}\
         table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}\
         .rule{color:#444}</style></head><body><h1>knowngood API reference</h1>\
         <p>Machine-readable: <a href=\"/api/v1/openapi.json\">/api/v1/openapi.json</a> (OpenAPI 3.1).</p>";

/// The reference page: the API's description, a table of contents by audience (public,
/// customer, staff) and tag, then each operation with its rendered description, access
/// rule, parameters, request body and answers. Markdown is rendered; raw HTML in it is
/// shown as text. No script, no external resource.
fn render_docs(doc: &Value) -> String {
    let ops = operations(doc);
    let mut html = String::from(DOCS_HEAD);
    html.push_str(&markdown(&text_of(&doc["info"], "description")));
    html.push_str(&contents(&ops));
    let mut audience_shown = None;
    for op in &ops {
        if audience_shown != Some(op.audience) {
            html.push_str(&format!("<h2>{}</h2>", op.audience.title()));
            audience_shown = Some(op.audience);
        }
        html.push_str(&operation_section(op));
    }
    html.push_str("</body></html>");
    html
}

/// One operation of the description, with what the page sorts and files it by.
struct Operation<'a> {
    audience: Audience,
    /// Its first tag, `other` when it has none.
    tag: String,
    path: String,
    /// In capitals (`GET`).
    method: String,
    op: &'a Value,
}

/// Every operation of the description, by audience, tag, path and method.
fn operations(doc: &Value) -> Vec<Operation<'_>> {
    let mut ops = Vec::new();
    for (path, methods) in doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        for (method, op) in methods.as_object().into_iter().flatten() {
            let tag = op
                .pointer("/tags/0")
                .and_then(Value::as_str)
                .unwrap_or("other")
                .to_string();
            ops.push(Operation {
                audience: Audience::of(op),
                tag,
                path: path.clone(),
                method: method.to_uppercase(),
                op,
            });
        }
    }
    ops.sort_by(|a, b| {
        (a.audience, &a.tag, &a.path, &a.method).cmp(&(b.audience, &b.tag, &b.path, &b.method))
    });
    ops
}

/// A string field of a JSON object, empty when absent.
fn text_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The id of an operation's section on the page (`get-apiv1...`).
fn anchor(method: &str, path: &str) -> String {
    let mut id = format!("{}-{}", method.to_lowercase(), path);
    id.retain(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    id
}

/// The table of contents: a heading per audience, a list per tag, a link per operation
/// with the first sentence of its summary.
fn contents(ops: &[Operation<'_>]) -> String {
    let mut html = String::from("<nav><h2>Contents</h2>");
    let mut current: Option<(Audience, String)> = None;
    for Operation {
        audience,
        tag,
        path,
        method,
        op,
    } in ops
    {
        if current.as_ref().map(|(a, _)| a) != Some(audience) {
            if current.is_some() {
                html.push_str("</ul>");
            }
            html.push_str(&format!("<h3>{}</h3>", audience.title()));
        }
        if current.as_ref() != Some(&(*audience, tag.clone())) {
            if current.as_ref().map(|(a, _)| a) == Some(audience) {
                html.push_str("</ul>");
            }
            html.push_str(&format!("<h4>{}</h4><ul>", escape(tag)));
            current = Some((*audience, tag.clone()));
        }
        html.push_str(&format!(
            "<li><a href=\"#{}\"><span class=\"m\">{}</span>{}</a> {}</li>",
            anchor(method, path),
            escape(method),
            escape(path),
            inline_markdown(first_sentence(&text_of(op, "summary")))
        ));
    }
    if current.is_some() {
        html.push_str("</ul>");
    }
    html.push_str("</nav>");
    html
}

/// One operation's section: its heading, summary and description, access rule,
/// parameters, request body and answers.
fn operation_section(operation: &Operation<'_>) -> String {
    let Operation {
        path, method, op, ..
    } = operation;
    let mut html = format!(
        "<h3 id=\"{}\"><span class=\"m\">{}</span><code>{}</code></h3>",
        anchor(method, path),
        escape(method),
        escape(path)
    );
    html.push_str(&markdown(&text_of(op, "summary")));
    html.push_str(&markdown(&text_of(op, "description")));
    html.push_str(&access_rule(op));
    if let Some(params) = op.get("parameters").and_then(Value::as_array) {
        html.push_str(&parameters_table(params));
    }
    if let Some(body) = op.get("requestBody") {
        let schema = body
            .pointer("/content/application~1json/schema/$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or("");
        if !schema.is_empty() {
            html.push_str(&format!(
                "<p>Body: <code>{}</code> (JSON).</p>",
                escape(schema)
            ));
        }
    }
    if let Some(responses) = op.get("responses").and_then(Value::as_object) {
        html.push_str(&responses_table(responses));
    }
    html
}

/// The permission and tier an operation asks for; nothing for a public one.
fn access_rule(op: &Value) -> String {
    if op.get("x-min-tier").is_none() {
        return String::new();
    }
    let permission = op
        .get("x-permission")
        .and_then(Value::as_str)
        .map_or("none (any valid credential)".to_string(), |p| {
            format!("<code>{}</code>", escape(p))
        });
    format!(
        "<p class=\"rule\">Permission {permission}; tier <code>{}</code> or above.</p>",
        escape(&text_of(op, "x-min-tier"))
    )
}

/// An operation's parameters: name (and whether it is required), where it goes, what it
/// means.
fn parameters_table(params: &[Value]) -> String {
    let mut html =
        String::from("<table><tr><th>parameter</th><th>in</th><th>description</th></tr>");
    for p in params {
        html.push_str(&format!(
            "<tr><td><code>{}</code>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&text_of(p, "name")),
            if p.get("required").and_then(Value::as_bool) == Some(true) {
                " (required)"
            } else {
                ""
            },
            escape(&text_of(p, "in")),
            markdown(&text_of(p, "description"))
        ));
    }
    html.push_str("</table>");
    html
}

/// An operation's answers: each status and what it means.
fn responses_table(responses: &serde_json::Map<String, Value>) -> String {
    let mut html = String::from("<table><tr><th>status</th><th>meaning</th></tr>");
    for (status, answer) in responses {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(status),
            markdown(&text_of(answer, "description"))
        ));
    }
    html.push_str("</table>");
    html
}

/// The text up to the end of its first sentence.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |end| &text[..=end])
}

/// Markdown of one line, without the paragraph around it.
fn inline_markdown(text: &str) -> String {
    let html = markdown(text);
    let html = html.trim_end();
    html.strip_prefix("<p>")
        .and_then(|h| h.strip_suffix("</p>"))
        .unwrap_or(html)
        .to_string()
}

/// Markdown to HTML; raw HTML in the source is shown as text.
fn markdown(text: &str) -> String {
    use pulldown_cmark::{Event, Parser};
    let events = Parser::new(text).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
