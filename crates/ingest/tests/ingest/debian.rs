//! Debian's signed chain over loopback: an `InRelease` cleartext-signed with an OpenPGP key
//! made here (standing in for the archive key), `Packages.xz` indexes whose SHA-256 and size
//! the signed `Release` lists, and `.deb` packages (ar: `debian-binary`, `control.tar.gz`,
//! `data.tar.xz`) whose SHA-256 the index lists. Layout and fields follow
//! <https://wiki.debian.org/DebianRepository/Format> and deb(5); the Release fields are those
//! of `deb.debian.org/debian/dists/stable/InRelease`. The archive's parts come from
//! `testkit::vendor::apt`.

use ingest::vendors::Debian;
use ingest::{FetchContext, ProblemKind, VendorReport, ingest_vendor};
use model::Arch::{Amd64, Arm64};
use model::Platform::Linux;
use pgp::composed::SignedSecretKey;
use testkit::vendor::apt::{
    SnapshotFile, archive_key, deb, deb_listing, deb_package, ls_binary, publish_suite, sign,
    snapshot_binfiles, stanza, xz,
};

use crate::vendor_support::{MemorySink, Site, clock, config_for, limits, md5, sha1, sha256};

struct Archive {
    site: Site,
    debs: Vec<(String, Vec<u8>)>,
}

/// The repository: `InRelease` over the two indexes, each listing an old and the current
/// coreutils plus a package not followed. `tamper` changes what is served after signing.
fn archive(key: &SignedSecretKey, tamper: Tamper) -> Archive {
    let site = Site::new();
    let mut sums = String::new();
    let mut debs = Vec::new();
    for arch in ["amd64", "arm64"] {
        let current = deb(arch);
        let path = format!("pool/main/c/coreutils/coreutils_9.7-3_{arch}.deb");
        let old_path = format!("pool/main/c/coreutils/coreutils_9.1-1_{arch}.deb");
        let packages = [
            stanza(
                "bash",
                "5.2.37-2",
                arch,
                "pool/main/b/bash/bash.deb",
                b"bash",
            ),
            stanza("coreutils", "9.1-1", arch, &old_path, b"old"),
            stanza("coreutils", "9.7-3", arch, &path, &current),
        ]
        .join("\n");
        let mut index = xz(packages.as_bytes());
        sums.push_str(&format!(
            " {} {} main/binary-{arch}/Packages.xz\n",
            sha256(&index),
            index.len()
        ));
        if tamper == Tamper::Index && arch == "amd64" {
            index = xz(packages.replace("9.7-3", "9.7-4").as_bytes());
        }
        for suite in ["stable", "trixie"] {
            site.file(
                &format!("/dists/{suite}/main/binary-{arch}/Packages.xz"),
                index.clone(),
            );
        }
        let served = if tamper == Tamper::Deb && arch == "amd64" {
            let mut evil = current.clone();
            evil.extend_from_slice(b"implant");
            evil
        } else {
            current.clone()
        };
        site.file(&format!("/{path}"), served);
        debs.push((arch.to_owned(), current));
    }
    let release = format!(
        "Origin: Debian\nLabel: Debian\nSuite: stable\nVersion: 13.2\nCodename: trixie\n\
         Changelogs: https://metadata.ftp-master.debian.org/changelogs/@CHANGEPATH@_changelog\n\
         Date: Sat, 08 Nov 2025 09:00:00 UTC\nAcquire-By-Hash: yes\nNo-Support-for-Architecture-all: Packages\n\
         Architectures: all amd64 arm64 armel armhf i386 ppc64el riscv64 s390x\n\
         Components: main contrib non-free-firmware non-free\nDescription: Debian 13.2 Released 08 November 2025\n\
         MD5Sum:\n 00000000000000000000000000000000 1 main/binary-amd64/Release\nSHA256:\n{sums}"
    );
    let mut signed = sign(key, &release);
    match tamper {
        Tamper::Signature => signed = signed.replace("Version: 13.2", "Version: 13.3"),
        Tamper::OtherKey => signed = sign(&archive_key().0, &release),
        _ => {}
    }
    site.file("/dists/stable/InRelease", signed.clone());
    site.file("/dists/trixie/InRelease", signed);
    publish_suite(&site, key, "", "trixie-updates", "trixie-updates", &[]);
    Archive { site, debs }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tamper {
    Nothing,
    Signature,
    OtherKey,
    Index,
    Deb,
}

async fn run(public: &str, site: &Site) -> (VendorReport, MemorySink) {
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_into(public, &base, &sink).await;
    (report, sink)
}

async fn run_into(public: &str, base: &str, sink: &MemorySink) -> VendorReport {
    let mut config = config_for("debian", base);
    config.items = vec!["coreutils".into()];
    config.releases = vec!["stable".into()];
    config.security_url = None;
    let mut limits = limits();
    limits.members.enabled = true;
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits);
    ingest_vendor(&Debian::with_keys(&[public]), &ctx, sink, &clock()).await
}

