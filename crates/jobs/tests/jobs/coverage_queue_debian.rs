//! The coverage queue through the refresh for the Debian-format channels: a version an SBOM
//! lists as `pkg:deb/debian/...` or `pkg:deb/ubuntu/...` is recorded pinned from a loopback
//! archive (`testkit::vendor::apt`: signed `InRelease`, `Packages.xz`, `.deb` packages built
//! here), the files inside its `.deb` included, while the archive's newest version is left
//! alone unless the channel follows that package; a version the archive lacks is closed as
//! failed with the channel's reason. Debian and Ubuntu share the archive code but not the
//! way they find their releases (Debian: the configured code names and the security
//! archive; Ubuntu: `meta-release`), so both are run.

use std::sync::Arc;

use jobs::refresh::{RefreshOptions, refresh_queued, refresh_vendors};
use model::{FixedClock, HashAlgo, HashValue, RecordStatus};
use testkit::vendor::Site;
use testkit::vendor::apt::{self, Suite, UBUNTU_META_RELEASE, archive_key, deb_package};
use testkit::{Db, t};

use crate::coverage_queue::{entries, options_for, queue_sbom, sha256};

testkit::backend_tests!(
    queued_debian_versions_are_recorded_pinned,
    queued_ubuntu_versions_are_recorded_pinned,
    an_unreadable_history_costs_only_its_own_member,
);

/// One Debian-format channel as a test serves it: the release pocket lists `older`, the
/// updates pocket `newest`, each a coreutils `.deb` for amd64.
struct Distro {
    /// The fetcher id, the queue's ecosystem and the package URL's namespace.
    id: &'static str,
    /// The vendor of its records.
    vendor: &'static str,
    older: &'static str,
    newest: &'static str,
    /// Where the `.deb` files are, under the served site.
    archive: &'static str,
    release: &'static str,
}

const DEBIAN: Distro = Distro {
    id: "debian",
    vendor: "Debian trixie",
    older: "9.7-3",
    newest: "9.7-3+deb13u1",
    archive: "/debian",
    release: "trixie",
};

const UBUNTU: Distro = Distro {
    id: "ubuntu",
    vendor: "Ubuntu",
    older: "9.4-3ubuntu6",
    newest: "9.4-3ubuntu6.1",
    archive: "/ubuntu",
    release: "noble",
};

/// The `ls` of a coreutils build.
fn ls(version: &str) -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend(format!("coreutils {version} ls ").repeat(500).bytes());
    elf
}

fn coreutils(version: &str) -> Vec<u8> {
    deb_package(
        "coreutils",
        &[
            ("usr/bin/ls", &ls(version)),
            ("usr/share/doc/coreutils/copyright", b"GPL-3+\n"),
        ],
    )
}

impl Distro {
    fn deb_path(&self, version: &str) -> String {
        format!(
            "{}/pool/main/c/coreutils/coreutils_{version}_amd64.deb",
            self.archive
        )
    }

    /// The archive, signed by a key made here, and that key's public half.
    fn site(&self) -> (Site, String) {
        let package = |version| vec![("coreutils", version, "required", coreutils(version))];
        self.site_with(&package(self.older), &package(self.newest))
    }

    /// The archive listing `release` in its release pocket and `updates` in its updates
    /// pocket.
    fn site_with(&self, release: &[apt::Package], updates: &[apt::Package]) -> (Site, String) {
        let (key, public) = archive_key();
        let site = Site::new();
        let suite = |prefix, suite| Suite {
            origin: if self.id == "debian" {
                "Debian"
            } else {
                "Ubuntu"
            },
            prefix,
            suite,
            codename: self.release,
            arches: &["amd64"],
        };
        let updates_suite = format!("{}-updates", self.release);
        apt::publish(&site, &key, &suite(self.archive, self.release), release);
        apt::publish(&site, &key, &suite(self.archive, &updates_suite), updates);
        if self.id == "debian" {
            let security = format!("{}-security", self.release);
            apt::publish(&site, &key, &suite("/debian-security", &security), &[]);
        } else {
            site.file("/meta-release", UBUNTU_META_RELEASE);
        }
        (site, public)
    }

