//! Files inside archives: real zip and tar containers built here (zip with sizes in the local
//! headers and with data descriptors, tar plain and in gzip, xz, bzip2 and zstd), scanned
//! directly and through the pipeline from a vendor channel, with digests checked against
//! independent implementations, the archive's published hash checked first, and the caps.

use std::io::Write;

use ingest::{
    ArchiveFormat, Compression, ExecutableKind, MemberLimits, ProblemKind, VendorReport,
    scan_archive,
};
use model::Arch::Amd64;
use model::Platform::{Universal, Windows};
use serde_json::json;

use crate::vendor_support::{MemorySink, Site, md5, run_with, sha1, sha256};

/// A PE-looking, an ELF-looking and a script file, plus files a host does not run.
fn files(root: &str) -> Vec<(String, Vec<u8>)> {
    let mut exe = b"MZ\x90\x00\x03\x00\x00\x00".to_vec();
    exe.extend((0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()));
    let mut so = b"\x7fELF\x02\x01\x01\x00".to_vec();
    so.extend(format!("{root} library ").repeat(5_000).bytes());
    vec![
        (format!("{root}/node.exe"), exe),
        (format!("{root}/README.md"), b"# Node.js\n".repeat(100)),
        (
            format!("{root}/npx"),
            b"#!/usr/bin/env node\nrequire('npx')\n".to_vec(),
        ),
        (format!("{root}/lib/libnode.so"), so),
        // Same name as the first, elsewhere: a distinct member.
        (
            format!("{root}/tools/node.exe"),
            b"MZ tools copy".repeat(10),
        ),
        (format!("{root}/LICENSE"), Vec::new()),
    ]
}

fn executables(files: &[(String, Vec<u8>)]) -> Vec<&(String, Vec<u8>)> {
    files
        .iter()
        .filter(|(_, d)| d.starts_with(b"MZ") || d.starts_with(b"\x7fELF") || d.starts_with(b"#!"))
        .collect()
}

/// A zip of `files`; `streamed` writes data descriptors (sizes after the data), as
/// streaming archivers and Go's archive/zip do.
fn zip_of(files: &[(String, Vec<u8>)], streamed: bool) -> Vec<u8> {
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut out = Vec::new();
    if streamed {
        let mut w = zip::ZipWriter::new_stream(&mut out);
        w.add_directory("dir/", options).unwrap();
        for (name, data) in files {
            w.start_file(name.as_str(), options).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
    } else {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut out));
        w.add_directory("dir/", options).unwrap();
        for (i, (name, data)) in files.iter().enumerate() {
            // Mix stored and deflated entries.
            let method = if i % 2 == 0 {
                zip::CompressionMethod::Deflated
            } else {
                zip::CompressionMethod::Stored
            };
            w.start_file(name.as_str(), options.compression_method(method))
                .unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
    }
    out
}

fn tar_of(files: &[(String, Vec<u8>)], compression: Compression) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    b.append_data(&mut dir, "./pkg/", std::io::empty()).unwrap();
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        b.append_data(&mut h, format!("./{name}"), data.as_slice())
            .unwrap();
    }
    let raw = b.into_inner().unwrap();
    match compression {
        Compression::None => raw,
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        Compression::Xz => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        Compression::Bzip2 => {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        }
        Compression::Zstd => zstd::encode_all(raw.as_slice(), 1).unwrap(),
    }
}

fn assert_members(scan: &ingest::MemberScan, files: &[(String, Vec<u8>)], prefix: &str) {
    let expected = executables(files);
    assert_eq!(
        scan.members.len(),
        expected.len(),
        "{:?}",
        scan.members.iter().map(|m| &m.path).collect::<Vec<_>>()
    );
    for (name, data) in expected {
        let m = scan
            .members
            .iter()
            .find(|m| m.path == format!("{prefix}{name}"))
            .unwrap_or_else(|| panic!("no member {name}"));
        assert_eq!(m.size, data.len() as u64);
        assert_eq!(m.digests.sha256, sha256(data), "{name}");
        assert_eq!(m.digests.sha1, sha1(data), "{name}");
        assert_eq!(m.digests.md5, md5(data), "{name}");
    }
    assert!(scan.stopped.is_none(), "{:?}", scan.stopped);
}

#[test]
fn zip_members_are_found_with_and_without_data_descriptors() {
    let files = files("node-v20.11.0-win-x64");
    for streamed in [false, true] {
        let zip = zip_of(&files, streamed);
        let scan =
            scan_archive(zip.as_slice(), ArchiveFormat::Zip, &MemberLimits::default()).unwrap();
        assert_members(&scan, &files, "");
        assert_eq!(scan.entries, files.len() + 1, "the directory is an entry");
        let kinds: Vec<ExecutableKind> = scan.members.iter().map(|m| m.kind).collect();
        assert!(kinds.contains(&ExecutableKind::Pe) && kinds.contains(&ExecutableKind::Script));
    }
}

