//! Rocky Linux's signed chain over loopback: the mirror's top listing with its release
//! directories, `repodata/repomd.xml` with a detached armored signature (`repomd.xml.asc`,
//! what `gpg --armor --detach-sign` writes) made with an OpenPGP key made here (standing in
//! for the release key), a gzip `primary.xml` whose SHA-256 the signed `repomd.xml` lists,
//! and `.rpm` packages (lead, signature header, main header with the per-file tags, a zstd
//! payload) whose SHA-256 `primary.xml` lists. The element and attribute names follow the
//! repository metadata `createrepo_c` writes (`<data type="primary">` with `checksum`,
//! `open-checksum`, `location`, `timestamp`, `size`, `open-size`; `<package type="rpm">`
//! with `name`, `arch`, `version epoch ver rel`, `checksum type="sha256" pkgid="YES"`,
//! `location href`), and the RPM layout and tag numbers follow the RPM file format.

use std::io::Write;

use ingest::vendors::RockyLinux;
use ingest::{FetchContext, ProblemKind, VendorReport, ingest_vendor};
use model::Arch::{Amd64, Arm64};
use model::Platform::Linux;
use pgp::composed::{SignedSecretKey, StandaloneSignature};
use pgp::packet::{SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::types::{KeyDetails, Password};
use testkit::vendor::apt::archive_key;

use crate::vendor_support::{MemorySink, Site, clock, config_for, limits, sha256};

/// An armored detached binary signature, as `gpg --armor --detach-sign` makes.
fn detach_sign(key: &SignedSecretKey, data: &[u8]) -> String {
    let mut config =
        SignatureConfig::from_key(rand08::thread_rng(), &**key, SignatureType::Binary).unwrap();
    config.hashed_subpackets = vec![
        Subpacket::regular(SubpacketData::IssuerFingerprint(key.fingerprint())).unwrap(),
        Subpacket::regular(SubpacketData::SignatureCreationTime(
            chrono::Utc::now().trunc_subsecs(0),
        ))
        .unwrap(),
    ];
    let signature = config.sign(&**key, &Password::empty(), data).unwrap();
    StandaloneSignature::new(signature)
        .to_armored_string(None.into())
        .unwrap()
}

use chrono::SubsecRound;

/// A header value of the RPM format.
enum Value {
    Int16(Vec<u16>),
    Int32(Vec<u32>),
    Str(String),
    Strs(Vec<String>),
    Bin(Vec<u8>),
}

/// One header structure: magic, reserved, counts, index entries, data store (values aligned
/// as their type requires), with a region tag first as `rpmbuild` writes it.
fn header(region: u32, tags: Vec<(u32, Value)>) -> Vec<u8> {
    let mut index = Vec::new();
    let mut data = Vec::new();
    let n = tags.len() as u32 + 1;
    for (tag, value) in tags {
        let (kind, align, count, bytes) = match value {
            Value::Int16(v) => (
                3u32,
                2,
                v.len(),
                v.iter().flat_map(|x| x.to_be_bytes()).collect(),
            ),
            Value::Int32(v) => (
                4,
                4,
                v.len(),
                v.iter().flat_map(|x| x.to_be_bytes()).collect(),
            ),
            Value::Str(s) => (6, 1, 1, format!("{s}\0").into_bytes()),
            Value::Strs(v) => (
                8,
                1,
                v.len(),
                v.iter()
                    .flat_map(|s| format!("{s}\0").into_bytes())
                    .collect(),
            ),
            Value::Bin(b) => (7, 1, b.len(), b),
        };
        while data.len() % align != 0 {
            data.push(0);
        }
        index.push((tag, kind, data.len() as u32, count as u32));
        data.extend::<Vec<u8>>(bytes);
    }
    // The region trailer: the region tag again, pointing back over the whole index.
    let trailer_at = data.len() as u32;
    data.extend(region.to_be_bytes());
    data.extend(7u32.to_be_bytes());
    data.extend((-(n as i32 * 16)).to_be_bytes());
    data.extend(16u32.to_be_bytes());
    let mut out = vec![0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];
    out.extend(n.to_be_bytes());
    out.extend((data.len() as u32).to_be_bytes());
    for (tag, kind, offset, count) in std::iter::once((region, 7, trailer_at, 16)).chain(index) {
        for word in [tag, kind, offset, count] {
            out.extend(word.to_be_bytes());
        }
    }
    out.extend(data);
    out
}

/// A file of a package: path, mode, content (`None` for directories and symlinks), ghost.
struct File {
    path: &'static str,
    mode: u16,
    content: Option<Vec<u8>>,
    ghost: bool,
}

fn file(path: &'static str, mode: u16, content: Option<Vec<u8>>) -> File {
    File {
        path,
        mode,
        content,
        ghost: false,
    }
}

/// An RPM package: 96-byte lead, signature header (SHA-256 of the main header, sizes)
/// padded to 8 bytes, main header, zstd "payload".
fn rpm(name: &str, version: &str, release: &str, arch: &str, files: &[File]) -> Vec<u8> {
    let mut dirs: Vec<String> = Vec::new();
    let mut dirindexes = Vec::new();
    let mut basenames = Vec::new();
    for f in files {
        let (dir, base) = f.path.rsplit_once('/').unwrap();
        let dir = format!("{dir}/");
        let at = dirs.iter().position(|d| *d == dir).unwrap_or_else(|| {
            dirs.push(dir.clone());
            dirs.len() - 1
        });
        dirindexes.push(at as u32);
        basenames.push(base.to_owned());
    }
    let main = header(
        63,
        vec![
            (1000, Value::Str(name.into())),
            (1001, Value::Str(version.into())),
            (1002, Value::Str(release.into())),
            (1004, Value::Str("The GNU core utilities".into())),
            (1022, Value::Str(arch.into())),
            (
                1028,
                Value::Int32(
                    files
                        .iter()
                        .map(|f| f.content.as_ref().map_or(4096, |c| c.len() as u32))
                        .collect(),
                ),
            ),
            (1030, Value::Int16(files.iter().map(|f| f.mode).collect())),
            (
                1035,
                Value::Strs(
                    files
                        .iter()
                        .map(|f| f.content.as_deref().map(sha256).unwrap_or_default())
                        .collect(),
                ),
            ),
            (
                1037,
                Value::Int32(files.iter().map(|f| if f.ghost { 64 } else { 0 }).collect()),
            ),
            (1116, Value::Int32(dirindexes)),
            (1117, Value::Strs(basenames)),
            (1118, Value::Strs(dirs)),
            (1124, Value::Str("cpio".into())),
            (1125, Value::Str("zstd".into())),
            (5011, Value::Int32(vec![8])),
        ],
    );
    let payload = zstd::encode_all(
        &files
            .iter()
            .filter_map(|f| f.content.clone())
            .flatten()
            .collect::<Vec<u8>>()[..],
        3,
    )
    .unwrap();
    let signature = header(
        62,
        vec![
            (269, Value::Str(hex::encode([0u8; 20]))),
            (273, Value::Str(sha256(&main))),
            (
                1000,
                Value::Int32(vec![(main.len() + payload.len()) as u32]),
            ),
            (1004, Value::Bin(vec![0; 16])),
        ],
    );
    let mut lead = vec![0xed, 0xab, 0xee, 0xdb, 3, 0, 0, 0, 0, 1];
    let mut lead_name = format!("{name}-{version}-{release}").into_bytes();
    lead_name.resize(66, 0);
    lead.extend(lead_name);
    lead.extend([0, 1, 0, 5]);
    lead.extend([0u8; 16]);
    assert_eq!(lead.len(), 96);
    let mut out = lead;
    out.extend(&signature);
    while out.len() % 8 != 0 {
        out.push(0);
    }
    out.extend(main);
    out.extend(payload);
    out
}

/// The ELF `ls` of a package for `arch`.
fn elf(what: &str, arch: &str) -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend(format!("{what} for {arch} ").repeat(500).bytes());
    elf
}

