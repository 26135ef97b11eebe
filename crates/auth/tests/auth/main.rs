//! The auth crate against real services: the Redis rate limiter falling back to per-replica
//! limits when its Redis goes away, and returning to shared limits when it is back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use auth::limits::{Limiter, RedisLimiter};
use model::Error;

/// A private redis-server on a free port, killed on drop.
struct PrivateRedis {
    child: Child,
    port: u16,
}

impl PrivateRedis {
    fn start(port: u16) -> Option<PrivateRedis> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        Some(PrivateRedis { child, port })
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn connect(port: u16) -> RedisLimiter {
    for _ in 0..50 {
        if let Ok(l) = RedisLimiter::connect(&format!("redis://127.0.0.1:{port}")).await {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("redis-server on {port} never answered");
}

/// Redis stopped mid-use: checks never fail, the limit still holds on this replica, each
/// fallback is counted; with Redis back, limits are shared again.
#[tokio::test]
async fn redis_down_falls_back_to_per_replica_limits() {
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        eprintln!("SKIPPED: no redis-server binary");
        return;
    };
    let limiter = Limiter::Redis(connect(redis.port).await);
    let now = 1_000_000;
    for _ in 0..3 {
        limiter.check("key:a:api", 3, now).await.unwrap();
    }
    assert!(matches!(
        limiter.check("key:a:api", 3, now).await,
        Err(Error::RateLimited { .. })
    ));
    assert_eq!(limiter.fallbacks(), Some(0));
    assert_eq!(limiter.redis_up().await, Some(true));

    drop(redis);
    let began = std::time::Instant::now();
    for _ in 0..3 {
        limiter.check("key:b:api", 3, now).await.unwrap();
    }
    match limiter.check("key:b:api", 3, now).await {
        Err(Error::RateLimited { retry_after_secs }) => assert!(retry_after_secs >= 1),
        other => panic!("the limit must hold without Redis: {other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "fallback is fast: {:?}",
        began.elapsed()
    );
    assert_eq!(limiter.fallbacks(), Some(4));
    assert_eq!(limiter.redis_up().await, Some(false));

    // While Redis stays down, requests do not wait for it one by one: after a failure the
    // replica's own limits answer at once for a while, then one check tries Redis again.
    let began = std::time::Instant::now();
    for i in 0..200 {
        limiter
            .check(&format!("key:d{i}:api"), 3, now)
            .await
            .unwrap();
    }
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "200 checks without Redis took {:?}",
        began.elapsed()
    );
    assert_eq!(limiter.fallbacks(), Some(204));

    // Redis back on the same port: shared limits again (a fresh bucket in Redis).
    let _redis = PrivateRedis::start(port).unwrap();
    let mut back = false;
    for _ in 0..50 {
        if limiter.redis_up().await == Some(true) {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "the connection manager reconnects");
    // Past the pause after the last failure, checks ask Redis again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = limiter.fallbacks().unwrap();
    limiter.check("key:c:api", 3, now).await.unwrap();
    assert_eq!(limiter.fallbacks(), Some(before), "answered by Redis");
}