    /// Only this channel, at the served `base`, following `items`, trusting `public`.
    fn options(&self, base: &str, public: &str, items: &[&str]) -> RefreshOptions {
        let mut options = options_for(self.id, base, items);
        let o = options.vendors.get_mut(self.id).unwrap();
        if self.id == "debian" {
            o.base_url = Some(format!("{base}/debian"));
            o.security_url = Some(format!("{base}/debian-security"));
            o.releases = Some(vec![self.release.to_owned()]);
        } else {
            o.files_url = Some(format!("{base}/ubuntu"));
        }
        options.archive_keys = Some(vec![public.to_owned()]);
        options
    }

    /// The (vendor, version, status) of each record holding `sha256`.
    async fn holders(&self, db: &Db, sha256: &str) -> Vec<(String, String, String)> {
        let hash = HashValue::parse_as(sha256, HashAlgo::Sha256).unwrap();
        db.store
            .find_by_hashes(&[hash], true)
            .await
            .expect("lookup")
            .into_iter()
            .map(|h| {
                (
                    h.record.vendor,
                    h.record.version,
                    format!("{}{}", h.record.executable_name, status(h.status)),
                )
            })
            .collect()
    }
}

fn row(vendor: &str, version: &str, file: &str) -> (String, String, String) {
    (vendor.to_owned(), version.to_owned(), file.to_owned())
}

fn status(s: RecordStatus) -> &'static str {
    match s {
        RecordStatus::Current => "",
        _ => " (not current)",
    }
}

async fn queued_debian_versions_are_recorded_pinned(db: Db) {
    queued_versions_are_recorded_pinned(db, &DEBIAN).await;
}

async fn queued_ubuntu_versions_are_recorded_pinned(db: Db) {
    queued_versions_are_recorded_pinned(db, &UBUNTU).await;
}

async fn queued_versions_are_recorded_pinned(db: Db, distro: &Distro) {
    let (site, public) = distro.site();
    let base = site.serve().await;
    let id = distro.id;
    let missing = "9.9.9-1";
    let queued = queue_sbom(
        &db,
        &[
            &format!("pkg:deb/{id}/coreutils@{}?arch=amd64", distro.older),
            &format!("pkg:deb/{id}/coreutils@{missing}?arch=amd64"),
        ],
    )
    .await;
    assert_eq!(queued.queued.len(), 2, "{queued:?}");

    // The channel's own run follows another package: only the queue asks for coreutils.
    let clock = Arc::new(FixedClock::new(t("2026-03-10T02:00:00Z")));
    let reports = refresh_vendors(
        db.store.clone(),
        clock.clone(),
        &distro.options(&base, &public, &["bash"]),
        Some(id),
        &|_| {},
    )
    .await
    .expect("refresh");
    let passes: Vec<_> = reports
        .iter()
        .filter(|r| r.fetcher == format!("{id} (coverage queue)"))
        .collect();
    // A distribution pins one version of a package per pass. Of the .deb's files, the
    // executable is a member.
    assert_eq!(passes.len(), 2, "{reports:#?}");
    let downloaded: usize = passes.iter().map(|r| r.downloaded).sum();
    let members: usize = passes.iter().map(|r| r.members).sum();
    assert_eq!((downloaded, members), (1, 1), "{passes:#?}");
    assert!(site.hit(&distro.deb_path(distro.older)));
    assert!(
        !site.hit(&distro.deb_path(distro.newest)),
        "the newest version is not fetched: nothing follows it"
    );

    // The pinned .deb and the files inside it, known with that version.
    let deb = format!("coreutils_{}_amd64.deb", distro.older);
    assert_eq!(
        distro.holders(&db, &sha256(&coreutils(distro.older))).await,
        [row(distro.vendor, distro.older, &deb)]
    );
    assert_eq!(
        distro.holders(&db, &sha256(&ls(distro.older))).await,
        [row(distro.vendor, distro.older, "usr/bin/ls")]
    );
    assert!(
        distro
            .holders(&db, &sha256(&ls(distro.newest)))
            .await
            .is_empty()
    );

    let shown = entries(&db).await;
    assert_eq!(shown[0], format!("{id} coreutils {} done", distro.older));
    let failed = format!(
        "{id} coreutils {missing} failed discovery: coreutils={missing}: not listed by the \
         followed suites of"
    );
    assert!(shown[1].starts_with(&failed), "{shown:?}");

    // Known now: the same inventory queues nothing for that version.
    let again = queue_sbom(&db, &[&format!("pkg:deb/{id}/coreutils@{}", distro.older)]).await;
    assert_eq!((again.queued.len(), again.known.len()), (0, 1), "{again:?}");

    // Nothing queued: the queue alone reads nothing.
    let hits = site.hits.lock().unwrap().len();
    let options = distro.options(&base, &public, &["coreutils"]);
    let none = refresh_queued(db.store.clone(), clock.clone(), &options, Some(id), &|_| {})
        .await
        .expect("refresh");
    assert!(none.is_empty(), "{none:#?}");
    assert_eq!(site.hits.lock().unwrap().len(), hits);

    // A channel that follows coreutils records the newest version itself.
    let followed = refresh_vendors(db.store.clone(), clock, &options, Some(id), &|_| {})
        .await
        .expect("refresh");
    assert_eq!(followed.len(), 1, "{followed:#?}");
    assert_eq!(followed[0].fetcher, id);
    assert!(site.hit(&distro.deb_path(distro.newest)));
    assert_eq!(
        distro.holders(&db, &sha256(&ls(distro.newest))).await,
        [row(distro.vendor, distro.newest, "usr/bin/ls")]
    );
}