fn coreutils(arch: &str) -> Vec<u8> {
    rpm(
        "coreutils",
        "9.5",
        "6.el10",
        arch,
        &[
            file("/usr/bin", 0o40755, None),
            file("/usr/bin/ls", 0o100755, Some(elf("ls", arch))),
            file("/usr/bin/dir", 0o120777, None),
            file(
                "/usr/lib64/coreutils/libstdbuf.so",
                0o100644,
                Some(elf("libstdbuf", arch)),
            ),
            file(
                "/usr/share/licenses/coreutils/COPYING",
                0o100644,
                Some(b"GPL-3.0-or-later\n".to_vec()),
            ),
            File {
                ghost: true,
                ..file("/usr/bin/ghost", 0o100755, Some(b"not shipped".to_vec()))
            },
        ],
    )
}

fn wget(arch: &str) -> Vec<u8> {
    rpm(
        "wget",
        "1.24.5",
        "5.el10",
        arch,
        &[file("/usr/bin/wget", 0o100755, Some(elf("wget", arch)))],
    )
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn package(name: &str, arch: &str, ver: &str, rel: &str, href: &str, body: &[u8]) -> String {
    format!(
        r#"<package type="rpm">
  <name>{name}</name>
  <arch>{arch}</arch>
  <version epoch="0" ver="{ver}" rel="{rel}"/>
  <checksum type="sha256" pkgid="YES">{}</checksum>
  <summary>The GNU core utilities: a set of tools commonly used in shell scripts</summary>
  <description>These are the GNU core utilities.</description>
  <packager>Rocky Linux Build System (Peridot) &lt;releng@rockylinux.org&gt;</packager>
  <url>https://www.gnu.org/software/coreutils/</url>
  <time file="1747000000" build="1746900000"/>
  <size package="{}" installed="6000000" archive="6100000"/>
  <location href="{href}"/>
  <format>
    <rpm:license>GPL-3.0-or-later</rpm:license>
    <rpm:vendor>Rocky Enterprise Software Foundation</rpm:vendor>
    <rpm:group>Unspecified</rpm:group>
    <rpm:buildhost>iad1-prod-build001.bld.equ.rockylinux.org</rpm:buildhost>
    <rpm:sourcerpm>{name}-{ver}-{rel}.src.rpm</rpm:sourcerpm>
    <rpm:header-range start="4504" end="40000"/>
    <rpm:provides>
      <rpm:entry name="{name}" flags="EQ" epoch="0" ver="{ver}" rel="{rel}"/>
    </rpm:provides>
    <file>/usr/bin/ls</file>
  </format>
</package>
"#,
        sha256(body),
        body.len()
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tamper {
    Nothing,
    Signature,
    OtherKey,
    Primary,
    Rpm,
    /// Not tampering: a mirror whose `location href`s are relative paths out of the
    /// repository (`../../../pool/…`), as repository managers answer.
    MirrorLinks,
}

struct Mirror {
    site: Site,
    packages: Vec<(String, Vec<u8>)>,
}

/// The mirror: release 10 (and its minor's directory, not followed), BaseOS with an old and
/// the current coreutils plus a package not followed, AppStream with wget.
fn mirror(key: &SignedSecretKey, tamper: Tamper) -> Mirror {
    let site = Site::new();
    site.file(
        "/",
        "<html><head><title>Index of /pub/rocky/</title></head><body><h1>Index of /pub/rocky/</h1><hr><pre>\
         <a href=\"../\">../</a>\n<a href=\"10/\">10/</a>      12-Nov-2025 09:00    -\n\
         <a href=\"10.1/\">10.1/</a>    12-Nov-2025 09:00    -\n<a href=\"RPM-GPG-KEY-Rocky-10\">RPM-GPG-KEY-Rocky-10</a>\n\
         </pre><hr></body></html>",
    );
    let mut packages = Vec::new();
    for arch in ["x86_64", "aarch64"] {
        for repo in ["BaseOS", "AppStream"] {
            let dir = format!("/10/{repo}/{arch}/os");
            let mut listed = Vec::new();
            if repo == "BaseOS" {
                let current = coreutils(arch);
                let href = format!("Packages/c/coreutils-9.5-6.el10.{arch}.rpm");
                let served = if tamper == Tamper::Rpm && arch == "x86_64" {
                    let mut evil = current.clone();
                    evil.extend_from_slice(b"implant");
                    evil
                } else {
                    current.clone()
                };
                site.file(&format!("{dir}/{href}"), served);
                listed.push(package("coreutils", arch, "9.5", "6.el10", &href, &current));
                listed.push(package(
                    "coreutils",
                    arch,
                    "9.5",
                    "5.el10",
                    "Packages/c/old.rpm",
                    b"old",
                ));
                listed.push(package(
                    "bzip2",
                    arch,
                    "1.0.8",
                    "25.el10",
                    "Packages/b/bzip2.rpm",
                    b"bz",
                ));
                packages.push((format!("coreutils-9.5-6.el10.{arch}.rpm"), current));
            } else {
                let current = wget(arch);
                let href = if tamper == Tamper::MirrorLinks {
                    format!("../../../pool/wget-1.24.5-5.el10.{arch}.rpm")
                } else {
                    format!("Packages/w/wget-1.24.5-5.el10.{arch}.rpm")
                };
                let served_at = if tamper == Tamper::MirrorLinks {
                    format!("/10/pool/wget-1.24.5-5.el10.{arch}.rpm")
                } else {
                    format!("{dir}/{href}")
                };
                site.file(&served_at, current.clone());
                listed.push(package("wget", arch, "1.24.5", "5.el10", &href, &current));
                packages.push((format!("wget-1.24.5-5.el10.{arch}.rpm"), current));
            }
            let primary_xml = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" \
                 xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"{}\">\n{}</metadata>\n",
                listed.len(),
                listed.join("")
            );
            let mut primary = gz(primary_xml.as_bytes());
            let primary_sum = sha256(&primary);
            let href = if tamper == Tamper::MirrorLinks {
                format!("./repodata/../repodata/{primary_sum}-primary.xml.gz")
            } else {
                format!("repodata/{primary_sum}-primary.xml.gz")
            };
            let repomd = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" \
                 xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n  <revision>1762938000</revision>\n\
                 \x20 <data type=\"primary\">\n    <checksum type=\"sha256\">{primary_sum}</checksum>\n\
                 \x20   <open-checksum type=\"sha256\">{}</open-checksum>\n    <location href=\"{href}\"/>\n\
                 \x20   <timestamp>1762937900</timestamp>\n    <size>{}</size>\n    <open-size>{}</open-size>\n  </data>\n\
                 \x20 <data type=\"filelists\">\n    <checksum type=\"sha256\">{}</checksum>\n\
                 \x20   <location href=\"repodata/x-filelists.xml.gz\"/>\n  </data>\n</repomd>\n",
                sha256(primary_xml.as_bytes()),
                primary.len(),
                primary_xml.len(),
                sha256(b"filelists"),
            );
            if tamper == Tamper::Primary && arch == "x86_64" {
                primary = gz(primary_xml.replace("6.el10", "7.el10").as_bytes());
            }
            site.file(
                &format!("{dir}/repodata/{primary_sum}-primary.xml.gz"),
                primary,
            );
            let signature = match tamper {
                Tamper::OtherKey => detach_sign(&archive_key().0, repomd.as_bytes()),
                _ => detach_sign(key, repomd.as_bytes()),
            };
            let served = if tamper == Tamper::Signature {
                repomd.replace("1762938000", "1762938001")
            } else {
                repomd
            };
            site.file(&format!("{dir}/repodata/repomd.xml"), served);
            site.file(&format!("{dir}/repodata/repomd.xml.asc"), signature);
        }
    }
    Mirror { site, packages }
}

async fn run(public: &str, site: &Site) -> (VendorReport, MemorySink) {
    let base = site.serve().await;
    let mut config = config_for("rockylinux", &base);
    config.items = vec!["coreutils".into(), "wget".into()];
    let mut limits = limits();
    limits.members.enabled = true;
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits);
    let sink = MemorySink::default();
    let report = ingest_vendor(&RockyLinux::with_keys(&[public]), &ctx, &sink, &clock()).await;
    (report, sink)
}

