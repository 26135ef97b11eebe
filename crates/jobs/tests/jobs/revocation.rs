//! The revocation check against a CA made here, its CRLs served on loopback: what it
//! records on the records and in the revocation history, and what it refuses.

use super::*;
use jobs::revocation::{CheckReport, RevocationOptions, check};
use model::{Arch, HashRecord};
use store::downloads::SigningCert;
use testkit::pki::{CrlServer, Leaf, RevocationReason, TestCa};

testkit::backend_tests!(
    a_listed_serial_revokes_every_record_it_signed,
    an_unlisted_serial_changes_nothing,
    a_hold_is_released_when_it_leaves_the_crl_or_is_removed,
    a_crl_signed_by_another_key_is_refused,
    a_crl_of_a_ca_without_crl_sign_is_refused,
    a_crl_number_going_backwards_is_refused,
    an_unreachable_ca_marks_nothing_until_it_is_back,
    an_unchanged_crl_is_confirmed_by_a_304,
    malformed_and_truncated_crls_are_refused,
    a_crl_over_the_size_cap_is_refused_while_it_streams,
    the_check_fetches_with_the_ingest_client_rules,
);

const NOW: &str = "2026-03-10T00:00:00Z";
const SERIAL: &[u8] = &[0x8a, 0x5e, 0x01];

fn now() -> DateTime<Utc> {
    t(NOW)
}

fn revoked_at() -> DateTime<Utc> {
    t("2026-03-09T12:00:00Z")
}

struct Pki {
    ca: TestCa,
    server: CrlServer,
    leaf: Leaf,
    /// The current record and a superseded one, both signed with `leaf`.
    records: Vec<String>,
    clock: Arc<FixedClock>,
    options: RevocationOptions,
}

impl Pki {
    async fn new(db: &Db, ca: TestCa) -> Self {
        let server = CrlServer::start().await;
        let leaf = ca.leaf("Example Signer", SERIAL, &server.url("/ca.crl"));
        let store = db.store.as_ref();
        let mut records = Vec::new();
        for (version, seed) in [("0.80", 1), ("0.81", 2)] {
            let mut r = testkit::putty(version, Arch::Amd64, seed);
            r.sig_signer = Some(leaf.subject.clone());
            r.sig_issuer = Some(leaf.issuer.clone());
            r.sig_serial = Some(leaf.serial.clone());
            r.sig_thumbprint = Some(leaf.thumbprint.clone());
            let id = match store.record(r, now()).await.unwrap() {
                store::RecordOutcome::Inserted { id, .. } => id,
                other => panic!("{other:?}"),
            };
            store.record_signed_by(&id, &leaf.thumbprint).await.unwrap();
            records.push(id);
        }
        store
            .signing_cert_seen(
                &SigningCert {
                    thumbprint: leaf.thumbprint.clone(),
                    signer: leaf.subject.clone(),
                    issuer: leaf.issuer.clone(),
                    serial: leaf.serial.clone(),
                    crl_urls: vec![server.url("/ca.crl")],
                    issuer_cert: Some(ca.der.clone()),
                },
                now(),
            )
            .await
            .unwrap();
        Self {
            ca,
            server,
            leaf,
            records,
            clock: Arc::new(FixedClock::new(now())),
            options: RevocationOptions {
                fetch_timeout: std::time::Duration::from_secs(20),
                client: Some(reqwest::Client::builder().no_proxy().build().unwrap()),
                ..RevocationOptions::default()
            },
        }
    }

    fn serve(&self, number: u64, revoked: &[(&[u8], Option<RevocationReason>)]) {
        let entries: Vec<_> = revoked
            .iter()
            .map(|(s, r)| (*s, revoked_at(), *r))
            .collect();
        let crl = self.ca.crl(
            number,
            self.clock.now() - chrono::Duration::hours(1),
            &entries,
        );
        self.server.set("/ca.crl", crl);
    }

    async fn check(&self, db: &Db, force: bool) -> CheckReport {
        check(
            db.store.as_ref(),
            self.clock.as_ref(),
            &self.options,
            &ingest::OutboundSettings::default(),
            force,
        )
        .await
        .unwrap()
    }

