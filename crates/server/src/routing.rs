//! Route registration: each route is declared once, next to its handler, as the handler's
//! `#[utoipa::path]` annotation (method, path, OpenAPI operation) plus the [`RouteRule`] given
//! where the route module registers it (`api.route(routes!(handler), RouteRule::…)`). Everything
//! else is derived from that registration: the axum router, the access table
//! ([`ROUTES`]), the enforcement middleware attached to each route, each route's body
//! limit, the OpenAPI document and the authorization test matrix.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use model::{Error, Permission, Tier};
use utoipa::openapi::path::{HttpMethod, Paths};
use utoipa::openapi::{Components, RefOr, Schema};
use utoipa_axum::router::UtoipaMethodRouter;

use crate::AppState;
use crate::error::ApiError;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credential.
    Public,
    /// A valid credential whose effective roles hold `permission` (when set) on an
    /// account of at least `min_tier`.
    Authenticated {
        permission: Option<Permission>,
        min_tier: Tier,
    },
}

/// Which per-minute limit a route counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitClass {
    /// Per client address: the public feed (100/min by default).
    HashOfDay,
    /// Per client address: other public routes (300/min).
    Public,
    /// Per key: token exchange (10/min).
    Token,
    /// Per key: every other authenticated route (60/min).
    Authenticated,
    /// Probes that orchestrators call constantly.
    None,
}

/// Whether a staff impersonation session may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpersonationPolicy {
    /// Both `view` and `manage` sessions (reads).
    Allowed,
    /// Only `manage` sessions (writes: a `view` session is refused).
    ManageOnly,
    /// No impersonation session (minting or refreshing tokens, impersonating again).
    Refused,
    /// Every session, `view` included, whatever the method (ending one's own session).
    Always,
}

/// Default largest body: 100 hashes need about 7 KB.
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;

/// The access rule of one route, given where the route is registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteRule {
    pub access: Access,
    pub limit: LimitClass,
    /// Largest request body accepted, in bytes (413 beyond).
    pub max_body: usize,
    /// A console session must have passed a second factor (403 `MFA_REQUIRED` otherwise).
    /// Raw-key and JWT sessions from a key are not console sessions.
    pub second_factor: bool,
    pub impersonation: ImpersonationPolicy,
    /// The API key travels as the route's `{key}` path parameter instead of a header, for
    /// clients that cannot send one (the hashlookup-compatible routes). It is the request's
    /// one credential and is checked, limited and counted like an `X-API-Key`.
    pub key_in_path: bool,
}

/// The path parameter that carries the key of a [`RouteRule::key_in_path`] route.
pub(crate) const PATH_KEY_PARAM: &str = "key";

impl RouteRule {
    /// No credential; counted per client address.
    pub const fn public() -> Self {
        Self {
            access: Access::Public,
            limit: LimitClass::Public,
            max_body: DEFAULT_MAX_BODY,
            second_factor: false,
            impersonation: ImpersonationPolicy::Allowed,
            key_in_path: false,
        }
    }

    /// A credential whose roles hold `permission` on an account of at least `min_tier`.
    pub const fn private(permission: Permission, min_tier: Tier) -> Self {
        Self {
            access: Access::Authenticated {
                permission: Some(permission),
                min_tier,
            },
            limit: LimitClass::Authenticated,
            max_body: DEFAULT_MAX_BODY,
            second_factor: true,
            impersonation: ImpersonationPolicy::Allowed,
            key_in_path: false,
        }
    }

    /// Any authenticated account of any tier (routes with no permission of their own).
    pub const fn any_account() -> Self {
        Self {
            access: Access::Authenticated {
                permission: None,
                min_tier: Tier::Free,
            },
            limit: LimitClass::Authenticated,
            max_body: DEFAULT_MAX_BODY,
            second_factor: true,
            impersonation: ImpersonationPolicy::Allowed,
            key_in_path: false,
        }
    }

    pub const fn limit(mut self, limit: LimitClass) -> Self {
        self.limit = limit;
        self
    }

    pub const fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Reachable by a console session that has not passed a second factor yet (the
    /// enrollment and account-switch routes).
    pub const fn without_second_factor(mut self) -> Self {
        self.second_factor = false;
        self
    }

    pub const fn impersonation(mut self, impersonation: ImpersonationPolicy) -> Self {
        self.impersonation = impersonation;
        self
    }

    /// The key is the `{key}` path parameter (see [`RouteRule::key_in_path`]).
    pub const fn key_in_path(mut self) -> Self {
        self.key_in_path = true;
        self
    }
}

/// One registered route: its method, path and rule.
#[derive(Debug, Clone)]
pub struct RouteSpec {
    /// Position in the registration order ([`ROUTES`]); indexes per-route metrics.
    pub index: usize,
    pub method: Method,
    pub path: String,
    pub access: Access,
    pub limit: LimitClass,
    pub rule: RouteRule,
}

impl RouteSpec {
    /// `<METHOD> <route>`, the key of usage statistics.
    pub(crate) fn endpoint_name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// The API as its route modules register it, before it is bound to a state.
#[derive(Default)]
pub struct Api {
    routes: Vec<(RouteSpec, axum::routing::MethodRouter<AppState>)>,
    paths: Paths,
    schemas: Vec<(String, RefOr<Schema>)>,
}

impl Api {
    /// Registers the handler(s) collected by `routes!` under `rule`. A write method (not
    /// GET or HEAD) defaults to refusing `view` impersonation sessions.
    pub fn route(
        mut self,
        (schemas, paths, router): UtoipaMethodRouter<AppState>,
        rule: RouteRule,
    ) -> Self {
        for (path, item) in &paths.paths {
            for method in item_methods(item) {
                let mut rule = rule;
                if method != Method::GET && rule.impersonation == ImpersonationPolicy::Allowed {
                    rule.impersonation = ImpersonationPolicy::ManageOnly;
                }
                let spec = RouteSpec {
                    index: self.routes.len(),
                    method,
                    path: path.clone(),
                    access: rule.access,
                    limit: rule.limit,
                    rule,
                };
                self.routes.push((spec, router.clone()));
            }
        }
        self.paths.merge(paths);
        self.schemas.extend(schemas);
        self
    }

