//! Roles beyond the primary one, and who may hand out what.
//!
//! A key has a primary role plus grants, permanent or expiring within 30 days. Its
//! effective roles are the primary plus every grant not yet expired at the time of the
//! request, so expiry needs no cleanup job. The rank rules (docs/api.md, "Roles") decide
//! every issue, grant, update and revocation.

use chrono::{DateTime, Duration, Utc};
use model::TenantKind;
use model::{Error, Permission, Role};
use store::admin::GrantRow;

use crate::Principal;

/// The longest a time-limited grant may run.
pub const MAX_GRANT_DAYS: i64 = 30;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub role: Role,
    pub expires_at: Option<DateTime<Utc>>,
}

impl From<&GrantRow> for Grant {
    fn from(row: &GrantRow) -> Self {
        Self {
            role: row.role,
            expires_at: row.expires_at,
        }
    }
}

/// Primary role plus the grants active at `now`, without duplicates, in rank order.
pub fn effective_roles(primary: Role, grants: &[Grant], now: DateTime<Utc>) -> Vec<Role> {
    let mut roles = vec![primary];
    roles.extend(
        grants
            .iter()
            .filter(|g| g.expires_at.is_none_or(|at| at > now))
            .map(|g| g.role),
    );
    roles.sort();
    roles.dedup();
    roles
}

/// The key an administrative action is aimed at.
#[derive(Debug, Clone)]
pub struct KeyTarget<'a> {
    pub key_id: &'a str,
    pub team_id: &'a str,
    pub tenant_kind: TenantKind,
    /// Effective roles now.
    pub roles: &'a [Role],
}

impl KeyTarget<'_> {
    /// Highest effective role of the target.
    pub fn rank(&self) -> Role {
        self.roles.iter().copied().max().unwrap_or(Role::Analyst)
    }
}

impl Principal {
    /// Highest effective role.
    pub fn rank(&self) -> Role {
        self.roles.iter().copied().max().unwrap_or(self.role)
    }

    fn is_staff(&self) -> bool {
        self.has(Permission::PlatformKeys)
    }

    /// May this principal see and act on keys of `team_id` at all?
    pub fn can_manage_team(&self, team_id: &str) -> Result<(), Error> {
        if self.is_staff() || (self.team_id == team_id && self.has(Permission::TenantManage)) {
            Ok(())
        } else {
            // Other accounts' keys are not even acknowledged to exist.
            Err(Error::NotFound("no such key".into()))
        }
    }

    /// May this principal update, revoke, reissue or grant roles to the target key?
    ///
    /// Every one of these can take a key away from its holder (a revoked or demoted key
    /// can then be reissued), so they share one rule: the key must be the caller's own,
    /// rank strictly below the caller, or be a customer key in the hands of staff
    /// (platform:keys). The platform owner is altered by no one else, and platform admins
    /// by the owner only.
    pub fn can_alter(&self, target: &KeyTarget<'_>) -> Result<(), Error> {
        self.can_manage_team(target.team_id)?;
        let own = target.key_id == self.key_id;
        let target_rank = target.rank();
        if target_rank == Role::PlatformOwner && !own {
            return Err(Error::Forbidden(
                "the platform owner cannot be altered by others".into(),
            ));
        }
        if target_rank == Role::PlatformAdmin && self.rank() != Role::PlatformOwner && !own {
            return Err(Error::Forbidden(
                "platform admins are managed by the platform owner only".into(),
            ));
        }
        if target_rank > self.rank() {
            return Err(Error::Forbidden(format!(
                "the key holds {target_rank}, which ranks above your {}",
                self.rank()
            )));
        }
        let staff_on_customer = self.is_staff() && target.tenant_kind == TenantKind::Customer;
        if own || staff_on_customer || target_rank < self.rank() {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "the key holds {target_rank}, as high as your {}; only its holder or a higher rank may change, revoke or reissue it",
                self.rank()
            )))
        }
    }

    /// May this principal give `role` to a key of the given tenant (by issuing a key with
    /// it, changing a primary role to it, or granting it)?
    pub fn can_give(
        &self,
        role: Role,
        team_id: &str,
        tenant_kind: TenantKind,
    ) -> Result<(), Error> {
        self.can_manage_team(team_id)?;
        if role > self.rank() {
            return Err(Error::Forbidden(format!(
                "{role} ranks above your {}; you can give only roles at or below your own",
                self.rank()
            )));
        }
        if role.is_platform() {
            if self.rank() != Role::PlatformOwner {
                return Err(Error::Forbidden(
                    "platform roles are granted by the platform owner only".into(),
                ));
            }
            if tenant_kind == TenantKind::Customer {
                return Err(Error::Forbidden(
                    "platform roles are never given to a customer account".into(),
                ));
            }
        }
        if !self.rank().is_platform() && !matches!(role, Role::Analyst | Role::Auditor) {
            return Err(Error::Forbidden(format!(
                "an account admin may give only analyst or auditor; {role} needs staff"
            )));
        }
        Ok(())
    }
}