#[tokio::test]
async fn debian_follows_the_signed_chain_to_the_files_in_each_package() {
    let (key, public) = archive_key();
    let repo = archive(&key, Tamper::Nothing);
    let (report, sink) = run(&public, &repo.site).await;
    assert!(
        report.errors == 0 && report.rejected == 0,
        "{:#?}",
        report.problems
    );
    // Per arch: the newest coreutils .deb and its one executable.
    assert_eq!(
        (report.discovered, report.recorded, report.members),
        (2, 4, 2)
    );
    for (arch, model_arch) in [("amd64", Amd64), ("arm64", Arm64)] {
        let deb = sink.get(&format!("coreutils_9.7-3_{arch}.deb"), Linux, model_arch);
        assert_eq!(deb.vendor, "Debian trixie");
        assert_eq!(deb.version, "9.7-3");
        let served = &repo.debs.iter().find(|(a, _)| a == arch).unwrap().1;
        assert_eq!(deb.hash_sha256, sha256(served));
        let ls = sink.get("usr/bin/ls", Linux, model_arch);
        let elf = ls_binary(arch);
        assert_eq!(
            (
                ls.hash_sha256.clone(),
                ls.hash_sha1.clone(),
                ls.hash_md5.clone()
            ),
            (sha256(&elf), Some(sha1(&elf)), Some(md5(&elf)))
        );
        assert_eq!(ls.version, "9.7-3");
        assert!(ls.download_verified);
        assert!(
            ls.source_url.ends_with(&format!(
                "/pool/main/c/coreutils/coreutils_9.7-3_{arch}.deb#usr/bin/ls"
            )),
            "{}",
            ls.source_url
        );
    }
}

