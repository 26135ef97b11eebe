//! The service layer: what the API's route handlers and the console's pages both do, with
//! typed inputs and outputs and `model::Error` for refusals. Route handlers parse the
//! request, call a service and answer in JSON; console pages call the same service and
//! answer in HTML. Neither calls the other, and services know nothing of either.

pub mod bundle;
pub mod export;
pub mod packages;
pub mod revocations;
pub mod sessions;
pub(crate) mod streamed;
pub mod taxii;
pub mod warninglist;
