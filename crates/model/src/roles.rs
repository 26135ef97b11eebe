//! Tiers, roles and permissions, as docs/api.md ("Roles") fixes them.
//!
//! A request passes only if the caller's effective permissions hold the route's
//! permission AND the account's tier is at least the route's minimum tier.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// Account tiers, ordered: free < basic < teams < enterprise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Free,
    Basic,
    Teams,
    Enterprise,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Free, Tier::Basic, Tier::Teams, Tier::Enterprise];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Basic => "basic",
            Tier::Teams => "teams",
            Tier::Enterprise => "enterprise",
        }
    }
}

impl FromStr for Tier {
    type Err = Error;

    /// `paid` is the deprecated name of `teams`: accepted wherever a tier is written,
    /// stored and emitted as `teams`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "free" => Ok(Tier::Free),
            "basic" => Ok(Tier::Basic),
            "teams" | "paid" => Ok(Tier::Teams),
            "enterprise" => Ok(Tier::Enterprise),
            other => Err(Error::bad_request(format!(
                "unknown tier {other:?}: expected free, basic, teams (or paid) or enterprise"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Tier {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Permission {
    #[serde(rename = "intel:stats")]
    IntelStats,
    #[serde(rename = "intel:lookup")]
    IntelLookup,
    #[serde(rename = "intel:history")]
    IntelHistory,
    #[serde(rename = "intel:downloads")]
    IntelDownloads,
    #[serde(rename = "intel:revocations")]
    IntelRevocations,
    #[serde(rename = "intel:packages")]
    IntelPackages,
    #[serde(rename = "tenant:manage")]
    TenantManage,
    #[serde(rename = "tenant:impersonate")]
    TenantImpersonate,
    #[serde(rename = "platform:keys")]
    PlatformKeys,
    #[serde(rename = "platform:settings")]
    PlatformSettings,
    #[serde(rename = "platform:admin")]
    PlatformAdmin,
}

impl Permission {
    pub const INTEL: [Permission; 6] = [
        Permission::IntelStats,
        Permission::IntelLookup,
        Permission::IntelHistory,
        Permission::IntelDownloads,
        Permission::IntelRevocations,
        Permission::IntelPackages,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::IntelStats => "intel:stats",
            Permission::IntelLookup => "intel:lookup",
            Permission::IntelHistory => "intel:history",
            Permission::IntelDownloads => "intel:downloads",
            Permission::IntelRevocations => "intel:revocations",
            Permission::IntelPackages => "intel:packages",
            Permission::TenantManage => "tenant:manage",
            Permission::TenantImpersonate => "tenant:impersonate",
            Permission::PlatformKeys => "platform:keys",
            Permission::PlatformSettings => "platform:settings",
            Permission::PlatformAdmin => "platform:admin",
        }
    }
}

/// Roles in rank order, low to high.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Analyst,
    Auditor,
    AccountAdmin,
    ClientLiaison,
    PlatformAdmin,
    PlatformOwner,
}

impl Role {
    pub const ALL: [Role; 6] = [
        Role::Analyst,
        Role::Auditor,
        Role::AccountAdmin,
        Role::ClientLiaison,
        Role::PlatformAdmin,
        Role::PlatformOwner,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Analyst => "analyst",
            Role::Auditor => "auditor",
            Role::AccountAdmin => "account_admin",
            Role::ClientLiaison => "client_liaison",
            Role::PlatformAdmin => "platform_admin",
            Role::PlatformOwner => "platform_owner",
        }
    }

    /// Platform roles are never assignable to a customer tenant.
    pub fn is_platform(self) -> bool {
        self >= Role::ClientLiaison
    }

    /// The fixed permission set of the role (the decided role table).
    pub fn permissions(self) -> &'static [Permission] {
        use Permission::*;
        match self {
            Role::Analyst => &[IntelStats, IntelLookup, IntelHistory],
            Role::Auditor => &[
                IntelStats,
                IntelLookup,
                IntelHistory,
                IntelDownloads,
                IntelRevocations,
                IntelPackages,
            ],
            Role::AccountAdmin => &[
                IntelStats,
                IntelLookup,
                IntelHistory,
                IntelDownloads,
                IntelRevocations,
                IntelPackages,
                TenantManage,
            ],
            Role::ClientLiaison => &[
                IntelStats,
                IntelLookup,
                IntelHistory,
                IntelDownloads,
                IntelRevocations,
                IntelPackages,
                TenantImpersonate,
            ],
            Role::PlatformAdmin => &[
                IntelStats,
                IntelLookup,
                IntelHistory,
                IntelDownloads,
                IntelRevocations,
                IntelPackages,
                TenantManage,
                TenantImpersonate,
                PlatformKeys,
                PlatformSettings,
            ],
            Role::PlatformOwner => &[
                IntelStats,
                IntelLookup,
                IntelHistory,
                IntelDownloads,
                IntelRevocations,
                IntelPackages,
                TenantManage,
                TenantImpersonate,
                PlatformKeys,
                PlatformSettings,
                PlatformAdmin,
            ],
        }
    }

    pub fn has(self, permission: Permission) -> bool {
        self.permissions().contains(&permission)
    }
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "analyst" => Ok(Role::Analyst),
            "auditor" => Ok(Role::Auditor),
            "account_admin" => Ok(Role::AccountAdmin),
            "client_liaison" => Ok(Role::ClientLiaison),
            "platform_admin" => Ok(Role::PlatformAdmin),
            "platform_owner" => Ok(Role::PlatformOwner),
            "responder" | "senior responder" | "senior_responder" => Err(Error::bad_request(
                format!("role {s:?} was removed; use analyst, auditor or account_admin"),
            )),
            other => Err(Error::bad_request(format!("unknown role {other:?}"))),
        }
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paid_is_teams() {
        assert_eq!("paid".parse::<Tier>().unwrap(), Tier::Teams);
        assert_eq!(
            serde_json::to_string(&"paid".parse::<Tier>().unwrap()).unwrap(),
            "\"teams\""
        );
        assert!("gold".parse::<Tier>().is_err());
    }

    #[test]
    fn removed_roles_say_so() {
        let err = "responder".parse::<Role>().unwrap_err();
        assert!(matches!(err, Error::BadRequest(m) if m.contains("removed")));
    }

    #[test]
    fn role_sets_nest_by_rank_within_each_side() {
        for p in Role::Analyst.permissions() {
            assert!(Role::Auditor.has(*p));
        }
        for p in Role::Auditor.permissions() {
            assert!(Role::AccountAdmin.has(*p));
        }
        for p in Role::PlatformAdmin.permissions() {
            assert!(Role::PlatformOwner.has(*p));
        }
        assert!(!Role::ClientLiaison.has(Permission::TenantManage));
        assert!(!Role::PlatformAdmin.has(Permission::PlatformAdmin));
        assert!(!Role::AccountAdmin.is_platform());
        assert!(Role::ClientLiaison.is_platform());
    }
}

/// Whose an account is: the operator's own platform tenant (staff keys) or a customer's.
/// Platform roles are never given to a customer account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantKind {
    Platform,
    Customer,
}

impl TenantKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TenantKind::Platform => "platform",
            TenantKind::Customer => "customer",
        }
    }
}
