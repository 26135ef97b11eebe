//! Vendors whose channel is not one of the catalog's patterns, and the registry of every
//! vendor with its official configuration.

pub mod android;
pub mod arch;
pub mod debian;
pub mod edge;
pub mod fdroid;
pub mod gomod;
pub mod npm;
pub mod pypi;
pub mod python;
pub mod rocky;
pub mod rust;
pub mod temurin;
pub mod ubuntu;
pub mod wireshark;

use crate::catalog::{CATALOG, CatalogFetcher};
use crate::fetch::{Fetcher, VendorConfig};

use android::AndroidPlatformTools;
use arch::ArchLinux;
pub use debian::Debian;
pub use edge::Edge;
use fdroid::FDroid;
use gomod::GoModules;
pub use npm::Npm;
use pypi::PyPi;
use python::PythonOrg;
pub use rocky::RockyLinux;
pub use rust::Rust;
pub use temurin::Temurin;
pub use ubuntu::Ubuntu;
pub use wireshark::Wireshark;

/// A fetcher with its configuration.
pub struct VendorSetup {
    pub fetcher: Box<dyn Fetcher>,
    pub config: VendorConfig,
}

/// Every vendor, catalog ones first, each with its official channel as configuration.
pub fn all() -> Vec<VendorSetup> {
    let mut out: Vec<VendorSetup> = CATALOG
        .iter()
        .map(|entry| {
            let fetcher = CatalogFetcher { entry };
            VendorSetup {
                config: fetcher.default_config(),
                fetcher: Box::new(fetcher),
            }
        })
        .collect();
    let code: [(Box<dyn Fetcher>, VendorConfig); 14] = [
        (Box::new(Rust), Rust::default_config()),
        (Box::new(FDroid), FDroid::default_config()),
        (
            Box::new(AndroidPlatformTools),
            AndroidPlatformTools::default_config(),
        ),
        (Box::new(PyPi), PyPi::default_config()),
        (Box::new(Npm), Npm::default_config()),
        (Box::new(GoModules), GoModules::default_config()),
        (Box::new(Temurin), Temurin::default_config()),
        (Box::new(Edge), Edge::default_config()),
        (Box::new(PythonOrg), PythonOrg::default_config()),
        (Box::new(Wireshark), Wireshark::default_config()),
        (Box::new(Debian::new()), Debian::default_config()),
        (Box::new(Ubuntu::new()), Ubuntu::default_config()),
        (Box::new(ArchLinux), ArchLinux::default_config()),
        (Box::new(RockyLinux::new()), RockyLinux::default_config()),
    ];
    out.extend(
        code.into_iter()
            .map(|(fetcher, config)| VendorSetup { fetcher, config }),
    );
    out
}

/// The vendor with this id.
pub fn by_id(id: &str) -> Option<VendorSetup> {
    all().into_iter().find(|v| v.fetcher.id() == id)
}

#[cfg(test)]
mod tests {
    #[test]
    fn registry_has_unique_ids_and_https_defaults() {
        let all = super::all();
        let mut ids: Vec<String> = all.iter().map(|v| v.fetcher.id().to_owned()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
        // Forty-three vendor channels and four distributions of three families.
        assert_eq!(all.len(), 47);
        for family in ["debian", "ubuntu", "archlinux", "rockylinux"] {
            assert!(ids.iter().any(|i| i == family), "{family}");
        }
        for v in &all {
            assert!(
                v.config.base_url.starts_with("https://"),
                "{}",
                v.fetcher.id()
            );
            assert!(v.config.enabled);
        }
    }
}
