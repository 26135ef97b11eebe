//! `knowngood admin`: accounts, keys, invites, imported records and the JWT key.

use anyhow::{Context, Result, bail};
use model::{Role, TenantKind, Tier};
use store::NewApiKey;

use super::{load_secrets, with_store};
use crate::config::{CommonArgs, Config};
use crate::secrets;

/// `admin bootstrap`: the platform tenant and its platform_owner key, printed once.
pub(crate) async fn bootstrap(common: &CommonArgs) -> Result<()> {
    let key = create_tenant(
        &Config::resolve(common, None)?,
        "platform",
        TenantKind::Platform,
        Tier::Enterprise,
        Role::PlatformOwner,
    )
    .await
    .map_err(|e| match e.downcast_ref::<model::Error>() {
        Some(model::Error::Conflict(_)) => {
            anyhow::anyhow!("already bootstrapped: the platform tenant exists")
        }
        _ => e,
    })?;
    println!("{key}");
    Ok(())
}

/// `admin create-account`: a customer account; its first key is printed once.
pub(crate) async fn create_account(
    common: &CommonArgs,
    team: &str,
    tier: &str,
    role: &str,
) -> Result<()> {
    let tier: Tier = tier.parse()?;
    let role: Role = role.parse()?;
    if role.is_platform() {
        bail!(
            "{role} is a platform role; customer accounts take analyst, auditor or account_admin"
        );
    }
    let key = create_tenant(
        &Config::resolve(common, None)?,
        team,
        TenantKind::Customer,
        tier,
        role,
    )
    .await?;
    println!("{key}");
    Ok(())
}

/// `admin add-key`: another key for an existing account, printed once.
pub(crate) async fn add_key(
    common: &CommonArgs,
    team: &str,
    role: &str,
    label: Option<String>,
) -> Result<()> {
    let role: Role = role.parse()?;
    let key = issue_key(&Config::resolve(common, None)?, team, role, label).await?;
    println!("{key}");
    Ok(())
}

/// `admin invite`: the code on stdout, what it is for and where it is redeemed on stderr.
pub(crate) async fn invite(
    common: &CommonArgs,
    team: &str,
    role: &str,
    name: &str,
    contact: &str,
) -> Result<()> {
    let role: Role = role.parse()?;
    let config = Config::resolve(common, None)?;
    let invite = create_invite(&config, team, role, name, contact).await?;
    // The configured console origin; on the default (any port on localhost) the
    // path alone.
    let rp = &config.settings.relying_party;
    let page = if rp.any_port {
        "/console/invite".to_string()
    } else {
        format!("{}console/invite", rp.origin)
    };
    println!("{}", invite.code);
    eprintln!(
        "invite {} for {name} ({role}) in {team}, valid until {}; they redeem the code at {page}",
        invite.invite_id,
        model::record::rfc3339(invite.expires_at)
    );
    Ok(())
}

/// `admin import-records`: the whole file is checked before the database is touched.
pub(crate) async fn import_records(common: &CommonArgs, file: &std::path::Path) -> Result<()> {
    let config = Config::resolve(common, None)?;
    let secrets = load_secrets(&config)?;
    let records = read_records(file)?;
    let (inserted, unchanged) = with_store(&config, &secrets, async |store| {
        record_all(store.as_ref(), records).await
    })
    .await?;
    println!("{inserted} recorded, {unchanged} unchanged");
    Ok(())
}

/// `admin rotate-jwt-key`: a new signing key in the data directory.
pub(crate) fn rotate_jwt_key(common: &CommonArgs) -> Result<()> {
    let config = Config::resolve(common, None)?;
    if config.secrets.jwt_private_key_pem.is_some() {
        bail!(
            "the JWT key comes from the configuration; rotate it there (move the old key to jwt_retired_keys_pem)"
        );
    }
    let path = secrets::rotate_jwt_key(&config.data_dir)?;
    eprintln!("new JWT signing key at {path}; restart the replicas to sign with it");
    Ok(())
}

/// Every line of a JSON Lines file, parsed and validated; an error names the line. With
/// [`record_all`] the import is all or nothing, and a line already recorded (same file
/// of the same version) counts as unchanged, so a re-run, even after an interrupted one,
/// records nothing twice.
fn read_records(file: &std::path::Path) -> Result<Vec<model::NewRecord>> {
    use std::io::BufRead;
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
        ))
    };
    let mut records = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("line {}: cannot read", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: model::NewRecord =
            serde_json::from_str(&line).with_context(|| format!("line {}: not a record", n + 1))?;
        let record = record
            .validate()
            .with_context(|| format!("line {}: invalid record", n + 1))?;
        records.push(record);
    }
    Ok(records)
}

