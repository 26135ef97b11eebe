//! OpenPGP signatures of distribution repositories, checked against a keyring of the
//! distribution's archive keys shipped with the service (`keys/`, each with its source in
//! `keys/SOURCE.md`): cleartext-signed documents (Debian and Ubuntu `InRelease`) and
//! detached armored signatures (`repomd.xml.asc` beside an RPM repository's `repomd.xml`).
//!
//! Only the signed text is ever returned: whatever surrounds the signed block (or a file
//! whose signature does not verify) is never parsed.

use pgp::composed::{CleartextSignedMessage, Deserializable, SignedPublicKey, StandaloneSignature};
#[cfg(test)]
use pgp::types::KeyDetails;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SignatureError {
    #[error("not an OpenPGP signed document: {0}")]
    Unreadable(String),
    #[error("no signature verifies against the archive keys")]
    NotVerified,
}

/// A set of public keys (primary keys and their subkeys) any of which may sign.
#[derive(Debug, Clone)]
pub(crate) struct Keyring {
    keys: Vec<SignedPublicKey>,
}

impl Keyring {
    /// Parses ASCII-armored public keys. A key that does not parse is an error: a keyring is
    /// shipped or configured, never remote data.
    pub(crate) fn from_armored(armored: &[&str]) -> Result<Self, SignatureError> {
        let keys = armored
            .iter()
            .map(|text| {
                SignedPublicKey::from_string(text)
                    .map(|(key, _)| key)
                    .map_err(|e| SignatureError::Unreadable(format!("archive key: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { keys })
    }

    /// A keyring nothing verifies against.
    pub fn empty() -> Self {
        Self { keys: Vec::new() }
    }

    /// Primary key fingerprints, upper-case hex (the tests compare the shipped keys').
    #[cfg(test)]
    pub(crate) fn fingerprints(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| hex::encode_upper(k.fingerprint().as_bytes()))
            .collect()
    }

    /// Verifies a cleartext-signed document and returns the text that was signed, with LF
    /// line ends.
    pub(crate) fn verify_cleartext(&self, document: &str) -> Result<String, SignatureError> {
        let (message, _) = CleartextSignedMessage::from_string(document)
            .map_err(|e| SignatureError::Unreadable(e.to_string()))?;
        let verified = self.keys.iter().any(|key| {
            message.verify(key).is_ok()
                || key
                    .public_subkeys
                    .iter()
                    .any(|subkey| message.verify(subkey).is_ok())
        });
        if !verified {
            return Err(SignatureError::NotVerified);
        }
        Ok(message.signed_text().replace("\r\n", "\n"))
    }

    /// Verifies an armored detached signature over `data`.
    pub(crate) fn verify_detached(
        &self,
        data: &[u8],
        signature: &str,
    ) -> Result<(), SignatureError> {
        let (signature, _) = StandaloneSignature::from_string(signature)
            .map_err(|e| SignatureError::Unreadable(e.to_string()))?;
        let verified = self.keys.iter().any(|key| {
            signature.verify(key, data).is_ok()
                || key
                    .public_subkeys
                    .iter()
                    .any(|subkey| signature.verify(subkey, data).is_ok())
        });
        if verified {
            Ok(())
        } else {
            Err(SignatureError::NotVerified)
        }
    }
}
