//! Tamper tests for the signed daily root: any change to any field of the
//! signed message, or to the signature, must break verification.

use chrono::{Days, NaiveDate};
use proptest::prelude::*;
use translog::encoding::{
    parse_public_key_base64, parse_public_key_pem, public_key_to_base64, public_key_to_pem,
};
use translog::{GENESIS_PREV_ROOT, SignedRoot, SigningKey, VerifyError};

fn key() -> SigningKey {
    SigningKey::from_bytes(&[0x42; 32])
}

fn sample() -> SignedRoot {
    let date = NaiveDate::from_ymd_opt(2024, 5, 1).unwrap();
    SignedRoot::sign(&key(), date, [0x5a; 32], 123_456, [0xc3; 32])
}

fn assert_rejected(root: &SignedRoot, what: &str) {
    assert_eq!(
        root.verify(&key().verifying_key()),
        Err(VerifyError::BadSignature),
        "{what} not detected"
    );
}

#[test]
fn untouched_root_verifies_with_published_key_forms() {
    let root = sample();
    let vk = key().verifying_key();
    assert_eq!(root.verify(&vk), Ok(()));
    // Through the published encodings, as a CLI would receive them.
    assert_eq!(
        root.verify(&parse_public_key_base64(&public_key_to_base64(&vk)).unwrap()),
        Ok(())
    );
    assert_eq!(
        root.verify(&parse_public_key_pem(&public_key_to_pem(&vk)).unwrap()),
        Ok(())
    );
}

#[test]
fn every_field_change_breaks_the_signature() {
    let good = sample();
    for days in [1u64, 30, 365] {
        let mut r = good.clone();
        r.log_date = good.log_date.checked_add_days(Days::new(days)).unwrap();
        assert_rejected(&r, "later log_date");
        r.log_date = good.log_date.checked_sub_days(Days::new(days)).unwrap();
        assert_rejected(&r, "earlier log_date");
    }
    for byte in 0..32 {
        for bit in 0..8 {
            let mut r = good.clone();
            r.merkle_root[byte] ^= 1 << bit;
            assert_rejected(&r, "merkle_root bit");
            let mut r = good.clone();
            r.prev_root[byte] ^= 1 << bit;
            assert_rejected(&r, "prev_root bit");
        }
    }
    for count in [0, 1, 123_455, 123_457, 1_234_560, u64::MAX] {
        let r = SignedRoot {
            entry_count: count,
            ..good.clone()
        };
        assert_rejected(&r, "entry_count");
    }
    let r = SignedRoot {
        prev_root: GENESIS_PREV_ROOT,
        ..good.clone()
    };
    assert_rejected(&r, "prev_root reset to genesis");
    // Swapping the two hashes keeps the same bytes in a different order.
    let r = SignedRoot {
        merkle_root: good.prev_root,
        prev_root: good.merkle_root,
        ..good.clone()
    };
    assert_rejected(&r, "swapped roots");
    for byte in 0..64 {
        let mut r = good.clone();
        r.signature[byte] ^= 0x01;
        assert_rejected(&r, "signature byte");
    }
}

#[test]
fn wrong_key_is_rejected() {
    let other = SigningKey::from_bytes(&[0x43; 32]).verifying_key();
    assert_eq!(sample().verify(&other), Err(VerifyError::BadSignature));
}

#[test]
fn malleated_signature_is_rejected() {
    // S' = S + L (the group order) is the classic Ed25519 malleation; strict
    // verification requires canonical S.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut r = sample();
    let mut carry = 0u16;
    for (s_byte, l_byte) in r.signature[32..].iter_mut().zip(L) {
        let sum = u16::from(*s_byte) + u16::from(l_byte) + carry;
        *s_byte = sum as u8;
        carry = sum >> 8;
    }
    assert_rejected(&r, "S + L");
}

#[test]
fn signature_covers_exact_message_bytes() {
    use ed25519_dalek::{Signature, Verifier as _};
    let root = sample();
    let msg = root.message();
    let sig = Signature::from_bytes(&root.signature);
    let vk = key().verifying_key();
    assert!(vk.verify(msg.as_bytes(), &sig).is_ok());
    // Not with a trailing newline, not without the prefix line.
    assert!(vk.verify(format!("{msg}\n").as_bytes(), &sig).is_err());
    assert!(
        vk.verify(
            msg.trim_start_matches("service-transparency-v1\n")
                .as_bytes(),
            &sig
        )
        .is_err()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_roots_sign_and_any_field_mutation_fails(
        days in 0u32..40_000, root: [u8; 32], count: u64, prev: [u8; 32],
        field in 0usize..4, byte in 0usize..32, bit in 0u8..8, delta in 1u64..1000,
    ) {
        let date = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap().checked_add_days(Days::new(days.into())).unwrap();
        let good = SignedRoot::sign(&key(), date, root, count, prev);
        prop_assert_eq!(good.verify(&key().verifying_key()), Ok(()));
        let mut bad = good.clone();
        match field {
            0 => bad.log_date = date.checked_add_days(Days::new(delta)).unwrap(),
            1 => bad.merkle_root[byte] ^= 1 << bit,
            2 => bad.entry_count = count.wrapping_add(delta),
            _ => bad.prev_root[byte] ^= 1 << bit,
        }
        prop_assert_eq!(bad.verify(&key().verifying_key()), Err(VerifyError::BadSignature));
    }
}
