//! The declarative catalog: vendors whose channel follows a common pattern are described
//! as data ([`CatalogEntry`]) and read by one interpreter ([`CatalogFetcher`]).
//!
//! Patterns ([`Source`]):
//! - checksum files listing a release's files (`SHA256SUMS`, `sha1sums`, `md5sums`);
//! - one `.sha256` file beside each artifact, at fixed paths or found in a directory listing;
//! - JSON manifests whose file entries carry their hashes, read through small field paths;
//! - GitHub release assets and their `digest` (`sha256:<hex>`, null on old assets).
//!
//! URL templates may use `{base}` (the configured base URL), `{files}` (the files host),
//! `{version}`, `{name}` (a listed file name, path-encoded) and `{target}`. File names are
//! mapped to platform and arch by [`Rule`]s, first match wins; a name no rule matches is not
//! an artifact (signatures, sources, platforms the service does not track).

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;
use serde_json::Value;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, resolve_url};
use crate::formats::{
    encode_path, file_name, glob_match, hex_digest, json_at, json_str, listing_links, newest,
    parse_checksums, valid_version,
};

use Arch::{Amd64, Arm, Arm64, Universal, X86};
use Platform::{Darwin, Linux, Windows};

/// One vendor described as data.
#[derive(Debug)]
pub(crate) struct CatalogEntry {
    pub id: &'static str,
    pub vendor: &'static str,
    /// Official discovery endpoint root.
    pub base_url: &'static str,
    /// Official files host when it differs.
    pub files_url: Option<&'static str>,
    pub source: Source,
    /// File name (or path) globs to platform and arch; see [`glob_match`].
    pub rules: &'static [Rule],
}

#[derive(Debug)]
pub struct Rule {
    pub glob: &'static str,
    pub platform: Platform,
    pub arch: Arch,
}

const fn rule(glob: &'static str, platform: Platform, arch: Arch) -> Rule {
    Rule {
        glob,
        platform,
        arch,
    }
}

/// Where a channel lists its releases.
#[derive(Debug)]
pub enum Releases {
    /// A JSON array of releases; `version` is each element's version field, and elements
    /// whose `skip_if` field is `true` (pre-releases) are ignored.
    JsonArray {
        url: &'static str,
        version: &'static str,
        skip_if: Option<&'static str>,
    },
    /// A JSON object whose named fields hold versions.
    JsonFields {
        url: &'static str,
        fields: &'static [&'static str],
    },
    /// A text document that is the version (kubectl's `stable.txt`).
    Text { url: &'static str },
    /// The channel only has a "latest" directory: the version is the `{version}` capture of
    /// `glob` on one of the listed names.
    InNames { glob: &'static str },
}

/// How a vendor's files and hashes are found.
#[derive(Debug)]
pub enum Source {
    ChecksumFiles(ChecksumFiles),
    Sidecar(Sidecar),
    JsonFiles(JsonFiles),
    JsonPerTarget(JsonPerTarget),
    /// `GET /repos/{repo}/releases`; assets carry `digest: "sha256:<hex>"` (null on assets
    /// uploaded before GitHub computed digests).
    GithubReleases {
        repo: &'static str,
    },
}

/// Checksum files that list every file of a release. The SHA-256 file is required; SHA-1
/// and MD5 files are read where the vendor publishes them.
#[derive(Debug)]
pub(crate) struct ChecksumFiles {
    pub releases: Releases,
    pub sha256: &'static str,
    pub sha1: Option<&'static str>,
    pub md5: Option<&'static str>,
    pub file_url: &'static str,
}

/// A `<file>.sha256` beside each file. A missing one means the file is downloaded.
#[derive(Debug)]
pub(crate) struct Sidecar {
    pub releases: Releases,
    pub files: SidecarFiles,
}

/// A JSON array of releases, each with an array of file entries carrying their SHA-256.
#[derive(Debug)]
pub(crate) struct JsonFiles {
    pub url: &'static str,
    pub version: &'static str,
    /// Releases whose field is `false` are skipped (Go's `stable`).
    pub keep_if: Option<&'static str>,
    pub files: &'static str,
    pub name: &'static str,
    pub sha256: &'static str,
    pub file_url: &'static str,
}

/// One JSON document per target (VS Code's update API); the target names platform and arch.
#[derive(Debug)]
pub(crate) struct JsonPerTarget {
    pub url: &'static str,
    pub targets: &'static [(&'static str, Platform, Arch)],
    pub version: &'static str,
    pub file_url: &'static str,
    pub sha256: &'static str,
    pub sha1: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) enum SidecarFiles {
    /// URL templates of the files.
    Paths(&'static [&'static str]),
    /// URL templates of directory listings; every linked file a rule matches is taken.
    Listing(&'static [&'static str]),
}

/// Every catalog vendor.
pub(crate) static CATALOG: &[CatalogEntry] = &[
    GO,
    NODEJS,
    FIREFOX,
    PUTTY,
    VSCODE,
    KUBECTL,
    TERRAFORM,
    VLC,
    SEVEN_ZIP,
    NOTEPADPP,
    GIT_WINDOWS,
    POWERSHELL,
    WINDOWS_TERMINAL,
    KEEPASSXC,
    DOCKER_COMPOSE,
    OBS_STUDIO,
    GH,
    RCLONE,
    SYNCTHING,
    JQ,
    RIPGREP,
    MINIKUBE,
    RESTIC,
    K9S,
    VELOCIRAPTOR,
    NEOVIM,
    AGE,
    CHAINSAW,
    HAYABUSA,
    VAULT,
    PACKER,
    CONSUL,
    NOMAD,
];

// https://go.dev/dl/?mode=json&include=all: [{version: "go1.23.4", stable, files: [{filename,
// os, arch, version, sha256, size, kind}]}], newest first (golang.org/x/website/internal/dl).
const GO: CatalogEntry = CatalogEntry {
    id: "go",
    vendor: "Go",
    base_url: "https://go.dev",
    files_url: None,
    source: Source::JsonFiles(JsonFiles {
        url: "{base}/dl/?mode=json&include=all",
        version: "version",
        keep_if: Some("stable"),
        files: "files",
        name: "filename",
        sha256: "sha256",
        file_url: "{base}/dl/{name}",
    }),
    rules: &[
        rule("go*.windows-amd64.*", Windows, Amd64),
        rule("go*.windows-386.*", Windows, X86),
        rule("go*.windows-arm64.*", Windows, Arm64),
        rule("go*.linux-amd64.tar.gz", Linux, Amd64),
        rule("go*.linux-arm64.tar.gz", Linux, Arm64),
        rule("go*.linux-386.tar.gz", Linux, X86),
        rule("go*.linux-armv6l.tar.gz", Linux, Arm),
        rule("go*.darwin-amd64.*", Darwin, Amd64),
        rule("go*.darwin-arm64.*", Darwin, Arm64),
    ],
};