/// A grant's expiry must lie in the future and at most 30 days ahead.
pub fn check_expiry(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<(), Error> {
    match expires_at {
        Some(at) if at <= now => Err(Error::bad_request("expires_at must be in the future")),
        Some(at) if at > now + Duration::days(MAX_GRANT_DAYS) => Err(Error::bad_request(format!(
            "expires_at must be at most {MAX_GRANT_DAYS} days ahead"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use model::Tier;

    use super::*;

    fn principal(team: &str, kind: TenantKind, roles: &[Role]) -> Principal {
        Principal {
            key_id: format!("key_{team}"),
            team_id: team.into(),
            tenant_kind: kind,
            role: roles[0],
            roles: roles.to_vec(),
            tier: Tier::Enterprise,
            credential: crate::Credential::ApiKey,
            impersonation: None,
            session: None,
        }
    }

    #[test]
    fn expired_grants_stop_counting_without_cleanup() {
        let now = Utc::now();
        let grants = [
            Grant {
                role: Role::Auditor,
                expires_at: Some(now + Duration::hours(1)),
            },
            Grant {
                role: Role::AccountAdmin,
                expires_at: Some(now - Duration::seconds(1)),
            },
        ];
        assert_eq!(
            effective_roles(Role::Analyst, &grants, now),
            vec![Role::Analyst, Role::Auditor]
        );
        assert_eq!(
            effective_roles(Role::Analyst, &grants, now + Duration::hours(2)),
            vec![Role::Analyst]
        );
    }

    #[test]
    fn account_admin_limits() {
        let admin = principal("acme", TenantKind::Customer, &[Role::AccountAdmin]);
        assert!(
            admin
                .can_give(Role::Auditor, "acme", TenantKind::Customer)
                .is_ok()
        );
        assert!(matches!(
            admin.can_give(Role::AccountAdmin, "acme", TenantKind::Customer),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            admin.can_give(Role::ClientLiaison, "acme", TenantKind::Customer),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            admin.can_give(Role::Analyst, "other", TenantKind::Customer),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn platform_roles_only_from_the_owner_and_never_to_customers() {
        let owner = principal("platform", TenantKind::Platform, &[Role::PlatformOwner]);
        let admin = principal("platform", TenantKind::Platform, &[Role::PlatformAdmin]);
        assert!(
            owner
                .can_give(Role::PlatformAdmin, "platform", TenantKind::Platform)
                .is_ok()
        );
        assert!(matches!(
            owner.can_give(Role::ClientLiaison, "acme", TenantKind::Customer),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            admin.can_give(Role::ClientLiaison, "platform", TenantKind::Platform),
            Err(Error::Forbidden(_))
        ));
        assert!(
            admin
                .can_give(Role::AccountAdmin, "acme", TenantKind::Customer)
                .is_ok()
        );
        let target = KeyTarget {
            key_id: "key_owner",
            team_id: "platform",
            tenant_kind: TenantKind::Platform,
            roles: &[Role::PlatformOwner],
        };
        assert!(matches!(admin.can_alter(&target), Err(Error::Forbidden(_))));
        let other_admin = KeyTarget {
            key_id: "key_other_admin",
            team_id: "platform",
            tenant_kind: TenantKind::Platform,
            roles: &[Role::PlatformAdmin],
        };
        assert!(matches!(
            admin.can_alter(&other_admin),
            Err(Error::Forbidden(_))
        ));
        assert!(owner.can_alter(&other_admin).is_ok());
    }

    #[test]
    fn expiry_window() {
        let now = Utc::now();
        assert!(check_expiry(None, now).is_ok());
        assert!(check_expiry(Some(now + Duration::days(30)), now).is_ok());
        assert!(check_expiry(Some(now + Duration::days(31)), now).is_err());
        assert!(check_expiry(Some(now - Duration::seconds(1)), now).is_err());
    }
}
