//! The accept loop: HTTP/1.1 connections with a header-read timeout, a deadline for reading
//! a request body (408), and caps on connections per client address and in total, so slow
//! or numerous clients cannot hold the server's sockets and memory.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use crate::Settings;
use crate::bare_refusals::JsonRefusals;
use crate::error::HttpRefusal;

/// Limits on client connections.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Time a client has to send a request's header block, also the idle time allowed
    /// between requests on a kept-alive connection.
    pub header_read_timeout: Duration,
    /// Time a client has to send a whole request body once the server starts reading it;
    /// answered 408 beyond.
    pub body_read_timeout: Duration,
    /// Open connections per client address (IPv6: per /64); trusted proxies are exempt.
    pub max_per_address: usize,
    /// Open connections in all.
    pub max_total: usize,
    /// After a stop signal, time `/readyz` answers 503 while requests are still served,
    /// so a load balancer stops sending new ones before the listener closes.
    pub drain_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_per_address: 256,
            max_total: 10_000,
            drain_grace: Duration::ZERO,
        }
    }
}

/// Largest request head hyper buffers; a head beyond it is answered 431 by hyper itself
/// (given its JSON body by `bare_refusals`). Smaller excesses get JSON answers from
/// `headers::head_limits`.
const MAX_HEAD_BUFFER: usize = 64 * 1024;

/// Refusals closer together than this are one burst, logged once.
const BURST_GAP: Duration = Duration::from_secs(10);

/// Serves `app` until `shutdown` resolves, then lets in-flight requests finish. Connection
/// limits come from `settings.connections`; `settings.trusted_proxies` are exempt from the
/// per-address cap (every client behind them shares their address).
pub fn serve_with(
    listener: TcpListener,
    app: Router,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
    let limits = settings.connections.clone();
    let gate = Arc::new(Gate::new(&limits, &settings.trusted_proxies));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BUFFER);
    accept_loop(listener, app, gate, builder, shutdown)
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    gate: Arc<Gate>,
    builder: hyper::server::conn::http1::Builder,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a receiver; `closed` resolves when the last one ends.
    let (done_tx, done_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait a
                    // moment rather than spin.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(admitted) = gate.admit(peer.ip()) else {
            drop(stream);
            continue;
        };
        let service = app
            .clone()
            .map_request(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            });
        let connection = builder.serve_connection(
            TokioIo::new(JsonRefusals::new(stream)),
            TowerToHyperService::new(service),
        );
        let mut stop = stop_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, %peer, "connection ended with an error");
                    }
                }
                _ = async { stop.wait_for(|stop| *stop).await.map(|_| ()) } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(admitted);
            drop(done);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

/// Counts open connections.
struct Gate {
    max_per_address: usize,
    max_total: usize,
    exempt: Vec<IpAddr>,
    open: Mutex<Open>,
    last_refusal: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Open {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// An admitted connection; counted until dropped.
struct Admitted {
    gate: Arc<Gate>,
    /// None for an address exempt from the per-address cap.
    address: Option<IpAddr>,
}

impl Gate {
    fn new(limits: &ConnectionLimits, exempt: &[IpAddr]) -> Self {
        Self {
            max_per_address: limits.max_per_address,
            max_total: limits.max_total,
            exempt: exempt.iter().map(|ip| ip.to_canonical()).collect(),
            open: Mutex::default(),
            last_refusal: Mutex::default(),
        }
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Admitted> {
        let peer = peer.to_canonical();
        let address = (!self.exempt.contains(&peer)).then(|| address_key(peer));
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = if open.total >= self.max_total {
            Some("total connection limit reached")
        } else if address
            .is_some_and(|a| open.per_address.get(&a).copied().unwrap_or(0) >= self.max_per_address)
        {
            Some("per-address connection limit reached")
        } else {
            None
        };
        if let Some(reason) = refused {
            drop(open);
            self.log_refusal(reason, peer);
            return None;
        }
        open.total += 1;
        if let Some(a) = address {
            *open.per_address.entry(a).or_default() += 1;
        }
        Some(Admitted {
            gate: Arc::clone(self),
            address,
        })
    }

    /// Logs the first refusal of a burst only: a flood must not flood the log too.
    fn log_refusal(&self, reason: &'static str, peer: IpAddr) {
        let now = Instant::now();
        let mut last = self
            .last_refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let quiet = last.is_none_or(|t| now.duration_since(t) > BURST_GAP);
        *last = Some(now);
        if quiet {
            tracing::warn!(
                %peer,
                reason,
                max_per_address = self.max_per_address,
                max_total = self.max_total,
                "refusing connections (further refusals in this burst are not logged)"
            );
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self
            .gate
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(a) = self.address
            && let Some(n) = open.per_address.get_mut(&a)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_address.remove(&a);
            }
        }
    }
}

/// The unit a per-address cap counts: the address, or its /64 for IPv6 (one host usually
/// holds a whole /64).
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
    }
}

/// Middleware: the request body must arrive within `timeout` of the first read, whatever
/// its pace (a per-read timeout would let one byte a second through); 408 beyond.
pub(crate) async fn body_deadline(
    State(timeout): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let expired = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            timeout,
            sleep: None,
            expired: Arc::clone(&expired),
        })
    });
    let response = next.run(request).await;
    if !expired.load(Ordering::Acquire) {
        return response;
    }
    // Whatever the handler made of the failed read, the cause was the client's pace.
    let mut response = HttpRefusal::RequestTimeout.response(format!(
        "the request body did not arrive within {} s",
        timeout.as_secs_f64()
    ));
    // The rest of the body is unread: the connection cannot carry another request.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A body that fails once `timeout` has passed since it was first read.
struct DeadlineBody {
    inner: Body,
    timeout: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
}

#[derive(Debug)]
struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let timeout = this.timeout;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        // What has arrived is delivered even at the deadline.
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if sleep.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(per_address: usize, total: usize, exempt: &[IpAddr]) -> Arc<Gate> {
        Arc::new(Gate::new(
            &ConnectionLimits {
                max_per_address: per_address,
                max_total: total,
                ..ConnectionLimits::default()
            },
            exempt,
        ))
    }

    #[test]
    fn caps_count_open_connections_per_address_and_in_all() {
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let g = gate(2, 3, &[]);
        let first = g.admit(a).unwrap();
        let _second = g.admit(a).unwrap();
        assert!(g.admit(a).is_none(), "third from one address");
        let _third = g.admit(b).unwrap();
        assert!(g.admit(b).is_none(), "fourth in all");
        drop(first);
        assert!(g.admit(a).is_some(), "a closed connection frees its place");
    }

    #[test]
    fn proxies_are_exempt_and_ipv6_counts_per_64() {
        let proxy: IpAddr = "10.0.0.10".parse().unwrap();
        let g = gate(1, 100, &[proxy]);
        let held: Vec<_> = (0..5).map(|_| g.admit(proxy).unwrap()).collect();
        assert_eq!(held.len(), 5);
        let _one = g.admit("2001:db8::1".parse().unwrap()).unwrap();
        assert!(g.admit("2001:db8::ffff:2".parse().unwrap()).is_none());
        assert!(g.admit("2001:db8:0:1::1".parse().unwrap()).is_some());
        // IPv4-mapped IPv6 is the IPv4 address.
        let _v4 = g.admit("192.0.2.9".parse().unwrap()).unwrap();
        assert!(g.admit("::ffff:192.0.2.9".parse().unwrap()).is_none());
    }
}
