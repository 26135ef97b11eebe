//! Ingest of knowngood: turning vendor release channels into hash records.
//!
//! - [`fetch`]: the [`Fetcher`] trait, the [`Artifact`]s a channel yields and the
//!   [`FetchContext`] (client, [`VendorConfig`], [`FetchLimits`]) fetchers read through.
//! - [`catalog`]: vendors described as data (checksum files, `.sha256` sidecars, JSON
//!   manifests, GitHub release digests) and their interpreter [`CatalogFetcher`].
//! - [`vendors`]: fetchers written as code for the other channels, and [`vendors::all`], the
//!   registry of every vendor with its official configuration.
//! - [`pipeline`]: [`ingest_vendor`] records each artifact through a [`RecordSink`], using a
//!   published SHA-256 as is and downloading the file otherwise.
//! - [`http`]: [`OutboundSettings`], where every outbound client is built (HTTPS only, the
//!   built-in roots, the system trust store and an optional extra CA bundle, proxies from
//!   the environment), and the hints that say which setting fixes a failed connection.
//! - [`hasher`], [`download`], [`authenticode`]: one-pass SHA-256/SHA-1/MD5 of a streamed
//!   download, never written to disk, with the Authenticode signer of PE files.
//! - [`members`]: the files inside zip, tar and `.deb` archives, decoded and hashed while the
//!   archive streams; [`rpm`]: RPM packages' headers and the per-file SHA-256 they list;
//!   [`openpgp`]: signed `InRelease` and `repomd.xml` files of distributions.
//!
//! Vendors, their channels, and what each publishes (versions are always read from the
//! channel, never configured):
//!
//! | id | vendor | channel | hashes | download |
//! |---|---|---|---|---|
//! | `go` | Go | `go.dev/dl/?mode=json&include=all` | SHA-256 | no |
//! | `nodejs` | Node.js | `nodejs.org/dist/index.json`, `dist/<v>/SHASUMS256.txt` | SHA-256 | no |
//! | `rust` | Rust | `static.rust-lang.org/dist/channel-rust-stable.toml` | SHA-256 | no |
//! | `firefox` | Mozilla | `product-details.mozilla.org/1.0/firefox_versions.json`, `archive.mozilla.org/pub/firefox/releases/<v>/SHA256SUMS` | SHA-256 | no |
//! | `putty` | PuTTY | `the.earth.li/~sgtatham/putty/latest/{sha256,sha1,md5}sums` | SHA-256, SHA-1, MD5 | no |
//! | `vscode` | Microsoft | `update.code.visualstudio.com/api/update/<target>/stable/latest` | SHA-256, SHA-1 | no |
//! | `kubectl` | Kubernetes | `dl.k8s.io/release/stable.txt`, `.../kubectl.sha256` | SHA-256 | if a `.sha256` is missing |
//! | `terraform` | HashiCorp | `api.releases.hashicorp.com/v1/releases/terraform`, `releases.hashicorp.com/.../SHA256SUMS` | SHA-256 | no |
//! | `vlc` | VideoLAN | `get.videolan.org/vlc/last/<dir>/` listing, `<file>.sha256` | SHA-256 | if a `.sha256` is missing |
//! | `7zip` | 7-Zip | GitHub releases of `ip7z/7zip`, `assets[].digest` | SHA-256 | assets without digest |
//! | `notepadpp` | Notepad++ | GitHub releases of `notepad-plus-plus/notepad-plus-plus` | SHA-256 | assets without digest |
//! | `fdroid` | F-Droid | `f-droid.org/repo/index-v2.json`, configured app ids (android) | SHA-256 | no |
//! | `android-platform-tools` | Google | `dl.google.com/android/repository/repository2-3.xml` | SHA-1 | always (SHA-1 checked) |
//! | `pypi` | pypi | `pypi.org/pypi/<name>/json`, configured packages (sdist or pure wheel, and platform wheels) | SHA-256, MD5 | archives, for their files |
//! | `npm` | npm | `registry.npmjs.org/<name>`, configured packages | SHA-1 | always (SHA-1 checked) |
//! | `gomod` | go | `proxy.golang.org/<module>/@v/{list,<v>.info,<v>.zip}`, configured modules | none | always |
//! | `temurin` | Eclipse Adoptium | `api.adoptium.net/v3/info/available_releases`, `/v3/assets/latest/<feature>/hotspot` | SHA-256 | archives, for their files |
//! | `edge` | Microsoft | `edgeupdates.microsoft.com/api/products` (`Stable`) | SHA-256 | archives, for their files |
//! | `python` | Python Software Foundation | `www.python.org/api/v2/downloads/release/`, `release_file/?release=<id>` | SHA-256 (MD5 on older entries) | where only MD5 is published |
//! | `wireshark` | Wireshark Foundation | `www.wireshark.org/download/` listing, `SIGNATURES-<v>.txt` | SHA-256, SHA-1 | no |
//! | `vault`, `packer`, `consul`, `nomad` | HashiCorp | as `terraform` | SHA-256 | no |
//! | 19 GitHub channels (`git-windows`, `powershell`, `windows-terminal`, `keepassxc`, `docker-compose`, `obs-studio`, `gh`, `rclone`, `syncthing`, `jq`, `ripgrep`, `minikube`, `restic`, `k9s`, `velociraptor`, `neovim`, `age`, `chainsaw`, `hayabusa`) | each project | GitHub releases, `assets[].digest` | SHA-256 | assets without digest |
//! | `archlinux` | Arch Linux | `geo.mirror.pkgbuild.com/{core,extra}/os/x86_64/<repo>.db`, `.pkg.tar.zst` | SHA-256 | archives, for their files |
//! | `debian` | Debian | `deb.debian.org/debian/dists/{oldstable,stable}/InRelease` (release code names), `dists/<release>{,-updates}/InRelease` and `security.debian.org/debian-security/dists/<release>-security/InRelease` (signed), `Packages.xz`, `.deb` | SHA-256 | archives, for their files (checked against `md5sums`) |
//! | `ubuntu` | Ubuntu | `changelogs.ubuntu.com/meta-release` (supported releases), `mirrors.edge.kernel.org/ubuntu/dists/<dist>{,-updates}/InRelease` (signed), `Packages.xz`, `.deb` | SHA-256 | archives, for their files |
//! | `rockylinux` | Rocky Linux | `download.rockylinux.org/pub/rocky/` listing, `<major>/{BaseOS,AppStream}/<arch>/os/repodata/repomd.xml` (+ `.asc`, signed), `primary.xml`, `.rpm` | SHA-256 | packages, for their header's file digests |
//!
//! Archives (zip, tarballs, `.deb`) are also read for the executables inside them
//! ([`members`]), after the archive's published hashes are checked.
//!
//! Packages (PyPI, npm, Go modules) are recorded as `name (ecosystem)` on
//! universal/universal, with the ecosystem as vendor; PyPI platform wheels are recorded under
//! their file name with the platform and arch of their tag.

pub(crate) mod authenticode;
pub(crate) mod catalog;
pub(crate) mod download;
pub(crate) mod fetch;
pub mod formats;
pub mod hasher;
pub mod http;
pub(crate) mod members;
pub(crate) mod openpgp;
pub mod pipeline;
pub mod rpm;
pub mod vendors;

pub use authenticode::{AuthenticodeError, SignatureCapture, SignerInfo, extract_signer};
pub use download::{DownloadError, DownloadLimits, Downloaded, download_and_hash};
pub use fetch::{
    Artifact, FetchContext, FetchError, FetchLimits, Fetcher, History, PublishedHashes,
    VendorConfig, resolve_url,
};
pub use hasher::{Digests, HasherError, PublishedHashError, verify_published};
pub use http::{ExtraCa, OutboundError, OutboundSettings, ProxySettings, SystemRoots};
pub use members::{
    ArchiveFormat, Compression, ExecutableKind, Member, MemberError, MemberKinds, MemberLimits,
    MemberScan, ScannedArchive, download_archive, scan_archive,
};
pub use pipeline::{Problem, ProblemKind, RecordSink, VendorReport, error_chain, ingest_vendor};