    async fn records(&self, db: &Db) -> Vec<HashRecord> {
        let mut out = Vec::new();
        for r in db.store.records_after(None, 100).await.unwrap() {
            if self.records.contains(&r.id) {
                out.push(r);
            }
        }
        assert_eq!(out.len(), 2);
        out
    }

    async fn last_error(&self, db: &Db) -> String {
        let cache = db
            .store
            .crl_cache(&self.server.url("/ca.crl"))
            .await
            .unwrap()
            .unwrap();
        cache.last_error.unwrap_or_default()
    }

    async fn assert_not_revoked(&self, db: &Db) {
        for r in self.records(db).await {
            assert_eq!(r.cert_revoked_at, None, "{}", r.id);
            assert!(r.integrity_ok);
        }
        assert!(db.store.active_revocations().await.unwrap().is_empty());
    }
}

async fn a_listed_serial_revokes_every_record_it_signed(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Revoking CA")).await;
    // Listed with a sign byte the CA's DER needs: compared as unsigned integers.
    pki.serve(
        1,
        &[(
            &[0x00, 0x8a, 0x5e, 0x01],
            Some(RevocationReason::KeyCompromise),
        )],
    );
    let report = pki.check(&db, false).await;
    assert_eq!(
        (report.certificates, report.checked, report.newly_revoked),
        (1, 1, 1)
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for r in pki.records(&db).await {
        assert_eq!(
            r.cert_revoked_at,
            Some(revoked_at()),
            "current and superseded alike"
        );
        assert!(r.integrity_ok, "the record HMAC still verifies");
    }
    let cert = db
        .store
        .revocation(&pki.leaf.thumbprint)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cert.reason, "keyCompromise");
    assert_eq!(cert.check_method, "crl");
    assert_eq!(cert.revoked_at, revoked_at());
    assert_eq!(cert.affected_vendors, vec!["PuTTY".to_string()]);
    assert!(cert.currently_active);
    assert_eq!(cert.signer, pki.leaf.subject);

    // Before the CRL's nextUpdate nothing is fetched again, and nothing changes.
    let again = pki.check(&db, false).await;
    assert_eq!(
        (again.fetched, again.newly_revoked, again.checked),
        (0, 0, 1)
    );
    assert_eq!(pki.server.requests("/ca.crl").0, 1);
    assert_eq!(
        db.store
            .revocation_history(&store::revocations::RevocationQuery {
                limit: 50,
                ..Default::default()
            })
            .await
            .unwrap()
            .total,
        1
    );
}