// https://nodejs.org/dist/index.json: [{version: "v23.3.0", date, files, lts, security}];
// dist/<version>/SHASUMS256.txt: "<sha256>  node-v23.3.0-win-x64.zip", "... win-x64/node.exe".
const NODEJS: CatalogEntry = CatalogEntry {
    id: "nodejs",
    vendor: "Node.js",
    base_url: "https://nodejs.org",
    files_url: None,
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/dist/index.json",
            version: "version",
            skip_if: None,
        },
        sha256: "{base}/dist/{version}/SHASUMS256.txt",
        sha1: None,
        md5: None,
        file_url: "{base}/dist/{version}/{name}",
    }),
    rules: &[
        rule("node-v*-win-x64.zip", Windows, Amd64),
        rule("node-v*-win-x64.7z", Windows, Amd64),
        rule("node-v*-x64.msi", Windows, Amd64),
        rule("win-x64/node.exe", Windows, Amd64),
        rule("node-v*-win-x86.zip", Windows, X86),
        rule("node-v*-win-x86.7z", Windows, X86),
        rule("node-v*-x86.msi", Windows, X86),
        rule("win-x86/node.exe", Windows, X86),
        rule("node-v*-win-arm64.zip", Windows, Arm64),
        rule("node-v*-win-arm64.7z", Windows, Arm64),
        rule("node-v*-arm64.msi", Windows, Arm64),
        rule("win-arm64/node.exe", Windows, Arm64),
        rule("node-v*-darwin-x64.tar.*", Darwin, Amd64),
        rule("node-v*-darwin-arm64.tar.*", Darwin, Arm64),
        rule("node-v*.pkg", Darwin, Universal),
        rule("node-v*-linux-x64.tar.*", Linux, Amd64),
        rule("node-v*-linux-arm64.tar.*", Linux, Arm64),
        rule("node-v*-linux-armv7l.tar.*", Linux, Arm),
    ],
};

// https://product-details.mozilla.org/1.0/firefox_versions.json: {"LATEST_FIREFOX_VERSION":
// "133.0", "FIREFOX_ESR": "128.5.0esr", ...}; archive.mozilla.org/pub/firefox/releases/<v>/
// SHA256SUMS: "<sha256>  win64/en-US/Firefox Setup 133.0.exe" for every locale and file.
const FIREFOX: CatalogEntry = CatalogEntry {
    id: "firefox",
    vendor: "Mozilla",
    base_url: "https://product-details.mozilla.org",
    files_url: Some("https://archive.mozilla.org"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonFields {
            url: "{base}/1.0/firefox_versions.json",
            fields: &["LATEST_FIREFOX_VERSION"],
        },
        sha256: "{files}/pub/firefox/releases/{version}/SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/pub/firefox/releases/{version}/{name}",
    }),
    rules: &[
        rule("win64/en-US/Firefox Setup *.exe", Windows, Amd64),
        rule("win64/en-US/Firefox Setup *.msi", Windows, Amd64),
        rule("win32/en-US/Firefox Setup *.exe", Windows, X86),
        rule("win32/en-US/Firefox Setup *.msi", Windows, X86),
        rule("win64-aarch64/en-US/Firefox Setup *.exe", Windows, Arm64),
        rule("mac/en-US/Firefox *.dmg", Darwin, Universal),
        rule("mac/en-US/Firefox *.pkg", Darwin, Universal),
        rule("linux-x86_64/en-US/firefox-*.tar.bz2", Linux, Amd64),
        rule("linux-x86_64/en-US/firefox-*.tar.xz", Linux, Amd64),
        rule("linux-i686/en-US/firefox-*.tar.bz2", Linux, X86),
        rule("linux-i686/en-US/firefox-*.tar.xz", Linux, X86),
        rule("linux-aarch64/en-US/firefox-*.tar.xz", Linux, Arm64),
    ],
};

// https://the.earth.li/~sgtatham/putty/latest/{sha256sums,sha1sums,md5sums}:
// "<hex>  w64/putty.exe", "<hex>  w64/putty-64bit-0.83-installer.msi", and lines such as
// "<hex>  w64/putty.exe (installer version)" for files inside the installer (not URLs).
// `latest/` moves; files are recorded under the versioned directory, which does not.
const PUTTY: CatalogEntry = CatalogEntry {
    id: "putty",
    vendor: "PuTTY",
    base_url: "https://the.earth.li/~sgtatham/putty",
    files_url: None,
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::InNames {
            glob: "putty-{version}.tar.gz",
        },
        sha256: "{base}/latest/sha256sums",
        sha1: Some("{base}/latest/sha1sums"),
        md5: Some("{base}/latest/md5sums"),
        file_url: "{base}/{version}/{name}",
    }),
    rules: &[
        rule("w64/*.exe", Windows, Amd64),
        rule("w64/*.msi", Windows, Amd64),
        rule("w32/*.exe", Windows, X86),
        rule("w32/*.msi", Windows, X86),
        rule("wa64/*.exe", Windows, Arm64),
        rule("wa64/*.msi", Windows, Arm64),
        rule("wa32/*.exe", Windows, Arm),
        rule("wa32/*.msi", Windows, Arm),
    ],
};

// https://update.code.visualstudio.com/api/update/<target>/stable/latest: {url, name,
// version (commit), productVersion, hash (SHA-1), timestamp, sha256hash, supportsFastUpdate}.
const VSCODE: CatalogEntry = CatalogEntry {
    id: "vscode",
    vendor: "Microsoft",
    base_url: "https://update.code.visualstudio.com",
    files_url: None,
    source: Source::JsonPerTarget(JsonPerTarget {
        url: "{base}/api/update/{target}/stable/latest",
        targets: &[
            ("win32-x64", Windows, Amd64),
            ("win32-x64-user", Windows, Amd64),
            ("win32-x64-archive", Windows, Amd64),
            ("win32-arm64", Windows, Arm64),
            ("win32-arm64-user", Windows, Arm64),
            ("darwin-universal", Darwin, Universal),
            ("darwin-arm64", Darwin, Arm64),
            ("darwin", Darwin, Amd64),
            ("linux-x64", Linux, Amd64),
            ("linux-deb-x64", Linux, Amd64),
            ("linux-rpm-x64", Linux, Amd64),
            ("linux-arm64", Linux, Arm64),
            ("linux-armhf", Linux, Arm),
        ],
        version: "productVersion",
        file_url: "url",
        sha256: "sha256hash",
        sha1: Some("hash"),
    }),
    rules: &[],
};