    /// The access table of every registered route.
    pub fn table(&self) -> Vec<RouteSpec> {
        self.routes.iter().map(|(spec, _)| spec.clone()).collect()
    }

    /// The registered operations and the schemas they name.
    pub(crate) fn openapi_parts(self) -> (Paths, Vec<(String, RefOr<Schema>)>) {
        (self.paths, self.schemas)
    }

    /// The axum router: each route wrapped in its own enforcement of its rule and body limit,
    /// the hashlookup-compatible routes mounted under the configured prefix.
    pub(crate) fn into_router(self, state: &AppState) -> Router<AppState> {
        let mut router = Router::new();
        for (spec, method_router) in self.routes {
            let path = crate::routes::hashlookup::mounted(&spec.path, &state.settings);
            let body_limit = DefaultBodyLimit::max(spec.rule.max_body);
            // `route_layer`, not `layer`: a method router's 405 fallback stays unwrapped,
            // so two registrations of one path merge.
            let method_router = method_router
                .route_layer(axum::middleware::from_fn_with_state(
                    Arc::new((state.clone(), spec)),
                    enforce_rule,
                ))
                .route_layer(body_limit);
            router = router.route(&path, method_router);
        }
        router
    }
}

/// The methods with an operation in a path item, in a fixed order.
fn item_methods(item: &utoipa::openapi::PathItem) -> Vec<Method> {
    [
        (&item.get, HttpMethod::Get, Method::GET),
        (&item.post, HttpMethod::Post, Method::POST),
        (&item.put, HttpMethod::Put, Method::PUT),
        (&item.patch, HttpMethod::Patch, Method::PATCH),
        (&item.delete, HttpMethod::Delete, Method::DELETE),
    ]
    .into_iter()
    .filter(|(op, _, _)| op.is_some())
    .map(|(_, _, method)| method)
    .collect()
}

/// The edge checks, then the route's rule, then the handler.
async fn enforce_rule(
    State(route): State<Arc<(AppState, RouteSpec)>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    path_params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let (state, spec) = &*route;
    crate::request_log::record_route(&spec.path);
    let path_params = path_params.map_err(|e| {
        Error::bad_request(format!("a path parameter is not valid: {}", e.body_text()))
    })?;
    let params: Vec<(&str, &str)> = path_params.iter().collect();
    crate::extract::check_edge(request.uri().query(), &params)?;
    let path_key = spec
        .rule
        .key_in_path
        .then(|| params.iter().find(|(name, _)| *name == PATH_KEY_PARAM))
        .flatten()
        .map(|(_, key)| (*key).to_owned());
    let began = std::time::Instant::now();
    let response = crate::guard::enforce(state, spec, peer, path_key, request, next)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    state
        .metrics
        .observe(spec.index, response.status().as_u16(), began.elapsed());
    Ok(response)
}

/// Every route the server answers, as registered.
pub static ROUTES: LazyLock<Vec<RouteSpec>> = LazyLock::new(|| crate::routes::api().table());

/// The rule of a route, as the request matched it.
#[cfg(test)]
fn spec_for(method: &Method, path: &str) -> Option<&'static RouteSpec> {
    ROUTES.iter().find(|r| {
        r.path == path
            && (r.method == method || (method == Method::HEAD && r.method == Method::GET))
    })
}

/// Components for the schemas the registered operations name.
pub(crate) fn add_schemas(components: &mut Components, schemas: Vec<(String, RefOr<Schema>)>) {
    for (name, schema) in schemas {
        components.schemas.entry(name).or_insert(schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_unique() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    !(a.method == b.method && a.path == b.path),
                    "{} {}",
                    a.method,
                    a.path
                );
            }
        }
    }

    #[test]
    fn path_keys_are_declared_in_the_path() {
        for route in ROUTES.iter().filter(|r| r.rule.key_in_path) {
            assert!(
                route.path.contains(&format!("{{{PATH_KEY_PARAM}}}")),
                "{} {} takes its key from the path but has no {{key}}",
                route.method,
                route.path
            );
        }
        assert!(ROUTES.iter().any(|r| r.rule.key_in_path));
    }

    #[test]
    fn writes_refuse_view_sessions_by_default() {
        let lookup = spec_for(&Method::POST, "/api/v1/intel/lookup").expect("registered");
        assert_eq!(lookup.rule.impersonation, ImpersonationPolicy::ManageOnly);
        let stats = spec_for(&Method::GET, "/api/v1/intel/stats").expect("registered");
        assert_eq!(stats.rule.impersonation, ImpersonationPolicy::Allowed);
    }
}