#[tokio::test]
async fn rocky_follows_the_signed_chain_to_the_file_digests_of_each_package() {
    let (key, public) = archive_key();
    let repo = mirror(&key, Tamper::Nothing);
    let (report, sink) = run(&public, &repo.site).await;
    assert!(
        report.errors == 0 && report.rejected == 0 && report.archive_problems == 0,
        "{:#?}",
        report.problems
    );
    // Per arch: coreutils (ls, libstdbuf.so) and wget (wget).
    assert_eq!(
        (report.discovered, report.downloaded, report.members),
        (4, 4, 6)
    );
    assert_eq!(report.recorded, 10);
    // The minor release's directory is not a release of its own.
    assert!(!repo.site.hit("/10.1/BaseOS/x86_64/os/repodata/repomd.xml"));
    for (arch, model_arch) in [("x86_64", Amd64), ("aarch64", Arm64)] {
        let name = format!("coreutils-9.5-6.el10.{arch}.rpm");
        let package = sink.get(&name, Linux, model_arch);
        assert_eq!(package.vendor, "Rocky Linux");
        assert_eq!(package.version, "9.5-6.el10");
        let served = &repo.packages.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(package.hash_sha256, sha256(served));

        let ls = sink.get("usr/bin/ls", Linux, model_arch);
        assert_eq!(ls.hash_sha256, sha256(&elf("ls", arch)));
        assert_eq!(ls.size, Some(elf("ls", arch).len() as u64));
        // An RPM header lists SHA-256 only; the file itself was not hashed here.
        assert_eq!((ls.hash_sha1.clone(), ls.hash_md5.clone()), (None, None));
        assert!(!ls.download_verified);
        assert_eq!(ls.version, "9.5-6.el10");
        assert!(
            ls.source_url.ends_with(&format!(
                "/10/BaseOS/{arch}/os/Packages/c/{name}#usr/bin/ls"
            )),
            "{}",
            ls.source_url
        );
        let lib = sink.get("usr/lib64/coreutils/libstdbuf.so", Linux, model_arch);
        assert_eq!(lib.hash_sha256, sha256(&elf("libstdbuf", arch)));
        let wget = sink.get("usr/bin/wget", Linux, model_arch);
        assert_eq!(wget.hash_sha256, sha256(&elf("wget", arch)));
        assert_eq!(wget.version, "1.24.5-5.el10");
    }
    // Directories, symlinks, documentation and ghost files are not recorded.
    let records = sink.records.lock().unwrap();
    for absent in ["usr/bin", "usr/bin/dir", "usr/bin/ghost"] {
        assert!(records.iter().all(|(_, r)| r.executable_name != absent));
    }
    assert!(
        records
            .iter()
            .all(|(_, r)| !r.executable_name.contains("COPYING"))
    );
}