#[test]
fn tar_members_are_found_in_every_compression() {
    let files = files("go");
    for c in [
        Compression::None,
        Compression::Gzip,
        Compression::Xz,
        Compression::Bzip2,
        Compression::Zstd,
    ] {
        let tar = tar_of(&files, c);
        let scan = scan_archive(
            tar.as_slice(),
            ArchiveFormat::Tar(c),
            &MemberLimits::default(),
        )
        .unwrap();
        assert_members(&scan, &files, "");
    }
}

#[test]
fn caps_stop_the_scan_and_keep_what_was_read() {
    let files = files("app");
    let zip = zip_of(&files, true);
    let one = MemberLimits {
        max_members: 1,
        ..MemberLimits::default()
    };
    let scan = scan_archive(zip.as_slice(), ArchiveFormat::Zip, &one).unwrap();
    assert_eq!(scan.members.len(), 1);
    assert!(scan.stopped.as_deref().unwrap().contains("members"));

    // A decompression bomb stops at the decoded-bytes cap.
    let bomb = vec![(String::from("zeros.bin"), vec![0u8; 8 << 20])];
    let small = MemberLimits {
        max_decoded_bytes: 1 << 20,
        ..MemberLimits::default()
    };
    let tar = tar_of(&bomb, Compression::Gzip);
    assert!(tar.len() < 1 << 20, "a small archive");
    let scan = scan_archive(
        tar.as_slice(),
        ArchiveFormat::Tar(Compression::Gzip),
        &small,
    )
    .unwrap();
    assert!(scan.stopped.as_deref().unwrap().contains("decoded"));

    // A member over the size cap is read past, the rest recorded.
    let capped = MemberLimits {
        max_member_bytes: 100_000,
        ..MemberLimits::default()
    };
    let scan = scan_archive(
        zip_of(&files, false).as_slice(),
        ArchiveFormat::Zip,
        &capped,
    )
    .unwrap();
    assert_eq!((scan.members.len(), scan.skipped), (3, 1));
    assert!(scan.members.iter().all(|m| m.path != "app/node.exe"));
}