/// A coreutils build whose `.deb` holds three executables.
fn coreutils_tools(version: &str) -> Vec<u8> {
    let tools: Vec<(String, Vec<u8>)> = ["cat", "cp", "ls"]
        .iter()
        .map(|tool| {
            let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
            elf.extend(format!("coreutils {version} {tool} ").repeat(500).bytes());
            (format!("usr/bin/{tool}"), elf)
        })
        .collect();
    let files: Vec<(&str, &[u8])> = tools
        .iter()
        .map(|(path, bytes)| (path.as_str(), bytes.as_slice()))
        .collect();
    deb_package("coreutils", &files)
}

/// An archive's members are written together; when that write fails because one member's
/// stored history cannot be read, the others are still recorded and only that member is
/// reported.
async fn an_unreadable_history_costs_only_its_own_member(db: Db) {
    let refresh = |version: &'static str| {
        let store = db.store.clone();
        async move {
            let package = vec![("coreutils", version, "required", coreutils_tools(version))];
            let (site, public) = DEBIAN.site_with(&package, &[]);
            let base = site.serve().await;
            let clock = Arc::new(FixedClock::new(t("2026-03-10T02:00:00Z")));
            let options = DEBIAN.options(&base, &public, &["coreutils"]);
            let reports = refresh_vendors(store, clock, &options, Some("debian"), &|_| {})
                .await
                .expect("refresh");
            reports
                .into_iter()
                .find(|r| r.fetcher == "debian")
                .expect("a report")
        }
    };
    let first = refresh("9.7-3").await;
    assert_eq!(first.members, 3, "{first:#?}");

    // `cat`'s stored row becomes unreadable (a byte size no file has).
    let tampered = db
        .exec(
            "UPDATE hash_records SET size_bytes = -1 WHERE executable_name = 'usr/bin/cat'",
            &[],
        )
        .await;
    assert_eq!(tampered, 1);

    let second = refresh("9.7-4").await;
    assert_eq!(second.members, 2, "{second:#?}");
    let problems: Vec<_> = second
        .problems
        .iter()
        .filter(|p| p.kind == model::ProblemKind::Record)
        .collect();
    assert_eq!(problems.len(), 1, "{second:#?}");
    assert!(
        problems[0]
            .url
            .as_deref()
            .is_some_and(|u| u.ends_with("#usr/bin/cat")),
        "{problems:?}"
    );
    for tool in ["cp", "ls"] {
        let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
        elf.extend(format!("coreutils 9.7-4 {tool} ").repeat(500).bytes());
        assert_eq!(
            DEBIAN.holders(&db, &sha256(&elf)).await,
            [row(DEBIAN.vendor, "9.7-4", &format!("usr/bin/{tool}"))]
        );
    }
}
