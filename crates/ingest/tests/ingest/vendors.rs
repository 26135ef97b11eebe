//! Every vendor fetcher against a loopback HTTPS server speaking that vendor's channel format,
//! through the whole pipeline into an in-memory sink: version discovery, platform and arch
//! mapping, downloads where no SHA-256 is published, vendors down or broken, and published
//! hashes that disagree with the served bytes.
//!
//! Sample documents follow the real formats (structure and naming copied from each channel's
//! documented or observed responses, cited at each vendor's module in `src/`); digests are
//! made up unless a test downloads the file.

use crate::vendor_support;
use crate::vendor_support::{
    ConnectProxy, MemorySink, Site, body, dead_base, fake_hex, md5, run, run_with, sha1, sha256,
};
use ingest::{ProblemKind, VendorReport, vendors};
use model::Arch::{Amd64, Arm, Arm64, Universal, X86};
use model::Platform::{Android, Darwin, Linux, Windows};
use serde_json::json;

fn h64(seed: &str) -> String {
    fake_hex(seed, 64)
}

fn assert_clean(report: &VendorReport) {
    assert!(
        report.errors == 0 && report.rejected == 0,
        "unexpected problems: {:#?}",
        report.problems
    );
}

// ---------------------------------------------------------------------------------------
// Go: go.dev/dl/?mode=json&include=all

fn go_site() -> Site {
    go_site_with("")
}

/// `salt` changes the published digest of go1.23.4.windows-amd64.msi.
fn go_site_with(salt: &str) -> Site {
    let file = |name: &str, os: &str, arch: &str, kind: &str| {
        let seed = if name == "go1.23.4.windows-amd64.msi" {
            format!("{name}{salt}")
        } else {
            name.to_owned()
        };
        json!({"filename": name, "os": os, "arch": arch, "version": "go1.23.4",
               "sha256": h64(&seed), "size": 75_000_000, "kind": kind})
    };
    let doc = json!([
        {"version": "go1.24rc1", "stable": false, "files": [
            file("go1.24rc1.windows-amd64.msi", "windows", "amd64", "installer")]},
        {"version": "go1.23.4", "stable": true, "files": [
            file("go1.23.4.src.tar.gz", "", "", "source"),
            file("go1.23.4.darwin-arm64.pkg", "darwin", "arm64", "installer"),
            file("go1.23.4.freebsd-amd64.tar.gz", "freebsd", "amd64", "archive"),
            file("go1.23.4.linux-amd64.tar.gz", "linux", "amd64", "archive"),
            file("go1.23.4.linux-armv6l.tar.gz", "linux", "armv6l", "archive"),
            file("go1.23.4.windows-386.zip", "windows", "386", "archive"),
            file("go1.23.4.windows-amd64.msi", "windows", "amd64", "installer")]},
        {"version": "go1.22.10", "stable": true, "files": [
            file("go1.22.10.windows-amd64.msi", "windows", "amd64", "installer")]},
    ]);
    Site::new().file("/dl/", doc.to_string())
}

#[tokio::test]
async fn go_takes_the_newest_stable_release_from_the_manifest() {
    let site = go_site();
    let (report, sink) = run("go", &site).await;
    assert_clean(&report);
    assert_eq!(
        (report.discovered, report.recorded, report.downloaded),
        (5, 5, 0)
    );
    assert_eq!(sink.versions(), ["go1.23.4"]);
    let msi = sink.get("go1.23.4.windows-amd64.msi", Windows, Amd64);
    assert_eq!(msi.hash_sha256, h64("go1.23.4.windows-amd64.msi"));
    assert!(msi.source_url.ends_with("/dl/go1.23.4.windows-amd64.msi"));
    assert!(!msi.download_verified && msi.hash_sha1.is_none());
    sink.get("go1.23.4.windows-386.zip", Windows, X86);
    sink.get("go1.23.4.linux-armv6l.tar.gz", Linux, Arm);
    sink.get("go1.23.4.darwin-arm64.pkg", Darwin, Arm64);
}

#[tokio::test]
async fn go_records_older_releases_first_when_asked_for_several() {
    let site = go_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("go", &base, &sink, |_, limits| limits.max_versions = 3).await;
    assert_clean(&report);
    // The release candidate is never taken; the older release is recorded first.
    assert_eq!(sink.versions(), ["go1.22.10", "go1.23.4"]);
}

// ---------------------------------------------------------------------------------------
// Node.js: dist/index.json + dist/<v>/SHASUMS256.txt

fn node_site() -> Site {
    let release = |v: &str, lts: serde_json::Value| {
        json!({"version": v, "date": "2024-11-20", "files": ["linux-x64", "osx-arm64-tar", "win-x64-msi", "win-x64-zip"],
               "npm": "10.9.0", "v8": "12.9.202.28", "uv": "1.49.1", "zlib": "1.3.0.1-motley",
               "openssl": "3.0.15+quic", "modules": "131", "lts": lts, "security": false})
    };
    let index = json!([
        release("v22.12.0", json!("Jod")),
        release("v23.3.0", json!(false)),
        release("v20.18.1", json!("Iron")),
    ]);
    let names = [
        "node-v23.3.0-aix-ppc64.tar.gz",
        "node-v23.3.0-darwin-arm64.tar.gz",
        "node-v23.3.0-darwin-x64.tar.xz",
        "node-v23.3.0-headers.tar.gz",
        "node-v23.3.0-linux-arm64.tar.xz",
        "node-v23.3.0-linux-armv7l.tar.xz",
        "node-v23.3.0-linux-s390x.tar.xz",
        "node-v23.3.0-linux-x64.tar.xz",
        "node-v23.3.0-win-x64.zip",
        "node-v23.3.0-x64.msi",
        "node-v23.3.0-arm64.msi",
        "node-v23.3.0.pkg",
        "node-v23.3.0.tar.gz",
        "win-x64/node.exe",
        "win-x64/node.lib",
        "win-x86/node.exe",
    ];
    let sums: String = names.iter().map(|n| format!("{}  {n}\n", h64(n))).collect();
    Site::new()
        .file("/dist/index.json", index.to_string())
        .file("/dist/v23.3.0/SHASUMS256.txt", sums)
}

#[tokio::test]
async fn nodejs_picks_the_highest_version_and_maps_every_build() {
    let site = node_site();
    let (report, sink) = run("nodejs", &site).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 11);
    assert_eq!(sink.versions(), ["v23.3.0"]);
    assert!(!site.hit("/dist/v22.12.0/SHASUMS256.txt"));
    let node = sink.get("node.exe", Windows, Amd64);
    assert!(node.source_url.ends_with("/dist/v23.3.0/win-x64/node.exe"));
    assert_eq!(node.hash_sha256, h64("win-x64/node.exe"));
    sink.get("node.exe", Windows, X86);
    sink.get("node-v23.3.0-arm64.msi", Windows, Arm64);
    sink.get("node-v23.3.0.pkg", Darwin, Universal);
    sink.get("node-v23.3.0-darwin-x64.tar.xz", Darwin, Amd64);
    sink.get("node-v23.3.0-linux-armv7l.tar.xz", Linux, Arm);
}

// ---------------------------------------------------------------------------------------
// Rust: dist/channel-rust-stable.toml

#[tokio::test]
async fn rust_reads_the_stable_channel_manifest() {
    let target = |t: &str| {
        format!(
            "[pkg.rust.target.{t}]\navailable = true\nurl = \"{{BASE}}/dist/2024-11-28/rust-1.83.0-{t}.tar.gz\"\n\
             hash = \"{}\"\nxz_url = \"{{BASE}}/dist/2024-11-28/rust-1.83.0-{t}.tar.xz\"\nxz_hash = \"{}\"\n\
             [[pkg.rust.target.{t}.components]]\npkg = \"rustc\"\ntarget = \"{t}\"\n\n",
            h64(&format!("{t}gz")),
            h64(&format!("{t}xz"))
        )
    };
    let manifest = format!(
        "manifest-version = \"2\"\ndate = \"2024-11-28\"\n\n\
         [pkg.cargo]\nversion = \"0.84.0 (66221abde 2024-11-19)\"\n\
         [pkg.cargo.target.x86_64-unknown-linux-gnu]\navailable = true\n\
         url = \"{{BASE}}/dist/2024-11-28/cargo-1.83.0-x86_64-unknown-linux-gnu.tar.gz\"\nhash = \"{}\"\n\n\
         [pkg.rust]\nversion = \"1.83.0 (90b35a623 2024-11-26)\"\n\n{}{}{}{}\
         [pkg.rust.target.i686-pc-windows-gnu]\navailable = false\n\n[renames.rls]\nto = \"rls-preview\"\n",
        h64("cargo"),
        target("aarch64-apple-darwin"),
        target("x86_64-pc-windows-msvc"),
        target("x86_64-unknown-linux-gnu"),
        target("powerpc64le-unknown-linux-gnu"),
    );
    let site = Site::new().file("/dist/channel-rust-stable.toml", manifest);
    let (report, sink) = run("rust", &site).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 6);
    assert_eq!(sink.versions(), ["1.83.0"]);
    let xz = sink.get("rust-1.83.0-x86_64-pc-windows-msvc.tar.xz", Windows, Amd64);
    assert_eq!(xz.hash_sha256, h64("x86_64-pc-windows-msvcxz"));
    sink.get("rust-1.83.0-aarch64-apple-darwin.tar.gz", Darwin, Arm64);
    sink.get("rust-1.83.0-x86_64-unknown-linux-gnu.tar.gz", Linux, Amd64);
}

// ---------------------------------------------------------------------------------------
// Firefox: product-details + archive SHA256SUMS

#[tokio::test]
async fn firefox_reads_the_latest_release_and_keeps_en_us_installers() {
    let versions = json!({
        "FIREFOX_AURORA": "", "FIREFOX_DEVEDITION": "134.0b9", "FIREFOX_ESR": "128.5.0esr",
        "FIREFOX_ESR_NEXT": "", "FIREFOX_NIGHTLY": "135.0a1", "LAST_RELEASE_DATE": "2024-11-26",
        "LATEST_FIREFOX_DEVEL_VERSION": "134.0b9", "LATEST_FIREFOX_OLDER_VERSION": "3.6.28",
        "LATEST_FIREFOX_RELEASED_DEVEL_VERSION": "134.0b9", "LATEST_FIREFOX_VERSION": "133.0",
        "NEXT_RELEASE_DATE": "2025-01-07"
    });
    let names = [
        "KEY",
        "linux-x86_64/de/firefox-133.0.tar.bz2",
        "linux-x86_64/en-US/firefox-133.0.tar.bz2",
        "linux-x86_64/en-US/firefox-133.0.tar.bz2.asc",
        "mac/en-US/Firefox 133.0.dmg",
        "update/win64/en-US/firefox-133.0.complete.mar",
        "win32/en-US/Firefox Setup 133.0.exe",
        "win64-aarch64/en-US/Firefox Setup 133.0.exe",
        "win64/de/Firefox Setup 133.0.exe",
        "win64/en-US/Firefox Setup 133.0.exe",
        "win64/en-US/Firefox Setup 133.0.msi",
    ];
    let sums: String = names.iter().map(|n| format!("{}  {n}\n", h64(n))).collect();
    let site = Site::new()
        .file("/1.0/firefox_versions.json", versions.to_string())
        .file("/pub/firefox/releases/133.0/SHA256SUMS", sums);
    let (report, sink) = run("firefox", &site).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 6);
    assert_eq!(sink.versions(), ["133.0"]);
    let setup = sink.get("Firefox Setup 133.0.exe", Windows, Amd64);
    assert!(
        setup
            .source_url
            .ends_with("/pub/firefox/releases/133.0/win64/en-US/Firefox%20Setup%20133.0.exe")
    );
    assert_eq!(
        setup.hash_sha256,
        h64("win64/en-US/Firefox Setup 133.0.exe")
    );
    sink.get("Firefox Setup 133.0.exe", Windows, X86);
    sink.get("Firefox Setup 133.0.exe", Windows, Arm64);
    sink.get("Firefox 133.0.dmg", Darwin, Universal);
    sink.get("firefox-133.0.tar.bz2", Linux, Amd64);
    assert!(!site.hit("/pub/firefox/releases/128.5.0esr/SHA256SUMS"));
}