async fn an_unlisted_serial_changes_nothing(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Quiet CA")).await;
    pki.serve(1, &[(&[0x01, 0x02], Some(RevocationReason::KeyCompromise))]);
    let report = pki.check(&db, false).await;
    assert_eq!(
        (report.checked, report.crls_good, report.newly_revoked),
        (1, 1, 0)
    );
    pki.assert_not_revoked(&db).await;
    let cache = db
        .store
        .crl_cache(&pki.server.url("/ca.crl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.last_good_at, Some(now()));
    assert_eq!(cache.crl_number.as_deref(), Some("01"));
    assert_eq!(cache.issuer, pki.ca.name);
}

async fn a_hold_is_released_when_it_leaves_the_crl_or_is_removed(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Holding CA")).await;
    pki.serve(1, &[(SERIAL, Some(RevocationReason::CertificateHold))]);
    assert_eq!(pki.check(&db, false).await.newly_revoked, 1);
    let held = db
        .store
        .revocation(&pki.leaf.thumbprint)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.reason, "certificateHold");
    assert!(
        pki.records(&db)
            .await
            .iter()
            .all(|r| r.cert_revoked_at.is_some())
    );

    // The next CRL no longer lists it: released, kept in the history.
    pki.clock.advance(chrono::Duration::hours(6));
    pki.serve(2, &[]);
    assert_eq!(pki.check(&db, true).await.released, 1);
    pki.assert_not_revoked(&db).await;
    let released = db
        .store
        .revocation(&pki.leaf.thumbprint)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(released.released_at, Some(pki.clock.now()));

    // Held again, then listed as removeFromCRL (a delta-style removal on a full CRL).
    pki.clock.advance(chrono::Duration::hours(6));
    pki.serve(3, &[(SERIAL, Some(RevocationReason::CertificateHold))]);
    assert_eq!(pki.check(&db, true).await.newly_revoked, 1);
    pki.clock.advance(chrono::Duration::hours(6));
    pki.serve(4, &[(SERIAL, Some(RevocationReason::RemoveFromCrl))]);
    assert_eq!(pki.check(&db, true).await.released, 1);
    pki.assert_not_revoked(&db).await;
    let history = db
        .store
        .revocation_history(&store::revocations::RevocationQuery {
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(history.total, 2);
    assert!(history.items.iter().all(|c| c.released_at.is_some()));
}

async fn a_crl_signed_by_another_key_is_refused(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Genuine CA")).await;
    let impostor = pki.ca.impostor();
    let crl = impostor.crl(
        1,
        now() - chrono::Duration::hours(1),
        &[(SERIAL, revoked_at(), None)],
    );
    pki.server.set("/ca.crl", crl);
    let report = pki.check(&db, false).await;
    assert_eq!(
        (report.checked, report.crls_good, report.newly_revoked),
        (0, 0, 0)
    );
    assert!(
        pki.last_error(&db).await.starts_with("unverified:"),
        "{}",
        pki.last_error(&db).await
    );
    pki.assert_not_revoked(&db).await;
}

async fn a_crl_of_a_ca_without_crl_sign_is_refused(db: Db) {
    let pki = Pki::new(&db, TestCa::without_crl_sign("Certificate-only CA")).await;
    pki.serve(1, &[(SERIAL, Some(RevocationReason::KeyCompromise))]);
    let report = pki.check(&db, false).await;
    assert_eq!(report.newly_revoked, 0);
    let error = pki.last_error(&db).await;
    assert!(
        error.starts_with("unverified:") && error.contains("cRLSign"),
        "{error}"
    );
    pki.assert_not_revoked(&db).await;
}

async fn a_crl_number_going_backwards_is_refused(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Numbered CA")).await;
    pki.serve(5, &[]);
    pki.check(&db, false).await;
    // An older CRL (number 4) replayed with a revocation on it.
    pki.serve(4, &[(SERIAL, Some(RevocationReason::KeyCompromise))]);
    let report = pki.check(&db, true).await;
    assert_eq!(report.newly_revoked, 0);
    let error = pki.last_error(&db).await;
    assert!(error.starts_with("rollback:"), "{error}");
    pki.assert_not_revoked(&db).await;
    let cache = db
        .store
        .crl_cache(&pki.server.url("/ca.crl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        cache.crl_number.as_deref(),
        Some("05"),
        "the last good number stays"
    );
}

async fn an_unreachable_ca_marks_nothing_until_it_is_back(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Flaky CA")).await;
    pki.serve(1, &[(SERIAL, Some(RevocationReason::Superseded))]);
    pki.server.down(Some(503));
    let report = pki.check(&db, false).await;
    assert_eq!((report.crls_good, report.newly_revoked), (0, 0));
    assert_eq!(report.errors.len(), 1);
    assert!(pki.last_error(&db).await.starts_with("http_status:"));
    pki.assert_not_revoked(&db).await;

    pki.server.down(None);
    pki.clock.advance(chrono::Duration::hours(6));
    let report = pki.check(&db, false).await;
    assert_eq!(report.newly_revoked, 1);
    let cache = db
        .store
        .crl_cache(&pki.server.url("/ca.crl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.last_error, None, "a good check clears the error");
    assert_eq!(cache.last_good_at, Some(pki.clock.now()));
    assert!(
        pki.records(&db)
            .await
            .iter()
            .all(|r| r.cert_revoked_at == Some(revoked_at()))
    );
}

async fn an_unchanged_crl_is_confirmed_by_a_304(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Steady CA")).await;
    pki.serve(1, &[(SERIAL, Some(RevocationReason::CessationOfOperation))]);
    pki.check(&db, false).await;
    pki.clock.advance(chrono::Duration::hours(6));
    let report = pki.check(&db, true).await;
    assert_eq!((report.fetched, report.crls_good), (1, 1));
    assert_eq!(
        pki.server.requests("/ca.crl"),
        (2, 1),
        "one conditional GET answered 304"
    );
    let cache = db
        .store
        .crl_cache(&pki.server.url("/ca.crl"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.last_good_at, Some(pki.clock.now()));
    let cert = db
        .store
        .revocation(&pki.leaf.thumbprint)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cert.reason, "cessationOfOperation");
    assert_eq!(cert.released_at, None);
}

async fn malformed_and_truncated_crls_are_refused(db: Db) {
    let pki = Pki::new(&db, TestCa::new("Garbled CA")).await;
    let good = pki.ca.crl(
        1,
        now() - chrono::Duration::hours(1),
        &[(SERIAL, revoked_at(), None)],
    );
    for body in [
        good[..good.len() / 2].to_vec(),
        good[..good.len() - 1].to_vec(),
        b"<html>maintenance</html>".to_vec(),
        Vec::new(),
    ] {
        pki.server.set("/ca.crl", body);
        let report = pki.check(&db, true).await;
        assert_eq!(report.newly_revoked, 0);
        let error = pki.last_error(&db).await;
        assert!(error.starts_with("malformed:"), "{error}");
    }
    pki.assert_not_revoked(&db).await;
}

async fn a_crl_over_the_size_cap_is_refused_while_it_streams(db: Db) {
    let mut pki = Pki::new(&db, TestCa::new("Bloated CA")).await;
    // 100 MB streamed without a length against the default 32 MiB cap: refused after the
    // cap, never held whole.
    pki.server.endless("/ca.crl", 100_000_000);
    let report = pki.check(&db, false).await;
    assert_eq!(report.newly_revoked, 0);
    let error = pki.last_error(&db).await;
    assert!(
        error.starts_with("too_large:") && error.contains("33554432"),
        "{error}"
    );

    // The cap is configurable: a real CRL over a 1 KiB cap is refused the same way.
    let many: Vec<Vec<u8>> = (0u16..100).map(|i| i.to_be_bytes().to_vec()).collect();
    let mut entries: Vec<(&[u8], Option<RevocationReason>)> =
        many.iter().map(|s| (s.as_slice(), None)).collect();
    entries.push((SERIAL, None));
    pki.serve(1, &entries);
    pki.options.max_crl_bytes = 1024;
    pki.check(&db, true).await;
    let error = pki.last_error(&db).await;
    assert!(
        error.starts_with("too_large:") && error.contains("1024"),
        "{error}"
    );
    pki.assert_not_revoked(&db).await;
    pki.options.max_crl_bytes = jobs::revocation::DEFAULT_MAX_CRL_BYTES;
    assert_eq!(pki.check(&db, true).await.newly_revoked, 1);
}

async fn the_check_fetches_with_the_ingest_client_rules(db: Db) {
    let mut pki = Pki::new(&db, TestCa::new("Identified CA")).await;
    pki.serve(1, &[(SERIAL, Some(RevocationReason::KeyCompromise))]);
    // No injected client: the one built from the outbound settings, as in production
    // (proxies none here, so loopback is reached directly).
    pki.options.client = None;
    let outbound = ingest::OutboundSettings {
        proxy: ingest::ProxySettings::none(),
        ..ingest::OutboundSettings::default()
    };
    let report = check(
        db.store.as_ref(),
        pki.clock.as_ref(),
        &pki.options,
        &outbound,
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.newly_revoked, 1, "{report:?}");
    let agents = pki.server.user_agents();
    assert_eq!(agents.len(), 1);
    assert!(agents[0].starts_with("knowngood-ingest/"), "{agents:?}");
}