#[tokio::test]
async fn an_inrelease_whose_signature_fails_records_nothing() {
    let (key, public) = archive_key();
    for tamper in [Tamper::Signature, Tamper::OtherKey] {
        let repo = archive(&key, tamper);
        let (report, sink) = run(&public, &repo.site).await;
        assert_eq!((report.discovered, report.errors), (0, 1), "{report:#?}");
        assert_eq!(report.problems[0].kind, ProblemKind::Discovery);
        assert!(
            report.problems[0].message.contains("no signature verifies"),
            "{:?}",
            report.problems
        );
        assert!(sink.records.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_tampered_index_or_package_is_refused() {
    let (key, public) = archive_key();
    // An index that is not the one the signed Release lists: that architecture gives nothing.
    let repo = archive(&key, Tamper::Index);
    let (report, sink) = run(&public, &repo.site).await;
    assert_eq!((report.discovered, report.errors), (1, 1), "{report:#?}");
    assert!(report.problems[0].message.contains("possible tampering"));
    assert!(
        sink.records
            .lock()
            .unwrap()
            .iter()
            .all(|(_, r)| r.arch == Arm64)
    );

    // A .deb whose bytes disagree with the index: refused, and neither it nor anything
    // inside it recorded (neither the index's hash nor the bytes' can be trusted).
    let repo = archive(&key, Tamper::Deb);
    let (report, sink) = run(&public, &repo.site).await;
    assert_eq!(
        (report.mismatches, report.members, report.recorded),
        (1, 1, 2),
        "{report:#?}"
    );
    let records = sink.records.lock().unwrap();
    assert!(records.iter().all(|(_, r)| r.arch == Arm64), "{records:#?}");
}

#[tokio::test]
async fn a_second_run_over_an_unchanged_index_downloads_nothing() {
    let (key, public) = archive_key();
    let repo = archive(&key, Tamper::Nothing);
    let base = repo.site.serve().await;
    let sink = MemorySink::default();
    let first = run_into(&public, &base, &sink).await;
    assert_eq!((first.downloaded, first.recorded), (2, 4), "{first:#?}");
    let second = run_into(&public, &base, &sink).await;
    assert!(second.problems.is_empty(), "{:#?}", second.problems);
    assert_eq!(
        (
            second.discovered,
            second.downloaded,
            second.recorded,
            second.unchanged
        ),
        (2, 0, 0, 2),
        "{second:#?}"
    );
}

#[tokio::test]
async fn a_package_whose_files_disagree_with_its_md5sums_is_refused() {
    let (key, public) = archive_key();
    let site = Site::new();
    // The builder's md5sums lists another ls than the one the package carries.
    let forged = deb_listing("amd64", &md5(b"the ls the maintainer built"));
    let genuine = deb("amd64");
    let amd64_only = |body: Vec<u8>| vec![("coreutils", "9.7-3", "required", body)];
    publish_suite(
        &site,
        &key,
        "",
        "stable",
        "trixie",
        &amd64_only(forged.clone()),
    );
    publish_suite(&site, &key, "", "trixie", "trixie", &amd64_only(forged));
    publish_suite(&site, &key, "", "trixie-updates", "trixie-updates", &[]);
    let (report, sink) = run(&public, &site).await;
    // Both architectures' indexes list the forged package.
    assert_eq!((report.mismatches, report.recorded), (2, 0), "{report:#?}");
    assert!(
        report.problems[0].message.contains("md5sums"),
        "{:#?}",
        report.problems
    );
    assert!(sink.records.lock().unwrap().is_empty());

    // The genuine package agrees with its md5sums: recorded with its files.
    let site = Site::new();
    publish_suite(
        &site,
        &key,
        "",
        "stable",
        "trixie",
        &amd64_only(genuine.clone()),
    );
    publish_suite(&site, &key, "", "trixie", "trixie", &amd64_only(genuine));
    publish_suite(&site, &key, "", "trixie-updates", "trixie-updates", &[]);
    let (report, sink) = run(&public, &site).await;
    assert_eq!((report.mismatches, report.members), (0, 2), "{report:#?}");
    sink.get("usr/bin/ls", Linux, Amd64);
}

/// `releases = ["supported"]`: oldstable and stable, whose code names come from the
/// archive's Release files, each with its updates pocket and the security archive. A
/// bookworm and a trixie build are told apart by their vendor; within bookworm the
/// security build is the newest of its history. `@base` follows packages by priority.
#[tokio::test]
async fn supported_releases_are_read_with_their_updates_and_security_pockets() {
    let (key, public) = archive_key();
    let site = Site::new();
    let pkg = |name: &'static str, version: &'static str, priority: &'static str| {
        let body = format!("{name} {version}").repeat(40).into_bytes();
        (name, version, priority, body)
    };
    let bookworm = [
        pkg("coreutils", "9.1-1", "required"),
        pkg("less", "590-2", "important"),
        pkg("nginx", "1.22.1-9", "optional"),
    ];
    let trixie = [
        pkg("coreutils", "9.7-3", "required"),
        pkg("nginx", "1.26.3-3", "optional"),
    ];
    for (suite, codename, packages) in [
        ("oldstable", "bookworm", &bookworm[..]),
        ("bookworm", "bookworm", &bookworm[..]),
        ("stable", "trixie", &trixie[..]),
        ("trixie", "trixie", &trixie[..]),
    ] {
        publish_suite(&site, &key, "/debian", suite, codename, packages);
    }
    publish_suite(
        &site,
        &key,
        "/debian",
        "bookworm-updates",
        "bookworm-updates",
        &[pkg("less", "590-2.1~deb12u2", "important")],
    );
    publish_suite(
        &site,
        &key,
        "/debian",
        "trixie-updates",
        "trixie-updates",
        &[],
    );
    publish_suite(
        &site,
        &key,
        "/debian-security",
        "bookworm-security",
        "bookworm-security",
        &[pkg("coreutils", "9.1-1+deb12u1", "required")],
    );
    publish_suite(
        &site,
        &key,
        "/debian-security",
        "trixie-security",
        "trixie-security",
        &[],
    );
    let base = site.serve().await;

    let sink = MemorySink::default();
    let mut config = config_for("debian", &format!("{base}/debian"));
    config.security_url = Some(format!("{base}/debian-security"));
    assert_eq!(config.releases, ["supported"]);
    config.items = vec!["@base".into()];
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits());
    let report = ingest_vendor(
        &Debian::with_keys(&[public.as_str()]),
        &ctx,
        &sink,
        &clock(),
    )
    .await;
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    let mut seen: Vec<(String, String, String)> = sink
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.arch == Amd64)
        .map(|(_, r)| {
            (
                r.vendor.clone(),
                r.executable_name.clone(),
                r.version.clone(),
            )
        })
        .collect();
    seen.sort();
    let row = |v: &str, n: &str, ver: &str| (v.to_owned(), n.to_owned(), ver.to_owned());
    assert_eq!(
        seen,
        [
            row(
                "Debian bookworm",
                "coreutils_9.1-1+deb12u1_amd64.deb",
                "9.1-1+deb12u1"
            ),
            row("Debian bookworm", "coreutils_9.1-1_amd64.deb", "9.1-1"),
            row(
                "Debian bookworm",
                "less_590-2.1~deb12u2_amd64.deb",
                "590-2.1~deb12u2"
            ),
            row("Debian bookworm", "less_590-2_amd64.deb", "590-2"),
            row("Debian trixie", "coreutils_9.7-3_amd64.deb", "9.7-3"),
        ],
        "base packages only (no nginx), each release under its own vendor"
    );
    // The security build is newer than the release build of the same package: the store
    // keeps it current and the release build in its history.
    assert!(
        model::version::compare("Debian", "9.1-1+deb12u1", "9.1-1").is_gt()
            && model::family_of("coreutils_9.1-1+deb12u1_amd64.deb", "9.1-1+deb12u1")
                == model::family_of("coreutils_9.1-1_amd64.deb", "9.1-1")
    );
    let security = sink.get("coreutils_9.1-1+deb12u1_amd64.deb", Linux, Amd64);
    assert!(
        security
            .source_url
            .starts_with(&format!("{base}/debian-security/pool/")),
        "{}",
        security.source_url
    );

    // `releases` restricts: trixie alone.
    let sink = MemorySink::default();
    let mut config = config_for("debian", &format!("{base}/debian"));
    config.security_url = Some(format!("{base}/debian-security"));
    config.releases = vec!["trixie".into()];
    config.items = vec!["*".into()];
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits());
    let report = ingest_vendor(
        &Debian::with_keys(&[public.as_str()]),
        &ctx,
        &sink,
        &clock(),
    )
    .await;
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    let records = sink.records.lock().unwrap();
    assert!(records.iter().all(|(_, r)| r.vendor == "Debian trixie"));
    assert!(
        records
            .iter()
            .any(|(_, r)| r.executable_name == "nginx_1.26.3-3_amd64.deb"),
        "`*` follows every package"
    );
}