// https://dl.k8s.io/release/stable.txt: "v1.31.3"; .../release/<v>/bin/<os>/<arch>/kubectl
// with kubectl.sha256 beside it holding the bare hex digest.
const KUBECTL: CatalogEntry = CatalogEntry {
    id: "kubectl",
    vendor: "Kubernetes",
    base_url: "https://dl.k8s.io",
    files_url: None,
    source: Source::Sidecar(Sidecar {
        releases: Releases::Text {
            url: "{base}/release/stable.txt",
        },
        files: SidecarFiles::Paths(&[
            "{base}/release/{version}/bin/linux/amd64/kubectl",
            "{base}/release/{version}/bin/linux/arm64/kubectl",
            "{base}/release/{version}/bin/linux/arm/kubectl",
            "{base}/release/{version}/bin/linux/386/kubectl",
            "{base}/release/{version}/bin/darwin/amd64/kubectl",
            "{base}/release/{version}/bin/darwin/arm64/kubectl",
            "{base}/release/{version}/bin/windows/amd64/kubectl.exe",
            "{base}/release/{version}/bin/windows/386/kubectl.exe",
            "{base}/release/{version}/bin/windows/arm64/kubectl.exe",
        ]),
    }),
    rules: &[
        rule("*/bin/linux/amd64/kubectl", Linux, Amd64),
        rule("*/bin/linux/arm64/kubectl", Linux, Arm64),
        rule("*/bin/linux/arm/kubectl", Linux, Arm),
        rule("*/bin/linux/386/kubectl", Linux, X86),
        rule("*/bin/darwin/amd64/kubectl", Darwin, Amd64),
        rule("*/bin/darwin/arm64/kubectl", Darwin, Arm64),
        rule("*/bin/windows/amd64/kubectl.exe", Windows, Amd64),
        rule("*/bin/windows/386/kubectl.exe", Windows, X86),
        rule("*/bin/windows/arm64/kubectl.exe", Windows, Arm64),
    ],
};

// https://api.releases.hashicorp.com/v1/releases/terraform: [{version, is_prerelease, builds:
// [{os, arch, url}], url_shasums, ...}]; releases.hashicorp.com/terraform/<v>/
// terraform_<v>_SHA256SUMS: "<sha256>  terraform_<v>_linux_amd64.zip".
const TERRAFORM: CatalogEntry = CatalogEntry {
    id: "terraform",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/terraform?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/terraform/{version}/terraform_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/terraform/{version}/{name}",
    }),
    rules: &[
        rule("terraform_*_windows_amd64.zip", Windows, Amd64),
        rule("terraform_*_windows_386.zip", Windows, X86),
        rule("terraform_*_linux_amd64.zip", Linux, Amd64),
        rule("terraform_*_linux_arm64.zip", Linux, Arm64),
        rule("terraform_*_linux_arm.zip", Linux, Arm),
        rule("terraform_*_linux_386.zip", Linux, X86),
        rule("terraform_*_darwin_amd64.zip", Darwin, Amd64),
        rule("terraform_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// https://get.videolan.org/vlc/last/<dir>/: an autoindex listing of vlc-3.0.21-win64.exe and
// friends, each with a "<sha256>  <name>" file named <name>.sha256 beside it.
const VLC: CatalogEntry = CatalogEntry {
    id: "vlc",
    vendor: "VideoLAN",
    base_url: "https://get.videolan.org",
    files_url: None,
    source: Source::Sidecar(Sidecar {
        releases: Releases::InNames {
            glob: "vlc-{version}-*",
        },
        files: SidecarFiles::Listing(&[
            "{base}/vlc/last/win64/",
            "{base}/vlc/last/win32/",
            "{base}/vlc/last/macosx/",
        ]),
    }),
    rules: &[
        rule("vlc-{version}-win64.exe", Windows, Amd64),
        rule("vlc-{version}-win64.msi", Windows, Amd64),
        rule("vlc-{version}-win64.zip", Windows, Amd64),
        rule("vlc-{version}-win64.7z", Windows, Amd64),
        rule("vlc-{version}-win32.exe", Windows, X86),
        rule("vlc-{version}-win32.msi", Windows, X86),
        rule("vlc-{version}-win32.zip", Windows, X86),
        rule("vlc-{version}-win32.7z", Windows, X86),
        rule("vlc-{version}-universal.dmg", Darwin, Universal),
        rule("vlc-{version}-arm64.dmg", Darwin, Arm64),
        rule("vlc-{version}-intel64.dmg", Darwin, Amd64),
    ],
};

// GitHub releases of ip7z/7zip: tag "24.09", assets 7z2409-x64.exe, 7z2409.exe (x86),
// 7z2409-arm64.exe, 7z2409-x64.msi, 7z2409-linux-x64.tar.xz, 7z2409-mac.tar.xz, 7zr.exe...
const SEVEN_ZIP: CatalogEntry = CatalogEntry {
    id: "7zip",
    vendor: "7-Zip",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "ip7z/7zip" },
    rules: &[
        rule("7z*-x64.exe", Windows, Amd64),
        rule("7z*-x64.msi", Windows, Amd64),
        rule("7z*-arm64.exe", Windows, Arm64),
        rule("7z{version}.exe", Windows, X86),
        rule("7z{version}.msi", Windows, X86),
        rule("7zr.exe", Windows, X86),
        rule("7z*-linux-x64.tar.xz", Linux, Amd64),
        rule("7z*-linux-arm64.tar.xz", Linux, Arm64),
        rule("7z*-linux-x86.tar.xz", Linux, X86),
        rule("7z*-linux-arm.tar.xz", Linux, Arm),
        rule("7z*-mac.tar.xz", Darwin, Universal),
    ],
};

// GitHub releases of notepad-plus-plus/notepad-plus-plus: tag "v8.7.7", assets
// npp.8.7.7.Installer.x64.exe, npp.8.7.7.Installer.exe (x86), npp.8.7.7.portable.x64.zip...
const NOTEPADPP: CatalogEntry = CatalogEntry {
    id: "notepadpp",
    vendor: "Notepad++",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "notepad-plus-plus/notepad-plus-plus",
    },
    rules: &[
        rule("npp.*.Installer.x64.exe", Windows, Amd64),
        rule("npp.*.Installer.x64.msi", Windows, Amd64),
        rule("npp.*.portable.x64.zip", Windows, Amd64),
        rule("npp.*.portable.x64.7z", Windows, Amd64),
        rule("npp.*.Installer.arm64.exe", Windows, Arm64),
        rule("npp.*.portable.arm64.zip", Windows, Arm64),
        rule("npp.*.portable.arm64.7z", Windows, Arm64),
        rule("npp.{version}.Installer.exe", Windows, X86),
        rule("npp.{version}.portable.zip", Windows, X86),
        rule("npp.{version}.portable.7z", Windows, X86),
    ],
};