#[tokio::test]
async fn a_repomd_whose_signature_fails_records_nothing() {
    let (key, public) = archive_key();
    for tamper in [Tamper::Signature, Tamper::OtherKey] {
        let repo = mirror(&key, tamper);
        let (report, sink) = run(&public, &repo.site).await;
        assert_eq!(report.discovered, 0, "{report:#?}");
        assert!(report.errors >= 1);
        assert!(
            report
                .problems
                .iter()
                .all(|p| p.kind == ProblemKind::Discovery
                    && p.message.contains("no signature verifies")),
            "{:?}",
            report.problems
        );
        assert!(sink.records.lock().unwrap().is_empty());
        // Nothing the unverified repomd.xml points to was read.
        assert!(
            !repo
                .site
                .hits
                .lock()
                .unwrap()
                .iter()
                .any(|p| p.contains("primary") || p.ends_with(".rpm"))
        );
    }
}

#[tokio::test]
async fn a_tampered_primary_or_package_is_refused() {
    let (key, public) = archive_key();
    // Metadata that is not what the signed repomd.xml lists: that repository gives nothing.
    let repo = mirror(&key, Tamper::Primary);
    let (report, sink) = run(&public, &repo.site).await;
    assert_eq!((report.discovered, report.errors), (3, 1), "{report:#?}");
    assert!(report.problems[0].message.contains("possible tampering"));
    assert!(
        sink.records
            .lock()
            .unwrap()
            .iter()
            .all(|(_, r)| !r.executable_name.starts_with("coreutils") || r.arch == Arm64)
    );

    // A package whose bytes disagree with primary.xml: refused as possible tampering,
    // nothing its header lists recorded.
    let repo = mirror(&key, Tamper::Rpm);
    let (report, sink) = run(&public, &repo.site).await;
    assert_eq!((report.mismatches, report.members), (1, 4), "{report:#?}");
    let mismatch = report
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::HashMismatch)
        .unwrap();
    assert!(
        mismatch
            .url
            .as_deref()
            .unwrap()
            .ends_with("coreutils-9.5-6.el10.x86_64.rpm")
    );
    let records = sink.records.lock().unwrap();
    assert!(
        records
            .iter()
            .filter(|(_, r)| r.executable_name == "usr/bin/ls")
            .all(|(_, r)| r.arch == Arm64)
    );
}

