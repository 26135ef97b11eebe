//! Android SDK platform-tools (adb, fastboot) from Google's SDK repository manifest.
//!
//! `https://dl.google.com/android/repository/repository2-3.xml`: `<remotePackage
//! path="platform-tools">` with `<revision><major/><minor/><micro/></revision>`,
//! `<channelRef ref="channel-0"/>` (stable) and `<archives><archive><complete><size/>
//! <checksum type="sha1">…</checksum><url>platform-tools_r36.0.0-win.zip</url></complete>
//! <host-os>windows</host-os></archive>…`. Only SHA-1 is published, so every archive is
//! downloaded to compute its SHA-256, and the SHA-1 is checked against the download.

use async_trait::async_trait;
use model::{Arch, Platform};
use roxmltree::{Document, Node};

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{compare_versions, file_name, hex_digest};

pub(crate) struct AndroidPlatformTools;

impl AndroidPlatformTools {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://dl.google.com/android/repository")
    }
}

/// A `<host-os>` (and optional `<host-arch>`) as platform and arch. Without a host-arch the
/// one archive serves every arch of that OS.
pub(crate) fn host_platform(os: &str, arch: Option<&str>) -> Option<(Platform, Arch)> {
    let platform = match os {
        "windows" => Platform::Windows,
        "linux" => Platform::Linux,
        "macosx" => Platform::Darwin,
        _ => return None,
    };
    let arch = match arch {
        None => Arch::Universal,
        Some("x64") => Arch::Amd64,
        Some("aarch64") => Arch::Arm64,
        Some("x86") => Arch::X86,
        Some(_) => return None,
    };
    Some((platform, arch))
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| c.tag_name().name() == name)
}

fn child_text<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    child(node, name).and_then(|c| c.text()).map(str::trim)
}

/// "36.0.0" from `<revision>`; absent parts are 0.
fn revision(package: Node) -> Option<String> {
    let rev = child(package, "revision")?;
    let part = |n| child_text(rev, n).unwrap_or("0");
    let parts = [part("major"), part("minor"), part("micro")];
    parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .then(|| parts.join("."))
}

#[async_trait]
impl Fetcher for AndroidPlatformTools {
    fn id(&self) -> &str {
        "android-platform-tools"
    }

    fn vendor(&self) -> &str {
        "Google"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{}/repository2-3.xml", ctx.base_url());
        let text = ctx.get_text(&url).await?;
        let doc = Document::parse(&text)
            .map_err(|e| FetchError::malformed(&url, format!("invalid XML: {e}")))?;
        // Stable (channel-0, or no channel) and not obsolete.
        let packages: Vec<(String, Node)> = doc
            .descendants()
            .filter(|n| {
                n.tag_name().name() == "remotePackage"
                    && n.attribute("path") == Some("platform-tools")
            })
            .filter(|n| n.attribute("obsolete") != Some("true"))
            .filter(|n| {
                child(*n, "channelRef")
                    .and_then(|c| c.attribute("ref"))
                    .is_none_or(|r| r == "channel-0")
            })
            .filter_map(|n| Some((revision(n)?, n)))
            .collect();
        let Some(newest) = packages
            .iter()
            .map(|(v, _)| v)
            .max_by(|a, b| compare_versions(a, b))
            .cloned()
        else {
            return Err(FetchError::malformed(
                &url,
                "no stable platform-tools package",
            ));
        };
        let mut out = Vec::new();
        for (_, package) in packages.iter().filter(|(v, _)| *v == newest) {
            let archives = child(*package, "archives")
                .into_iter()
                .flat_map(|a| a.children());
            for archive in archives.filter(|a| a.tag_name().name() == "archive") {
                let Some(complete) = child(archive, "complete") else {
                    continue;
                };
                let (Some(os), Some(file)) =
                    (child_text(archive, "host-os"), child_text(complete, "url"))
                else {
                    continue;
                };
                let Some((platform, arch)) = host_platform(os, child_text(archive, "host-arch"))
                else {
                    continue;
                };
                let sha1 = child(complete, "checksum")
                    .filter(|c| c.attribute("type").is_none_or(|t| t == "sha1"))
                    .and_then(|c| c.text())
                    .and_then(|h| hex_digest(h, 40));
                // Archive URLs are relative to the repository document.
                let file_url = match crate::fetch::resolve_url(&url, file) {
                    Ok(u) => u,
                    Err(e) => {
                        ctx.note(e);
                        continue;
                    }
                };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file_name(file).into(),
                    version: newest.clone(),
                    platform,
                    arch,
                    url: file_url,
                    published: PublishedHashes {
                        sha1,
                        ..Default::default()
                    },
                });
            }
        }
        Ok(out)
    }
}