// ---------------------------------------------------------------------------------------
// PuTTY: latest/{sha256sums,sha1sums,md5sums}

#[tokio::test]
async fn putty_merges_its_three_sums_files_and_checks_md5_only_files() {
    let listed = [
        "putty-0.83.tar.gz",
        "w32/putty.exe",
        "w32/putty-0.83-installer.msi",
        "w64/putty.exe",
        "w64/putty-64bit-0.83-installer.msi",
        "w64/putty.exe (installer version)",
        "wa64/putty.exe",
        "wa32/putty.exe",
    ];
    let lines = |len: usize| -> String {
        listed
            .iter()
            .map(|n| format!("{}  {n}\n", fake_hex(n, len)))
            .collect()
    };
    // Two files only in md5sums: one intact, one whose served bytes differ.
    let (pscp, pageant) = (body("pscp.exe"), body("pageant.exe"));
    let md5s = format!(
        "{}{}  w64/pscp.exe\n{}  w64/pageant.exe\n",
        lines(32),
        md5(&pscp),
        md5(b"the genuine pageant.exe")
    );
    let site = Site::new()
        .file("/latest/sha256sums", lines(64))
        .file("/latest/sha1sums", lines(40))
        .file("/latest/md5sums", md5s)
        .file("/0.83/w64/pscp.exe", pscp.clone())
        .file("/0.83/w64/pageant.exe", pageant);
    let (report, sink) = run("putty", &site).await;
    assert_eq!(sink.versions(), ["0.83"]);
    assert_eq!((report.recorded, report.downloaded), (7, 2));
    assert_eq!(
        (report.rejected, report.mismatches, report.errors),
        (1, 1, 0)
    );
    let mismatch = &report.problems[0];
    assert_eq!(mismatch.kind, ProblemKind::HashMismatch);
    assert!(
        mismatch
            .url
            .as_deref()
            .unwrap()
            .ends_with("/0.83/w64/pageant.exe")
    );
    assert!(mismatch.message.contains("MD5"), "{}", mismatch.message);

    let putty = sink.get("putty.exe", Windows, Amd64);
    assert!(putty.source_url.ends_with("/0.83/w64/putty.exe"));
    assert_eq!(
        putty.hash_sha1.as_deref(),
        Some(fake_hex("w64/putty.exe", 40).as_str())
    );
    assert_eq!(
        putty.hash_md5.as_deref(),
        Some(fake_hex("w64/putty.exe", 32).as_str())
    );
    assert!(!putty.download_verified);
    // Hashes taken from the vendor's list: no size known.
    assert_eq!(putty.size, None);
    sink.get("putty.exe", Windows, X86);
    sink.get("putty.exe", Windows, Arm64);
    sink.get("putty.exe", Windows, Arm);
    sink.get("putty-64bit-0.83-installer.msi", Windows, Amd64);
    let downloaded = sink.get("pscp.exe", Windows, Amd64);
    assert!(downloaded.download_verified);
    assert_eq!(downloaded.hash_sha256, sha256(&pscp));
    assert_eq!(downloaded.size, Some(pscp.len() as u64));
    assert_eq!(sink.audits.lock().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------
// VS Code: api/update/<target>/stable/latest

#[tokio::test]
async fn vscode_asks_each_target_and_notes_a_missing_one() {
    let commit = "f1a4fb101478ce6ec82fe9627c43efbf9e98c813";
    let targets = [
        ("win32-x64", "VSCodeSetup-x64-1.95.3.exe"),
        ("win32-x64-user", "VSCodeUserSetup-x64-1.95.3.exe"),
        ("win32-x64-archive", "VSCode-win32-x64-1.95.3.zip"),
        ("win32-arm64", "VSCodeSetup-arm64-1.95.3.exe"),
        ("win32-arm64-user", "VSCodeUserSetup-arm64-1.95.3.exe"),
        ("darwin-universal", "VSCode-darwin-universal.zip"),
        ("darwin-arm64", "VSCode-darwin-arm64.zip"),
        ("darwin", "VSCode-darwin.zip"),
        ("linux-x64", "code-stable-x64-1731512990.tar.gz"),
        ("linux-deb-x64", "code_1.95.3-1731513102_amd64.deb"),
        ("linux-rpm-x64", "code-1.95.3-1731513102.el8.x86_64.rpm"),
        ("linux-arm64", "code-stable-arm64-1731512998.tar.gz"),
    ];
    let mut site = Site::new();
    for (target, file) in targets {
        let doc = json!({"url": format!("{{BASE}}/stable/{commit}/{file}"), "name": "1.95.3", "version": commit,
                         "productVersion": "1.95.3", "hash": fake_hex(file, 40), "timestamp": 1_731_513_102_000_u64,
                         "sha256hash": h64(file), "supportsFastUpdate": true});
        site = site.file(
            &format!("/api/update/{target}/stable/latest"),
            doc.to_string(),
        );
    }
    // linux-armhf fails: noted, the other targets still recorded.
    let site = site.status("/api/update/linux-armhf/stable/latest", 503);
    let (report, sink) = run("vscode", &site).await;
    assert_eq!(
        (report.recorded, report.errors, report.rejected),
        (12, 1, 0)
    );
    assert_eq!(report.problems[0].kind, ProblemKind::Discovery);
    let message = &report.problems[0].message;
    assert!(
        message.contains("linux-armhf") && message.contains("503"),
        "{message}"
    );
    let setup = sink.get("VSCodeSetup-x64-1.95.3.exe", Windows, Amd64);
    assert_eq!(setup.version, "1.95.3");
    assert_eq!(
        setup.hash_sha1.as_deref(),
        Some(fake_hex("VSCodeSetup-x64-1.95.3.exe", 40).as_str())
    );
    sink.get("VSCode-darwin-universal.zip", Darwin, Universal);
    sink.get("VSCode-darwin.zip", Darwin, Amd64);
    sink.get("VSCodeUserSetup-arm64-1.95.3.exe", Windows, Arm64);
    sink.get("code_1.95.3-1731513102_amd64.deb", Linux, Amd64);
}

// ---------------------------------------------------------------------------------------
// kubectl: release/stable.txt + bin/<os>/<arch>/kubectl.sha256

#[tokio::test]
async fn kubectl_follows_stable_txt_and_downloads_where_the_sidecar_is_missing() {
    let mut site = Site::new().file("/release/stable.txt", "v1.31.3");
    let builds = [
        ("linux", "amd64", "kubectl"),
        ("linux", "arm64", "kubectl"),
        ("linux", "arm", "kubectl"),
        ("linux", "386", "kubectl"),
        ("darwin", "amd64", "kubectl"),
        ("darwin", "arm64", "kubectl"),
        ("windows", "amd64", "kubectl.exe"),
        ("windows", "386", "kubectl.exe"),
        ("windows", "arm64", "kubectl.exe"),
    ];
    for (os, arch, file) in builds {
        let path = format!("/release/v1.31.3/bin/{os}/{arch}/{file}");
        let data = body(&path);
        if (os, arch) != ("windows", "arm64") {
            site = site.file(&format!("{path}.sha256"), sha256(&data));
        }
        site = site.file(&path, data);
    }
    let (report, sink) = run("kubectl", &site).await;
    assert_clean(&report);
    assert_eq!((report.recorded, report.downloaded), (9, 1));
    assert_eq!(sink.versions(), ["v1.31.3"]);
    let linux = sink.get("kubectl", Linux, Amd64);
    assert_eq!(
        linux.hash_sha256,
        sha256(&body("/release/v1.31.3/bin/linux/amd64/kubectl"))
    );
    assert!(!linux.download_verified);
    sink.get("kubectl", Linux, X86);
    sink.get("kubectl", Linux, Arm);
    sink.get("kubectl", Darwin, Arm64);
    let arm = sink.get("kubectl.exe", Windows, Arm64);
    let served = body("/release/v1.31.3/bin/windows/arm64/kubectl.exe");
    assert!(arm.download_verified);
    assert_eq!(
        (
            arm.hash_sha256.as_str(),
            arm.hash_sha1.as_deref(),
            arm.hash_md5.as_deref()
        ),
        (
            sha256(&served).as_str(),
            Some(sha1(&served).as_str()),
            Some(md5(&served).as_str())
        )
    );
    assert!(arm.sig_signer.is_none());
    let audits = sink.audits.lock().unwrap();
    assert_eq!(audits.len(), 1);
    assert_eq!(audits[0].size_bytes, served.len() as u64);
    assert!(audits[0].url.ends_with("/windows/arm64/kubectl.exe"));
}

// ---------------------------------------------------------------------------------------
// Terraform: api.releases.hashicorp.com + releases.hashicorp.com SHA256SUMS

#[tokio::test]
async fn terraform_skips_prereleases_and_reads_the_release_sums() {
    let release = |v: &str, pre: bool| {
        json!({"builds": [{"arch": "amd64", "os": "linux", "unsupported": false,
                           "url": format!("{{BASE}}/terraform/{v}/terraform_{v}_linux_amd64.zip")}],
               "is_prerelease": pre, "license_class": "oss", "name": "terraform",
               "status": {"state": "supported", "timestamp_updated": "2024-11-27T15:45:00.000Z"},
               "timestamp_created": "2024-11-27T15:45:00.000Z",
               "url_shasums": format!("{{BASE}}/terraform/{v}/terraform_{v}_SHA256SUMS"),
               "url_source_repository": "https://github.com/hashicorp/terraform", "version": v})
    };
    let api = json!([
        release("1.11.0-beta1", true),
        release("1.10.0", false),
        release("1.9.8", false)
    ]);
    let names = [
        "darwin_amd64",
        "darwin_arm64",
        "freebsd_amd64",
        "linux_386",
        "linux_amd64",
        "linux_arm",
        "linux_arm64",
        "solaris_amd64",
        "windows_386",
        "windows_amd64",
    ];
    let sums: String = names
        .iter()
        .map(|p| format!("{}  terraform_1.10.0_{p}.zip\n", h64(p)))
        .collect();
    let site = Site::new()
        .file("/v1/releases/terraform", api.to_string())
        .file("/terraform/1.10.0/terraform_1.10.0_SHA256SUMS", sums);
    let (report, sink) = run("terraform", &site).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 8);
    assert_eq!(sink.versions(), ["1.10.0"]);
    let linux = sink.get("terraform_1.10.0_linux_amd64.zip", Linux, Amd64);
    assert!(
        linux
            .source_url
            .ends_with("/terraform/1.10.0/terraform_1.10.0_linux_amd64.zip")
    );
    assert_eq!(linux.hash_sha256, h64("linux_amd64"));
    sink.get("terraform_1.10.0_windows_386.zip", Windows, X86);
    sink.get("terraform_1.10.0_linux_arm.zip", Linux, Arm);
}

// ---------------------------------------------------------------------------------------
// VLC: vlc/last/<dir>/ listings + <file>.sha256

fn autoindex(dir: &str, names: &[&str]) -> String {
    let rows: String = names
        .iter()
        .map(|n| format!("<a href=\"{n}\">{n}</a>                       10-Jun-2024 13:45            43503396\n"))
        .collect();
    format!(
        "<html>\n<head><title>Index of {dir}</title></head>\n<body>\n<h1>Index of {dir}</h1><hr><pre>\
         <a href=\"../\">../</a>\n{rows}</pre><hr></body>\n</html>\n"
    )
}

#[tokio::test]
async fn vlc_reads_the_listings_and_downloads_files_without_sidecar() {
    let mut site = Site::new();
    let dirs: [(&str, &[&str]); 3] = [
        (
            "win64",
            &[
                "vlc-3.0.21-win64.7z",
                "vlc-3.0.21-win64.exe",
                "vlc-3.0.21-win64.msi",
                "vlc-3.0.21-win64.zip",
            ],
        ),
        ("win32", &["vlc-3.0.21-win32.exe"]),
        (
            "macosx",
            &[
                "vlc-3.0.21-arm64.dmg",
                "vlc-3.0.21-intel64.dmg",
                "vlc-3.0.21-universal.dmg",
            ],
        ),
    ];
    for (dir, files) in dirs {
        let mut listed = Vec::new();
        for file in files {
            let path = format!("/vlc/last/{dir}/{file}");
            listed.push(file.to_string());
            listed.push(format!("{file}.asc"));
            site = site.file(&path, body(file));
            if *file != "vlc-3.0.21-win64.msi" {
                listed.push(format!("{file}.sha256"));
                site = site.file(
                    &format!("{path}.sha256"),
                    format!("{}  {file}\n", sha256(&body(file))),
                );
            }
        }
        let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
        site = site.file(
            &format!("/vlc/last/{dir}/"),
            autoindex(&format!("/vlc/last/{dir}/"), &listed),
        );
    }
    let (report, sink) = run("vlc", &site).await;
    assert_clean(&report);
    assert_eq!((report.recorded, report.downloaded), (8, 1));
    assert_eq!(sink.versions(), ["3.0.21"]);
    let exe = sink.get("vlc-3.0.21-win64.exe", Windows, Amd64);
    assert_eq!(exe.hash_sha256, sha256(&body("vlc-3.0.21-win64.exe")));
    assert!(!exe.download_verified);
    assert!(
        sink.get("vlc-3.0.21-win64.msi", Windows, Amd64)
            .download_verified
    );
    sink.get("vlc-3.0.21-win32.exe", Windows, X86);
    sink.get("vlc-3.0.21-universal.dmg", Darwin, Universal);
    sink.get("vlc-3.0.21-intel64.dmg", Darwin, Amd64);
    sink.get("vlc-3.0.21-arm64.dmg", Darwin, Arm64);
}

// ---------------------------------------------------------------------------------------
// GitHub releases: 7-Zip and Notepad++

fn gh_release(
    repo: &str,
    tag: &str,
    prerelease: bool,
    assets: &[(&str, Option<String>)],
) -> serde_json::Value {
    let assets: Vec<_> = assets
        .iter()
        .enumerate()
        .map(|(i, (name, digest))| {
            json!({"url": format!("https://api.github.com/repos/{repo}/releases/assets/{i}"), "id": 200_000 + i,
                   "name": name, "label": "", "content_type": "application/octet-stream", "state": "uploaded",
                   "size": 1_588_000, "digest": digest, "download_count": 12_345,
                   "created_at": "2024-11-29T10:00:00Z", "updated_at": "2024-11-29T10:00:00Z",
                   "browser_download_url": format!("{{BASE}}/{repo}/releases/download/{tag}/{name}")})
        })
        .collect();
    json!({"url": format!("https://api.github.com/repos/{repo}/releases/1"), "tag_name": tag,
           "target_commitish": "main", "name": tag, "draft": false, "prerelease": prerelease,
           "created_at": "2024-11-29T10:00:00Z", "published_at": "2024-11-29T10:00:00Z", "assets": assets})
}

fn digest(name: &str) -> Option<String> {
    Some(format!("sha256:{}", h64(name)))
}

#[tokio::test]
async fn seven_zip_reads_asset_digests_and_downloads_assets_without_one() {
    let repo = "ip7z/7zip";
    let msi = body("7z2409-x64.msi");
    let releases = json!([
        gh_release(
            repo,
            "25.00",
            true,
            &[("7z2500-x64.exe", digest("7z2500-x64.exe"))]
        ),
        gh_release(
            repo,
            "24.09",
            false,
            &[
                ("7z2409-arm64.exe", digest("7z2409-arm64.exe")),
                ("7z2409-x64.exe", digest("7z2409-x64.exe")),
                ("7z2409.exe", digest("7z2409.exe")),
                ("7z2409-linux-x64.tar.xz", digest("7z2409-linux-x64.tar.xz")),
                ("7z2409-mac.tar.xz", digest("7z2409-mac.tar.xz")),
                ("7z2409-src.7z", digest("7z2409-src.7z")),
                ("7z2409-x64.msi", None),
            ]
        ),
        gh_release(repo, "24.08", false, &[("7z2408-x64.exe", None)]),
    ]);
    let site = Site::new()
        .file("/repos/ip7z/7zip/releases", releases.to_string())
        .file(
            "/ip7z/7zip/releases/download/24.09/7z2409-x64.msi",
            msi.clone(),
        );
    let (report, sink) = run("7zip", &site).await;
    assert_clean(&report);
    assert_eq!((report.recorded, report.downloaded), (6, 1));
    assert_eq!(sink.versions(), ["24.09"]);
    assert_eq!(
        sink.get("7z2409-x64.exe", Windows, Amd64).hash_sha256,
        h64("7z2409-x64.exe")
    );
    sink.get("7z2409.exe", Windows, X86);
    sink.get("7z2409-arm64.exe", Windows, Arm64);
    sink.get("7z2409-linux-x64.tar.xz", Linux, Amd64);
    sink.get("7z2409-mac.tar.xz", Darwin, Universal);
    let downloaded = sink.get("7z2409-x64.msi", Windows, Amd64);
    assert!(downloaded.download_verified);
    assert_eq!(downloaded.hash_sha256, sha256(&msi));
}

fn borrowed(assets: &[(String, Option<String>)]) -> Vec<(&str, Option<String>)> {
    assets
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect()
}

#[tokio::test]
async fn notepadpp_records_two_releases_oldest_first() {
    let repo = "notepad-plus-plus/notepad-plus-plus";
    let assets = |v: &str| -> Vec<(String, Option<String>)> {
        [
            format!("npp.{v}.Installer.x64.exe"),
            format!("npp.{v}.Installer.x64.exe.sig"),
            format!("npp.{v}.Installer.exe"),
            format!("npp.{v}.Installer.arm64.exe"),
            format!("npp.{v}.portable.x64.zip"),
            format!("npp.{v}.portable.minimalist.7z"),
            format!("npp.{v}.checksums.sha256"),
        ]
        .into_iter()
        .map(|n| {
            let d = digest(&n);
            (n, d)
        })
        .collect()
    };
    let (new, old, older) = (assets("8.7.7"), assets("8.7.6"), assets("8.7.5"));
    let releases = json!([
        gh_release(repo, "v8.7.7", false, &borrowed(&new)),
        gh_release(repo, "v8.7.6", false, &borrowed(&old)),
        gh_release(repo, "v8.7.5", false, &borrowed(&older)),
    ]);
    let site = Site::new().file(&format!("/repos/{repo}/releases"), releases.to_string());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("notepadpp", &base, &sink, |_, limits| {
        limits.max_versions = 2
    })
    .await;
    assert_clean(&report);
    assert_eq!(report.recorded, 8);
    assert_eq!(sink.versions(), ["8.7.6", "8.7.7"]);
    sink.get("npp.8.7.7.Installer.x64.exe", Windows, Amd64);
    sink.get("npp.8.7.7.Installer.exe", Windows, X86);
    sink.get("npp.8.7.7.Installer.arm64.exe", Windows, Arm64);
    sink.get("npp.8.7.7.portable.x64.zip", Windows, Amd64);
}

// ---------------------------------------------------------------------------------------
// More GitHub release channels, each in the GitHub releases API format: every asset a rule
// maps is recorded with its platform and arch; checksums, signatures and sources are not.

#[tokio::test]
async fn github_release_channels_map_their_assets() {
    use model::Platform;
    /// Channel id, repository, tag, assets mapped (name, platform, arch), assets ignored.
    type Channel<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a [(&'a str, Platform, model::Arch)],
        &'a [&'a str],
    );
    let channels: &[Channel] = &[
        (
            "git-windows",
            "git-for-windows/git",
            "v2.47.1.windows.1",
            &[
                ("Git-2.47.1-64-bit.exe", Windows, Amd64),
                ("Git-2.47.1-arm64.exe", Windows, Arm64),
                ("MinGit-2.47.1-64-bit.zip", Windows, Amd64),
                ("MinGit-2.47.1-arm64.zip", Windows, Arm64),
                ("PortableGit-2.47.1-64-bit.7z.exe", Windows, Amd64),
            ],
            &["sha-256.txt", "Git-2.47.1-64-bit.tar.bz2"],
        ),
        (
            "powershell",
            "PowerShell/PowerShell",
            "v7.4.6",
            &[
                ("PowerShell-7.4.6-win-x64.msi", Windows, Amd64),
                ("PowerShell-7.4.6-win-x64.zip", Windows, Amd64),
                ("PowerShell-7.4.6-win-arm64.zip", Windows, Arm64),
                ("powershell-7.4.6-linux-x64.tar.gz", Linux, Amd64),
                ("powershell-7.4.6-linux-arm64.tar.gz", Linux, Arm64),
                ("powershell-7.4.6-osx-arm64.pkg", Darwin, Arm64),
                ("powershell-7.4.6-osx-x64.pkg", Darwin, Amd64),
            ],
            &["hashes.sha256", "powershell-7.4.6-linux-musl-x64.tar.gz"],
        ),
        (
            "windows-terminal",
            "microsoft/terminal",
            "v1.21.3231.0",
            &[
                (
                    "Microsoft.WindowsTerminal_1.21.3231.0_8wekyb3d8bbwe.msixbundle",
                    Windows,
                    Universal,
                ),
                (
                    "Microsoft.WindowsTerminal_1.21.3231.0_x64.zip",
                    Windows,
                    Amd64,
                ),
                (
                    "Microsoft.WindowsTerminal_1.21.3231.0_arm64.zip",
                    Windows,
                    Arm64,
                ),
                (
                    "Microsoft.WindowsTerminal_1.21.3231.0_x86.zip",
                    Windows,
                    X86,
                ),
            ],
            &[
                "Microsoft.WindowsTerminal_1.21.3231.0_8wekyb3d8bbwe.msixbundle_Windows10_PreinstallKit.zip",
            ],
        ),
        (
            "keepassxc",
            "keepassxreboot/keepassxc",
            "2.7.9",
            &[
                ("KeePassXC-2.7.9-Win64.msi", Windows, Amd64),
                ("KeePassXC-2.7.9-Win64.zip", Windows, Amd64),
                ("KeePassXC-2.7.9-x86_64.AppImage", Linux, Amd64),
                ("KeePassXC-2.7.9-arm64.dmg", Darwin, Arm64),
                ("KeePassXC-2.7.9-x86_64.dmg", Darwin, Amd64),
            ],
            &[
                "KeePassXC-2.7.9-Win64.msi.DIGEST",
                "keepassxc-2.7.9-src.tar.xz",
            ],
        ),
        (
            "docker-compose",
            "docker/compose",
            "v2.31.0",
            &[
                ("docker-compose-windows-x86_64.exe", Windows, Amd64),
                ("docker-compose-windows-aarch64.exe", Windows, Arm64),
                ("docker-compose-linux-x86_64", Linux, Amd64),
                ("docker-compose-linux-aarch64", Linux, Arm64),
                ("docker-compose-darwin-x86_64", Darwin, Amd64),
                ("docker-compose-darwin-aarch64", Darwin, Arm64),
            ],
            &["checksums.txt", "docker-compose-linux-x86_64.sha256"],
        ),
        (
            "obs-studio",
            "obsproject/obs-studio",
            "31.0.0",
            &[
                ("OBS-Studio-31.0.0-Windows-Installer.exe", Windows, Amd64),
                ("OBS-Studio-31.0.0-Windows.zip", Windows, Amd64),
                ("OBS-Studio-31.0.0-macOS-Apple.dmg", Darwin, Arm64),
                ("OBS-Studio-31.0.0-macOS-Intel.dmg", Darwin, Amd64),
            ],
            &["OBS-Studio-31.0.0-Sources.tar.gz"],
        ),
        (
            "gh",
            "cli/cli",
            "v2.63.2",
            &[
                ("gh_2.63.2_windows_amd64.msi", Windows, Amd64),
                ("gh_2.63.2_windows_amd64.zip", Windows, Amd64),
                ("gh_2.63.2_windows_arm64.zip", Windows, Arm64),
                ("gh_2.63.2_linux_amd64.tar.gz", Linux, Amd64),
                ("gh_2.63.2_linux_arm64.tar.gz", Linux, Arm64),
                ("gh_2.63.2_macOS_arm64.zip", Darwin, Arm64),
                ("gh_2.63.2_macOS_amd64.zip", Darwin, Amd64),
            ],
            &["gh_2.63.2_checksums.txt", "gh_2.63.2_linux_386.deb"],
        ),
        (
            "rclone",
            "rclone/rclone",
            "v1.68.2",
            &[
                ("rclone-v1.68.2-windows-amd64.zip", Windows, Amd64),
                ("rclone-v1.68.2-windows-arm64.zip", Windows, Arm64),
                ("rclone-v1.68.2-linux-amd64.zip", Linux, Amd64),
                ("rclone-v1.68.2-linux-arm64.zip", Linux, Arm64),
                ("rclone-v1.68.2-osx-arm64.zip", Darwin, Arm64),
                ("rclone-v1.68.2-osx-amd64.zip", Darwin, Amd64),
            ],
            &["SHA256SUMS", "rclone-v1.68.2-linux-amd64.deb"],
        ),
        (
            "syncthing",
            "syncthing/syncthing",
            "v1.28.1",
            &[
                ("syncthing-windows-amd64-v1.28.1.zip", Windows, Amd64),
                ("syncthing-windows-arm64-v1.28.1.zip", Windows, Arm64),
                ("syncthing-linux-amd64-v1.28.1.tar.gz", Linux, Amd64),
                ("syncthing-linux-arm64-v1.28.1.tar.gz", Linux, Arm64),
                ("syncthing-macos-universal-v1.28.1.zip", Darwin, Universal),
            ],
            &["sha256sum.txt.asc", "syncthing-source-v1.28.1.tar.gz"],
        ),
        (
            "jq",
            "jqlang/jq",
            "jq-1.7.1",
            &[
                ("jq-windows-amd64.exe", Windows, Amd64),
                ("jq-linux-amd64", Linux, Amd64),
                ("jq-linux-arm64", Linux, Arm64),
                ("jq-macos-arm64", Darwin, Arm64),
                ("jq-macos-amd64", Darwin, Amd64),
            ],
            &["jq-1.7.1.tar.gz", "sha256sum.txt"],
        ),
        (
            "ripgrep",
            "BurntSushi/ripgrep",
            "14.1.1",
            &[
                ("ripgrep-14.1.1-x86_64-pc-windows-msvc.zip", Windows, Amd64),
                ("ripgrep-14.1.1-aarch64-pc-windows-msvc.zip", Windows, Arm64),
                (
                    "ripgrep-14.1.1-x86_64-unknown-linux-musl.tar.gz",
                    Linux,
                    Amd64,
                ),
                (
                    "ripgrep-14.1.1-aarch64-unknown-linux-gnu.tar.gz",
                    Linux,
                    Arm64,
                ),
                ("ripgrep-14.1.1-aarch64-apple-darwin.tar.gz", Darwin, Arm64),
                ("ripgrep-14.1.1-x86_64-apple-darwin.tar.gz", Darwin, Amd64),
            ],
            &[
                "ripgrep-14.1.1-x86_64-pc-windows-msvc.zip.sha256",
                "ripgrep_14.1.1-1_amd64.deb",
            ],
        ),
        (
            "minikube",
            "kubernetes/minikube",
            "v1.34.0",
            &[
                ("minikube-installer.exe", Windows, Amd64),
                ("minikube-windows-amd64.exe", Windows, Amd64),
                ("minikube-linux-amd64", Linux, Amd64),
                ("minikube-linux-arm64", Linux, Arm64),
                ("minikube-darwin-arm64", Darwin, Arm64),
                ("minikube-darwin-amd64", Darwin, Amd64),
            ],
            &["minikube-linux-amd64.sha256", "minikube-1.34.0.tar.gz"],
        ),
        (
            "restic",
            "restic/restic",
            "v0.17.3",
            &[
                ("restic_0.17.3_windows_amd64.zip", Windows, Amd64),
                ("restic_0.17.3_windows_386.zip", Windows, X86),
                ("restic_0.17.3_linux_amd64.bz2", Linux, Amd64),
                ("restic_0.17.3_linux_arm64.bz2", Linux, Arm64),
                ("restic_0.17.3_darwin_arm64.bz2", Darwin, Arm64),
                ("restic_0.17.3_darwin_amd64.bz2", Darwin, Amd64),
            ],
            &["SHA256SUMS", "restic-0.17.3.tar.gz"],
        ),
        (
            "k9s",
            "derailed/k9s",
            "v0.32.7",
            &[
                ("k9s_Windows_amd64.zip", Windows, Amd64),
                ("k9s_Windows_arm64.zip", Windows, Arm64),
                ("k9s_Linux_amd64.tar.gz", Linux, Amd64),
                ("k9s_Linux_arm64.tar.gz", Linux, Arm64),
                ("k9s_Darwin_arm64.tar.gz", Darwin, Arm64),
                ("k9s_Darwin_amd64.tar.gz", Darwin, Amd64),
            ],
            &["checksums.sha256", "k9s_linux_amd64.deb"],
        ),
        (
            "velociraptor",
            "Velocidex/velociraptor",
            "v0.73.3",
            &[
                ("velociraptor-v0.73.3-windows-amd64.exe", Windows, Amd64),
                ("velociraptor-v0.73.3-windows-amd64.msi", Windows, Amd64),
                ("velociraptor-v0.73.3-windows-386.exe", Windows, X86),
                ("velociraptor-v0.73.3-linux-amd64", Linux, Amd64),
                ("velociraptor-v0.73.3-linux-arm64", Linux, Arm64),
                ("velociraptor-v0.73.3-darwin-arm64", Darwin, Arm64),
                ("velociraptor-v0.73.3-darwin-amd64", Darwin, Amd64),
            ],
            &[
                "velociraptor-v0.73.3-linux-amd64.sig",
                "velociraptor-v0.73.3-linux-amd64-musl",
            ],
        ),
        (
            "neovim",
            "neovim/neovim",
            "v0.10.2",
            &[
                ("nvim-win64.msi", Windows, Amd64),
                ("nvim-win64.zip", Windows, Amd64),
                ("nvim-linux64.tar.gz", Linux, Amd64),
                ("nvim-linux-x86_64.tar.gz", Linux, Amd64),
                ("nvim-linux-arm64.tar.gz", Linux, Arm64),
                ("nvim-macos-arm64.tar.gz", Darwin, Arm64),
                ("nvim-macos-x86_64.tar.gz", Darwin, Amd64),
            ],
            &["nvim-win64.zip.sha256sum", "nvim.appimage.zsync"],
        ),
        (
            "age",
            "FiloSottile/age",
            "v1.2.1",
            &[
                ("age-v1.2.1-windows-amd64.zip", Windows, Amd64),
                ("age-v1.2.1-linux-amd64.tar.gz", Linux, Amd64),
                ("age-v1.2.1-linux-arm64.tar.gz", Linux, Arm64),
                ("age-v1.2.1-darwin-arm64.tar.gz", Darwin, Arm64),
                ("age-v1.2.1-darwin-amd64.tar.gz", Darwin, Amd64),
            ],
            &["age-v1.2.1-linux-amd64.tar.gz.proof"],
        ),
        (
            "chainsaw",
            "WithSecureLabs/chainsaw",
            "v2.10.1",
            &[
                ("chainsaw_x86_64-pc-windows-msvc.zip", Windows, Amd64),
                ("chainsaw_x86_64-unknown-linux-gnu.tar.gz", Linux, Amd64),
                ("chainsaw_aarch64-apple-darwin.tar.gz", Darwin, Arm64),
                ("chainsaw_x86_64-apple-darwin.tar.gz", Darwin, Amd64),
            ],
            &["chainsaw_all_platforms+rules.zip"],
        ),
        (
            "hayabusa",
            "Yamato-Security/hayabusa",
            "v2.18.0",
            &[
                ("hayabusa-2.18.0-win-x64.zip", Windows, Amd64),
                ("hayabusa-2.18.0-win-aarch64.zip", Windows, Arm64),
                ("hayabusa-2.18.0-lin-x64-gnu.zip", Linux, Amd64),
                ("hayabusa-2.18.0-lin-aarch64-gnu.zip", Linux, Arm64),
                ("hayabusa-2.18.0-mac-arm.zip", Darwin, Arm64),
                ("hayabusa-2.18.0-mac-intel.zip", Darwin, Amd64),
            ],
            &["hayabusa-2.18.0-all-platforms.zip"],
        ),
    ];
    for &(id, repo, tag, mapped, ignored) in channels {
        let mut assets: Vec<(&str, Option<String>)> =
            mapped.iter().map(|(n, _, _)| (*n, digest(n))).collect();
        assets.extend(ignored.iter().map(|n| (*n, digest(n))));
        let releases = json!([gh_release(repo, tag, false, &assets)]);
        let site = Site::new().file(&format!("/repos/{repo}/releases"), releases.to_string());
        let (report, sink) = run(id, &site).await;
        assert_clean(&report);
        assert_eq!(
            report.recorded,
            mapped.len(),
            "{id}: {:#?}",
            sink.records.lock().unwrap()
        );
        for (name, platform, arch) in mapped {
            let r = sink.get(name, *platform, *arch);
            assert_eq!(r.hash_sha256, h64(name), "{id}");
            assert_eq!(r.version, tag.trim_start_matches('v'), "{id}");
        }
    }
}

/// HashiCorp's other products share Terraform's release API and SHA256SUMS layout.
#[tokio::test]
async fn hashicorp_products_read_their_release_sums() {
    for (product, version) in [
        ("vault", "2.0.0"),
        ("packer", "1.11.2"),
        ("consul", "1.20.1"),
        ("nomad", "1.9.3"),
    ] {
        let api = json!([
            {"builds": [], "is_prerelease": true, "name": product, "version": format!("{version}-rc1")},
            {"builds": [{"arch": "amd64", "os": "linux",
                         "url": format!("{{BASE}}/{product}/{version}/{product}_{version}_linux_amd64.zip")}],
             "is_prerelease": false, "license_class": "oss", "name": product,
             "timestamp_created": "2024-11-27T15:45:00.000Z",
             "url_shasums": format!("{{BASE}}/{product}/{version}/{product}_{version}_SHA256SUMS"),
             "version": version},
        ]);
        let platforms = [
            "darwin_arm64",
            "linux_amd64",
            "linux_arm64",
            "windows_amd64",
            "freebsd_amd64",
        ];
        let sums: String = platforms
            .iter()
            .map(|p| format!("{}  {product}_{version}_{p}.zip\n", h64(p)))
            .collect();
        let site = Site::new()
            .file(&format!("/v1/releases/{product}"), api.to_string())
            .file(
                &format!("/{product}/{version}/{product}_{version}_SHA256SUMS"),
                sums,
            );
        let (report, sink) = run(product, &site).await;
        assert_clean(&report);
        assert_eq!(report.recorded, 4, "{product}");
        let linux = sink.get(
            &format!("{product}_{version}_linux_amd64.zip"),
            Linux,
            Amd64,
        );
        assert_eq!(linux.hash_sha256, h64("linux_amd64"));
        assert_eq!(linux.vendor, "HashiCorp");
        sink.get(
            &format!("{product}_{version}_darwin_arm64.zip"),
            Darwin,
            Arm64,
        );
    }
}

// ---------------------------------------------------------------------------------------
// F-Droid: repo/index-v2.json

#[tokio::test]
async fn fdroid_takes_every_abi_split_of_the_newest_version() {
    let version = |file: &str, name: &str, code: u64, abis: &[&str]| {
        let mut manifest = json!({"versionName": name, "versionCode": code,
                                  "usesSdk": {"minSdkVersion": 21, "targetSdkVersion": 35},
                                  "signer": {"sha256": [h64("signer")]}});
        if !abis.is_empty() {
            manifest["nativecode"] = json!(abis);
        }
        (
            h64(file),
            json!({"added": 1_732_000_000_000_u64, "file": {"name": format!("/{file}"), "sha256": h64(file), "size": 12_537_183},
                           "manifest": manifest}),
        )
    };
    let nameless = |file: &str, code: u64| {
        (
            h64(file),
            json!({"added": 1_732_000_000_000_u64, "file": {"name": format!("/{file}"), "sha256": h64(file), "size": 1},
                   "manifest": {"versionCode": code, "nativecode": ["arm64-v8a"]}}),
        )
    };
    let app = |versions: Vec<(String, serde_json::Value)>| {
        json!({"metadata": {"name": {"en-US": "App"}, "lastUpdated": 1_732_000_000_000_u64},
               "versions": versions.into_iter().collect::<serde_json::Map<_, _>>()})
    };
    let index = json!({
        "repo": {"name": {"en-US": "F-Droid"}, "address": "https://f-droid.org/repo", "timestamp": 1_732_000_000_000_u64},
        "packages": {
            "org.fdroid.fdroid": app(vec![
                version("org.fdroid.fdroid_1021050.apk", "1.21.0", 1_021_050, &[]),
                version("org.fdroid.fdroid_1020050.apk", "1.20.0", 1_020_050, &[]),
            ]),
            "org.videolan.vlc": app(vec![
                version("org.videolan.vlc_13060103.apk", "3.6.0", 13_060_103, &["armeabi-v7a"]),
                version("org.videolan.vlc_13060104.apk", "3.6.0", 13_060_104, &["arm64-v8a"]),
                version("org.videolan.vlc_13060105.apk", "3.6.0", 13_060_105, &["x86_64"]),
                version("org.videolan.vlc_13050404.apk", "3.5.4", 13_050_404, &["arm64-v8a"]),
                // The index may omit versionName (it is optional in index-v2); such an entry
                // is skipped, never fatal to the app or the index.
                nameless("org.videolan.vlc_13070001.apk", 13_070_001),
                (h64("odd"), json!({"added": 1, "file": 42, "manifest": null})),
            ]),
        }
    });
    let site = Site::new().file("/index-v2.json", index.to_string());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("fdroid", &base, &sink, |config, _| {
        config.items = vec![
            "org.fdroid.fdroid".into(),
            "org.videolan.vlc".into(),
            "com.example.gone".into(),
        ];
    })
    .await;
    // The app missing from the index is noted; the others are recorded.
    assert_eq!((report.recorded, report.errors), (4, 1));
    assert!(report.problems[0].message.contains("com.example.gone"));
    let fdroid = sink.get("org.fdroid.fdroid_1021050.apk", Android, Universal);
    assert_eq!(fdroid.version, "1.21.0");
    assert!(
        fdroid
            .source_url
            .ends_with("/org.fdroid.fdroid_1021050.apk")
    );
    sink.get("org.videolan.vlc_13060104.apk", Android, Arm64);
    sink.get("org.videolan.vlc_13060103.apk", Android, Arm);
    sink.get("org.videolan.vlc_13060105.apk", Android, Amd64);
}

// ---------------------------------------------------------------------------------------
// Android SDK platform-tools: repository2-3.xml (SHA-1 only)

#[tokio::test]
async fn android_platform_tools_are_downloaded_and_checked_against_sha1() {
    let (win, linux, mac) = (body("pt-win"), body("pt-linux"), body("pt-mac"));
    let archive = |sha: &str, url: &str, os: &str| {
        format!(
            "<archive><!--Built on: Mon Jan 13 2025.--><complete><size>6700000</size>\
             <checksum type=\"sha1\">{sha}</checksum><url>{url}</url></complete><host-os>{os}</host-os></archive>"
        )
    };
    let package = |attrs: &str, rev: (u32, u32, u32), channel: &str, archives: String| {
        format!(
            "<remotePackage path=\"platform-tools\"{attrs}><type-details xsi:type=\"generic:genericDetailsType\"/>\
             <revision><major>{}</major><minor>{}</minor><micro>{}</micro></revision>\
             <display-name>Android SDK Platform-Tools</display-name><uses-license ref=\"android-sdk-license\"/>\
             <channelRef ref=\"{channel}\"/><archives>{archives}</archives></remotePackage>",
            rev.0, rev.1, rev.2
        )
    };
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
         <sdk:sdk-repository xmlns:sdk=\"http://schemas.android.com/sdk/android/repo/repository2/03\" \
         xmlns:common=\"http://schemas.android.com/repository/android/common/02\" \
         xmlns:generic=\"http://schemas.android.com/repository/android/generic/02\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\
         <license id=\"android-sdk-license\" type=\"text\">Terms and Conditions</license>\
         <channel id=\"channel-0\">stable</channel><channel id=\"channel-1\">beta</channel>\
         {}{}{}{}\
         <remotePackage path=\"build-tools;35.0.0\"><revision><major>35</major></revision><archives>{}</archives></remotePackage>\
         </sdk:sdk-repository>",
        package(
            "",
            (35, 0, 2),
            "channel-0",
            archive(
                &fake_hex("old", 40),
                "platform-tools_r35.0.2-win.zip",
                "windows"
            )
        ),
        package(
            "",
            (36, 0, 0),
            "channel-0",
            archive(&sha1(&win), "platform-tools_r36.0.0-win.zip", "windows")
                + &archive(&sha1(&linux), "platform-tools_r36.0.0-linux.zip", "linux")
                + &archive(
                    &sha1(b"genuine mac archive"),
                    "platform-tools_r36.0.0-darwin.zip",
                    "macosx"
                )
        ),
        package(
            "",
            (37, 0, 0),
            "channel-1",
            archive(
                &fake_hex("beta", 40),
                "platform-tools_r37.0.0-rc1-win.zip",
                "windows"
            )
        ),
        package(
            " obsolete=\"true\"",
            (40, 0, 0),
            "channel-0",
            archive(
                &fake_hex("obs", 40),
                "platform-tools_r40-win.zip",
                "windows"
            )
        ),
        archive(&fake_hex("bt", 40), "build-tools_r35_linux.zip", "linux"),
    );
    let site = Site::new()
        .file("/repository2-3.xml", xml)
        .file("/platform-tools_r36.0.0-win.zip", win.clone())
        .file("/platform-tools_r36.0.0-linux.zip", linux)
        .file("/platform-tools_r36.0.0-darwin.zip", mac);
    let (report, sink) = run("android-platform-tools", &site).await;
    assert_eq!(
        (report.discovered, report.downloaded, report.recorded),
        (3, 3, 2)
    );
    assert_eq!(
        (report.mismatches, report.rejected, report.errors),
        (1, 1, 0)
    );
    assert_eq!(report.problems[0].kind, ProblemKind::HashMismatch);
    assert!(report.problems[0].message.contains("SHA-1"));
    let windows = sink.get("platform-tools_r36.0.0-win.zip", Windows, Universal);
    assert_eq!(windows.version, "36.0.0");
    assert_eq!(windows.hash_sha256, sha256(&win));
    assert!(windows.download_verified);
    sink.get("platform-tools_r36.0.0-linux.zip", Linux, Universal);
    assert_eq!(sink.audits.lock().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------
// PyPI: pypi/<name>/json

fn pypi_file(name: &str, version: &str, file: &str, kind: &str) -> serde_json::Value {
    json!({"comment_text": "", "digests": {"blake2b_256": h64(&format!("b{file}")), "md5": fake_hex(file, 32), "sha256": h64(file)},
           "downloads": -1, "filename": file, "has_sig": false, "md5_digest": fake_hex(file, 32), "packagetype": kind,
           "python_version": if kind == "sdist" { "source" } else { "py3" }, "requires_python": ">=3.8", "size": 131_218,
           "upload_time": "2024-05-29T15:37:49", "upload_time_iso_8601": "2024-05-29T15:37:49.011825Z",
           "url": format!("{{BASE}}/packages/source/{}/{name}/{file}", &name[..1]), "yanked": false, "yanked_reason": null,
           "version": version})
}

#[tokio::test]
async fn pypi_records_the_sdist_of_the_latest_release() {
    let requests = json!({
        "info": {"name": "requests", "version": "2.32.3", "summary": "Python HTTP for Humans."},
        "releases": {
            "2.32.2": [pypi_file("requests", "2.32.2", "requests-2.32.2.tar.gz", "sdist")],
            "2.32.3": [pypi_file("requests", "2.32.3", "requests-2.32.3-py3-none-any.whl", "bdist_wheel"),
                       pypi_file("requests", "2.32.3", "requests-2.32.3.tar.gz", "sdist")],
            "2.33.0rc1": [pypi_file("requests", "2.33.0rc1", "requests-2.33.0rc1.tar.gz", "sdist")],
        },
        "urls": [pypi_file("requests", "2.32.3", "requests-2.32.3.tar.gz", "sdist")]
    });
    let typing = json!({
        "info": {"name": "typing_extensions", "version": "4.12.2"},
        "releases": {"4.12.2": [pypi_file("typing_extensions", "4.12.2", "typing_extensions-4.12.2-py3-none-any.whl", "bdist_wheel")]},
        "urls": []
    });
    let site = Site::new()
        .file("/pypi/requests/json", requests.to_string())
        .file("/pypi/typing-extensions/json", typing.to_string());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &base, &sink, |config, _| {
        config.items = vec!["requests".into(), "Typing_Extensions".into()];
    })
    .await;
    assert_clean(&report);
    assert_eq!((report.recorded, report.downloaded), (2, 0));
    let requests = sink.get("requests (pypi)", model::Platform::Universal, Universal);
    assert_eq!(
        (requests.vendor.as_str(), requests.version.as_str()),
        ("pypi", "2.32.3")
    );
    assert!(requests.source_url.ends_with("/requests-2.32.3.tar.gz"));
    assert_eq!(requests.hash_sha256, h64("requests-2.32.3.tar.gz"));
    assert_eq!(
        requests.hash_md5.as_deref(),
        Some(fake_hex("requests-2.32.3.tar.gz", 32).as_str())
    );
    let typing = sink.get(
        "typing-extensions (pypi)",
        model::Platform::Universal,
        Universal,
    );
    assert!(typing.source_url.ends_with("-py3-none-any.whl"));
}

/// A wheel: a zip holding the package's files (the extension module an ELF, PE or Mach-O).
fn wheel(module: &str, binary: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut out));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    w.start_file("cryptography/__init__.py", options).unwrap();
    w.write_all(b"from cryptography.__about__ import __version__\n")
        .unwrap();
    w.start_file(module, options).unwrap();
    w.write_all(binary).unwrap();
    w.start_file("cryptography-44.0.0.dist-info/WHEEL", options)
        .unwrap();
    w.write_all(b"Wheel-Version: 1.0\nGenerator: maturin (1.7.8)\nRoot-Is-Purelib: false\nTag: cp39-abi3-win_amd64\n")
        .unwrap();
    w.finish().unwrap();
    out
}

