//! Arch Linux over loopback: `core.db` and `extra.db` (gzip tar of `<pkg>-<ver>/desc` files, as
//! `repo-add` writes them) naming `.pkg.tar.zst` packages by SHA-256; each package is a zstd
//! tar with `.PKGINFO`, `.MTREE` and the installed files.

use std::io::Write;

use ingest::ProblemKind;
use model::Arch::Amd64;
use model::Platform::Linux;

use crate::vendor_support::{MemorySink, Site, run_with, sha256};

fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn desc(name: &str, version: &str, file: &str, sha: &str) -> String {
    format!(
        "%FILENAME%\n{file}\n\n%NAME%\n{name}\n\n%BASE%\n{name}\n\n%VERSION%\n{version}\n\n\
         %DESC%\nThe basic file, shell and text manipulation utilities\n\n%CSIZE%\n2700000\n\n\
         %ISIZE%\n17000000\n\n%SHA256SUM%\n{sha}\n\n%PGPSIG%\niHUEABYKAB0WIQ\n\n\
         %URL%\nhttps://www.gnu.org/software/coreutils/\n\n%LICENSE%\nGPL-3.0-or-later\n\n\
         %ARCH%\nx86_64\n\n%BUILDDATE%\n1730000000\n\n%PACKAGER%\nSomeone <x@archlinux.org>\n\n\
         %DEPENDS%\nglibc\nacl\n\n"
    )
}

fn db(descs: &[(String, String)]) -> Vec<u8> {
    let files: Vec<(String, Vec<u8>)> = descs
        .iter()
        .map(|(dir, d)| (format!("{dir}/desc"), d.as_bytes().to_vec()))
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar_of(&borrowed)).unwrap();
    gz.finish().unwrap()
}

fn elf(label: &str) -> Vec<u8> {
    let mut e = b"\x7fELF\x02\x01\x01\x00".to_vec();
    e.extend(label.repeat(500).bytes());
    e
}

/// A package's `.MTREE` as makepkg writes it (libarchive's mtree writer, gzip-compressed):
/// defaults on `/set` lines, then one line per path, files with their digests.
fn mtree(ls_sha256: &str) -> Vec<u8> {
    let text = format!(
        "#mtree\n/set type=file uid=0 gid=0 mode=644\n\
         ./.PKGINFO time=1730000000.0 size=40 md5digest=0123456789abcdef0123456789abcdef \
         sha256digest=0000000000000000000000000000000000000000000000000000000000000000\n\
         ./usr time=1730000000.0 mode=755 type=dir\n\
         ./usr/bin time=1730000000.0 mode=755 type=dir\n\
         ./usr/bin/ls time=1730000000.0 mode=755 size=4008 md5digest=0123456789abcdef0123456789abcdef \
         sha256digest={ls_sha256}\n\
         ./usr/bin/vdir time=1730000000.0 mode=777 type=link link=ls\n"
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap()
}

fn site(tampered: bool) -> (Site, Vec<u8>) {
    site_with(tampered, None)
}

/// `listed_ls`: the SHA-256 the package's `.MTREE` gives `usr/bin/ls` (default: its own).
fn site_with(tampered: bool, listed_ls: Option<&str>) -> (Site, Vec<u8>) {
    let ls = elf("arch ls ");
    let manifest = mtree(listed_ls.unwrap_or(&sha256(&ls)));
    let pkg = zstd::encode_all(
        tar_of(&[
            (".PKGINFO", b"pkgname = coreutils\npkgver = 9.5-2\n"),
            (".MTREE", &manifest),
            ("usr/bin/ls", &ls),
            ("usr/share/man/man1/ls.1.gz", b"\x1f\x8b manual"),
        ])
        .as_slice(),
        3,
    )
    .unwrap();
    let file = "coreutils-9.5-2-x86_64.pkg.tar.zst";
    let core = db(&[
        (
            "coreutils-9.5-2".into(),
            desc("coreutils", "9.5-2", file, &sha256(&pkg)),
        ),
        (
            "zlib-1:1.3.1-2".into(),
            desc(
                "zlib",
                "1:1.3.1-2",
                "zlib-1:1.3.1-2-x86_64.pkg.tar.zst",
                &sha256(b"z"),
            ),
        ),
    ]);
    let mut served = pkg.clone();
    if tampered {
        served.extend_from_slice(b"implant");
    }
    let site = Site::new()
        .file("/core/os/x86_64/core.db", core)
        .file("/extra/os/x86_64/extra.db", db(&[]))
        .file(&format!("/core/os/x86_64/{file}"), served);
    (site, ls)
}

#[tokio::test]
async fn arch_reads_the_databases_and_the_files_of_each_package() {
    let (site, ls) = site(false);
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("archlinux", &base, &sink, |config, limits| {
        config.items = vec!["coreutils".into()];
        limits.members.enabled = true;
    })
    .await;
    assert!(report.errors == 0 && report.rejected == 0, "{report:#?}");
    assert_eq!((report.recorded, report.members), (2, 1));
    let pkg = sink.get("coreutils-9.5-2-x86_64.pkg.tar.zst", Linux, Amd64);
    assert_eq!(
        (pkg.vendor.as_str(), pkg.version.as_str()),
        ("Arch Linux", "9.5-2")
    );
    let member = sink.get("usr/bin/ls", Linux, Amd64);
    assert_eq!(member.hash_sha256, sha256(&ls));
    assert!(
        member
            .source_url
            .ends_with("coreutils-9.5-2-x86_64.pkg.tar.zst#usr/bin/ls")
    );
}

#[tokio::test]
async fn a_tampered_arch_package_gives_no_file() {
    let (site, _) = site(true);
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("archlinux", &base, &sink, |config, limits| {
        config.items = vec!["coreutils".into()];
        limits.members.enabled = true;
    })
    .await;
    assert_eq!((report.mismatches, report.members), (1, 0), "{report:#?}");
    assert_eq!(report.problems[0].kind, ProblemKind::HashMismatch);
}

#[tokio::test]
async fn a_package_whose_files_disagree_with_its_mtree_gives_no_file() {
    // The package matches the signed database, but its own file list gives `ls` another
    // SHA-256: its files are not trusted.
    let other = sha256(b"another ls");
    let (site, _) = site_with(false, Some(&other));
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("archlinux", &base, &sink, |config, limits| {
        config.items = vec!["coreutils".into()];
        limits.members.enabled = true;
    })
    .await;
    assert_eq!((report.mismatches, report.members), (1, 0), "{report:#?}");
    assert_eq!(report.problems[0].kind, ProblemKind::HashMismatch);
    assert!(
        report.problems[0]
            .message
            .contains("usr/bin/ls does not match the package's .MTREE"),
        "{report:#?}"
    );
}