/// `name=version` records exactly that version, whatever is newer in the updates or
/// security pocket; a pinned version no followed suite lists is reported once, naming the
/// suites read and what to do, and does not stop the other pins.
#[tokio::test]
async fn a_pinned_version_is_recorded_and_an_unlisted_one_is_reported() {
    let (key, public) = archive_key();
    let site = Site::new();
    let pkg = |name: &'static str, version: &'static str| {
        let body = format!("{name} {version}").repeat(40).into_bytes();
        (name, version, "required", body)
    };
    publish_suite(
        &site,
        &key,
        "/debian",
        "stable",
        "trixie",
        &[pkg("coreutils", "9.7-3")],
    );
    publish_suite(
        &site,
        &key,
        "/debian",
        "trixie",
        "trixie",
        &[pkg("coreutils", "9.7-3")],
    );
    publish_suite(
        &site,
        &key,
        "/debian",
        "trixie-updates",
        "trixie-updates",
        &[pkg("coreutils", "9.7-3+deb13u1")],
    );
    let base = site.serve().await;
    let sink = MemorySink::default();
    let mut config = config_for("debian", &format!("{base}/debian"));
    config.security_url = None;
    config.releases = vec!["trixie".into()];
    config.items = vec!["coreutils=9.7-3".into(), "bash=5.2.15-2".into()];
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits());
    let report = ingest_vendor(
        &Debian::with_keys(&[public.as_str()]),
        &ctx,
        &sink,
        &clock(),
    )
    .await;
    let versions: Vec<String> = sink
        .records
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.version.clone())
        .collect();
    assert!(
        !versions.is_empty() && versions.iter().all(|v| v == "9.7-3"),
        "{versions:?}"
    );
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let message = &report.problems[0].message;
    assert!(
        message.starts_with("bash=5.2.15-2: not listed by the followed suites of ")
            && message.contains("(trixie)")
            && message.contains("pin a version it lists")
            && !message.contains("malformed"),
        "{message}"
    );
}