#[tokio::test]
async fn pypi_records_every_platform_wheel_with_platform_and_arch_from_its_tag() {
    let site = Site::new();
    // The sdist: a tarball with no executable inside.
    let sdist = {
        let mut b = tar::Builder::new(Vec::new());
        let info = b"Metadata-Version: 2.3\nName: cryptography\nVersion: 44.0.0\n";
        let mut h = tar::Header::new_gnu();
        h.set_size(info.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, "cryptography-44.0.0/PKG-INFO", &info[..])
            .unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &b.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    };
    let mut entry = pypi_file(
        "cryptography",
        "44.0.0",
        "cryptography-44.0.0.tar.gz",
        "sdist",
    );
    entry["digests"]["sha256"] = json!(sha256(&sdist));
    entry["digests"]["md5"] = json!(md5(&sdist));
    site.file(
        "/packages/source/c/cryptography/cryptography-44.0.0.tar.gz",
        sdist,
    );
    let mut files = vec![entry];
    let elf = |build: &str| {
        let mut b = b"\x7fELF\x02\x01\x01\x00".to_vec();
        b.extend(format!("_rust.abi3.so {build}").repeat(100).bytes());
        b
    };
    let so = "cryptography/hazmat/bindings/_rust.abi3.so";
    // Two builds for one Python tag and x86_64 Linux (glibc 2.17 and 2.28), musl builds,
    // and a 32-bit one: pip on different hosts installs different ones.
    let wheels = [
        (
            "cryptography-44.0.0-cp39-abi3-win_amd64.whl",
            "cryptography/hazmat/bindings/_rust.pyd",
            b"MZ\x90\x00 _rust.pyd".repeat(50),
            (Windows, Amd64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-macosx_10_9_universal2.whl",
            so,
            [vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2], b"fat".repeat(50)].concat(),
            (Darwin, Universal),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            so,
            elf("glibc 2.17 x86_64"),
            (Linux, Amd64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl",
            so,
            elf("glibc 2.28 x86_64"),
            (Linux, Amd64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-musllinux_1_2_x86_64.whl",
            so,
            elf("musl x86_64"),
            (Linux, Amd64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-manylinux_2_28_aarch64.whl",
            so,
            elf("glibc 2.28 aarch64"),
            (Linux, Arm64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-musllinux_1_2_aarch64.whl",
            so,
            elf("musl aarch64"),
            (Linux, Arm64),
        ),
        (
            "cryptography-44.0.0-cp39-abi3-manylinux_2_17_i686.manylinux2014_i686.whl",
            so,
            elf("glibc 2.17 i686"),
            (Linux, X86),
        ),
    ];
    for (file, module, binary, _) in &wheels {
        let bytes = wheel(module, binary);
        let mut entry = pypi_file("cryptography", "44.0.0", file, "bdist_wheel");
        entry["digests"]["sha256"] = json!(sha256(&bytes));
        entry["digests"]["md5"] = json!(md5(&bytes));
        entry["python_version"] = json!("cp39");
        site.file(&format!("/packages/source/c/cryptography/{file}"), bytes);
        files.push(entry);
    }
    // Left out: a platform without an arch of the model, and a yanked build.
    files.push(pypi_file(
        "cryptography",
        "44.0.0",
        "cryptography-44.0.0-cp39-abi3-manylinux_2_17_ppc64le.whl",
        "bdist_wheel",
    ));
    let mut yanked = pypi_file(
        "cryptography",
        "44.0.0",
        "cryptography-44.0.0-cp39-abi3-manylinux_2_34_x86_64.whl",
        "bdist_wheel",
    );
    yanked["yanked"] = json!(true);
    files.push(yanked);
    let project = json!({
        "info": {"name": "cryptography", "version": "44.0.0"},
        "releases": {"44.0.0": files},
        "urls": []
    });
    site.file("/pypi/cryptography/json", project.to_string());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let run = || {
        run_with("pypi", &base, &sink, |config, limits| {
            config.items = vec!["cryptography".into()];
            limits.members.enabled = true;
        })
    };
    let report = run().await;
    assert_clean(&report);
    // The sdist and eight wheels, each downloaded once; each wheel's extension module.
    assert_eq!(
        (report.discovered, report.downloaded, report.members),
        (9, 9, 8)
    );
    assert_eq!(report.hash_changed, 0);
    sink.get("cryptography (pypi)", model::Platform::Universal, Universal);
    for (file, module, binary, (platform, arch)) in &wheels {
        let record = sink.get(file, *platform, *arch);
        assert_eq!(
            (record.vendor.as_str(), record.version.as_str()),
            ("pypi", "44.0.0")
        );
        // Each build's module is a record of its own, named under its wheel: the
        // glibc 2.17, glibc 2.28 and musl builds are all known at once.
        let member = sink.get(&format!("{file}/{module}"), *platform, *arch);
        assert_eq!(member.hash_sha256, sha256(binary), "{file}");
        assert!(member.source_url.ends_with(&format!("{file}#{module}")));
    }
    assert!(
        sink.records
            .lock()
            .unwrap()
            .iter()
            .all(|(_, r)| !r.executable_name.contains("ppc64le")
                && !r.executable_name.contains("manylinux_2_34"))
    );

    // A second run over the same release downloads nothing: every wheel is known.
    let again = run().await;
    assert_clean(&again);
    assert_eq!((again.downloaded, again.recorded), (0, 0));
}

// ---------------------------------------------------------------------------------------
// npm: registry packument (SHA-1 only)

#[tokio::test]
async fn npm_tarballs_are_downloaded_and_a_wrong_shasum_is_rejected() {
    let (lodash, types) = (body("lodash-4.17.21.tgz"), body("node-22.10.1.tgz"));
    let version = |name: &str, v: &str, tarball: &str, shasum: &str| {
        json!({"name": name, "version": v, "dependencies": {}, "engines": {"node": ">=4"},
               "dist": {"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
                        "shasum": shasum, "tarball": format!("{{BASE}}/{tarball}"), "fileCount": 1054, "unpackedSize": 1_412_415}})
    };
    let lodash_doc = json!({"name": "lodash", "modified": "2024-11-20T14:00:00.000Z",
    "dist-tags": {"latest": "4.17.21"},
    "versions": {
        "4.17.20": version("lodash", "4.17.20", "lodash/-/lodash-4.17.20.tgz", &fake_hex("4.17.20", 40)),
        "4.17.21": version("lodash", "4.17.21", "lodash/-/lodash-4.17.21.tgz", &sha1(&lodash)),
        "5.0.0-alpha.1": version("lodash", "5.0.0-alpha.1", "lodash/-/lodash-5.0.0-alpha.1.tgz", &fake_hex("5", 40)),
    }});
    let types_doc = json!({"name": "@types/node", "modified": "2024-11-20T14:00:00.000Z",
        "dist-tags": {"latest": "22.10.1", "ts5.6": "22.10.1"},
        "versions": {"22.10.1": version("@types/node", "22.10.1", "@types/node/-/node-22.10.1.tgz", &sha1(b"the published tarball"))}});
    let site = Site::new()
        .file("/lodash", lodash_doc.to_string())
        .file("/@types%2Fnode", types_doc.to_string())
        .file("/lodash/-/lodash-4.17.21.tgz", lodash.clone())
        .file("/@types/node/-/node-22.10.1.tgz", types);
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("npm", &base, &sink, |config, _| {
        config.items = vec!["lodash".into(), "@types/node".into()];
    })
    .await;
    assert_eq!((report.downloaded, report.recorded), (2, 1));
    assert_eq!(
        (report.mismatches, report.rejected, report.errors),
        (1, 1, 0)
    );
    assert!(
        report.problems[0]
            .url
            .as_deref()
            .unwrap()
            .ends_with("node-22.10.1.tgz")
    );
    let rec = sink.get("lodash (npm)", model::Platform::Universal, Universal);
    assert_eq!(
        (rec.vendor.as_str(), rec.version.as_str()),
        ("npm", "4.17.21")
    );
    assert_eq!(rec.hash_sha256, sha256(&lodash));
    assert_eq!(rec.hash_sha1, Some(sha1(&lodash)));
    assert!(rec.download_verified);
    assert!(!site.hit("/lodash/-/lodash-5.0.0-alpha.1.tgz"));
}

// ---------------------------------------------------------------------------------------
// Go modules: proxy list, info, zip

#[tokio::test]
async fn go_modules_are_read_from_the_proxy_and_downloaded() {
    let (text_zip, toml_zip) = (body("x/text@v0.21.0.zip"), body("toml@v1.4.0.zip"));
    let site = Site::new()
        .file(
            "/golang.org/x/text/@v/list",
            // Lines may carry fields after the version (a timestamp).
            "v0.3.8\nv0.20.0 2024-11-05T10:00:00Z\nv0.21.0 2024-12-04T17:23:31Z\nv0.22.0-rc.1\n",
        )
        .file(
            "/golang.org/x/text/@v/v0.21.0.info",
            r#"{"Version":"v0.21.0","Time":"2024-12-04T17:23:31Z"}"#,
        )
        .file("/golang.org/x/text/@v/v0.21.0.zip", text_zip.clone())
        .file("/github.com/!burnt!sushi/toml/@v/list", "v1.3.2\nv1.4.0\n")
        .file(
            "/github.com/!burnt!sushi/toml/@v/v1.4.0.info",
            r#"{"Version":"v1.4.0","Time":"2024-06-05T12:00:00Z"}"#,
        )
        .file(
            "/github.com/!burnt!sushi/toml/@v/v1.4.0.zip",
            toml_zip.clone(),
        );
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("gomod", &base, &sink, |config, _| {
        config.items = vec![
            "golang.org/x/text".into(),
            "github.com/BurntSushi/toml".into(),
        ];
    })
    .await;
    assert_clean(&report);
    assert_eq!((report.recorded, report.downloaded), (2, 2));
    let text = sink.get(
        "golang.org/x/text (go)",
        model::Platform::Universal,
        Universal,
    );
    assert_eq!(
        (text.vendor.as_str(), text.version.as_str()),
        ("go", "v0.21.0")
    );
    assert_eq!(text.hash_sha256, sha256(&text_zip));
    let toml = sink.get(
        "github.com/BurntSushi/toml (go)",
        model::Platform::Universal,
        Universal,
    );
    assert_eq!(toml.hash_sha256, sha256(&toml_zip));
    assert_eq!(sink.audits.lock().unwrap().len(), 2);
}

/// A channel that still answers but whose format changed so that nothing matches is a
/// discovery failure, never a run with nothing to record.
#[tokio::test]
async fn a_channel_that_lists_nothing_is_a_discovery_failure() {
    let doc = json!([
        {"version": "go1.23.4", "stable": true, "files": [
            {"filename": "go1.23.4.src.tar.gz", "os": "", "arch": "", "version": "go1.23.4",
             "sha256": h64("src"), "size": 1, "kind": "source"}]},
    ]);
    let site = Site::new().file("/dl/", doc.to_string());
    let (report, sink) = run("go", &site).await;
    assert_eq!(
        (report.discovered, report.recorded, report.errors),
        (0, 0, 1)
    );
    assert_eq!(report.problems[0].kind, ProblemKind::Discovery);
    assert!(
        report.problems[0].message.contains("listed no artifact"),
        "{:?}",
        report.problems
    );
    assert!(sink.records.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------
// Every vendor: down or broken channels end in the report, never in a panic.

fn all_ids() -> Vec<String> {
    vendors::all()
        .iter()
        .map(|v| v.fetcher.id().to_owned())
        .collect()
}

async fn run_everywhere(base: &str) -> Vec<VendorReport> {
    let mut out = Vec::new();
    for id in all_ids() {
        out.push(run_with(&id, base, &MemorySink::default(), |_, _| {}).await);
    }
    out
}

fn assert_discovery_failed(report: &VendorReport, needle: &str) {
    assert!(
        report.errors >= 1 && report.recorded == 0 && report.discovered == 0,
        "{}: {report:#?}",
        report.fetcher
    );
    let problem = report.problems.last().unwrap();
    assert_eq!(problem.kind, ProblemKind::Discovery, "{}", report.fetcher);
    assert!(
        problem.message.to_lowercase().contains(needle),
        "{}: {:?} lacks {needle:?}",
        report.fetcher,
        problem.message
    );
}

#[tokio::test]
async fn every_vendor_reports_a_refused_connection() {
    let reports = run_everywhere(&dead_base().await).await;
    assert!(reports.len() >= 16);
    for report in &reports {
        assert_discovery_failed(report, "connect");
    }
}

#[tokio::test]
async fn every_vendor_reports_a_503() {
    let base = Site::down(503).serve().await;
    for report in &run_everywhere(&base).await {
        assert_discovery_failed(report, "503");
    }
}

#[tokio::test]
async fn every_vendor_rejects_a_malformed_channel_clearly() {
    let base = Site::garbage().serve().await;
    for report in &run_everywhere(&base).await {
        assert_discovery_failed(report, "malformed");
    }
}

#[tokio::test]
async fn a_disabled_vendor_is_not_read() {
    let site = go_site();
    let base = site.serve().await;
    let report = run_with("go", &base, &MemorySink::default(), |config, _| {
        config.enabled = false
    })
    .await;
    assert!(report.skipped && report.discovered == 0);
    assert!(site.hits.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------
// Pipeline: reruns, changed hashes, store failures.

#[tokio::test]
async fn a_rerun_is_unchanged_and_a_changed_manifest_hash_is_counted() {
    let base = go_site().serve().await;
    let sink = MemorySink::default();
    run_with("go", &base, &sink, |_, _| {}).await;
    let again = run_with("go", &base, &sink, |_, _| {}).await;
    assert_clean(&again);
    assert_eq!(
        (again.recorded, again.unchanged, again.hash_changed),
        (0, 5, 0)
    );

    // The same release now served with another digest for one file: a republish, or tampering.
    let republished = go_site_with("republished").serve().await;
    let changed = run_with("go", &republished, &sink, |_, _| {}).await;
    assert_eq!(
        (changed.recorded, changed.unchanged, changed.hash_changed),
        (1, 4, 1)
    );
}

#[tokio::test]
async fn a_store_failure_stops_only_that_artifact() {
    let base = go_site().serve().await;
    let sink = MemorySink {
        fail_name: Some("go1.23.4.windows-amd64.msi".into()),
        ..MemorySink::default()
    };
    let report = run_with("go", &base, &sink, |_, _| {}).await;
    assert_eq!((report.recorded, report.errors), (4, 1));
    assert_eq!(report.problems[0].kind, ProblemKind::Record);
    assert!(report.problems[0].message.contains("disk full"));
}

// ---------------------------------------------------------------------------------------
// Outbound clients: a private mirror's CA, a proxy.

/// Settings with no proxy and, when given, the test CA as the extra bundle.
fn outbound(with_ca: Option<&std::path::Path>) -> ingest::OutboundSettings {
    ingest::OutboundSettings {
        extra_ca: with_ca.map(|path| ingest::ExtraCa::load(path).unwrap()),
        proxy: ingest::ProxySettings::none(),
        ..ingest::OutboundSettings::default()
    }
}

/// Runs the go fetcher against `base` with a client built from `settings`.
async fn run_go_through(settings: &ingest::OutboundSettings, base: &str) -> VendorReport {
    let client = settings.https_client().unwrap();
    let ctx = ingest::FetchContext::new(
        client,
        vendor_support::config_for("go", base),
        vendor_support::limits(),
    );
    let setup = vendors::by_id("go").unwrap();
    ingest::ingest_vendor(
        &*setup.fetcher,
        &ctx,
        &MemorySink::default(),
        &vendor_support::clock(),
    )
    .await
}

#[tokio::test]
async fn a_private_mirror_is_trusted_only_with_its_ca_in_the_extra_bundle() {
    let site = go_site().file("/files/tool.exe", body("tool.exe"));
    let base = site.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("mirror-ca.pem");
    std::fs::write(&ca, vendor_support::ca_pem()).unwrap();

    // The built-in web roots alone do not know the mirror's CA.
    let report = run_go_through(&outbound(None), &base).await;
    assert_eq!(report.discovered, 0);
    assert_eq!(report.problems[0].kind, ProblemKind::Discovery);
    assert!(
        report.problems[0].message.contains("certificate"),
        "{:#?}",
        report.problems
    );
    let untrusted = outbound(None).https_client().unwrap();
    let limits = vendor_support::limits().download;
    let url = format!("{base}/files/tool.exe");
    let e = ingest::download_and_hash(&untrusted, &url, &limits, &vendor_support::clock())
        .await
        .unwrap_err();
    assert!(matches!(e, ingest::DownloadError::Request { .. }), "{e:?}");

    // With the bundle, the channel and the downloader both read the mirror.
    let trusted = outbound(Some(&ca));
    let report = run_go_through(&trusted, &base).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 5);
    let got = ingest::download_and_hash(
        &trusted.https_client().unwrap(),
        &url,
        &limits,
        &vendor_support::clock(),
    )
    .await
    .unwrap();
    assert_eq!(got.digests.sha256, sha256(&body("tool.exe")));
}

#[tokio::test]
async fn https_goes_through_the_proxy_except_to_no_proxy_hosts() {
    let base = go_site().serve().await;
    let mirror = base.trim_start_matches("https://").to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("mirror-ca.pem");
    std::fs::write(&ca, vendor_support::ca_pem()).unwrap();
    let proxy = ConnectProxy::start().await;

    // As read from HTTPS_PROXY: the fetch is tunnelled, TLS still checked end to end.
    let proxied = ingest::OutboundSettings {
        proxy: ingest::ProxySettings::from_vars(|name| {
            (name == "HTTPS_PROXY").then(|| proxy.url.clone())
        }),
        ..outbound(Some(&ca))
    };
    let report = run_go_through(&proxied, &base).await;
    assert_clean(&report);
    assert_eq!(report.recorded, 5);
    assert_eq!(proxy.targets(), vec![mirror.clone()]);

    // HTTP_PROXY is for http:// URLs only.
    let http_only = ingest::OutboundSettings {
        proxy: ingest::ProxySettings::from_vars(|name| {
            (name == "HTTP_PROXY").then(|| proxy.url.clone())
        }),
        ..outbound(Some(&ca))
    };
    assert_clean(&run_go_through(&http_only, &base).await);
    assert_eq!(proxy.targets().len(), 1);

    // A host in NO_PROXY (here `no_proxy`) is reached directly.
    let bypassed = ingest::OutboundSettings {
        proxy: ingest::ProxySettings::from_vars(|name| match name {
            "https_proxy" => Some(proxy.url.clone()),
            "no_proxy" => Some("mirror.internal, 127.0.0.1".into()),
            _ => None,
        }),
        ..outbound(Some(&ca))
    };
    assert_clean(&run_go_through(&bypassed, &base).await);
    assert_eq!(proxy.targets().len(), 1);

    // A proxy that cannot be reached fails the fetch: nothing bypasses it silently.
    let dead = dead_base().await.replace("https://", "http://");
    let unreachable = ingest::OutboundSettings {
        proxy: ingest::ProxySettings::from_vars(|name| {
            (name == "HTTPS_PROXY").then(|| dead.clone())
        }),
        ..outbound(Some(&ca))
    };
    assert_eq!(run_go_through(&unreachable, &base).await.discovered, 0);
}

// ---------------------------------------------------------------------------------------
// Eclipse Temurin: api.adoptium.net/v3/info/available_releases, /v3/assets/latest/<f>/hotspot

fn adoptium_asset(
    feature: u32,
    release: &str,
    os: &str,
    arch: &str,
    image: &str,
    ext: &str,
) -> serde_json::Value {
    let arch_name = if arch == "x32" { "x86-32" } else { arch };
    let file = format!(
        "OpenJDK{feature}U-{image}_{arch_name}_{os}_hotspot_{}.{ext}",
        release.trim_start_matches("jdk-").replace('+', "_")
    );
    let link = format!(
        "{{BASE}}/adoptium/temurin{feature}-binaries/releases/download/{}/{file}",
        release.replace('+', "%2B")
    );
    let package = json!({"checksum": h64(&file), "checksum_link": format!("{link}.sha256.txt"), "download_count": 1207,
        "link": link, "metadata_link": format!("{link}.json"), "name": file, "signature_link": format!("{link}.sig"), "size": 197_120_402});
    let mut binary = json!({"architecture": arch, "download_count": 1207, "heap_size": "normal", "image_type": image,
        "jvm_impl": "hotspot", "os": os, "package": package, "project": "jdk", "scm_ref": format!("{release}_adopt"),
        "updated_at": "2025-10-22T12:27:05Z"});
    if os == "windows" && image == "jdk" {
        let msi = file.replace(".zip", ".msi");
        binary["installer"] = json!({"checksum": h64(&msi), "download_count": 300, "link": link.replace(".zip", ".msi"), "name": msi, "size": 180_000_000});
    }
    json!({"binary": binary, "release_link": format!("https://github.com/adoptium/temurin{feature}-binaries/releases/tag/{}", release.replace('+', "%2B")),
           "release_name": release, "vendor": "eclipse",
           "version": {"build": 7, "major": feature, "minor": 0, "openjdk_version": format!("{}-LTS", release.trim_start_matches("jdk-")), "security": 9, "semver": format!("{}.0.LTS", release.trim_start_matches("jdk-"))}})
}

#[tokio::test]
async fn temurin_records_the_newest_build_of_the_current_feature_releases() {
    let lts = json!([
        adoptium_asset(21, "jdk-21.0.9+10", "windows", "x64", "jdk", "zip"),
        adoptium_asset(21, "jdk-21.0.9+10", "linux", "aarch64", "jre", "tar.gz"),
        adoptium_asset(21, "jdk-21.0.9+10", "mac", "x64", "jdk", "tar.gz"),
        adoptium_asset(21, "jdk-21.0.9+10", "windows", "x32", "jre", "zip"),
        // Not followed: another libc, other CPUs, debug images.
        adoptium_asset(21, "jdk-21.0.9+10", "alpine-linux", "x64", "jdk", "tar.gz"),
        adoptium_asset(21, "jdk-21.0.9+10", "linux", "s390x", "jdk", "tar.gz"),
        adoptium_asset(21, "jdk-21.0.9+10", "linux", "x64", "debugimage", "tar.gz"),
    ]);
    let feature = json!([adoptium_asset(
        25,
        "jdk-25.0.1+8",
        "linux",
        "x64",
        "jdk",
        "tar.gz"
    )]);
    let site = Site::new()
        .file(
            "/v3/info/available_releases",
            json!({"available_lts_releases": [8, 11, 17, 21], "available_releases": [8, 11, 17, 21, 25],
                   "most_recent_feature_release": 25, "most_recent_feature_version": 26, "most_recent_lts": 21,
                   "tip_version": 26})
            .to_string(),
        )
        .file("/v3/assets/latest/21/hotspot", lts.to_string())
        .file("/v3/assets/latest/25/hotspot", feature.to_string());
    let (report, sink) = run("temurin", &site).await;
    assert_clean(&report);
    // Four LTS targets (one with an installer) and the feature release's one.
    assert_eq!((report.discovered, report.downloaded), (6, 0));
    let msi = sink.get(
        "OpenJDK21U-jdk_x64_windows_hotspot_21.0.9_10.msi",
        Windows,
        Amd64,
    );
    assert_eq!(msi.vendor, "Eclipse Adoptium");
    assert_eq!(msi.version, "21.0.9+10");
    assert_eq!(
        msi.hash_sha256,
        h64("OpenJDK21U-jdk_x64_windows_hotspot_21.0.9_10.msi")
    );
    sink.get(
        "OpenJDK21U-jre_aarch64_linux_hotspot_21.0.9_10.tar.gz",
        Linux,
        Arm64,
    );
    sink.get(
        "OpenJDK21U-jdk_x64_mac_hotspot_21.0.9_10.tar.gz",
        Darwin,
        Amd64,
    );
    sink.get(
        "OpenJDK21U-jre_x86-32_windows_hotspot_21.0.9_10.zip",
        Windows,
        X86,
    );
    let feature = sink.get(
        "OpenJDK25U-jdk_x64_linux_hotspot_25.0.1_8.tar.gz",
        Linux,
        Amd64,
    );
    assert_eq!(feature.version, "25.0.1+8");
    assert!(
        feature
            .source_url
            .contains("/temurin25-binaries/releases/download/jdk-25.0.1%2B8/")
    );
}

// ---------------------------------------------------------------------------------------
// Microsoft Edge: edgeupdates.microsoft.com/api/products

fn edge_release(
    id: u32,
    platform: &str,
    arch: &str,
    version: &str,
    files: &[(&str, &str)],
) -> serde_json::Value {
    let artifacts: Vec<serde_json::Value> = files
        .iter()
        .map(|(kind, file)| {
            json!({"ArtifactName": kind, "Location": format!("{{BASE}}/{file}"),
                   "Hash": h64(file).to_uppercase(), "HashAlgorithm": "SHA256", "SizeInBytes": 178_061_312})
        })
        .collect();
    json!({"ReleaseId": id, "Platform": platform, "Architecture": arch, "CVEs": ["CVE-2025-12036"],
           "ProductVersion": version, "Artifacts": artifacts, "PublishedTime": "2025-10-24T21:19:00",
           "ExpectedExpiryDate": "2026-04-24T21:19:00"})
}

#[tokio::test]
async fn edge_records_the_newest_stable_release_of_each_platform_and_arch() {
    let products = json!([
        {"Product": "Stable", "Releases": [
            edge_release(111, "Windows", "x64", "141.0.3537.92",
                &[("msi", "prss/msedge/MicrosoftEdgeEnterpriseX64-141.0.3537.92.msi")]),
            edge_release(110, "Windows", "x64", "141.0.3537.85",
                &[("msi", "prss/msedge/MicrosoftEdgeEnterpriseX64-141.0.3537.85.msi")]),
            edge_release(112, "Windows", "arm64", "141.0.3537.92",
                &[("msi", "prss/msedge/MicrosoftEdgeEnterpriseARM64-141.0.3537.92.msi")]),
            edge_release(113, "MacOS", "universal", "141.0.3537.92",
                &[("pkg", "prss/msedge/MicrosoftEdge-141.0.3537.92.pkg"), ("plist", "prss/msedge/MicrosoftEdge.plist")]),
            edge_release(114, "Linux", "x64", "141.0.3537.92",
                &[("deb", "prss/msedge/microsoft-edge-stable_141.0.3537.92-1_amd64.deb"),
                  ("rpm", "prss/msedge/microsoft-edge-stable-141.0.3537.92-1.x86_64.rpm")]),
            edge_release(115, "iOS", "arm64", "141.0.3537.90", &[]),
        ]},
        {"Product": "Beta", "Releases": [
            edge_release(120, "Windows", "x64", "142.0.3595.20",
                &[("msi", "prss/msedge/MicrosoftEdgeBetaEnterpriseX64-142.0.3595.20.msi")]),
        ]}
    ]);
    // The plist's hash is published in another algorithm: not a file taken.
    let products = products.to_string().replace(
        &format!(
            "\"{}\",\"HashAlgorithm\":\"SHA256\"",
            h64("prss/msedge/MicrosoftEdge.plist").to_uppercase()
        ),
        "\"abc\",\"HashAlgorithm\":\"MD5\"",
    );
    let site = Site::new().file("/api/products", products);
    let (report, sink) = run("edge", &site).await;
    assert_clean(&report);
    assert_eq!((report.discovered, report.downloaded), (5, 0));
    let msi = sink.get(
        "MicrosoftEdgeEnterpriseX64-141.0.3537.92.msi",
        Windows,
        Amd64,
    );
    assert_eq!(
        (msi.vendor.as_str(), msi.version.as_str()),
        ("Microsoft", "141.0.3537.92")
    );
    assert_eq!(
        msi.hash_sha256,
        h64("prss/msedge/MicrosoftEdgeEnterpriseX64-141.0.3537.92.msi")
    );
    sink.get(
        "MicrosoftEdgeEnterpriseARM64-141.0.3537.92.msi",
        Windows,
        Arm64,
    );
    sink.get("MicrosoftEdge-141.0.3537.92.pkg", Darwin, Universal);
    sink.get(
        "microsoft-edge-stable_141.0.3537.92-1_amd64.deb",
        Linux,
        Amd64,
    );
    sink.get(
        "microsoft-edge-stable-141.0.3537.92-1.x86_64.rpm",
        Linux,
        Amd64,
    );
    let records = sink.records.lock().unwrap();
    assert!(
        records
            .iter()
            .all(|(_, r)| !r.executable_name.contains("Beta")
                && !r.executable_name.contains(".85.")
                && !r.executable_name.ends_with(".plist"))
    );
}

// ---------------------------------------------------------------------------------------
// Python: www.python.org/api/v2/downloads/release/, /release_file/?release=<id>

fn python_release(id: u32, name: &str, pre: bool) -> serde_json::Value {
    json!({"name": name, "slug": name.to_lowercase().replace([' ', '.'], "-"), "version": 3, "is_published": true,
           "is_latest": false, "release_date": "2025-10-07T12:00:00Z", "pre_release": pre,
           "release_page": null, "release_notes_url": "https://docs.python.org/release/3.14.0/whatsnew/changelog.html",
           "show_on_download_page": true, "resource_uri": format!("https://www.python.org/api/v2/downloads/release/{id}/")})
}

fn python_file(
    name: &str,
    version: &str,
    file: &str,
    source: bool,
    sha256: Option<String>,
    md5: String,
) -> serde_json::Value {
    json!({"name": name, "slug": file.to_lowercase(), "os": "https://www.python.org/api/v2/downloads/os/1/",
           "release": "https://www.python.org/api/v2/downloads/release/1/", "description": "", "is_source": source,
           "url": format!("{{BASE}}/ftp/python/{version}/{file}"),
           "gpg_signature_file": "", "md5_sum": md5, "sha256_sum": sha256, "filesize": 28_571_136,
           "download_button": false, "resource_uri": "https://www.python.org/api/v2/downloads/release_file/1/",
           "sigstore_signature_file": "", "sigstore_cert_file": "",
           "sigstore_bundle_file": format!("https://www.python.org/ftp/python/{version}/{file}.sigstore"),
           "sbom_spdx2_file": ""})
}

#[tokio::test]
async fn python_org_records_the_installers_of_the_two_newest_series() {
    let releases = json!([
        python_release(1050, "Python 3.14.0", false),
        python_release(1040, "Python 3.13.8", false),
        python_release(1045, "Python 3.13.9", false),
        python_release(1030, "Python 3.12.12", false),
        python_release(1060, "Python 3.15.0a1", true),
        python_release(1070, "Python install manager 25.0", false),
    ]);
    let f314 = json!([
        python_file(
            "Windows installer (64-bit)",
            "3.14.0",
            "python-3.14.0-amd64.exe",
            false,
            Some(h64("python-3.14.0-amd64.exe")),
            fake_hex("python-3.14.0-amd64.exe", 32)
        ),
        python_file(
            "macOS 64-bit universal2 installer",
            "3.14.0",
            "python-3.14.0-macos11.pkg",
            false,
            Some(h64("python-3.14.0-macos11.pkg")),
            fake_hex("python-3.14.0-macos11.pkg", 32)
        ),
        python_file(
            "XZ compressed source tarball",
            "3.14.0",
            "Python-3.14.0.tar.xz",
            true,
            Some(h64("Python-3.14.0.tar.xz")),
            fake_hex("Python-3.14.0.tar.xz", 32)
        ),
    ]);
    // An older entry with MD5 only: downloaded, its MD5 checked.
    let arm = body("python-3.13.9-arm64.exe");
    let f313 = json!([python_file(
        "Windows installer (ARM64)",
        "3.13.9",
        "python-3.13.9-arm64.exe",
        false,
        None,
        md5(&arm)
    )]);
    let site = Site::new()
        .file("/api/v2/downloads/release/", releases.to_string())
        .file(
            "/api/v2/downloads/release_file/?release=1050",
            f314.to_string(),
        )
        .file(
            "/api/v2/downloads/release_file/?release=1045",
            f313.to_string(),
        )
        .file("/ftp/python/3.13.9/python-3.13.9-arm64.exe", arm.clone());
    let (report, sink) = run("python", &site).await;
    assert_clean(&report);
    assert_eq!((report.discovered, report.downloaded), (3, 1));
    let exe = sink.get("python-3.14.0-amd64.exe", Windows, Amd64);
    assert_eq!(
        (exe.vendor.as_str(), exe.version.as_str()),
        ("Python Software Foundation", "3.14.0")
    );
    assert_eq!(exe.hash_sha256, h64("python-3.14.0-amd64.exe"));
    sink.get("python-3.14.0-macos11.pkg", Darwin, Universal);
    let arm64 = sink.get("python-3.13.9-arm64.exe", Windows, Arm64);
    assert_eq!(arm64.hash_sha256, sha256(&arm));
    assert!(arm64.download_verified);
    // The older 3.13 release, 3.12 (a third series) and pre-releases are not read.
    let hits = site.hits.lock().unwrap();
    assert_eq!(
        hits.iter()
            .filter(|p| p.starts_with("/api/v2/downloads/release_file/"))
            .count(),
        2
    );
}

// ---------------------------------------------------------------------------------------
// Wireshark: www.wireshark.org/download/ listing, SIGNATURES-<v>.txt

#[tokio::test]
async fn wireshark_records_the_newest_stable_release_from_its_signatures_file() {
    let listing = "<html><head><title>Index of /download</title></head><body><h1>Index of /download</h1><pre>\
        <a href=\"../\">../</a>\n<a href=\"osx/\">osx/</a>\n<a href=\"src/\">src/</a>\n<a href=\"win64/\">win64/</a>\n\
        <a href=\"SIGNATURES-4.4.10.txt\">SIGNATURES-4.4.10.txt</a>   08-Oct-2025 18:02    7114\n\
        <a href=\"SIGNATURES-4.6.0.txt\">SIGNATURES-4.6.0.txt</a>    02-Oct-2025 17:40    7300\n\
        <a href=\"SIGNATURES-4.6.1.txt\">SIGNATURES-4.6.1.txt</a>    05-Nov-2025 20:11    7300\n\
        <a href=\"SIGNATURES-4.7.0.txt\">SIGNATURES-4.7.0.txt</a>    12-Nov-2025 10:00    7300\n\
        <a href=\"wireshark-latest.tar.xz\">wireshark-latest.tar.xz</a>\n</pre></body></html>";
    let mut signed = String::from("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n");
    signed.push_str("wireshark-4.6.1.tar.xz: 48473368 bytes\n");
    for name in [
        "wireshark-4.6.1.tar.xz",
        "Wireshark-4.6.1-x64.exe",
        "Wireshark-4.6.1-x64.msi",
        "WiresharkPortable64_4.6.1.paf.exe",
        "Wireshark 4.6.1 Arm 64.dmg",
        "Wireshark 4.6.1 Intel 64.dmg",
    ] {
        signed.push_str(&format!(
            "{name}: 102937440 bytes\nSHA256({name})={}\nSHA1({name})={}\n\n",
            h64(name),
            fake_hex(name, 40)
        ));
    }
    signed.push_str(
        "-----BEGIN PGP SIGNATURE-----\n\niQIzBAEBCgAdFiEE\n-----END PGP SIGNATURE-----\n",
    );
    let site = Site::new()
        .file("/download/", listing)
        .file("/download/SIGNATURES-4.6.1.txt", signed);
    let (report, sink) = run("wireshark", &site).await;
    assert_clean(&report);
    // Two installers and the portable package for Windows, two disk images; no sources.
    assert_eq!((report.discovered, report.downloaded), (5, 0));
    let exe = sink.get("Wireshark-4.6.1-x64.exe", Windows, Amd64);
    assert_eq!(
        (exe.vendor.as_str(), exe.version.as_str()),
        ("Wireshark Foundation", "4.6.1")
    );
    assert_eq!(exe.hash_sha256, h64("Wireshark-4.6.1-x64.exe"));
    assert_eq!(
        exe.hash_sha1.as_deref(),
        Some(fake_hex("Wireshark-4.6.1-x64.exe", 40).as_str())
    );
    assert!(
        exe.source_url
            .ends_with("/download/win64/Wireshark-4.6.1-x64.exe")
    );
    sink.get("WiresharkPortable64_4.6.1.paf.exe", Windows, Amd64);
    let dmg = sink.get("Wireshark 4.6.1 Arm 64.dmg", Darwin, Arm64);
    assert!(
        dmg.source_url
            .ends_with("/download/osx/Wireshark%204.6.1%20Arm%2064.dmg"),
        "{}",
        dmg.source_url
    );
    sink.get("Wireshark 4.6.1 Intel 64.dmg", Darwin, Amd64);
    // The development release (odd minor) is not read.
    assert!(!site.hit("/download/SIGNATURES-4.7.0.txt"));
}
