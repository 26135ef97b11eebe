//! `knowngood serve`: the HTTP service until a shutdown signal, then a graceful drain.

use std::sync::Arc;

use anyhow::{Context, Result};
use model::SystemClock;

use super::data::refreshed_popular_lists;
use super::{load_secrets, with_store};
use crate::config::{self, CommonArgs, Config};
use crate::secrets::Secrets;

/// `serve`: the HTTP service, its metrics listener and its upkeep.
pub(crate) async fn serve(common: &CommonArgs, listen: Option<&str>) -> Result<()> {
    let config = Config::resolve(common, listen)?;
    let secrets = load_secrets(&config)?;
    with_store(&config, &secrets, async |store| {
        serve_with_store(&config, &secrets, store).await
    })
    .await
}

/// Serves until SIGINT or SIGTERM, then drains and stops the upkeep before the store closes.
async fn serve_with_store(
    config: &Config,
    secrets: &Secrets,
    store: &Arc<dyn store::Store>,
) -> Result<()> {
    let clock: Arc<dyn model::Clock> = Arc::new(SystemClock);
    let credentials = auth::credentials::Credentials::new(
        store.clone(),
        auth::KeyHasher::new(&secrets.hmac),
        auth::jwt::JwtKeys::from_pkcs8(&secrets.jwt_rsa_pkcs8)?,
        clock.clone(),
    );
    let limiter = match &config.redis_url {
        Some(url) => auth::limits::Limiter::Redis(auth::limits::RedisLimiter::connect(url).await?),
        None => auth::limits::Limiter::Local(Default::default()),
    };
    let state = server::AppState::new(
        store.clone(),
        credentials,
        limiter,
        clock,
        config.settings.clone(),
        jobs::LogKey::new(&secrets.log_ed25519),
    );
    let corpus_root = config.corpus_dir.clone();
    let corpus = tokio::task::spawn_blocking(move || corpus::Corpus::open(&corpus_root))
        .await?
        .context("opening the reference corpus")?;
    if let Some(info) = corpus.info() {
        tracing::info!(generation = %info.generation, entries = info.entries, "reference corpus loaded");
    }
    let state = state
        .with_corpus(Arc::new(corpus))
        .with_vendor_generations(config.data_dir.join("vendor-generations"))
        .with_popular_lists(refreshed_popular_lists(&config.data_dir)?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(
        listen = %listener.local_addr()?,
        database = store.backend(),
        database_url = %config::redact_url(&config.database_url),
        redis_url = %config
            .redis_url
            .as_deref()
            .map_or_else(|| "none".to_string(), config::redact_url),
        data_dir = %config.data_dir.display(),
        transparency_log_key = %secrets.log_public_key(),
        "knowngood serving"
    );
    if let Some(address) = config.metrics_listen {
        let metrics = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the metrics listener {address}"))?;
        tracing::info!(listen = %metrics.local_addr()?, "metrics served at /metrics");
        // Ends with the process; scrapes hold no state worth draining.
        tokio::spawn(server::metrics::serve(metrics, state.clone()));
    }
    let (stop_upkeep, upkeep_stopped) = tokio::sync::oneshot::channel::<()>();
    let upkeep = tokio::spawn(server::maintain(state.clone(), async {
        let _ = upkeep_stopped.await;
    }));
    let settings = Arc::clone(&state.settings);
    let draining = Arc::clone(&state.draining);
    let grace = settings.connections.drain_grace;
    let stop = async move {
        shutdown_signal().await;
        draining.store(true, std::sync::atomic::Ordering::Release);
        if !grace.is_zero() {
            tracing::info!(
                seconds = grace.as_secs(),
                "draining: /readyz answers 503 until the listener closes"
            );
            tokio::time::sleep(grace).await;
        }
    };
    server::serve_with(listener, server::router(state), &settings, stop).await?;
    tracing::info!("draining finished; writing usage counts and closing the database");
    let _ = stop_upkeep.send(());
    let _ = upkeep.await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                let _ = interrupt.await;
                return;
            }
        };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}
