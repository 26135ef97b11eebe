//! One function per subcommand. Those that use the database reach it through
//! [`with_store`], which closes it whatever the command's outcome.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::config::{self, Config};
use crate::secrets::Secrets;

pub(crate) mod admin;
pub(crate) mod data;
pub(crate) mod ingest;
pub(crate) mod serve;

/// The data directory's secrets, generated on first use.
fn load_secrets(config: &Config) -> Result<Secrets> {
    Secrets::load_or_generate(&config.data_dir, &config.secrets)
}

/// Opens the configured database, runs `work` with it and closes it, whether `work`
/// succeeded or not.
async fn with_store<T>(
    config: &Config,
    secrets: &Secrets,
    work: impl AsyncFnOnce(&Arc<dyn store::Store>) -> Result<T>,
) -> Result<T> {
    let store = open_store(config, secrets).await?;
    let outcome = work(&store).await;
    store.close().await;
    outcome
}

async fn open_store(config: &Config, secrets: &Secrets) -> Result<Arc<dyn store::Store>> {
    store::open_with(
        &config.database_url,
        model::RecordSigner::new(&secrets.hmac),
        config.database,
    )
    .await
    .with_context(|| {
        format!(
            "opening the {} database {}",
            backend_name(&config.database_url),
            config::redact_url(&config.database_url)
        )
    })
}

fn backend_name(url: &str) -> &str {
    url.split(':').next().unwrap_or("")
}
