//! Account administration, one module per resource: keys, role grants, accounts
//! (suspension), the audit log, usage, the staff view of the service's health and of the coverage queue, staff
//! impersonation and platform administration (settings, vendors, roles, administrators). Handlers only extract, call
//! [`auth::admin::Admin`] (which holds the rules and writes the audit log) and answer JSON.

use model::{Permission, Tier};

use crate::routing::{Api, RouteRule};

pub mod accounts;
pub mod audit;
pub mod coverage;
pub mod grants;
pub mod health;
pub mod impersonation;
pub mod keys;
pub mod platform;
pub mod usage;

/// Key and grant administration: account admins on teams and above, and staff.
const MANAGE_KEYS: RouteRule = RouteRule::private(Permission::TenantManage, Tier::Teams);

/// The administration routes and who may call them.
pub(crate) fn routes(api: Api) -> Api {
    let api = usage::routes(api);
    let api = keys::routes(api);
    let api = grants::routes(api);
    let api = accounts::routes(api);
    let api = health::routes(api);
    let api = coverage::routes(api);
    let api = impersonation::routes(api);
    let api = platform::routes(api);
    audit::routes(api)
}