/// A pinned version the archive no longer serves, kept by a snapshot service (Debian's
/// `snapshot.debian.org`).
const OLD: &str = "9.4-3.1+b1";
/// Its files by the service's machine-readable API (`+` percent-encoded).
const OLD_BINFILES: &str = "/mr/binary/coreutils/9.4-3.1%2Bb1/binfiles";
/// When the service first saw the amd64 build (in `debian`) and the arm64 build (in
/// `debian-security`).
const SEEN: &str = "20250520T083028Z";
const SEEN_SECURITY: &str = "20250601T120000Z";

/// The `ls` of the old build for `arch`.
fn old_ls(arch: &str) -> Vec<u8> {
    let mut elf = ls_binary(arch);
    elf.extend_from_slice(format!("built as coreutils {OLD}").as_bytes());
    elf
}

fn old_deb(arch: &str) -> Vec<u8> {
    deb_package("coreutils", &[("usr/bin/ls", &old_ls(arch))])
}

/// The live archive: trixie lists coreutils 9.7-3 only.
fn live_archive(key: &SignedSecretKey) -> Site {
    let site = Site::new();
    let current = ("coreutils", "9.7-3", "required", deb("amd64"));
    publish_suite(&site, key, "/debian", "trixie", "trixie", &[current]);
    publish_suite(
        &site,
        key,
        "/debian",
        "trixie-updates",
        "trixie-updates",
        &[],
    );
    site
}

/// The snapshot service: its machine-readable API (`/mr/binary/<name>/<version>/binfiles
/// ?fileinfo=1`, format: <https://salsa.debian.org/snapshot-team/snapshot/-/blob/master/API>)
/// places the old amd64 build in `debian` at [`SEEN`] and the arm64 build in
/// `debian-security` at [`SEEN_SECURITY`] (and an i386 build, not followed); the archives as
/// they stood then, `/archive/<archive>/<first_seen>/`, are signed by `signer` like the live
/// ones. Each archive's suite lists the old version for both architectures, with the build
/// of the architecture it holds: only the architecture the API places there may be taken
/// from it. Returns the site and the API's answer (registered with its query).
fn snapshot_service(signer: &SignedSecretKey) -> (Site, String) {
    let site = Site::new();
    let (amd64, arm64) = (old_deb("amd64"), old_deb("arm64"));
    publish_suite(
        &site,
        signer,
        &format!("/archive/debian/{SEEN}"),
        "trixie",
        "trixie",
        &[("coreutils", OLD, "required", amd64.clone())],
    );
    publish_suite(
        &site,
        signer,
        &format!("/archive/debian-security/{SEEN_SECURITY}"),
        "trixie-security",
        "trixie-security",
        &[("coreutils", OLD, "required", arm64.clone())],
    );
    let names = ["amd64", "arm64", "i386"].map(|a| format!("coreutils_{OLD}_{a}.deb"));
    let place = |architecture, archive_name, first_seen, name, body| SnapshotFile {
        architecture,
        archive_name,
        first_seen,
        path: "/pool/main/c/coreutils",
        name,
        body,
    };
    let answer = snapshot_binfiles(
        "coreutils",
        OLD,
        &[
            place("amd64", "debian", SEEN, &names[0], &amd64),
            place("arm64", "debian-security", SEEN_SECURITY, &names[1], &arm64),
            place("i386", "debian", SEEN, &names[2], b"an i386 build"),
        ],
    );
    site.file(&format!("{OLD_BINFILES}?fileinfo=1"), answer.clone());
    (site, answer)
}

