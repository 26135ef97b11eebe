//! Ubuntu over loopback: `meta-release` (deb822 paragraphs with `Dist`, `Name`, `Version`,
//! `Supported`, `Release-File`, as the release upgrader reads them) naming the supported
//! releases, then per release the release and `-updates` pockets, each an `InRelease`
//! cleartext-signed with a key made here (standing in for Ubuntu's archive key) over a
//! `Packages.xz` and `.deb` packages, built as in the Debian tests.

use ingest::vendors::Ubuntu;
use ingest::{FetchContext, ProblemKind, VendorReport, ingest_vendor};
use model::Arch::Amd64;
use model::Platform::Linux;
use pgp::composed::SignedSecretKey;
use testkit::vendor::apt::{
    UBUNTU_META_RELEASE as META_RELEASE, archive_key, deb, ls_binary, sign, stanza, xz,
};

use crate::vendor_support::{MemorySink, Site, clock, config_for, limits, sha256};

/// A suite of the archive with one coreutils of `version`, signed by `key`.
fn suite(site: &Site, key: &SignedSecretKey, suite: &str, version: &str, body: &[u8]) {
    let path = format!("pool/main/c/coreutils/coreutils_{version}_amd64.deb");
    site.file(&format!("/archive/{path}"), body.to_vec());
    let index = xz(stanza("coreutils", version, "amd64", &path, body).as_bytes());
    let release = format!(
        "Origin: Ubuntu\nLabel: Ubuntu\nSuite: {suite}\nVersion: 24.04\nCodename: noble\n\
         Date: Thu, 25 Apr 2024 15:10:33 UTC\nArchitectures: amd64 i386\n\
         Components: main restricted universe multiverse\nDescription: Ubuntu Noble 24.04\n\
         MD5Sum:\n 00000000000000000000000000000000 1 main/binary-amd64/Release\nSHA256:\n {} {} main/binary-amd64/Packages.xz\n",
        sha256(&index),
        index.len()
    );
    site.file(
        &format!("/archive/dists/{suite}/main/binary-amd64/Packages.xz"),
        index,
    );
    site.file(
        &format!("/archive/dists/{suite}/InRelease"),
        sign(key, &release),
    );
}

async fn run(public: &str, site: &Site) -> (VendorReport, MemorySink) {
    let base = site.serve().await;
    let mut config = config_for("ubuntu", &base);
    config.files_url = Some(format!("{base}/archive"));
    config.items = vec!["coreutils".into()];
    let mut limits = limits();
    limits.members.enabled = true;
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits);
    let sink = MemorySink::default();
    let report = ingest_vendor(&Ubuntu::with_keys(&[public]), &ctx, &sink, &clock()).await;
    (report, sink)
}

#[tokio::test]
async fn ubuntu_follows_each_supported_release_and_its_updates() {
    let (key, public) = archive_key();
    let site = Site::new();
    site.file("/meta-release", META_RELEASE);
    let package = deb("amd64");
    suite(&site, &key, "noble", "9.4-3ubuntu6", &package);
    suite(&site, &key, "noble-updates", "9.4-3ubuntu6.1", &package);
    let (report, sink) = run(&public, &site).await;
    assert!(
        report.errors == 0 && report.rejected == 0,
        "{:#?}",
        report.problems
    );
    assert_eq!((report.discovered, report.members), (2, 2));
    assert_eq!(
        sink.versions(),
        ["9.4-3ubuntu6", "9.4-3ubuntu6.1"],
        "both pockets"
    );
    let updated = sink.get("coreutils_9.4-3ubuntu6.1_amd64.deb", Linux, Amd64);
    assert_eq!(updated.vendor, "Ubuntu");
    assert_eq!(updated.hash_sha256, sha256(&package));
    let ls = sink.get("usr/bin/ls", Linux, Amd64);
    assert_eq!(ls.hash_sha256, sha256(&ls_binary("amd64")));
    // An unsupported release is never read.
    assert!(
        !site
            .hits
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.contains("warty"))
    );
}

#[tokio::test]
async fn an_ubuntu_inrelease_signed_by_another_key_records_nothing() {
    let (key, public) = archive_key();
    let (other, _) = archive_key();
    let site = Site::new();
    site.file("/meta-release", META_RELEASE);
    let package = deb("amd64");
    suite(&site, &key, "noble", "9.4-3ubuntu6", &package);
    suite(&site, &other, "noble-updates", "9.4-3ubuntu6.1", &package);
    let (report, sink) = run(&public, &site).await;
    // The pocket signed by the wrong key gives nothing; the other stands.
    assert_eq!((report.discovered, report.errors), (1, 1), "{report:#?}");
    assert_eq!(report.problems[0].kind, ProblemKind::Discovery);
    assert!(report.problems[0].message.contains("no signature verifies"));
    assert_eq!(sink.versions(), ["9.4-3ubuntu6"]);

    // Every pocket signed by another key: nothing recorded at all.
    suite(&site, &other, "noble", "9.4-3ubuntu6", &package);
    let (report, sink) = run(&public, &site).await;
    assert_eq!(report.discovered, 0, "{report:#?}");
    assert!(sink.records.lock().unwrap().is_empty());
}

/// `name=version` records exactly that version from the pocket that lists it; a pinned
/// version no pocket lists is reported, naming the pockets read, as for Debian.
#[tokio::test]
async fn an_ubuntu_pin_is_recorded_and_an_unlisted_one_is_reported() {
    let (key, public) = archive_key();
    let site = Site::new();
    site.file("/meta-release", META_RELEASE);
    let package = deb("amd64");
    suite(&site, &key, "noble", "9.4-3ubuntu6", &package);
    suite(&site, &key, "noble-updates", "9.4-3ubuntu6.1", &package);
    let base = site.serve().await;
    let mut config = config_for("ubuntu", &base);
    config.files_url = Some(format!("{base}/archive"));
    config.items = vec![
        "coreutils=9.4-3ubuntu6".into(),
        "bash=5.2.21-2ubuntu4".into(),
    ];
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits());
    let sink = MemorySink::default();
    let fetcher = Ubuntu::with_keys(&[public.as_str()]);
    let report = ingest_vendor(&fetcher, &ctx, &sink, &clock()).await;
    assert_eq!(sink.versions(), ["9.4-3ubuntu6"]);
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let message = &report.problems[0].message;
    assert!(
        message.starts_with("bash=5.2.21-2ubuntu4: not listed by the followed suites of ")
            && message.contains("(noble, noble-updates)"),
        "{message}"
    );
}