/// Reads one catalog vendor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CatalogFetcher {
    pub entry: &'static CatalogEntry,
}

impl CatalogFetcher {
    /// The catalog entry with this id.
    #[cfg(test)]
    fn by_id(id: &str) -> Option<Self> {
        CATALOG
            .iter()
            .find(|e| e.id == id)
            .map(|entry| Self { entry })
    }

    /// The entry's official URLs as a configuration.
    pub(crate) fn default_config(&self) -> crate::fetch::VendorConfig {
        let config = crate::fetch::VendorConfig::new(self.entry.base_url);
        match self.entry.files_url {
            Some(files) => config.with_files_url(files),
            None => config,
        }
    }

    /// The first rule matching `name`, with its `{version}` capture.
    fn classify(&self, name: &str) -> Option<(Platform, Arch, Option<String>)> {
        self.entry
            .rules
            .iter()
            .find_map(|r| glob_match(r.glob, name).map(|capture| (r.platform, r.arch, capture)))
    }

    fn artifact(
        &self,
        version: &str,
        name: &str,
        url: String,
        pa: (Platform, Arch),
        published: PublishedHashes,
    ) -> Artifact {
        Artifact {
            vendor: self.entry.vendor.into(),
            executable_name: file_name(name).into(),
            version: version.into(),
            platform: pa.0,
            arch: pa.1,
            url,
            published,
        }
    }
}

/// Fills a URL template.
fn expand(template: &str, ctx: &FetchContext, version: &str, name: &str) -> String {
    template
        .replace("{base}", ctx.base_url())
        .replace("{files}", ctx.files_url())
        .replace("{version}", version)
        .replace("{name}", &encode_path(name))
}

/// The newest versions a release list names (`None` for [`Releases::InNames`]).
async fn release_versions(
    ctx: &FetchContext,
    releases: &Releases,
) -> Result<Option<Vec<String>>, FetchError> {
    let n = ctx.limits.max_versions;
    let found = match releases {
        Releases::InNames { .. } => return Ok(None),
        Releases::JsonArray {
            url,
            version,
            skip_if,
        } => {
            let url = expand(url, ctx, "", "");
            let doc: Value = ctx.get_json(&url, None).await?;
            let items = doc
                .as_array()
                .ok_or_else(|| FetchError::malformed(&url, "expected a JSON array of releases"))?;
            let skipped = |item: &Value| {
                skip_if.is_some_and(|f| json_at(item, f) == Some(&Value::Bool(true)))
            };
            let versions: Vec<String> = items
                .iter()
                .filter(|item| !skipped(item))
                .filter_map(|item| json_str(item, version))
                .filter(|v| valid_version(v))
                .map(str::to_owned)
                .collect();
            if versions.is_empty() {
                return Err(FetchError::malformed(
                    &url,
                    format!("no release has a usable `{version}`"),
                ));
            }
            versions
        }
        Releases::JsonFields { url, fields } => {
            let url = expand(url, ctx, "", "");
            let doc: Value = ctx.get_json(&url, None).await?;
            let versions: Vec<String> = fields
                .iter()
                .filter_map(|f| json_str(&doc, f))
                .filter(|v| valid_version(v))
                .map(str::to_owned)
                .collect();
            if versions.is_empty() {
                return Err(FetchError::malformed(
                    &url,
                    format!("none of {fields:?} holds a version"),
                ));
            }
            versions
        }
        Releases::Text { url } => {
            let url = expand(url, ctx, "", "");
            let text = ctx.get_text(&url).await?;
            let version = text.trim();
            if !valid_version(version) {
                return Err(FetchError::malformed(
                    &url,
                    format!("{:?} is not a version", truncate(version)),
                ));
            }
            vec![version.to_owned()]
        }
    };
    Ok(Some(newest(found, n)))
}

fn truncate(s: &str) -> &str {
    let end = s.char_indices().nth(40).map_or(s.len(), |(i, _)| i);
    &s[..end]
}

#[async_trait]
impl Fetcher for CatalogFetcher {
    fn id(&self) -> &str {
        self.entry.id
    }

    fn vendor(&self) -> &str {
        self.entry.vendor
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        match &self.entry.source {
            Source::ChecksumFiles(spec) => self.checksum_files(ctx, spec).await,
            Source::Sidecar(spec) => self.sidecar(ctx, spec).await,
            Source::JsonFiles(spec) => self.json_files(ctx, spec).await,
            Source::JsonPerTarget(spec) => self.json_per_target(ctx, spec).await,
            Source::GithubReleases { repo } => self.github(ctx, repo).await,
        }
    }
}

/// A file found through a sidecar channel, before its `.sha256` is read.
struct Candidate {
    version: String,
    name: String,
    url: String,
    platform: Platform,
    arch: Arch,
}

impl CatalogFetcher {
    async fn checksum_files(
        &self,
        ctx: &FetchContext,
        spec: &ChecksumFiles,
    ) -> Result<Vec<Artifact>, FetchError> {
        // `None`: a "latest"-only channel whose version is read from the sums file (PuTTY).
        let versions: Vec<Option<String>> = match release_versions(ctx, &spec.releases).await? {
            Some(versions) => versions.into_iter().map(Some).collect(),
            None => vec![None],
        };
        let mut out = Vec::new();
        for version in versions {
            let sums = read_sums(ctx, version.as_deref().unwrap_or(""), spec).await?;
            let version = match version {
                Some(v) => v,
                None => version_in_names(&spec.releases, sums.keys()).ok_or_else(|| {
                    let url = expand(spec.sha256, ctx, "", "");
                    FetchError::malformed(&url, "no listed file name gives the version")
                })?,
            };
            for (name, published) in sums {
                if let Some((p, a, _)) = self.classify(&name) {
                    let url = expand(spec.file_url, ctx, &version, &name);
                    out.push(self.artifact(&version, &name, url, (p, a), published));
                }
            }
        }
        Ok(out)
    }

