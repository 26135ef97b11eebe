//! Revocations: signing certificates found revoked on their issuers' CRLs, in the order
//! the API and the console show them.

use model::Error;
use serde::Serialize;
use store::revocations::RevokedCert;
use utoipa::ToSchema;

use crate::AppState;
use crate::api::timestamp;

/// A signing certificate found revoked on its issuer's CRL.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevokedCertJson {
    /// SHA-1 of the certificate, 40 lowercase hex characters.
    pub thumbprint: String,
    /// Certificate subject (RFC 4514).
    pub signer: String,
    /// Issuing CA (RFC 4514).
    pub issuer: String,
    /// Certificate serial, lowercase hex.
    pub serial: String,
    /// The CRL entry's revocationDate.
    pub revoked_at: String,
    /// RFC 5280 reason: unspecified, keyCompromise, cACompromise, affiliationChanged,
    /// superseded, cessationOfOperation, certificateHold (also privilegeWithdrawn,
    /// aACompromise).
    pub revocation_reason: String,
    /// Always `crl`.
    pub check_method: String,
    /// Tracked vendors that shipped files signed with it.
    pub affected_vendors: Vec<String>,
    /// A file current on today's feed was signed with it.
    pub currently_active: bool,
    /// When a hold was lifted (history only); absent while the revocation is in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
}

impl From<RevokedCert> for RevokedCertJson {
    fn from(c: RevokedCert) -> Self {
        Self {
            thumbprint: c.thumbprint,
            signer: c.signer,
            issuer: c.issuer,
            serial: c.serial,
            revoked_at: timestamp(c.revoked_at),
            revocation_reason: c.reason,
            check_method: c.check_method,
            affected_vendors: c.affected_vendors,
            currently_active: c.currently_active,
            released_at: c.released_at.map(timestamp),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RevocationFeed {
    pub revoked_certs: Vec<RevokedCertJson>,
    pub total: u64,
}

/// Severity rank of a reason name: compromises first, holds last.
fn severity(reason: &str) -> u8 {
    revocation::Reason::parse(reason).map_or(1, revocation::Reason::severity)
}

/// Revocations in force: most severe reason first (keyCompromise, cACompromise), then
/// certificates that signed a current file, then the newest.
pub async fn in_force(state: &AppState) -> Result<RevocationFeed, Error> {
    let mut certs = state.store.active_revocations().await?;
    certs.sort_by(|a, b| {
        severity(&a.reason)
            .cmp(&severity(&b.reason))
            .then(b.currently_active.cmp(&a.currently_active))
            .then(b.revoked_at.cmp(&a.revoked_at))
            .then(a.thumbprint.cmp(&b.thumbprint))
    });
    Ok(RevocationFeed {
        total: certs.len() as u64,
        revoked_certs: certs.into_iter().map(RevokedCertJson::from).collect(),
    })
}