#[test]
fn the_package_header_parses_to_its_files() {
    let bytes = coreutils("x86_64");
    let end = ingest::rpm::header_end(&bytes).unwrap().unwrap();
    let header = ingest::rpm::parse_header(&bytes[..end]).unwrap();
    assert_eq!(
        (
            header.name.as_str(),
            header.version.as_str(),
            header.release.as_str()
        ),
        ("coreutils", "9.5", "6.el10")
    );
    let paths: Vec<&str> = header.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/usr/bin/ls",
            "/usr/lib64/coreutils/libstdbuf.so",
            "/usr/share/licenses/coreutils/COPYING"
        ]
    );
    assert!(header.files[0].is_executable() && header.files[1].is_executable());
    assert!(!header.files[2].is_executable());
    // Any truncation of the headers is told, never a panic.
    for cut in [10, 100, 200, end - 1] {
        assert!(ingest::rpm::parse_header(&bytes[..cut]).is_err());
    }
}

#[tokio::test]
async fn locations_relative_to_the_repository_are_followed() {
    let (key, public) = archive_key();
    let repo = mirror(&key, Tamper::MirrorLinks);
    let (report, sink) = run(&public, &repo.site).await;
    assert!(
        report.errors == 0 && report.rejected == 0,
        "{:#?}",
        report.problems
    );
    assert_eq!((report.discovered, report.downloaded), (4, 4));
    let wget = sink.get("wget-1.24.5-5.el10.x86_64.rpm", Linux, Amd64);
    assert!(
        wget.source_url
            .ends_with("/10/pool/wget-1.24.5-5.el10.x86_64.rpm"),
        "{}",
        wget.source_url
    );
    assert_eq!(
        sink.get("usr/bin/wget", Linux, Amd64).hash_sha256,
        sha256(&elf("wget", "x86_64"))
    );
}

