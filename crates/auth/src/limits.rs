//! Per-minute rate limits with GCRA (the generic cell rate algorithm): each bucket keeps
//! one "theoretical arrival time"; a request is allowed while that time is at most one
//! minute's worth of requests ahead of now. The in-process limiter serves one replica; with
//! Redis configured the same algorithm runs as a Lua script on Redis time, so every replica
//! shares the limits.

use std::collections::HashMap;
use std::sync::Mutex;

use model::Error;

/// Milliseconds of "credit" one request costs at `per_minute`.
fn interval_ms(per_minute: u32) -> i64 {
    60_000 / i64::from(per_minute.max(1))
}

/// Credit a bucket can hold: a whole minute's worth. (Computed as `interval × limit` it
/// dropped to 0 above 60,000 a minute, where the interval rounds to 0 ms, and every check
/// whose clock read a millisecond behind a concurrent one's was refused.)
const BURST_MS: i64 = 60_000;

/// The GCRA step: given the stored arrival time, returns the new one or the wait in ms.
fn gcra(stored_tat: Option<i64>, now_ms: i64, per_minute: u32) -> Result<i64, i64> {
    let interval = interval_ms(per_minute);
    let burst = BURST_MS;
    let tat = stored_tat.unwrap_or(now_ms).max(now_ms);
    let new_tat = tat + interval;
    let allow_at = new_tat - burst;
    if allow_at > now_ms {
        Err(allow_at - now_ms)
    } else {
        Ok(new_tat)
    }
}

fn limited(wait_ms: i64) -> Error {
    Error::RateLimited {
        retry_after_secs: u64::try_from((wait_ms + 999) / 1000).unwrap_or(1).max(1),
    }
}

/// Rate limits of one process.
#[derive(Default)]
pub struct LocalLimiter {
    buckets: Mutex<HashMap<String, i64>>,
}

impl LocalLimiter {
    pub fn check(&self, bucket: &str, per_minute: u32, now_ms: i64) -> Result<(), Error> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        match gcra(buckets.get(bucket).copied(), now_ms, per_minute) {
            Ok(tat) => {
                buckets.insert(bucket.to_string(), tat);
                Ok(())
            }
            Err(wait) => Err(limited(wait)),
        }
    }

    /// Drops buckets whose credit has fully returned; call on a timer.
    pub fn prune(&self, now_ms: i64) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.retain(|_, tat| *tat > now_ms);
    }
}

const REDIS_GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - burst
if allow_at > now then return allow_at - now end
redis.call('SET', KEYS[1], new_tat, 'PX', new_tat - now + 1000)
return 0
"#;

/// Longest wait for Redis before a request falls back to this replica's own limits.
const REDIS_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(250);

/// After Redis failed, checks use this replica's limits without asking Redis for this long;
/// then one check tries Redis again. (Asking on every request made each one wait for the
/// reconnection, up to `REDIS_TIMEOUT`, for as long as Redis was down.)
const REDIS_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Rate limits shared through Redis. While Redis cannot answer, each replica applies the
/// limits on its own (a client may then get up to N times the limit across N replicas,
/// never an error), logs a warning at most every 10 s and counts the fallbacks.
pub struct RedisLimiter {
    connection: redis::aio::ConnectionManager,
    script: redis::Script,
    fallback: LocalLimiter,
    /// Checks answered by `fallback` because Redis failed or was too slow.
    pub fallbacks: std::sync::atomic::AtomicU64,
    last_warning_ms: std::sync::atomic::AtomicI64,
    /// Until when checks skip Redis (after a failure), as milliseconds since `started`.
    skip_redis_until_ms: std::sync::atomic::AtomicU64,
    started: std::time::Instant,
}

