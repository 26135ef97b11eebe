//! The console's access rules, declared with its routes: every console route is registered
//! through [`ConsoleRoutes::route`] with its [`ConsoleRule`], and one middleware enforces the
//! rule before the handler runs, so no console handler can be reached without one. The
//! console is signed into with a session cookie, not an API credential, so its rules are
//! their own (the API's are [`crate::routing::RouteRule`]) but say the same things: who may
//! call, whether a second factor must have been passed, which permission and tier.

use std::sync::LazyLock;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::MethodRouter;
use model::{Permission, Tier};

use crate::AppState;

/// Who may call a console route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRule {
    /// Anyone: signing in, the second-factor step, invitations, the static assets.
    Public,
    /// A console session, second factor passed or not (Account and enrolment); others are
    /// sent to sign in.
    SignedIn,
    /// As [`ConsoleRule::SignedIn`], for the console script's JSON calls: refused with a
    /// JSON `401` instead of a redirect.
    SignedInScript,
    /// A console session that passed a second factor; one that has not is sent to Account
    /// to enrol one.
    SecondFactor,
    /// A session that passed a second factor, whose roles hold `permission` (when set) on
    /// an account of at least `tier`. With a `title`, a refusal is that page saying what is
    /// missing; without, the plain refusal page.
    Permission {
        permission: Option<Permission>,
        tier: Tier,
        title: Option<&'static str>,
    },
}

impl ConsoleRule {
    /// A second factor passed, `permission` on `tier`, refused with the plain page.
    pub const fn permission(permission: Option<Permission>, tier: Tier) -> Self {
        Self::Permission {
            permission,
            tier,
            title: None,
        }
    }

    /// As [`ConsoleRule::permission`], refused with page `title` saying what is missing.
    pub const fn page(permission: Permission, tier: Tier, title: &'static str) -> Self {
        Self::Permission {
            permission: Some(permission),
            tier,
            title: Some(title),
        }
    }
}

/// One console route: its method, path and rule.
#[derive(Debug, Clone)]
pub struct ConsoleRoute {
    /// `None`: every method (the console's catch-all page).
    pub method: Option<Method>,
    pub path: &'static str,
    pub rule: ConsoleRule,
}

/// The console's routes as declared: the table and the router are built from one list.
#[derive(Default)]
pub(crate) struct ConsoleRoutes {
    routes: Vec<(ConsoleRoute, MethodRouter<AppState>)>,
}

impl ConsoleRoutes {
    /// Registers `handler` for `method` on `path` under `rule`.
    fn route(
        mut self,
        method: Option<Method>,
        path: &'static str,
        rule: ConsoleRule,
        handler: MethodRouter<AppState>,
    ) -> Self {
        self.routes
            .push((ConsoleRoute { method, path, rule }, handler));
        self
    }

    pub(crate) fn get<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &'static str,
        rule: ConsoleRule,
        handler: H,
    ) -> Self {
        self.route(Some(Method::GET), path, rule, axum::routing::get(handler))
    }

    pub(crate) fn post<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &'static str,
        rule: ConsoleRule,
        handler: H,
    ) -> Self {
        self.route(Some(Method::POST), path, rule, axum::routing::post(handler))
    }

    /// Every method.
    pub(crate) fn any<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &'static str,
        rule: ConsoleRule,
        handler: H,
    ) -> Self {
        self.route(None, path, rule, axum::routing::any(handler))
    }

    pub(crate) fn table(&self) -> Vec<ConsoleRoute> {
        self.routes.iter().map(|(r, _)| r.clone()).collect()
    }

    /// The routes with their handlers, for the router.
    pub(crate) fn into_parts(self) -> Vec<(ConsoleRoute, MethodRouter<AppState>)> {
        self.routes
    }
}

/// Every console route, as declared.
pub static CONSOLE_ROUTES: LazyLock<Vec<ConsoleRoute>> =
    LazyLock::new(|| super::pages::declared().table());