/// Publishes a signed repository at `dir`: a gzip `primary.xml` listing `listed` (as
/// `package` writes each), the `repomd.xml` that gives its SHA-256 and the detached
/// signature of that `repomd.xml` (the layout of the mirror and of the vault alike).
fn signed_repo(site: &Site, key: &SignedSecretKey, dir: &str, listed: &[String]) {
    let primary_xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" \
         xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"{}\">\n{}</metadata>\n",
        listed.len(),
        listed.join("")
    );
    let primary = gz(primary_xml.as_bytes());
    let primary_sum = sha256(&primary);
    let repomd = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" \
         xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n  <revision>1731000000</revision>\n\
         \x20 <data type=\"primary\">\n    <checksum type=\"sha256\">{primary_sum}</checksum>\n\
         \x20   <open-checksum type=\"sha256\">{}</open-checksum>\n    \
         <location href=\"repodata/{primary_sum}-primary.xml.gz\"/>\n\
         \x20   <timestamp>1730999900</timestamp>\n    <size>{}</size>\n    <open-size>{}</open-size>\n  </data>\n\
         </repomd>\n",
        sha256(primary_xml.as_bytes()),
        primary.len(),
        primary_xml.len(),
    );
    site.file(
        &format!("{dir}/repodata/{primary_sum}-primary.xml.gz"),
        primary,
    );
    site.file(
        &format!("{dir}/repodata/repomd.xml.asc"),
        detach_sign(key, repomd.as_bytes()),
    );
    site.file(&format!("{dir}/repodata/repomd.xml"), repomd);
}

/// A Rocky Linux 9 coreutils build whose `ls` is its own.
fn coreutils9(rel: &str, arch: &str) -> Vec<u8> {
    rpm(
        "coreutils",
        "8.32",
        rel,
        arch,
        &[file(
            "/usr/bin/ls",
            0o100755,
            Some(elf(&format!("ls 8.32-{rel}"), arch)),
        )],
    )
}

