pub mod admin;
pub mod auth;
pub mod intel;
pub mod public;
pub mod transparency;