/// Records the validated lines of a file in one transaction: (recorded, unchanged).
async fn record_all(
    store: &dyn store::Store,
    records: Vec<model::NewRecord>,
) -> Result<(u64, u64)> {
    let outcomes = store
        .record_many(records, chrono::Utc::now())
        .await
        .context("recording (nothing was recorded)")?;
    let inserted = outcomes
        .iter()
        .filter(|o| matches!(o, store::RecordOutcome::Inserted { .. }))
        .count();
    let unchanged = outcomes.len() - inserted;
    Ok((inserted as u64, unchanged as u64))
}

/// Creates a tenant with its first key and returns the key, which exists nowhere else.
async fn create_tenant(
    config: &Config,
    team: &str,
    kind: TenantKind,
    tier: Tier,
    role: Role,
) -> Result<String> {
    let secrets = load_secrets(config)?;
    let issued = with_store(config, &secrets, async |store| {
        let issued = auth::KeyHasher::new(&secrets.hmac).issue(team)?;
        store
            .create_tenant_with_key(
                team,
                kind,
                tier,
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: team.to_string(),
                    key_hash: issued.key_hash.clone(),
                    role,
                    label: format!("first {role} key"),
                },
                chrono::Utc::now(),
            )
            .await?;
        Ok(issued)
    })
    .await?;
    tracing::info!(team, key_id = %issued.key_id, %role, %tier, "created account");
    Ok(issued.key)
}

/// Issues a key of `role` to the existing account `team`, audited as done from the
/// command line; returns the key.
async fn issue_key(
    config: &Config,
    team: &str,
    role: Role,
    label: Option<String>,
) -> Result<String> {
    auth::validate_team_id(team)?;
    let secrets = load_secrets(config)?;
    with_store(config, &secrets, async |store| {
        let tenant = store.tenant(team).await?.ok_or_else(|| {
            anyhow::anyhow!("no account {team:?}: create it with `knowngood admin create-account`")
        })?;
        if role.is_platform() != (tenant.kind == TenantKind::Platform) {
            bail!(
                "{role} is not a role for {} account {team:?}",
                if tenant.kind == TenantKind::Platform {
                    "the platform"
                } else {
                    "a customer"
                }
            );
        }
        let issued = auth::KeyHasher::new(&secrets.hmac).issue(team)?;
        let now = chrono::Utc::now();
        store
            .insert_key(
                NewApiKey {
                    key_id: issued.key_id.clone(),
                    team_id: team.to_string(),
                    key_hash: issued.key_hash.clone(),
                    role,
                    label: label.unwrap_or_else(|| format!("{role} key")),
                },
                now,
            )
            .await?;
        let detail = format!("knowngood admin add-key --role {role}");
        audit(
            store.as_ref(),
            now,
            team,
            "key.issue",
            &issued.key_id,
            detail,
        )
        .await?;
        tracing::info!(team, key_id = %issued.key_id, %role, "issued a key");
        Ok(issued.key)
    })
    .await
}

/// The audit row of a change made from the command line.
async fn audit(
    store: &dyn store::Store,
    at: chrono::DateTime<chrono::Utc>,
    team: &str,
    action: &str,
    target: &str,
    detail: String,
) -> Result<()> {
    let entry = store::admin::AuditEntry {
        at,
        actor: "command-line".into(),
        team_id: team.to_string(),
        action: action.into(),
        target: target.into(),
        outcome: "ok".into(),
        detail,
    };
    store.append_audit(&entry).await?;
    Ok(())
}

/// An invite into `team`'s account, from the command line (audited as such).
async fn create_invite(
    config: &Config,
    team: &str,
    role: Role,
    name: &str,
    contact: &str,
) -> Result<auth::users::NewInviteCode> {
    auth::validate_team_id(team)?;
    if role.is_platform() {
        bail!("people hold customer roles only; platform roles are for staff keys");
    }
    let secrets = load_secrets(config)?;
    with_store(config, &secrets, async |store| {
        let tenant = store.tenant(team).await?.ok_or_else(|| {
            anyhow::anyhow!("no account {team:?}: create it with `knowngood admin create-account`")
        })?;
        if tenant.kind == TenantKind::Platform {
            bail!("{team:?} is the platform account; invite people into customer accounts");
        }
        let now = chrono::Utc::now();
        let invite = auth::users::create_invite(
            store.as_ref(),
            &auth::KeyHasher::new(&secrets.hmac),
            auth::users::InviteRequest {
                team_id: team,
                role,
                display_name: name,
                contact,
                created_by: "command-line",
            },
            now,
        )
        .await?;
        let detail = format!("knowngood admin invite --role {role}");
        audit(
            store.as_ref(),
            now,
            team,
            "user.invite",
            &invite.invite_id,
            detail,
        )
        .await?;
        Ok(invite)
    })
    .await
}