    async fn sidecar(
        &self,
        ctx: &FetchContext,
        spec: &Sidecar,
    ) -> Result<Vec<Artifact>, FetchError> {
        let mut failures = Vec::new();
        let candidates = match &spec.files {
            SidecarFiles::Paths(paths) => self.fixed_paths(ctx, &spec.releases, paths).await?,
            SidecarFiles::Listing(dirs) => {
                self.listed(ctx, &spec.releases, dirs, &mut failures)
                    .await?
            }
        };
        let mut out = Vec::new();
        for c in candidates {
            // A missing sidecar means nothing is published: the file gets downloaded.
            let sha256 = match ctx.get_text(&format!("{}.sha256", c.url)).await {
                Ok(text) => text
                    .split_whitespace()
                    .next()
                    .and_then(|h| hex_digest(h, 64)),
                Err(e) if e.is_not_found() => None,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let published = PublishedHashes {
                sha256,
                ..Default::default()
            };
            out.push(self.artifact(&c.version, &c.name, c.url, (c.platform, c.arch), published));
        }
        ctx.settle(out, failures)
    }

    /// Files at known paths, for each release version.
    async fn fixed_paths(
        &self,
        ctx: &FetchContext,
        releases: &Releases,
        paths: &[&str],
    ) -> Result<Vec<Candidate>, FetchError> {
        let versions = release_versions(ctx, releases).await?.unwrap_or_default();
        let mut out = Vec::new();
        for version in &versions {
            for path in paths {
                let url = expand(path, ctx, version, "");
                if let Some((platform, arch, _)) = self.classify(&url) {
                    let name = file_name(&url).to_owned();
                    let version = version.clone();
                    out.push(Candidate {
                        version,
                        name,
                        url,
                        platform,
                        arch,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Files linked from directory listings, the newest versions among them.
    async fn listed(
        &self,
        ctx: &FetchContext,
        releases: &Releases,
        dirs: &[&str],
        failures: &mut Vec<FetchError>,
    ) -> Result<Vec<Candidate>, FetchError> {
        let mut out = Vec::new();
        for dir in dirs {
            let dir = expand(dir, ctx, "", "");
            let html = match ctx.get_text(&dir).await {
                Ok(html) => html,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for name in listing_links(&html) {
                let Some((platform, arch, capture)) = self.classify(&name) else {
                    continue;
                };
                let version = capture.or_else(|| version_in_names(releases, [&name]));
                let Some(version) = version.filter(|v| valid_version(v)) else {
                    continue;
                };
                let url = format!("{}/{}", dir.trim_end_matches('/'), encode_path(&name));
                out.push(Candidate {
                    version,
                    name,
                    url,
                    platform,
                    arch,
                });
            }
        }
        if out.is_empty() && failures.is_empty() {
            let first = expand(dirs.first().copied().unwrap_or(""), ctx, "", "");
            return Err(FetchError::malformed(
                &first,
                "the listings link no known file",
            ));
        }
        let keep = newest(
            out.iter().map(|c| c.version.clone()),
            ctx.limits.max_versions,
        );
        out.retain(|c| keep.contains(&c.version));
        Ok(out)
    }

    async fn json_files(
        &self,
        ctx: &FetchContext,
        spec: &JsonFiles,
    ) -> Result<Vec<Artifact>, FetchError> {
        let url = expand(spec.url, ctx, "", "");
        let doc: Value = ctx.get_json(&url, None).await?;
        let releases = doc
            .as_array()
            .ok_or_else(|| FetchError::malformed(&url, "expected a JSON array of releases"))?;
        let kept = |r: &&Value| {
            spec.keep_if
                .is_none_or(|f| json_at(r, f) != Some(&Value::Bool(false)))
        };
        let by_version: BTreeMap<&str, &Value> = releases
            .iter()
            .filter(kept)
            .filter_map(|r| Some((json_str(r, spec.version).filter(|v| valid_version(v))?, r)))
            .collect();
        if by_version.is_empty() {
            let reason = format!("no release has a usable `{}`", spec.version);
            return Err(FetchError::malformed(&url, reason));
        }
        let chosen = newest(
            by_version.keys().map(|v| (*v).to_owned()),
            ctx.limits.max_versions,
        );
        let mut out = Vec::new();
        for version in &chosen {
            let entries = json_at(by_version[version.as_str()], spec.files)
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    let reason = format!("release {version} has no `{}` array", spec.files);
                    FetchError::malformed(&url, reason)
                })?;
            for entry in entries {
                let Some(file) = json_str(entry, spec.name) else {
                    continue;
                };
                let Some((p, a, _)) = self.classify(file) else {
                    continue;
                };
                let published = PublishedHashes {
                    sha256: json_str(entry, spec.sha256).and_then(|h| hex_digest(h, 64)),
                    ..Default::default()
                };
                let file_url = expand(spec.file_url, ctx, version, file);
                out.push(self.artifact(version, file, file_url, (p, a), published));
            }
        }
        Ok(out)
    }

    async fn json_per_target(
        &self,
        ctx: &FetchContext,
        spec: &JsonPerTarget,
    ) -> Result<Vec<Artifact>, FetchError> {
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for &(target, platform, arch) in spec.targets {
            let url = expand(spec.url, ctx, "", "").replace("{target}", target);
            let doc = match ctx.get_json::<Value>(&url, None).await {
                Ok(doc) => doc,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let version = json_str(&doc, spec.version).filter(|v| valid_version(v));
            let (Some(version), Some(file)) = (version, json_str(&doc, spec.file_url)) else {
                let reason = format!("no usable `{}` or `{}`", spec.version, spec.file_url);
                failures.push(FetchError::malformed(&url, reason));
                continue;
            };
            let published = PublishedHashes {
                sha256: json_str(&doc, spec.sha256).and_then(|h| hex_digest(h, 64)),
                sha1: spec
                    .sha1
                    .and_then(|f| json_str(&doc, f))
                    .and_then(|h| hex_digest(h, 40)),
                md5: None,
            };
            let file_url = match resolve_url(&url, file) {
                Ok(u) => u,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            out.push(self.artifact(version, file, file_url, (platform, arch), published));
        }
        ctx.settle(out, failures)
    }

    async fn github(&self, ctx: &FetchContext, repo: &str) -> Result<Vec<Artifact>, FetchError> {
        #[derive(Deserialize)]
        struct Release {
            tag_name: String,
            #[serde(default)]
            draft: bool,
            #[serde(default)]
            prerelease: bool,
            #[serde(default)]
            assets: Vec<Asset>,
        }
        #[derive(Deserialize)]
        struct Asset {
            name: String,
            browser_download_url: String,
            digest: Option<String>,
        }
        let url = format!("{}/repos/{repo}/releases?per_page=20", ctx.base_url());
        let releases: Vec<Release> = ctx
            .get_json(&url, Some("application/vnd.github+json"))
            .await?;
        let version_of = |r: &Release| r.tag_name.trim_start_matches('v').to_owned();
        let usable: Vec<&Release> = releases
            .iter()
            .filter(|r| !r.draft && !r.prerelease && valid_version(&version_of(r)))
            .collect();
        if usable.is_empty() {
            return Err(FetchError::malformed(&url, "no published release"));
        }
        let keep = newest(
            usable.iter().map(|r| version_of(r)),
            ctx.limits.max_versions,
        );
        let mut out = Vec::new();
        for release in usable.into_iter().filter(|r| keep.contains(&version_of(r))) {
            let version = version_of(release);
            for asset in &release.assets {
                let Some((p, a, _)) = self.classify(&asset.name) else {
                    continue;
                };
                let sha256 = asset
                    .digest
                    .as_deref()
                    .and_then(|d| d.strip_prefix("sha256:"))
                    .and_then(|h| hex_digest(h, 64));
                let published = PublishedHashes {
                    sha256,
                    ..Default::default()
                };
                // GitHub Enterprise and mirrors of the API may answer relative links.
                let file_url = match resolve_url(&url, &asset.browser_download_url) {
                    Ok(u) => u,
                    Err(e) => {
                        ctx.note(e);
                        continue;
                    }
                };
                out.push(self.artifact(&version, &asset.name, file_url, (p, a), published));
            }
        }
        Ok(out)
    }
}

// https://api.github.com/repos/git-for-windows/git/releases: GitHub release assets with `digest`.
const GIT_WINDOWS: CatalogEntry = CatalogEntry {
    id: "git-windows",
    vendor: "Git for Windows",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "git-for-windows/git",
    },
    rules: &[
        rule("Git-*-64-bit.exe", Windows, Amd64),
        rule("Git-*-arm64.exe", Windows, Arm64),
        rule("MinGit-*-64-bit.zip", Windows, Amd64),
        rule("MinGit-*-arm64.zip", Windows, Arm64),
        rule("PortableGit-*-64-bit.7z.exe", Windows, Amd64),
    ],
};

// https://api.github.com/repos/PowerShell/PowerShell/releases: GitHub release assets with `digest`.
const POWERSHELL: CatalogEntry = CatalogEntry {
    id: "powershell",
    vendor: "Microsoft PowerShell",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "PowerShell/PowerShell",
    },
    rules: &[
        rule("PowerShell-*-win-x64.msi", Windows, Amd64),
        rule("PowerShell-*-win-x64.zip", Windows, Amd64),
        rule("PowerShell-*-win-arm64.zip", Windows, Arm64),
        rule("powershell-*-linux-x64.tar.gz", Linux, Amd64),
        rule("powershell-*-linux-arm64.tar.gz", Linux, Arm64),
        rule("powershell-*-osx-arm64.pkg", Darwin, Arm64),
        rule("powershell-*-osx-x64.pkg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/microsoft/terminal/releases: GitHub release assets with `digest`.
const WINDOWS_TERMINAL: CatalogEntry = CatalogEntry {
    id: "windows-terminal",
    vendor: "Microsoft Windows Terminal",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "microsoft/terminal",
    },
    rules: &[
        rule(
            "Microsoft.WindowsTerminal_*_8wekyb3d8bbwe.msixbundle",
            Windows,
            Universal,
        ),
        rule("Microsoft.WindowsTerminal_*_x64.zip", Windows, Amd64),
        rule("Microsoft.WindowsTerminal_*_arm64.zip", Windows, Arm64),
        rule("Microsoft.WindowsTerminal_*_x86.zip", Windows, X86),
    ],
};

// https://api.github.com/repos/keepassxreboot/keepassxc/releases: GitHub release assets with `digest`.
const KEEPASSXC: CatalogEntry = CatalogEntry {
    id: "keepassxc",
    vendor: "KeePassXC",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "keepassxreboot/keepassxc",
    },
    rules: &[
        rule("KeePassXC-*-Win64.msi", Windows, Amd64),
        rule("KeePassXC-*-Win64.zip", Windows, Amd64),
        rule("KeePassXC-*-x86_64.AppImage", Linux, Amd64),
        rule("KeePassXC-*-arm64.dmg", Darwin, Arm64),
        rule("KeePassXC-*-x86_64.dmg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/docker/compose/releases: GitHub release assets with `digest`.
const DOCKER_COMPOSE: CatalogEntry = CatalogEntry {
    id: "docker-compose",
    vendor: "Docker",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "docker/compose",
    },
    rules: &[
        rule("docker-compose-windows-x86_64.exe", Windows, Amd64),
        rule("docker-compose-windows-aarch64.exe", Windows, Arm64),
        rule("docker-compose-linux-x86_64", Linux, Amd64),
        rule("docker-compose-linux-aarch64", Linux, Arm64),
        rule("docker-compose-darwin-x86_64", Darwin, Amd64),
        rule("docker-compose-darwin-aarch64", Darwin, Arm64),
    ],
};

// https://api.github.com/repos/obsproject/obs-studio/releases: GitHub release assets with `digest`.
const OBS_STUDIO: CatalogEntry = CatalogEntry {
    id: "obs-studio",
    vendor: "OBS Project",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "obsproject/obs-studio",
    },
    rules: &[
        rule("OBS-Studio-*-Windows-Installer.exe", Windows, Amd64),
        rule("OBS-Studio-*-Windows.zip", Windows, Amd64),
        rule("OBS-Studio-*-macOS-Apple.dmg", Darwin, Arm64),
        rule("OBS-Studio-*-macOS-Intel.dmg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/cli/cli/releases: GitHub release assets with `digest`.
const GH: CatalogEntry = CatalogEntry {
    id: "gh",
    vendor: "GitHub CLI",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "cli/cli" },
    rules: &[
        rule("gh_*_windows_amd64.msi", Windows, Amd64),
        rule("gh_*_windows_amd64.zip", Windows, Amd64),
        rule("gh_*_windows_arm64.zip", Windows, Arm64),
        rule("gh_*_linux_amd64.tar.gz", Linux, Amd64),
        rule("gh_*_linux_arm64.tar.gz", Linux, Arm64),
        rule("gh_*_macOS_arm64.zip", Darwin, Arm64),
        rule("gh_*_macOS_amd64.zip", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/rclone/rclone/releases: GitHub release assets with `digest`.
const RCLONE: CatalogEntry = CatalogEntry {
    id: "rclone",
    vendor: "Rclone",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "rclone/rclone",
    },
    rules: &[
        rule("rclone-v*-windows-amd64.zip", Windows, Amd64),
        rule("rclone-v*-windows-arm64.zip", Windows, Arm64),
        rule("rclone-v*-linux-amd64.zip", Linux, Amd64),
        rule("rclone-v*-linux-arm64.zip", Linux, Arm64),
        rule("rclone-v*-osx-arm64.zip", Darwin, Arm64),
        rule("rclone-v*-osx-amd64.zip", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/syncthing/syncthing/releases: GitHub release assets with `digest`.
const SYNCTHING: CatalogEntry = CatalogEntry {
    id: "syncthing",
    vendor: "Syncthing",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "syncthing/syncthing",
    },
    rules: &[
        rule("syncthing-windows-amd64-v*.zip", Windows, Amd64),
        rule("syncthing-windows-arm64-v*.zip", Windows, Arm64),
        rule("syncthing-linux-amd64-v*.tar.gz", Linux, Amd64),
        rule("syncthing-linux-arm64-v*.tar.gz", Linux, Arm64),
        rule("syncthing-macos-universal-v*.zip", Darwin, Universal),
    ],
};

// https://api.github.com/repos/jqlang/jq/releases: GitHub release assets with `digest`.
const JQ: CatalogEntry = CatalogEntry {
    id: "jq",
    vendor: "jq",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "jqlang/jq" },
    rules: &[
        rule("jq-windows-amd64.exe", Windows, Amd64),
        rule("jq-linux-amd64", Linux, Amd64),
        rule("jq-linux-arm64", Linux, Arm64),
        rule("jq-macos-arm64", Darwin, Arm64),
        rule("jq-macos-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/BurntSushi/ripgrep/releases: GitHub release assets with `digest`.
const RIPGREP: CatalogEntry = CatalogEntry {
    id: "ripgrep",
    vendor: "ripgrep",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "BurntSushi/ripgrep",
    },
    rules: &[
        rule("ripgrep-*-x86_64-pc-windows-msvc.zip", Windows, Amd64),
        rule("ripgrep-*-aarch64-pc-windows-msvc.zip", Windows, Arm64),
        rule("ripgrep-*-x86_64-unknown-linux-musl.tar.gz", Linux, Amd64),
        rule("ripgrep-*-aarch64-unknown-linux-gnu.tar.gz", Linux, Arm64),
        rule("ripgrep-*-aarch64-apple-darwin.tar.gz", Darwin, Arm64),
        rule("ripgrep-*-x86_64-apple-darwin.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/kubernetes/minikube/releases: GitHub release assets with `digest`.
const MINIKUBE: CatalogEntry = CatalogEntry {
    id: "minikube",
    vendor: "Kubernetes minikube",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "kubernetes/minikube",
    },
    rules: &[
        rule("minikube-installer.exe", Windows, Amd64),
        rule("minikube-windows-amd64.exe", Windows, Amd64),
        rule("minikube-linux-amd64", Linux, Amd64),
        rule("minikube-linux-arm64", Linux, Arm64),
        rule("minikube-darwin-arm64", Darwin, Arm64),
        rule("minikube-darwin-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/restic/restic/releases: GitHub release assets with `digest`.
const RESTIC: CatalogEntry = CatalogEntry {
    id: "restic",
    vendor: "restic",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "restic/restic",
    },
    rules: &[
        rule("restic_*_windows_amd64.zip", Windows, Amd64),
        rule("restic_*_windows_386.zip", Windows, X86),
        rule("restic_*_linux_amd64.bz2", Linux, Amd64),
        rule("restic_*_linux_arm64.bz2", Linux, Arm64),
        rule("restic_*_darwin_arm64.bz2", Darwin, Arm64),
        rule("restic_*_darwin_amd64.bz2", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/derailed/k9s/releases: GitHub release assets with `digest`.
const K9S: CatalogEntry = CatalogEntry {
    id: "k9s",
    vendor: "k9s",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "derailed/k9s",
    },
    rules: &[
        rule("k9s_Windows_amd64.zip", Windows, Amd64),
        rule("k9s_Windows_arm64.zip", Windows, Arm64),
        rule("k9s_Linux_amd64.tar.gz", Linux, Amd64),
        rule("k9s_Linux_arm64.tar.gz", Linux, Arm64),
        rule("k9s_Darwin_arm64.tar.gz", Darwin, Arm64),
        rule("k9s_Darwin_amd64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/Velocidex/velociraptor/releases: GitHub release assets with `digest`.
const VELOCIRAPTOR: CatalogEntry = CatalogEntry {
    id: "velociraptor",
    vendor: "Velocidex",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "Velocidex/velociraptor",
    },
    rules: &[
        rule("velociraptor-v*-windows-amd64.exe", Windows, Amd64),
        rule("velociraptor-v*-windows-amd64.msi", Windows, Amd64),
        rule("velociraptor-v*-windows-386.exe", Windows, X86),
        rule("velociraptor-v*-linux-amd64", Linux, Amd64),
        rule("velociraptor-v*-linux-arm64", Linux, Arm64),
        rule("velociraptor-v*-darwin-arm64", Darwin, Arm64),
        rule("velociraptor-v*-darwin-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/neovim/neovim/releases: GitHub release assets with `digest`.
const NEOVIM: CatalogEntry = CatalogEntry {
    id: "neovim",
    vendor: "Neovim",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "neovim/neovim",
    },
    rules: &[
        rule("nvim-win64.msi", Windows, Amd64),
        rule("nvim-win64.zip", Windows, Amd64),
        rule("nvim-linux64.tar.gz", Linux, Amd64),
        rule("nvim-linux-x86_64.tar.gz", Linux, Amd64),
        rule("nvim-linux-arm64.tar.gz", Linux, Arm64),
        rule("nvim-macos-arm64.tar.gz", Darwin, Arm64),
        rule("nvim-macos-x86_64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/FiloSottile/age/releases: GitHub release assets with `digest`.
const AGE: CatalogEntry = CatalogEntry {
    id: "age",
    vendor: "age",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "FiloSottile/age",
    },
    rules: &[
        rule("age-v*-windows-amd64.zip", Windows, Amd64),
        rule("age-v*-linux-amd64.tar.gz", Linux, Amd64),
        rule("age-v*-linux-arm64.tar.gz", Linux, Arm64),
        rule("age-v*-darwin-arm64.tar.gz", Darwin, Arm64),
        rule("age-v*-darwin-amd64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/WithSecureLabs/chainsaw/releases: GitHub release assets with `digest`.
const CHAINSAW: CatalogEntry = CatalogEntry {
    id: "chainsaw",
    vendor: "WithSecure",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "WithSecureLabs/chainsaw",
    },
    rules: &[
        rule("chainsaw_x86_64-pc-windows-msvc.zip", Windows, Amd64),
        rule("chainsaw_x86_64-unknown-linux-gnu.tar.gz", Linux, Amd64),
        rule("chainsaw_aarch64-apple-darwin.tar.gz", Darwin, Arm64),
        rule("chainsaw_x86_64-apple-darwin.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/Yamato-Security/hayabusa/releases: GitHub release assets with `digest`.
const HAYABUSA: CatalogEntry = CatalogEntry {
    id: "hayabusa",
    vendor: "Yamato Security",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "Yamato-Security/hayabusa",
    },
    rules: &[
        rule("hayabusa-*-win-x64.zip", Windows, Amd64),
        rule("hayabusa-*-win-aarch64.zip", Windows, Arm64),
        rule("hayabusa-*-lin-x64-gnu.zip", Linux, Amd64),
        rule("hayabusa-*-lin-aarch64-gnu.zip", Linux, Arm64),
        rule("hayabusa-*-mac-arm.zip", Darwin, Arm64),
        rule("hayabusa-*-mac-intel.zip", Darwin, Amd64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/vault, then vault_<v>_SHA256SUMS.
const VAULT: CatalogEntry = CatalogEntry {
    id: "vault",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/vault?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/vault/{version}/vault_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/vault/{version}/{name}",
    }),
    rules: &[
        rule("vault_*_windows_amd64.zip", Windows, Amd64),
        rule("vault_*_windows_386.zip", Windows, X86),
        rule("vault_*_linux_amd64.zip", Linux, Amd64),
        rule("vault_*_linux_arm64.zip", Linux, Arm64),
        rule("vault_*_linux_arm.zip", Linux, Arm),
        rule("vault_*_darwin_amd64.zip", Darwin, Amd64),
        rule("vault_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/packer, then packer_<v>_SHA256SUMS.
const PACKER: CatalogEntry = CatalogEntry {
    id: "packer",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/packer?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/packer/{version}/packer_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/packer/{version}/{name}",
    }),
    rules: &[
        rule("packer_*_windows_amd64.zip", Windows, Amd64),
        rule("packer_*_windows_386.zip", Windows, X86),
        rule("packer_*_linux_amd64.zip", Linux, Amd64),
        rule("packer_*_linux_arm64.zip", Linux, Arm64),
        rule("packer_*_linux_arm.zip", Linux, Arm),
        rule("packer_*_darwin_amd64.zip", Darwin, Amd64),
        rule("packer_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/consul, then consul_<v>_SHA256SUMS.
const CONSUL: CatalogEntry = CatalogEntry {
    id: "consul",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/consul?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/consul/{version}/consul_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/consul/{version}/{name}",
    }),
    rules: &[
        rule("consul_*_windows_amd64.zip", Windows, Amd64),
        rule("consul_*_windows_386.zip", Windows, X86),
        rule("consul_*_linux_amd64.zip", Linux, Amd64),
        rule("consul_*_linux_arm64.zip", Linux, Arm64),
        rule("consul_*_linux_arm.zip", Linux, Arm),
        rule("consul_*_darwin_amd64.zip", Darwin, Amd64),
        rule("consul_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/nomad, then nomad_<v>_SHA256SUMS.
const NOMAD: CatalogEntry = CatalogEntry {
    id: "nomad",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/nomad?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/nomad/{version}/nomad_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/nomad/{version}/{name}",
    }),
    rules: &[
        rule("nomad_*_windows_amd64.zip", Windows, Amd64),
        rule("nomad_*_windows_386.zip", Windows, X86),
        rule("nomad_*_linux_amd64.zip", Linux, Amd64),
        rule("nomad_*_linux_arm64.zip", Linux, Arm64),
        rule("nomad_*_linux_arm.zip", Linux, Arm),
        rule("nomad_*_darwin_amd64.zip", Darwin, Amd64),
        rule("nomad_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

/// The merged checksum files of one release: file name -> published hashes.
async fn read_sums(
    ctx: &FetchContext,
    version: &str,
    spec: &ChecksumFiles,
) -> Result<BTreeMap<String, PublishedHashes>, FetchError> {
    let mut sums: BTreeMap<String, PublishedHashes> = BTreeMap::new();
    let url = expand(spec.sha256, ctx, version, "");
    let lines = parse_checksums(&ctx.get_text(&url).await?, 64);
    if lines.is_empty() {
        return Err(FetchError::malformed(&url, "no `<sha256>  <file>` line"));
    }
    for (name, hex) in lines {
        sums.entry(name).or_default().sha256 = Some(hex);
    }
    // SHA-1 and MD5 files add what they list; one that cannot be read is noted, not fatal.
    for (template, len) in [(spec.sha1, 40), (spec.md5, 32)] {
        let Some(template) = template else {
            continue;
        };
        let url = expand(template, ctx, version, "");
        let text = match ctx.get_text(&url).await {
            Ok(text) => text,
            Err(e) => {
                ctx.note(e);
                continue;
            }
        };
        for (name, hex) in parse_checksums(&text, len) {
            let entry = sums.entry(name).or_default();
            if len == 40 {
                entry.sha1 = Some(hex);
            } else {
                entry.md5 = Some(hex);
            }
        }
    }
    Ok(sums)
}

/// The version named by [`Releases::InNames`]'s glob in one of `names`.
fn version_in_names<'a>(
    releases: &Releases,
    names: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let Releases::InNames { glob } = releases else {
        return None;
    };
    names
        .into_iter()
        .find_map(|n| glob_match(glob, n).flatten())
        .filter(|v| valid_version(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(id: &str, name: &str) -> Option<(Platform, Arch)> {
        let f = CatalogFetcher::by_id(id).unwrap();
        f.classify(name).map(|(p, a, _)| (p, a))
    }

    #[test]
    fn catalog_ids_are_unique_and_urls_official() {
        let mut ids: Vec<_> = CATALOG.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CATALOG.len());
        assert!(CATALOG.iter().all(|e| e.base_url.starts_with("https://")));
    }

    #[test]
    fn rules_map_vendor_names() {
        assert_eq!(
            classify("go", "go1.23.4.windows-amd64.msi"),
            Some((Windows, Amd64))
        );
        assert_eq!(classify("go", "go1.23.4.src.tar.gz"), None);
        assert_eq!(classify("go", "go1.23.4.freebsd-amd64.tar.gz"), None);
        assert_eq!(
            classify("nodejs", "win-arm64/node.exe"),
            Some((Windows, Arm64))
        );
        assert_eq!(
            classify("nodejs", "node-v23.3.0.pkg"),
            Some((Darwin, Universal))
        );
        assert_eq!(classify("nodejs", "node-v23.3.0-linux-s390x.tar.xz"), None);
        assert_eq!(
            classify("firefox", "win64/de/Firefox Setup 133.0.exe"),
            None
        );
        assert_eq!(
            classify("firefox", "linux-x86_64/en-US/firefox-133.0.tar.bz2.asc"),
            None
        );
        assert_eq!(classify("7zip", "7z2409.exe"), Some((Windows, X86)));
        assert_eq!(classify("7zip", "7z2409-src.7z"), None);
        assert_eq!(
            classify("notepadpp", "npp.8.7.7.Installer.exe"),
            Some((Windows, X86))
        );
        assert_eq!(
            classify("notepadpp", "npp.8.7.7.Installer.x64.exe.sig"),
            None
        );
        assert_eq!(classify("vlc", "vlc-3.0.21-win64.exe.sha256"), None);
    }
}