impl RedisLimiter {
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url)
            .map_err(|e| Error::bad_request(format!("invalid Redis URL: {e}")))?;
        let connection = redis::aio::ConnectionManager::new(client)
            .await
            .map_err(|e| Error::internal_caused("cannot reach Redis", e))?;
        Ok(Self {
            connection,
            script: redis::Script::new(REDIS_GCRA),
            fallback: LocalLimiter::default(),
            fallbacks: Default::default(),
            last_warning_ms: Default::default(),
            skip_redis_until_ms: Default::default(),
            started: std::time::Instant::now(),
        })
    }

    /// Milliseconds since this limiter was made (a monotonic clock, whatever `now_ms` is).
    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub async fn check(&self, bucket: &str, per_minute: u32, now_ms: i64) -> Result<(), Error> {
        if self.elapsed_ms()
            < self
                .skip_redis_until_ms
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.fallbacks
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return self.fallback.check(bucket, per_minute, now_ms);
        }
        let interval = interval_ms(per_minute);
        let burst = BURST_MS;
        let mut connection = self.connection.clone();
        let key = format!("knowngood:rl:{bucket}");
        let mut invocation = self.script.key(key);
        invocation.arg(interval).arg(burst);
        let shared = tokio::time::timeout(
            REDIS_TIMEOUT,
            invocation.invoke_async::<i64>(&mut connection),
        );
        match shared.await {
            Ok(Ok(wait)) if wait > 0 => Err(limited(wait)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => self.fall_back(bucket, per_minute, now_ms, &e.to_string()),
            Err(_) => self.fall_back(bucket, per_minute, now_ms, "no answer within 250 ms"),
        }
    }

    fn fall_back(
        &self,
        bucket: &str,
        per_minute: u32,
        now_ms: i64,
        why: &str,
    ) -> Result<(), Error> {
        use std::sync::atomic::Ordering::Relaxed;
        self.fallbacks.fetch_add(1, Relaxed);
        let retry = u64::try_from(REDIS_RETRY_AFTER.as_millis()).unwrap_or(u64::MAX);
        self.skip_redis_until_ms
            .store(self.elapsed_ms().saturating_add(retry), Relaxed);
        let last = self.last_warning_ms.load(Relaxed);
        if now_ms - last >= 10_000
            && self
                .last_warning_ms
                .compare_exchange(last, now_ms, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(error = %why, "Redis unavailable: applying rate limits per replica until it answers");
        }
        self.fallback.check(bucket, per_minute, now_ms)
    }
}

/// The limiter a server uses: in-process, or shared through Redis.
pub enum Limiter {
    Local(LocalLimiter),
    Redis(RedisLimiter),
}

impl Limiter {
    pub async fn check(&self, bucket: &str, per_minute: u32, now_ms: i64) -> Result<(), Error> {
        match self {
            Limiter::Local(l) => l.check(bucket, per_minute, now_ms),
            Limiter::Redis(r) => r.check(bucket, per_minute, now_ms).await,
        }
    }

    pub fn prune(&self, now_ms: i64) {
        match self {
            Limiter::Local(l) => l.prune(now_ms),
            Limiter::Redis(r) => r.fallback.prune(now_ms),
        }
    }

    /// Checks answered by this replica alone because Redis could not; None without Redis.
    pub fn fallbacks(&self) -> Option<u64> {
        match self {
            Limiter::Local(_) => None,
            Limiter::Redis(r) => Some(r.fallbacks.load(std::sync::atomic::Ordering::Relaxed)),
        }
    }

    /// Whether Redis answers a PING within half a second; None for the in-process limiter.
    pub async fn redis_up(&self) -> Option<bool> {
        let Limiter::Redis(r) = self else {
            return None;
        };
        let mut connection = r.connection.clone();
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut connection);
        Some(matches!(
            tokio::time::timeout(std::time::Duration::from_millis(500), ping).await,
            Ok(Ok(_))
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_limit_per_minute_then_says_when_to_retry() {
        let l = LocalLimiter::default();
        let t0 = 1_000_000;
        for _ in 0..10 {
            l.check("k", 10, t0).unwrap();
        }
        match l.check("k", 10, t0) {
            Err(Error::RateLimited { retry_after_secs }) => assert_eq!(retry_after_secs, 6),
            other => panic!("{other:?}"),
        }
        // Another bucket is independent; credit returns with time.
        l.check("other", 10, t0).unwrap();
        l.check("k", 10, t0 + 6_000).unwrap();
        assert!(l.check("k", 10, t0 + 6_000).is_err());
        l.prune(t0 + 120_000);
        assert!(l.buckets.lock().unwrap().is_empty());
    }

    #[test]
    fn limits_above_one_a_millisecond_tolerate_clocks_read_out_of_order() {
        // Concurrent requests read the clock before they take the lock: a check may come
        // with an instant a little older than the previous one's.
        let l = LocalLimiter::default();
        let t0 = 1_000_000;
        for i in 0..10_000 {
            l.check("k", 4_000_000_000, t0 + i % 3).unwrap();
            l.check("k", 4_000_000_000, t0 + 2 - i % 3).unwrap();
        }
        // A limit that divides a minute unevenly keeps its count.
        for _ in 0..7 {
            l.check("seven", 7, t0).unwrap();
        }
        assert!(l.check("seven", 7, t0).is_err());
    }
}