#[test]
fn a_file_that_is_no_archive_is_unreadable_not_a_panic() {
    for (data, format) in [
        (b"<html>not found</html>".to_vec(), ArchiveFormat::Zip),
        (vec![0xffu8; 4096], ArchiveFormat::Tar(Compression::Xz)),
        (b"PK\x03\x04\x14\x00".to_vec(), ArchiveFormat::Zip),
    ] {
        match scan_archive(data.as_slice(), format, &MemberLimits::default()) {
            Err(ingest::MemberError::Unreadable { .. }) => {}
            Ok(scan) => assert!(scan.members.is_empty() && scan.stopped.is_some()),
            Err(e) => panic!("{e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Through the pipeline: Node.js's SHASUMS256.txt publishes the zip's SHA-256.

fn node_site(version: &str, zip: &[u8], published_sha256: &str) -> Site {
    let index = json!([{"version": version, "date": "2024-11-20", "files": ["win-x64-zip"],
                        "lts": false, "security": false}]);
    let name = format!("node-{version}-win-x64.zip");
    Site::new()
        .file("/dist/index.json", index.to_string())
        .file(
            &format!("/dist/{version}/SHASUMS256.txt"),
            format!("{published_sha256}  {name}\n"),
        )
        .file(&format!("/dist/{version}/{name}"), zip.to_vec())
}

async fn run_members(id: &str, site: &Site, sink: &MemorySink) -> VendorReport {
    let base = site.serve().await;
    run_with(id, &base, sink, |config, limits| {
        limits.members.enabled = true;
        if id == "npm" {
            config.items = vec!["cowsay".into()];
        }
    })
    .await
}

#[tokio::test]
async fn members_of_a_published_zip_are_recorded_after_its_hash_is_checked() {
    let files = files("node-v20.11.0-win-x64");
    let zip = zip_of(&files, false);
    let site = node_site("v20.11.0", &zip, &sha256(&zip));
    let sink = MemorySink::default();
    let report = run_members("nodejs", &site, &sink).await;
    assert!(
        report.errors == 0 && report.rejected == 0,
        "{:#?}",
        report.problems
    );
    assert_eq!((report.members, report.downloaded), (4, 1));
    assert_eq!(report.recorded, 5, "the zip and its four executables");

    let exe = sink.get("node-v20.11.0-win-x64/node.exe", Windows, Amd64);
    let data = &files[0].1;
    assert_eq!(
        (
            exe.hash_sha256.as_str(),
            exe.hash_sha1.as_deref(),
            exe.hash_md5.as_deref()
        ),
        (
            sha256(data).as_str(),
            Some(sha1(data).as_str()),
            Some(md5(data).as_str())
        )
    );
    assert!(exe.download_verified);
    // The member's own size, as hashed.
    assert_eq!(exe.size, Some(data.len() as u64));
    assert_eq!(exe.vendor, "Node.js");
    assert_eq!(exe.version, "v20.11.0");
    let archive_url = format!(
        "{}/dist/v20.11.0/node-v20.11.0-win-x64.zip",
        site.serve().await
    );
    assert!(
        exe.source_url
            .ends_with("/dist/v20.11.0/node-v20.11.0-win-x64.zip#node-v20.11.0-win-x64/node.exe"),
        "{} vs {archive_url}",
        exe.source_url
    );
    // Two files named node.exe stay distinct by their path.
    let tools = sink.get("node-v20.11.0-win-x64/tools/node.exe", Windows, Amd64);
    assert_ne!(tools.hash_sha256, exe.hash_sha256);
    sink.get("node-v20.11.0-win-x64/npx", Windows, Amd64);
    sink.get("node-v20.11.0-win-x64/lib/libnode.so", Windows, Amd64);
    // The next version's node.exe is the same executable's history.
    assert_eq!(
        model::family_of("node-v20.11.0-win-x64/node.exe", "v20.11.0"),
        model::family_of("node-v20.12.0-win-x64/node.exe", "v20.12.0")
    );
    // The download is audited against the archive's record.
    let audits = sink.audits.lock().unwrap().clone();
    assert_eq!(audits.len(), 1);
    assert!(audits[0].url.ends_with("node-v20.11.0-win-x64.zip"));
}

#[tokio::test]
async fn a_tampered_archive_gives_no_member_and_reports_a_mismatch() {
    let files = files("node-v20.11.0-win-x64");
    let genuine = zip_of(&files, false);
    let mut tampered_files = files.clone();
    tampered_files[0].1.extend_from_slice(b"implant");
    let tampered = zip_of(&tampered_files, false);
    let site = node_site("v20.11.0", &tampered, &sha256(&genuine));
    let sink = MemorySink::default();
    let report = run_members("nodejs", &site, &sink).await;
    assert_eq!((report.mismatches, report.members), (1, 0), "{report:#?}");
    assert_eq!(report.problems[0].kind, ProblemKind::HashMismatch);
    assert!(report.problems[0].message.contains("tampered"));
    // Neither the published hash nor the bytes' can be trusted: nothing is recorded.
    let records = sink.records.lock().unwrap();
    assert!(records.is_empty(), "{records:#?}");
}

/// npm publishes a SHA-1 of the tarball: the download is checked against it, then the
/// package's executable scripts (`bin`) are recorded.
#[tokio::test]
async fn members_of_a_downloaded_tarball_follow_its_checked_sha1() {
    let files = vec![
        (
            "package/cli.js".to_owned(),
            b"#!/usr/bin/env node\nconsole.log('moo')\n".to_vec(),
        ),
        (
            "package/index.js".to_owned(),
            b"module.exports = 1\n".to_vec(),
        ),
        ("package/package.json".to_owned(), b"{}".to_vec()),
    ];
    let tgz = tar_of(&files, Compression::Gzip);
    let packument = |shasum: &str| {
        json!({"name": "cowsay", "dist-tags": {"latest": "1.6.0"}, "versions": {"1.6.0": {
            "name": "cowsay", "version": "1.6.0",
            "dist": {"shasum": shasum, "tarball": "{BASE}/cowsay/-/cowsay-1.6.0.tgz"}}}})
        .to_string()
    };
    let site = Site::new()
        .file("/cowsay", packument(&sha1(&tgz)))
        .file("/cowsay/-/cowsay-1.6.0.tgz", tgz.clone());
    let sink = MemorySink::default();
    let report = run_members("npm", &site, &sink).await;
    assert!(report.errors == 0 && report.rejected == 0, "{report:#?}");
    assert_eq!((report.recorded, report.members), (2, 1));
    let cli = sink.get("package/cli.js", Universal, model::Arch::Universal);
    assert_eq!(cli.hash_sha256, sha256(&files[0].1));
    assert_eq!(cli.vendor, "npm");

    // The same tarball behind a wrong SHA-1: nothing at all is recorded.
    let site = Site::new()
        .file("/cowsay", packument(&sha1(b"something else")))
        .file("/cowsay/-/cowsay-1.6.0.tgz", tgz);
    let sink = MemorySink::default();
    let report = run_members("npm", &site, &sink).await;
    assert_eq!((report.mismatches, report.recorded), (1, 0));
    assert!(sink.records.lock().unwrap().is_empty());
}
