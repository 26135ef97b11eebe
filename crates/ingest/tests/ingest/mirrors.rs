//! Mirrors and proxies as enterprises run them: channel documents whose links are relative
//! (Artifactory, Nexus, devpi, bandersnatch answer `../../packages/…`), a private CA
//! installed in the operating system's trust store, and errors that name the setting that
//! fixes them.

use ingest::{OutboundSettings, ProxySettings, SystemRoots};
use model::Arch::{Amd64, Universal};
use model::Platform::{Universal as AnyPlatform, Windows};
use serde_json::json;

use crate::vendor_support::{self, MemorySink, Site, body, run_with, sha256};

#[track_caller]
fn assert_clean(report: &ingest::VendorReport) {
    assert!(
        report.errors == 0 && report.rejected == 0 && report.problems.is_empty(),
        "{report:#?}"
    );
}

/// A PyPI JSON document from a mirror under `/mirror/pypi/`: the sdist's URL is relative
/// to the document (`../../packages/…`, as devpi and bandersnatch answer) and has no
/// digest, so it is downloaded from where the link points.
#[tokio::test]
async fn pypi_links_relative_to_the_document_are_followed() {
    let sdist = body("cffi-1.17.1.tar.gz");
    let doc = json!({
        "info": {"name": "cffi", "version": "1.17.1"},
        "releases": {"1.17.1": [{
            "filename": "cffi-1.17.1.tar.gz", "packagetype": "sdist", "digests": {},
            "url": "../../packages/fc/97/cffi-1.17.1.tar.gz", "yanked": false}]}
    });
    let site = Site::new()
        .file("/mirror/pypi/cffi/json", doc.to_string())
        .file("/mirror/packages/fc/97/cffi-1.17.1.tar.gz", sdist.clone());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &format!("{base}/mirror"), &sink, |config, _| {
        config.items = vec!["cffi".into()];
    })
    .await;
    assert_clean(&report);
    assert_eq!((report.downloaded, report.recorded), (1, 1));
    let rec = sink.get("cffi (pypi)", AnyPlatform, Universal);
    assert_eq!(
        rec.source_url,
        format!("{base}/mirror/packages/fc/97/cffi-1.17.1.tar.gz")
    );
    assert_eq!(rec.hash_sha256, sha256(&sdist));
}

/// An npm registry mirror answering tarball links relative to the packument, one
/// path-relative, one host-relative.
#[tokio::test]
async fn npm_tarball_links_relative_to_the_packument_are_followed() {
    let (lodash, chalk) = (body("lodash-4.17.21.tgz"), body("chalk-5.3.0.tgz"));
    let doc = |name: &str, version: &str, tarball: &str, bytes: &[u8]| {
        json!({"name": name, "dist-tags": {"latest": version}, "versions": {version: {
            "name": name, "version": version,
            "dist": {"shasum": vendor_support::sha1(bytes), "tarball": tarball}}}})
        .to_string()
    };
    let site = Site::new()
        .file(
            "/api/npm/npm-remote/lodash",
            doc("lodash", "4.17.21", "lodash/-/lodash-4.17.21.tgz", &lodash),
        )
        .file(
            "/api/npm/npm-remote/lodash/-/lodash-4.17.21.tgz",
            lodash.clone(),
        )
        .file(
            "/api/npm/npm-remote/chalk",
            doc("chalk", "5.3.0", "/cache/chalk-5.3.0.tgz", &chalk),
        )
        .file("/cache/chalk-5.3.0.tgz", chalk.clone());
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with(
        "npm",
        &format!("{base}/api/npm/npm-remote"),
        &sink,
        |config, _| config.items = vec!["lodash".into(), "chalk".into()],
    )
    .await;
    assert_clean(&report);
    assert_eq!((report.downloaded, report.recorded), (2, 2));
    let rec = sink.get("lodash (npm)", AnyPlatform, Universal);
    assert_eq!(rec.hash_sha256, sha256(&lodash));
    assert_eq!(
        rec.source_url,
        format!("{base}/api/npm/npm-remote/lodash/-/lodash-4.17.21.tgz")
    );
    let rec = sink.get("chalk (npm)", AnyPlatform, Universal);
    assert_eq!(rec.source_url, format!("{base}/cache/chalk-5.3.0.tgz"));
}

/// A GitHub releases API behind a mirror (GitHub Enterprise, a proxying repository) whose
/// asset links are host-relative.
#[tokio::test]
async fn github_asset_links_relative_to_the_api_are_followed() {
    let msi = body("7z2409-x64.msi");
    let releases = json!([{"tag_name": "24.09", "draft": false, "prerelease": false, "assets": [
        {"name": "7z2409-x64.msi", "digest": null,
         "browser_download_url": "/ip7z/7zip/releases/download/24.09/7z2409-x64.msi"},
        {"name": "7z2409-x64.exe", "digest": format!("sha256:{}", sha256(b"exe")),
         "browser_download_url": "../../download/7z2409-x64.exe"}]}]);
    let site = Site::new()
        .file("/github/repos/ip7z/7zip/releases", releases.to_string())
        .file(
            "/ip7z/7zip/releases/download/24.09/7z2409-x64.msi",
            msi.clone(),
        );
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("7zip", &format!("{base}/github"), &sink, |_, _| {}).await;
    assert_clean(&report);
    assert_eq!((report.downloaded, report.recorded), (1, 2));
    let rec = sink.get("7z2409-x64.msi", Windows, Amd64);
    assert_eq!(rec.hash_sha256, sha256(&msi));
    assert_eq!(
        rec.source_url,
        format!("{base}/ip7z/7zip/releases/download/24.09/7z2409-x64.msi")
    );
    let exe = sink.get("7z2409-x64.exe", Windows, Amd64);
    assert_eq!(
        exe.source_url,
        format!("{base}/github/repos/download/7z2409-x64.exe")
    );
}

