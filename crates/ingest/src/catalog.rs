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

mod entries;
pub(crate) use entries::CATALOG;

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
    use Arch::{Amd64, Arm64, Universal, X86};
    use Platform::{Darwin, Windows};

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
