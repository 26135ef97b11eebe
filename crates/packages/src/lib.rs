//! Package intelligence, free of I/O: what a package name is in each ecosystem
//! ([`names`]), which names are popular ([`popular`]), how a name relates to them
//! ([`typosquat`]), and what a software bill of materials lists ([`sbom`]). Everything
//! works on values in memory; the server decides where data comes from.

pub mod advisories;
pub mod names;
pub mod popular;
pub mod sbom;
pub mod typosquat;

pub use advisories::{Advisory, parse_osv};
pub use names::{Ecosystem, NameError};
pub use popular::{KnownNames, PopularList};
pub use sbom::{Component, Purl, Sbom, SbomError, SbomFormat};
pub use typosquat::{Detector, NameVerdict, Risk};
