//! Go modules from the module proxy, for a configured list of module paths.
//!
//! `https://proxy.golang.org/<module>/@v/list` lists versions one per line (a line may carry
//! more fields after the version, as some proxies add a timestamp; only the first is read),
//! `@v/<version>.info` is `{"Version": "v0.21.0", "Time": "…"}` and `@v/<version>.zip` is the
//! module zip (`go help goproxy`). Upper-case letters in paths are escaped as `!` + lower
//! case. Nothing is published for the zip itself (sum.golang.org's `h1:` is a hash over the
//! files, not over the zip), so every zip is downloaded.

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{newest, valid_version};

pub(crate) struct GoModules;

impl GoModules {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://proxy.golang.org").with_items(&[
            "golang.org/x/text",
            "golang.org/x/net",
            "github.com/google/uuid",
        ])
    }
}

#[derive(Deserialize)]
struct Info {
    #[serde(rename = "Version")]
    version: String,
}

/// The proxy's case encoding: `github.com/Azure/x` is `github.com/!azure/x`.
pub fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[async_trait]
impl Fetcher for GoModules {
    fn id(&self) -> &str {
        "gomod"
    }

    fn vendor(&self) -> &str {
        "go"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for module in &ctx.config.items {
            match self.module(ctx, module).await {
                Ok(found) => out.extend(found),
                Err(e) => failures.push(e),
            }
        }
        ctx.settle(out, failures)
    }
}

impl GoModules {
    async fn module(&self, ctx: &FetchContext, module: &str) -> Result<Vec<Artifact>, FetchError> {
        let root = format!("{}/{}/@v", ctx.base_url(), escape(module));
        let list_url = format!("{root}/list");
        let list = ctx.get_text(&list_url).await?;
        let all: Vec<&str> = list
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|v| v.starts_with('v') && valid_version(v))
            .collect();
        // Releases only, unless the module has nothing but pre-releases.
        let releases: Vec<&str> = all.iter().copied().filter(|v| !v.contains('-')).collect();
        let pool = if releases.is_empty() { all } else { releases };
        if pool.is_empty() {
            return Err(FetchError::malformed(
                &list_url,
                format!("{module} lists no version"),
            ));
        }
        let mut out = Vec::new();
        for version in newest(pool.into_iter().map(str::to_owned), ctx.limits.max_versions) {
            // .info gives the canonical version and proves the proxy serves it.
            let info_url = format!("{root}/{}.info", escape(&version));
            let info: Info = ctx.get_json(&info_url, None).await?;
            if !valid_version(&info.version) {
                return Err(FetchError::malformed(
                    &info_url,
                    format!("Version {:?}", info.version),
                ));
            }
            out.push(Artifact {
                vendor: "go".into(),
                executable_name: format!("{module} (go)"),
                url: format!("{root}/{}.zip", escape(&info.version)),
                version: info.version,
                platform: Platform::Universal,
                arch: Arch::Universal,
                published: PublishedHashes::default(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_upper_case() {
        assert_eq!(
            escape("github.com/Azure/go-Autorest"),
            "github.com/!azure/go-!autorest"
        );
    }
}
