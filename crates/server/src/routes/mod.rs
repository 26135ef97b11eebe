//! The route handlers, one module per resource. Each module's `routes` registers its
//! handlers with their access rules; [`api`] is the whole API.

use utoipa_axum::routes;

use crate::routing::{Api, RouteRule};

pub mod admin;
pub mod bundle;
pub mod coverage;
pub mod feeds;
pub mod hashlookup;
pub mod intel;
pub mod mfa;
pub mod packages;
pub mod public;
pub mod revocations;
pub mod taxii;
pub mod tokens;
pub mod transparency;
pub mod users;

/// Every route of the API, registered with its rule.
pub fn api() -> Api {
    let api = Api::default();
    let api = public::routes(api);
    let api = feeds::routes(api);
    let api = taxii::routes(api);
    let api = tokens::routes(api);
    let api = intel::routes(api);
    let api = revocations::routes(api);
    let api = packages::routes(api);
    let api = coverage::routes(api);
    let api = admin::routes(api);
    let api = transparency::routes(api);
    let api = users::routes(api);
    let api = mfa::routes(api);
    let api = hashlookup::routes(api);
    let api = bundle::routes(api);
    // The API's own description is public so that tools can read it before holding a key.
    api.route(routes!(crate::openapi::openapi_json), RouteRule::public())
        .route(routes!(crate::openapi::docs_page), RouteRule::public())
}