/// The mirror at `/pub/rocky` (major 9 at its current minor 9.6, BaseOS with coreutils
/// 8.32-39.el9) and the vault at `/vault/rocky` with 9.5 (BaseOS with 8.32-36.el9) and 9.4
/// (BaseOS with 8.32-34.el9; its x86_64 package altered, or its x86_64 repomd.xml signed
/// with another key, as `tamper` says); AppStream of each lists nothing followed. Older
/// minors are absent from the vault (HTTP 404).
fn mirror_and_vault(key: &SignedSecretKey, tamper: Tamper) -> Site {
    let site = Site::new();
    site.file(
        "/pub/rocky/",
        "<html><head><title>Index of /pub/rocky/</title></head><body><pre>\
         <a href=\"../\">../</a>\n<a href=\"9/\">9/</a>      20-Nov-2025 09:00    -\n\
         <a href=\"9.6/\">9.6/</a>    20-Nov-2025 09:00    -\n</pre></body></html>",
    );
    for (root, rel) in [
        ("/pub/rocky/9", "39.el9"),
        ("/vault/rocky/9.5", "36.el9"),
        ("/vault/rocky/9.4", "34.el9"),
    ] {
        for arch in ["x86_64", "aarch64"] {
            let body = coreutils9(rel, arch);
            let href = format!("Packages/c/coreutils-8.32-{rel}.{arch}.rpm");
            let dir = format!("{root}/BaseOS/{arch}/os");
            let in_94 = rel == "34.el9" && arch == "x86_64";
            let served = if tamper == Tamper::Rpm && in_94 {
                [body.as_slice(), b"implant"].concat()
            } else {
                body.clone()
            };
            site.file(&format!("{dir}/{href}"), served);
            let listed = [package("coreutils", arch, "8.32", rel, &href, &body)];
            let other = archive_key().0;
            let signer = if tamper == Tamper::OtherKey && in_94 {
                &other
            } else {
                key
            };
            signed_repo(&site, signer, &dir, &listed);
            signed_repo(&site, key, &format!("{root}/AppStream/{arch}/os"), &[]);
        }
    }
    site
}

/// Runs Rocky Linux over `site` with `items`, the vault configured when `vault`.
async fn run_pinned(
    public: &str,
    site: &Site,
    items: &[&str],
    vault: bool,
) -> (VendorReport, MemorySink, String) {
    let base = site.serve().await;
    let mut config = config_for("rockylinux", &format!("{base}/pub/rocky"));
    config.items = items.iter().map(|i| (*i).to_owned()).collect();
    if vault {
        config.snapshot_url = Some(format!("{base}/vault/rocky/"));
    }
    let mut limits = limits();
    limits.members.enabled = true;
    let ctx = FetchContext::new(testkit::vendor::https_client(), config, limits);
    let sink = MemorySink::default();
    let report = ingest_vendor(&RockyLinux::with_keys(&[public]), &ctx, &sink, &clock()).await;
    (report, sink, base)
}

