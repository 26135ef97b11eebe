//! Sessions opened once a second factor is proved, for the API's second-factor sign-in and
//! the console's.

use model::Error;

use crate::AppState;

/// The cookie of a sign-in waiting for its second factor.
pub(crate) const PENDING_COOKIE: &str = "kg_pending";

/// A session (second factor passed) for a subject that proved a factor: its token and when
/// it expires.
pub async fn session_for_subject(
    state: &AppState,
    subject: &str,
) -> Result<(String, chrono::DateTime<chrono::Utc>), Error> {
    if let Some(key_id) = subject.strip_prefix("key:") {
        state.credentials.key_session(key_id, true).await
    } else if let Some(user_id) = subject.strip_prefix("user:") {
        state.credentials.user_session(user_id, None, true).await
    } else {
        Err(Error::internal(format!("unknown subject kind {subject:?}")))
    }
}
