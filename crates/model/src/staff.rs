//! Staff tooling: impersonation modes and the platform settings that staff change at run
//! time (stored in the database, so every replica applies the same ones).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use chrono::NaiveTime;
use serde::{Deserialize, Serialize};

use crate::{Error, Role};

/// What an impersonation session may do: `view` is refused every write method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpersonationMode {
    View,
    Manage,
}

impl ImpersonationMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ImpersonationMode::View => "view",
            ImpersonationMode::Manage => "manage",
        }
    }
}

impl FromStr for ImpersonationMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "view" => Ok(ImpersonationMode::View),
            "manage" => Ok(ImpersonationMode::Manage),
            other => Err(Error::bad_request(format!(
                "mode {} must be \"view\" or \"manage\"",
                crate::shown(other)
            ))),
        }
    }
}

impl fmt::Display for ImpersonationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-minute limits staff may override; an absent value keeps the configured one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_of_day_per_ip: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_per_ip: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_per_key: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authenticated_per_key: Option<u32>,
}

impl LimitOverrides {
    fn values(&self) -> [(&'static str, Option<u32>); 4] {
        [
            ("hash_of_day_per_ip", self.hash_of_day_per_ip),
            ("public_per_ip", self.public_per_ip),
            ("token_per_key", self.token_per_key),
            ("authenticated_per_key", self.authenticated_per_key),
        ]
    }

    /// `other`'s values where it has them, else these.
    fn merged(&self, other: &LimitOverrides) -> LimitOverrides {
        LimitOverrides {
            hash_of_day_per_ip: other.hash_of_day_per_ip.or(self.hash_of_day_per_ip),
            public_per_ip: other.public_per_ip.or(self.public_per_ip),
            token_per_key: other.token_per_key.or(self.token_per_key),
            authenticated_per_key: other.authenticated_per_key.or(self.authenticated_per_key),
        }
    }
}

/// Largest per-minute limit staff may set; beyond it a limit is no limit.
pub const MAX_LIMIT_PER_MINUTE: u32 = 1_000_000;
/// Longest display label of a role.
pub const MAX_ROLE_LABEL: usize = 40;

/// The settings staff change at run time. Everything absent keeps the deployment's
/// configuration (file, environment or default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformSettings {
    #[serde(default)]
    pub limits: LimitOverrides,
    /// UTC time of day of the daily vendor refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_refresh_at: Option<NaiveTime>,
    /// Vendors the scheduled refresh skips.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub disabled_vendors: BTreeSet<String>,
    /// Display labels of the customer roles, by role name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub role_labels: BTreeMap<String, String>,
}

/// A change to the platform settings: what it names replaces the current value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsChange {
    #[serde(default)]
    pub limits: Option<LimitOverrides>,
    /// `null` clears the override; absent leaves it.
    #[serde(default, with = "double_option")]
    pub daily_refresh_at: Option<Option<NaiveTime>>,
    /// Role name -> label; an empty label restores the default.
    #[serde(default)]
    pub role_labels: Option<BTreeMap<String, String>>,
}

mod double_option {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

impl PlatformSettings {
    /// From its stored JSON document.
    pub fn from_document(document: &str) -> Result<PlatformSettings, Error> {
        serde_json::from_str(document)
            .map_err(|e| Error::internal_caused("stored platform settings", e))
    }

    /// The default display label of a customer role.
    pub fn default_label(role: Role) -> &'static str {
        match role {
            Role::Analyst => "Viewer",
            Role::Auditor => "Analyst",
            Role::AccountAdmin => "Account Admin",
            Role::ClientLiaison => "Client Liaison",
            Role::PlatformAdmin => "Platform Admin",
            Role::PlatformOwner => "Platform Owner",
        }
    }

    /// The label a role is shown with in this deployment.
    pub fn label(&self, role: Role) -> &str {
        self.role_labels
            .get(role.as_str())
            .map_or(Self::default_label(role), String::as_str)
    }

    /// These settings with `change` applied, checked; nothing changes on an error.
    pub fn apply(&self, change: SettingsChange) -> Result<PlatformSettings, Error> {
        let mut next = self.clone();
        if let Some(limits) = change.limits {
            for (name, value) in limits.values() {
                if let Some(v) = value
                    && !(1..=MAX_LIMIT_PER_MINUTE).contains(&v)
                {
                    return Err(Error::bad_request(format!(
                        "limits.{name} must be between 1 and {MAX_LIMIT_PER_MINUTE} requests per minute"
                    )));
                }
            }
            next.limits = next.limits.merged(&limits);
        }
        if let Some(at) = change.daily_refresh_at {
            next.daily_refresh_at = at;
        }
        for (name, label) in change.role_labels.unwrap_or_default() {
            let role: Role = name.parse()?;
            if role.is_platform() {
                return Err(Error::bad_request(format!(
                    "the label of {role} is fixed; only customer roles are renamed"
                )));
            }
            let label = label.trim();
            if label.is_empty() {
                next.role_labels.remove(role.as_str());
                continue;
            }
            if label.chars().count() > MAX_ROLE_LABEL || label.chars().any(char::is_control) {
                return Err(Error::bad_request(format!(
                    "the label of {role} must be 1-{MAX_ROLE_LABEL} characters without control characters"
                )));
            }
            next.role_labels
                .insert(role.as_str().to_string(), label.to_string());
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(json: &str) -> SettingsChange {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn changes_merge_and_bad_ones_change_nothing() {
        let s = PlatformSettings::default()
            .apply(change(
                r#"{"limits": {"authenticated_per_key": 120}, "daily_refresh_at": "03:15:00"}"#,
            ))
            .unwrap();
        assert_eq!(s.limits.authenticated_per_key, Some(120));
        assert_eq!(s.daily_refresh_at, NaiveTime::from_hms_opt(3, 15, 0));
        let s = s
            .apply(change(r#"{"limits": {"token_per_key": 5}}"#))
            .unwrap();
        assert_eq!(s.limits.authenticated_per_key, Some(120), "kept");
        assert_eq!(s.limits.token_per_key, Some(5));
        assert!(
            s.apply(change(r#"{"limits": {"token_per_key": 0}}"#))
                .is_err()
        );
        let cleared = s.apply(change(r#"{"daily_refresh_at": null}"#)).unwrap();
        assert_eq!(cleared.daily_refresh_at, None);
        assert!(serde_json::from_str::<SettingsChange>(r#"{"limit": {}}"#).is_err());
    }

    #[test]
    fn only_customer_roles_are_relabelled() {
        let s = PlatformSettings::default()
            .apply(change(r#"{"role_labels": {"analyst": "Reader"}}"#))
            .unwrap();
        assert_eq!(s.label(Role::Analyst), "Reader");
        assert_eq!(s.label(Role::Auditor), "Analyst");
        assert!(
            s.apply(change(r#"{"role_labels": {"platform_owner": "Boss"}}"#))
                .is_err()
        );
        assert!(
            s.apply(change(r#"{"role_labels": {"responder": "X"}}"#))
                .is_err()
        );
        assert!(
            s.apply(change(r#"{"role_labels": {"analyst": "a\u0007b"}}"#))
                .is_err()
        );
        let reset = s
            .apply(change(r#"{"role_labels": {"analyst": ""}}"#))
            .unwrap();
        assert_eq!(reset.label(Role::Analyst), "Viewer");
    }

    #[test]
    fn modes_parse_strictly() {
        assert_eq!(
            "view".parse::<ImpersonationMode>().unwrap(),
            ImpersonationMode::View
        );
        assert!("View".parse::<ImpersonationMode>().is_err());
    }
}