#[test]
fn links_resolve_as_rfc_3986_says_and_only_to_http() {
    let doc = "https://mirror.example/pypi/cffi/json";
    for (link, want) in [
        (
            "../../packages/a/cffi.tar.gz",
            "https://mirror.example/packages/a/cffi.tar.gz",
        ),
        ("/p/cffi.tar.gz", "https://mirror.example/p/cffi.tar.gz"),
        (
            "cffi.tar.gz",
            "https://mirror.example/pypi/cffi/cffi.tar.gz",
        ),
        (
            "https://files.example/cffi.tar.gz",
            "https://files.example/cffi.tar.gz",
        ),
        ("//cdn.example/x.tgz", "https://cdn.example/x.tgz"),
    ] {
        assert_eq!(ingest::resolve_url(doc, link).unwrap(), want, "{link}");
    }
    for bad in ["file:///etc/passwd", "javascript:alert(1)", "http://[::1"] {
        let e = ingest::resolve_url(doc, bad).unwrap_err().to_string();
        assert!(e.contains("mirror.example"), "{bad}: {e}");
    }
}

/// Settings as the service builds them, with the system store read from `roots`.
fn settings(roots: SystemRoots) -> OutboundSettings {
    OutboundSettings {
        system_roots: roots,
        extra_ca: None,
        proxy: ProxySettings::none(),
        ..OutboundSettings::default()
    }
}

async fn fetch(settings: &OutboundSettings, url: &str) -> Result<Vec<u8>, String> {
    let ctx = ingest::FetchContext::new(
        settings.https_client().unwrap(),
        vendor_support::config_for("go", url),
        vendor_support::limits(),
    );
    ctx.get_bytes(url, None)
        .await
        .map_err(|e| ingest::error_chain(&e))
}

/// A private CA installed the way the operating system does it (a bundle named by
/// `SSL_CERT_FILE`, or a directory of PEM files named by `SSL_CERT_DIR`, as OpenSSL reads
/// them): trusted with no setting of the service. Without it, the error says which setting
/// fixes it.
#[tokio::test]
async fn a_ca_in_the_system_trust_store_is_trusted_without_configuration() {
    let site = Site::new().file("/ok", "mirror answer");
    let base = site.serve().await;
    let url = format!("{base}/ok");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("certs");
    std::fs::create_dir(&store).unwrap();
    // Other certificates and unrelated files sit beside it, as in /etc/ssl/certs.
    std::fs::write(store.join("README"), "not a certificate").unwrap();
    std::fs::write(
        store.join("broken.pem"),
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();

    // Not installed: refused, and the message names the remedy.
    let none = settings(SystemRoots::from_vars(|name| {
        (name == "SSL_CERT_DIR").then(|| empty.display().to_string())
    }));
    let e = fetch(&none, &url).await.unwrap_err();
    assert!(
        e.contains("extra_ca_file") && e.contains("system trust store"),
        "{e}"
    );

    // Installed into the directory: trusted.
    std::fs::write(
        store.join("corporate-proxy-ca.pem"),
        vendor_support::ca_pem(),
    )
    .unwrap();
    let by_dir = settings(SystemRoots::from_vars(|name| {
        (name == "SSL_CERT_DIR").then(|| format!("{}:{}", empty.display(), store.display()))
    }));
    assert_eq!(fetch(&by_dir, &url).await.unwrap(), b"mirror answer");

    // Installed into a bundle with other CAs: trusted.
    let bundle = dir.path().join("ca-certificates.crt");
    let other = rcgen::generate_simple_self_signed(vec!["other.example".into()]).unwrap();
    std::fs::write(
        &bundle,
        format!("{}{}", other.cert.pem(), vendor_support::ca_pem()),
    )
    .unwrap();
    let by_file = settings(SystemRoots::from_vars(|name| {
        (name == "SSL_CERT_FILE").then(|| bundle.display().to_string())
    }));
    assert_eq!(by_file.system_roots.load().len(), 2);
    assert_eq!(fetch(&by_file, &url).await.unwrap(), b"mirror answer");
}

/// A name that does not resolve and a proxy that refuses the tunnel each say which setting
/// fixes them.
#[tokio::test]
async fn connection_errors_name_the_setting_that_fixes_them() {
    let roots = SystemRoots::none();
    let e = fetch(
        &settings(roots.clone()),
        "https://mirror.invalid/pypi/x/json",
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("does not resolve") && e.contains("HTTPS_PROXY") && e.contains("base_url"),
        "{e}"
    );

    // A proxy that answers CONNECT with 403.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).await;
            let _ = conn
                .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    });
    let refused = OutboundSettings {
        proxy: ProxySettings::from_vars(|name| (name == "HTTPS_PROXY").then(|| proxy.clone())),
        ..settings(roots)
    };
    let e = fetch(&refused, "https://mirror.example/x")
        .await
        .unwrap_err();
    assert!(
        e.contains("proxy refused") && e.contains("HTTPS_PROXY") && e.contains("NO_PROXY"),
        "{e}"
    );
}
