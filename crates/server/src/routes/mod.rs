pub mod intel;
pub mod public;