/// Debian trixie over the live archive at `live`, with the snapshot service at `snapshot`
/// when given, following `pin`.
async fn run_pinned(
    public: &str,
    live: &str,
    snapshot: Option<&str>,
    pin: &str,
) -> (VendorReport, MemorySink) {
    let sink = MemorySink::default();
    let mut config = config_for("debian", &format!("{live}/debian"));
    config.security_url = None;
    config.releases = vec!["trixie".into()];
    config.items = vec![pin.into()];
    config.snapshot_url = snapshot.map(str::to_owned);
    let mut limits = limits();
    limits.members.enabled = true;
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits);
    let report = ingest_vendor(&Debian::with_keys(&[public]), &ctx, &sink, &clock()).await;
    (report, sink)
}

/// A pinned version no followed suite lists any more is read from the snapshot service
/// through the same signed chain: the `.deb` of each followed architecture and its files,
/// under the pinned version and the release's vendor.
#[tokio::test]
async fn a_pinned_version_the_archive_no_longer_serves_is_read_from_the_snapshot_service() {
    let (key, public) = archive_key();
    let live = live_archive(&key).serve().await;
    let (snapshot, _) = snapshot_service(&key);
    let snap = snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, Some(&snap), &format!("coreutils={OLD}")).await;
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    // Per followed arch: the old .deb and its ls (no i386, no current 9.7-3).
    assert_eq!((report.discovered, report.members), (2, 2), "{report:#?}");
    for (arch, model_arch, archive, seen) in [
        ("amd64", Amd64, "debian", SEEN),
        ("arm64", Arm64, "debian-security", SEEN_SECURITY),
    ] {
        let deb = sink.get(&format!("coreutils_{OLD}_{arch}.deb"), Linux, model_arch);
        assert_eq!(
            (deb.vendor.as_str(), deb.version.as_str()),
            ("Debian trixie", OLD)
        );
        assert_eq!(deb.hash_sha256, sha256(&old_deb(arch)));
        assert_eq!(
            deb.source_url,
            format!(
                "{snap}/archive/{archive}/{seen}/pool/main/c/coreutils/coreutils_{OLD}_{arch}.deb"
            )
        );
        let ls = sink.get("usr/bin/ls", Linux, model_arch);
        assert_eq!(ls.hash_sha256, sha256(&old_ls(arch)));
        assert_eq!(ls.hash_sha1, Some(sha1(&old_ls(arch))));
        assert_eq!(
            (ls.vendor.as_str(), ls.version.as_str()),
            ("Debian trixie", OLD)
        );
        assert!(ls.download_verified);
    }
    let records = sink.records.lock().unwrap();
    assert_eq!(records.len(), 4, "{records:#?}");
    assert!(snapshot.hit(OLD_BINFILES));
}

/// Without `snapshot_url` nothing changes: the pin is reported as not listed, and no
/// snapshot service is asked.
#[tokio::test]
async fn without_a_snapshot_service_an_unlisted_pin_stays_a_problem() {
    let (key, public) = archive_key();
    let live = live_archive(&key).serve().await;
    let (snapshot, _) = snapshot_service(&key);
    snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, None, &format!("coreutils={OLD}")).await;
    assert!(sink.records.lock().unwrap().is_empty());
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let message = &report.problems[0].message;
    assert!(
        message.starts_with(&format!(
            "coreutils={OLD}: not listed by the followed suites of {live}/debian (trixie)"
        )) && !message.contains("snapshot"),
        "{message}"
    );
    assert!(snapshot.hits.lock().unwrap().is_empty());
}

