//! Usage counting and monthly quotas without a database write per request.
//!
//! Each authenticated request adds one to an in-memory counter per (account, day, route).
//! A background task flushes the counters to the store every half second, and the
//! server flushes once more on a clean shutdown, so a crash loses at most one interval.
//! Quota checks read a per-account month total loaded once from the store and kept current
//! by local counts and periodic refreshes (which also pick up other replicas' counts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use model::{Error, Tier};
use store::Store;
use store::admin::UsageDelta;

/// Monthly request quotas per tier; `None` = unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    pub free: Option<u64>,
    pub basic: Option<u64>,
    pub teams: Option<u64>,
    pub enterprise: Option<u64>,
}

impl Default for Quotas {
    /// The documented values; `free` reaches only token and usage routes and gets basic's quota.
    fn default() -> Self {
        Self {
            free: Some(50_000),
            basic: Some(50_000),
            teams: Some(500_000),
            enterprise: None,
        }
    }
}

impl Quotas {
    pub fn for_tier(&self, tier: Tier) -> Option<u64> {
        match tier {
            Tier::Free => self.free,
            Tier::Basic => self.basic,
            Tier::Teams => self.teams,
            Tier::Enterprise => self.enterprise,
        }
    }
}

/// First day of the UTC month containing `day`.
pub fn month_start(day: NaiveDate) -> NaiveDate {
    day.with_day(1).unwrap_or(day)
}

/// First day of the next UTC month.
pub fn next_month(day: NaiveDate) -> NaiveDate {
    let start = month_start(day);
    let (y, m) = if start.month() == 12 {
        (start.year() + 1, 1)
    } else {
        (start.year(), start.month() + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1).unwrap_or(start)
}

#[derive(Clone, Copy)]
struct MonthTotal {
    month: NaiveDate,
    /// Counted in the store when last read, plus what this process flushed since.
    stored: u64,
}

pub struct Usage {
    store: Arc<dyn Store>,
    quotas: Quotas,
    pending: Mutex<HashMap<(String, NaiveDate, String), u64>>,
    totals: Mutex<HashMap<String, MonthTotal>>,
}

impl Usage {
    pub fn new(store: Arc<dyn Store>, quotas: Quotas) -> Self {
        Self {
            store,
            quotas,
            pending: Mutex::default(),
            totals: Mutex::default(),
        }
    }

    pub fn quota(&self, tier: Tier) -> Option<u64> {
        self.quotas.for_tier(tier)
    }

    /// Counts one request.
    pub fn record(&self, team_id: &str, endpoint: &str, now: DateTime<Utc>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        *pending
            .entry((team_id.to_string(), now.date_naive(), endpoint.to_string()))
            .or_default() += 1;
    }

    fn pending_in_month(&self, team_id: &str, month: NaiveDate) -> u64 {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending
            .iter()
            .filter(|((team, day, _), _)| team == team_id && month_start(*day) == month)
            .map(|(_, n)| *n)
            .sum()
    }

    async fn stored_total(&self, team_id: &str, month: NaiveDate) -> Result<u64, Error> {
        let cached = {
            let totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
            totals.get(team_id).copied()
        };
        if let Some(t) = cached.filter(|t| t.month == month) {
            return Ok(t.stored);
        }
        let stored = self.read_month(team_id, month).await?;
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        totals.insert(team_id.to_string(), MonthTotal { month, stored });
        Ok(stored)
    }

    async fn read_month(&self, team_id: &str, month: NaiveDate) -> Result<u64, Error> {
        let last = next_month(month) - Duration::days(1);
        Ok(self
            .store
            .usage_by_endpoint(team_id, month, last)
            .await?
            .iter()
            .map(|(_, n)| n)
            .sum())
    }

    /// Requests of this account this month, counted and pending.
    pub async fn month_total(&self, team_id: &str, now: DateTime<Utc>) -> Result<u64, Error> {
        let month = month_start(now.date_naive());
        Ok(self.stored_total(team_id, month).await? + self.pending_in_month(team_id, month))
    }

    /// 429 `QUOTA_EXCEEDED` once the month's requests reached the tier's quota. Called
    /// before the request is counted, so a refused request costs nothing.
    pub async fn check_quota(
        &self,
        team_id: &str,
        tier: Tier,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let Some(quota) = self.quotas.for_tier(tier) else {
            return Ok(());
        };
        if self.month_total(team_id, now).await? >= quota {
            let next = Utc
                .from_utc_datetime(&next_month(now.date_naive()).and_time(chrono::NaiveTime::MIN));
            let secs = (next - now).num_seconds().max(1);
            return Err(Error::QuotaExceeded {
                retry_after_secs: u64::try_from(secs).unwrap_or(1),
            });
        }
        Ok(())
    }

    /// Writes pending counts to the store in one transaction. On failure the counts are
    /// put back and retried at the next flush.
    pub async fn flush(&self) -> Result<(), Error> {
        let taken: HashMap<(String, NaiveDate, String), u64> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *pending)
        };
        if taken.is_empty() {
            return Ok(());
        }
        let deltas: Vec<UsageDelta> = taken
            .iter()
            .map(|((team_id, day, endpoint), count)| UsageDelta {
                team_id: team_id.clone(),
                day: *day,
                endpoint: endpoint.clone(),
                count: *count,
            })
            .collect();
        if let Err(e) = self.store.add_usage(&deltas).await {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (k, n) in taken {
                *pending.entry(k).or_default() += n;
            }
            return Err(e);
        }
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        for d in &deltas {
            if let Some(t) = totals.get_mut(&d.team_id)
                && t.month == month_start(d.day)
            {
                t.stored += d.count;
            }
        }
        Ok(())
    }

    /// Re-reads the month totals of the accounts this process has seen, to take in other
    /// replicas' requests.
    pub async fn refresh_totals(&self) -> Result<(), Error> {
        let known: Vec<(String, NaiveDate)> = {
            let totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
            totals.iter().map(|(k, t)| (k.clone(), t.month)).collect()
        };
        for (team_id, month) in known {
            let stored = self.read_month(&team_id, month).await?;
            let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
            totals.insert(team_id, MonthTotal { month, stored });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_roll_over_in_december() {
        let d = NaiveDate::from_ymd_opt(2026, 12, 15).unwrap();
        assert_eq!(
            month_start(d),
            NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
        );
        assert_eq!(next_month(d), NaiveDate::from_ymd_opt(2027, 1, 1).unwrap());
    }
}