fn vault_hits(site: &Site) -> Vec<String> {
    let hits = site.hits.lock().unwrap();
    hits.iter()
        .filter(|p| p.contains("/vault/"))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_pin_of_an_older_minor_is_read_from_the_vault() {
    let (key, public) = archive_key();
    let site = mirror_and_vault(&key, Tamper::Nothing);
    let (report, sink, _) = run_pinned(&public, &site, &["coreutils=8.32-34.el9"], true).await;
    assert!(
        report.errors == 0 && report.rejected == 0 && report.mismatches == 0,
        "{:#?}",
        report.problems
    );
    assert_eq!(
        (report.discovered, report.downloaded, report.members),
        (2, 2, 2)
    );
    for (arch, model_arch) in [("x86_64", Amd64), ("aarch64", Arm64)] {
        let name = format!("coreutils-8.32-34.el9.{arch}.rpm");
        let package = sink.get(&name, Linux, model_arch);
        assert_eq!(package.vendor, "Rocky Linux");
        assert_eq!(package.version, "8.32-34.el9");
        assert_eq!(package.hash_sha256, sha256(&coreutils9("34.el9", arch)));
        assert!(
            package
                .source_url
                .contains(&format!("/vault/rocky/9.4/BaseOS/{arch}/os/Packages/c/")),
            "{}",
            package.source_url
        );
        let ls = sink.get("usr/bin/ls", Linux, model_arch);
        assert_eq!(ls.version, "8.32-34.el9");
        assert_eq!(ls.hash_sha256, sha256(&elf("ls 8.32-34.el9", arch)));
    }
    // The pin means that version: the live repository's newest is not taken.
    assert!(
        sink.records
            .lock()
            .unwrap()
            .iter()
            .all(|(_, r)| r.version == "8.32-34.el9")
    );
    // Newest minor first, and the search stops at the first minor listing the pin.
    let hits = vault_hits(&site);
    assert!(hits.contains(&"/vault/rocky/9.5/BaseOS/x86_64/os/repodata/repomd.xml".to_owned()));
    assert!(hits.iter().all(|p| !p.contains("/9.3/")), "{hits:?}");
}

#[tokio::test]
async fn without_the_vault_a_pin_the_mirror_does_not_list_is_reported() {
    let (key, public) = archive_key();
    let site = mirror_and_vault(&key, Tamper::Nothing);
    let (report, sink, base) = run_pinned(&public, &site, &["coreutils=8.32-34.el9"], false).await;
    assert_eq!(report.discovered, 0, "{report:#?}");
    assert!(sink.records.lock().unwrap().is_empty());
    assert!(
        report.problems.iter().any(|p| p.message.contains(&format!(
            "coreutils=8.32-34.el9: not listed by the followed repos of {base}/pub/rocky (9);"
        ))),
        "{:#?}",
        report.problems
    );
    assert!(vault_hits(&site).is_empty());
}

#[tokio::test]
async fn a_vault_package_that_disagrees_with_its_signed_metadata_is_refused() {
    let (key, public) = archive_key();
    let site = mirror_and_vault(&key, Tamper::Rpm);
    let (report, sink, _) = run_pinned(&public, &site, &["coreutils=8.32-34.el9"], true).await;
    assert_eq!(report.mismatches, 1, "{report:#?}");
    let mismatch = report
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::HashMismatch)
        .unwrap();
    assert!(mismatch.url.as_deref().unwrap().ends_with(
        "/vault/rocky/9.4/BaseOS/x86_64/os/Packages/c/coreutils-8.32-34.el9.x86_64.rpm"
    ));
    // Nothing of the refused package is recorded; the untouched arch is.
    let records = sink.records.lock().unwrap();
    assert!(records.iter().all(|(_, r)| r.arch == Arm64), "{records:?}");
    assert!(
        records
            .iter()
            .any(|(_, r)| r.executable_name == "usr/bin/ls")
    );
}

#[tokio::test]
async fn a_pin_listed_nowhere_names_the_minors_tried() {
    let (key, public) = archive_key();
    let site = mirror_and_vault(&key, Tamper::Nothing);
    let (report, sink, base) = run_pinned(&public, &site, &["coreutils=8.32-1.el9"], true).await;
    assert!(sink.records.lock().unwrap().is_empty());
    // Absent minors (404) are tried and skipped, not failures of their own.
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    assert!(
        report.problems[0].message.contains(&format!(
            "coreutils=8.32-1.el9: not listed by the followed repos of {base}/pub/rocky (9), \
             nor by the vault at {base}/vault/rocky (9.5, 9.4, 9.3, 9.2, 9.1, 9.0);"
        )),
        "{:#?}",
        report.problems
    );
    assert!(site.hit("/vault/rocky/9.0/BaseOS/aarch64/os/repodata/repomd.xml"));
}

#[tokio::test]
async fn a_vault_repomd_whose_signature_fails_records_nothing_of_it() {
    let (key, public) = archive_key();
    let site = mirror_and_vault(&key, Tamper::OtherKey);
    let (report, sink, _) = run_pinned(&public, &site, &["coreutils=8.32-34.el9"], true).await;
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::Discovery
                && p.message
                    .contains("/vault/rocky/9.4/BaseOS/x86_64/os/repodata/repomd.xml")
                && p.message.contains("no signature verifies")),
        "{:#?}",
        report.problems
    );
    // Nothing the unverified repomd.xml points to was read or recorded.
    assert!(
        vault_hits(&site)
            .iter()
            .all(|p| !p.contains("9.4/BaseOS/x86_64") || p.contains("repomd.xml")),
        "{:?}",
        vault_hits(&site)
    );
    let records = sink.records.lock().unwrap();
    assert!(records.iter().all(|(_, r)| r.arch == Arm64), "{records:?}");
}