/// A version the snapshot service does not know either is reported as listed by neither.
#[tokio::test]
async fn a_version_the_snapshot_service_does_not_know_is_reported_as_listed_by_neither() {
    let (key, public) = archive_key();
    let live = live_archive(&key).serve().await;
    let (snapshot, _) = snapshot_service(&key);
    let snap = snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, Some(&snap), "coreutils=9.0-1~bpo1").await;
    assert!(sink.records.lock().unwrap().is_empty());
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let message = &report.problems[0].message;
    assert!(
        message.starts_with(&format!(
            "coreutils=9.0-1~bpo1: not listed by the followed suites of {live}/debian (trixie), \
             nor by the snapshot service at {snap}"
        )),
        "{message}"
    );
    assert!(snapshot.hit("/mr/binary/coreutils/9.0-1~bpo1/binfiles"));

    // A version the service knows, first seen at a moment whose archive lists it in no
    // suite of the followed releases (it reached them later, or never): listed by neither.
    let (snapshot, answer) = snapshot_service(&key);
    let before = "20250101T000000Z";
    snapshot.file(
        &format!("{OLD_BINFILES}?fileinfo=1"),
        answer.replace(SEEN, before).replace(SEEN_SECURITY, before),
    );
    let snap = snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, Some(&snap), &format!("coreutils={OLD}")).await;
    assert!(sink.records.lock().unwrap().is_empty());
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let message = &report.problems[0].message;
    assert!(
        message.starts_with(&format!(
            "coreutils={OLD}: not listed by the followed suites of {live}/debian (trixie), \
             nor by the snapshot service at {snap}, whose archive had none of these releases' \
             suites where it was first seen"
        )),
        "{message}"
    );
}

/// A snapshot `.deb` whose bytes are not those its signed index lists is refused: neither
/// it nor anything inside it is recorded.
#[tokio::test]
async fn a_snapshot_package_that_disagrees_with_its_signed_index_is_refused() {
    let (key, public) = archive_key();
    let live = live_archive(&key).serve().await;
    let (snapshot, _) = snapshot_service(&key);
    let mut evil = old_deb("amd64");
    evil.extend_from_slice(b"implant");
    snapshot.file(
        &format!("/archive/debian/{SEEN}/pool/main/c/coreutils/coreutils_{OLD}_amd64.deb"),
        evil,
    );
    let snap = snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, Some(&snap), &format!("coreutils={OLD}")).await;
    assert_eq!(report.mismatches, 1, "{report:#?}");
    let records = sink.records.lock().unwrap();
    assert!(
        !records.is_empty() && records.iter().all(|(_, r)| r.arch == Arm64),
        "{records:#?}"
    );
}

/// What the snapshot service says only tells where to look: an answer that is not its
/// documented JSON, lacks a field, gives a malformed timestamp or an archive that is not
/// read, or places the file elsewhere than the signed index does, and an archive whose
/// `InRelease` does not verify, each record nothing of the version, with a problem saying
/// why.
#[tokio::test]
async fn a_bad_snapshot_answer_or_signature_records_nothing() {
    let (key, public) = archive_key();
    let live = live_archive(&key).serve().await;
    let (_, answer) = snapshot_service(&key);
    let cases: Vec<(String, &str)> = vec![
        ("<html>Service unavailable</html>".into(), "invalid JSON"),
        (answer.replace("\"first_seen\"", "\"seen\""), "first_seen"),
        (
            answer.replace(SEEN, "2025-05-20T08:30:28Z"),
            "is not a YYYYMMDDTHHMMSSZ timestamp",
        ),
        (answer.replace(SEEN, "20251340T083028Z"), "YYYYMMDDTHHMMSSZ"),
        (
            answer.replace(
                "\"archive_name\": \"debian\",",
                "\"archive_name\": \"debian-ports\",",
            ),
            "debian-ports",
        ),
        (
            answer.replace(
                "\"/pool/main/c/coreutils\"",
                "\"/pool/main/c/coreutils-old\"",
            ),
            "places no file of this version",
        ),
    ];
    for (served, expected) in cases {
        let (snapshot, _) = snapshot_service(&key);
        snapshot.file(&format!("{OLD_BINFILES}?fileinfo=1"), served);
        let snap = snapshot.serve().await;
        let (report, sink) =
            run_pinned(&public, &live, Some(&snap), &format!("coreutils={OLD}")).await;
        assert!(sink.records.lock().unwrap().is_empty(), "{expected}");
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        assert!(
            report.problems[0].message.contains(expected),
            "{expected}: {:#?}",
            report.problems
        );
    }

    // The archives as they stood then, signed with a key that is not the archive's.
    let (snapshot, _) = snapshot_service(&archive_key().0);
    let snap = snapshot.serve().await;
    let (report, sink) = run_pinned(&public, &live, Some(&snap), &format!("coreutils={OLD}")).await;
    assert!(sink.records.lock().unwrap().is_empty());
    assert!(
        report.problems.len() == 1 && report.problems[0].message.contains("no signature verifies"),
        "{:#?}",
        report.problems
    );
}
