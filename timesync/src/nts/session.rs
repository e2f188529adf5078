// SPDX-License-Identifier: Apache-2.0
//! One server's NTS association after key establishment: the two AEAD keys, the cookie jar,
//! and the authenticated requests and replies of RFC 8915 §5.
//!
//! A request carries a fresh random Unique Identifier, one cookie (never reused), one
//! placeholder for every further cookie the jar lacks, and an authenticator whose ciphertext is
//! the SIV tag over everything before it (nothing is encrypted). A reply counts only when its
//! authenticator opens with the server-to-client key over everything before it, and that part
//! carries the request's unique identifier; the cookies inside its encrypted part refill the
//! jar.

use std::collections::VecDeque;
use std::fmt;

use aes_siv::siv::Aes128Siv;
use aes_siv::KeyInit;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::fields::{self, AUTHENTICATOR, COOKIE, PLACEHOLDER, UNIQUE_ID};
use super::ke::{MAX_COOKIES, MAX_COOKIE_LEN};
use crate::ntp::wire::HEADER_LEN;

/// The length of the unique identifier keelson sends (§5.3 asks for at least 32 bytes).
pub const UID_LEN: usize = 32;
/// The nonce length keelson sends: AES-SIV's block size (§5.6).
const NONCE_LEN: usize = 16;
/// The SIV tag, the whole ciphertext of an empty plaintext.
const TAG_LEN: usize = 16;

/// Why a reply is not accepted.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No unique identifier before the authenticator, or not ours.
    #[error("unique identifier missing or not the request's")]
    UniqueId,
    /// No authenticator field.
    #[error("no NTS authenticator")]
    NoAuthenticator,
    /// The authenticator's lengths do not fit the field.
    #[error("malformed NTS authenticator")]
    Malformed,
    /// The tag does not verify with the server-to-client key.
    #[error("NTS authenticator does not verify")]
    BadTag,
}

/// The keys exported from the TLS session (§5.1), 32 bytes each for AEAD_AES_SIV_CMAC_256.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// Client to server: seals requests.
    pub c2s: [u8; 32],
    /// Server to client: opens replies.
    pub s2c: [u8; 32],
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Keys(..)")
    }
}

/// An outstanding request's identity.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Sent {
    uid: [u8; UID_LEN],
}

/// The association.
#[derive(Clone)]
pub struct Session {
    keys: Keys,
    jar: VecDeque<Vec<u8>>,
    secret: [u8; 32],
    counter: u64,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("cookies", &self.jar.len()).finish_non_exhaustive()
    }
}

impl Session {
    /// A session from a key exchange's keys and cookies; `secret` (32 random bytes, drawn where
    /// blocking is allowed) makes the unique identifiers and nonces.
    pub fn new(keys: Keys, cookies: Vec<Vec<u8>>, secret: [u8; 32]) -> Self {
        let mut jar: VecDeque<Vec<u8>> = cookies.into();
        jar.truncate(MAX_COOKIES);
        Self { keys, jar, secret, counter: 0 }
    }

    /// Cookies left.
    pub fn cookies(&self) -> usize {
        self.jar.len()
    }

    /// 32 unpredictable bytes: SHA-256 of the session's secret and a counter. Unique identifiers
    /// must be unguessable off path; SIV needs nonces that do not repeat, not secret ones.
    fn random(&mut self) -> [u8; 32] {
        self.counter = self.counter.wrapping_add(1);
        let mut h = Sha256::new();
        h.update(self.secret);
        h.update(self.counter.to_be_bytes());
        h.finalize().into()
    }

    /// The request for `header`: `None` when the jar is empty (time for a new key exchange).
    pub fn request(&mut self, header: &[u8; HEADER_LEN]) -> Option<(Vec<u8>, Sent)> {
        let cookie = self.jar.pop_front()?;
        let uid = self.random();
        let nonce_bytes = self.random();
        let nonce = nonce_bytes.get(..NONCE_LEN)?;
        // One cookie per field comes back: ask for enough to fill the jar again.
        let placeholders = MAX_COOKIES.saturating_sub(self.jar.len() + 1);
        let mut out =
            Vec::with_capacity(HEADER_LEN + 100 + (placeholders + 1) * (cookie.len() + 4));
        out.extend_from_slice(header);
        fields::push(&mut out, UNIQUE_ID, &uid);
        fields::push(&mut out, COOKIE, &cookie);
        for _ in 0..placeholders {
            fields::push_zeros(&mut out, PLACEHOLDER, cookie.len());
        }
        let mut cipher = Aes128Siv::new_from_slice(&self.keys.c2s).ok()?;
        let tag = cipher.encrypt([&out[..], nonce], &[]).ok()?;
        let mut value = Vec::with_capacity(4 + NONCE_LEN + TAG_LEN);
        value.extend_from_slice(&(NONCE_LEN as u16).to_be_bytes());
        value.extend_from_slice(&(tag.len() as u16).to_be_bytes());
        value.extend_from_slice(nonce);
        value.extend_from_slice(&tag);
        fields::push(&mut out, AUTHENTICATOR, &value);
        Some((out, Sent { uid }))
    }

    /// Check a reply to the request `sent` and take the cookies it brings. Nothing in the
    /// reply is trusted before this passes.
    pub fn verify(&mut self, reply: &[u8], sent: &Sent) -> Result<usize, AuthError> {
        let mut uid_seen = false;
        let auth = fields::iter(reply, HEADER_LEN)
            .find(|f| {
                if f.kind == UNIQUE_ID && f.value == sent.uid {
                    uid_seen = true;
                }
                f.kind == AUTHENTICATOR
            })
            .ok_or(AuthError::NoAuthenticator)?;
        if !uid_seen {
            return Err(AuthError::UniqueId);
        }
        let (nonce, ciphertext) = split_authenticator(auth.value)?;
        let aad = reply.get(..auth.at).ok_or(AuthError::Malformed)?;
        let mut cipher =
            Aes128Siv::new_from_slice(&self.keys.s2c).map_err(|_| AuthError::BadTag)?;
        let plain = cipher.decrypt([aad, nonce], ciphertext).map_err(|_| AuthError::BadTag)?;
        let mut added = 0;
        for f in fields::iter(&plain, 0) {
            if f.kind == COOKIE
                && !f.value.is_empty()
                && f.value.len() <= MAX_COOKIE_LEN
                && self.jar.len() < MAX_COOKIES
            {
                self.jar.push_back(f.value.to_vec());
                added += 1;
            }
        }
        Ok(added)
    }
}

/// Whether `reply` is an NTS negative acknowledgement of `sent`: kiss code NTSN carrying the
/// request's unique identifier (§5.7): the server no longer knows the cookie's key.
pub fn is_nak(reply: &[u8], sent: &Sent) -> bool {
    let kiss = reply.get(1) == Some(&0) && reply.get(12..16) == Some(b"NTSN".as_slice());
    kiss && fields::iter(reply, HEADER_LEN).any(|f| f.kind == UNIQUE_ID && f.value == sent.uid)
}

/// Nonce and ciphertext out of an authenticator's value (§5.6: two lengths, then each part
/// padded to a word).
fn split_authenticator(value: &[u8]) -> Result<(&[u8], &[u8]), AuthError> {
    let len = |at: usize| -> Result<usize, AuthError> {
        let b = value.get(at..at + 2).ok_or(AuthError::Malformed)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let (nonce_len, ct_len) = (len(0)?, len(2)?);
    let nonce = value.get(4..4 + nonce_len).ok_or(AuthError::Malformed)?;
    let ct_at = 4 + nonce_len.div_ceil(4) * 4;
    let ciphertext = value.get(ct_at..ct_at + ct_len).ok_or(AuthError::Malformed)?;
    if nonce.is_empty() || ciphertext.len() < TAG_LEN {
        return Err(AuthError::Malformed);
    }
    Ok((nonce, ciphertext))
}

/// What a server does (RFC 8915 §5.7), for tests: check the request's authenticator with the
/// c2s key, answer `header` with the request's unique identifier and `n` new cookies sealed
/// with the s2c key.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn serve_for_tests(
    keys: &Keys,
    request: &[u8],
    header: [u8; HEADER_LEN],
    n: usize,
) -> Vec<u8> {
    let auth = fields::iter(request, HEADER_LEN).find(|f| f.kind == AUTHENTICATOR).unwrap();
    let (nonce, tag) = split_authenticator(auth.value).unwrap();
    let mut c2s = Aes128Siv::new_from_slice(&keys.c2s).unwrap();
    assert!(c2s.decrypt([&request[..auth.at], nonce], tag).unwrap().is_empty());
    let uid = fields::iter(request, HEADER_LEN).find(|f| f.kind == UNIQUE_ID).unwrap();
    let mut reply = header.to_vec();
    fields::push(&mut reply, UNIQUE_ID, uid.value);
    let mut plain = Vec::new();
    for i in 0..n {
        fields::push(&mut plain, COOKIE, &[0xc0 + i as u8; 40]);
    }
    let nonce = [5u8; 16];
    let mut s2c = Aes128Siv::new_from_slice(&keys.s2c).unwrap();
    let ct = s2c.encrypt([&reply[..], &nonce], &plain).unwrap();
    let mut value = vec![0, 16];
    value.extend_from_slice(&(ct.len() as u16).to_be_bytes());
    value.extend_from_slice(&nonce);
    value.extend_from_slice(&ct);
    fields::push(&mut reply, AUTHENTICATOR, &value);
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// RFC 5297 Appendix A.1: deterministic AES-SIV-CMAC-256.
    #[test]
    fn rfc5297_deterministic_vector() {
        let key = hex("fffefdfc fbfaf9f8 f7f6f5f4 f3f2f1f0 f0f1f2f3 f4f5f6f7 f8f9fafb fcfdfeff");
        let ad = hex("10111213 14151617 18191a1b 1c1d1e1f 20212223 24252627");
        let plain = hex("11223344 55667788 99aabbcc ddee");
        let want = hex("85632d07 c6e8f37f 950acd32 0a2ecc93 40c02b96 90c4dc04 daef7f6a fe5c");
        let mut c = Aes128Siv::new_from_slice(&key).unwrap();
        assert_eq!(c.encrypt([&ad], &plain).unwrap(), want);
        assert_eq!(c.decrypt([&ad], &want).unwrap(), plain);
    }

    /// RFC 5297 Appendix A.2: nonce-based, two associated data components and the nonce.
    #[test]
    fn rfc5297_nonce_based_vector() {
        let key = hex("7f7e7d7c 7b7a7978 77767574 73727170 40414243 44454647 48494a4b 4c4d4e4f");
        let ad1 = hex(
            "00112233 44556677 8899aabb ccddeeff deaddada deaddada ffeeddcc bbaa9988 77665544 \
             33221100",
        );
        let ad2 = hex("10203040 50607080 90a0");
        let nonce = hex("09f91102 9d74e35b d84156c5 635688c0");
        let plain = hex(
            "74686973 20697320 736f6d65 20706c61 696e7465 78742074 6f20656e 63727970 74207573 \
             696e6720 5349562d 414553",
        );
        let want = hex(
            "7bdb6e3b 432667eb 06f4d14b ff2fbd0f cb900f2f ddbe4043 26601965 c889bf17 dba77ceb \
             094fa663 b7a3f748 ba8af829 ea64ad54 4a272e9c 485b62a3 fd5c0d",
        );
        let mut c = Aes128Siv::new_from_slice(&key).unwrap();
        assert_eq!(c.encrypt([&ad1, &ad2, &nonce], &plain).unwrap(), want);
        let mut bad = want.clone();
        bad[20] ^= 1;
        assert!(c.decrypt([&ad1, &ad2, &nonce], &bad).is_err());
    }

    fn keys() -> Keys {
        Keys { c2s: [1; 32], s2c: [2; 32] }
    }

    fn session(cookies: usize) -> Session {
        Session::new(keys(), (0..cookies).map(|i| vec![i as u8; 40]).collect(), [9; 32])
    }

    fn serve(request: &[u8], n: usize) -> Vec<u8> {
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&request[..HEADER_LEN]);
        header[0] = 0x24;
        serve_for_tests(&keys(), request, header, n)
    }

    #[test]
    fn a_request_spends_one_cookie_and_asks_to_refill_the_jar() {
        let mut s = session(8);
        let header = [0x23; HEADER_LEN];
        let (req, sent) = s.request(&header).unwrap();
        assert_eq!(s.cookies(), 7);
        let kinds: Vec<u16> = fields::iter(&req, HEADER_LEN).map(|f| f.kind).collect();
        assert_eq!(kinds, [UNIQUE_ID, COOKIE, AUTHENTICATOR], "a full jar needs no placeholder");
        assert_eq!(&req[..HEADER_LEN], &header);
        let reply = serve(&req, 1);
        assert_eq!(s.verify(&reply, &sent), Ok(1));
        assert_eq!(s.cookies(), 8);

        // Three requests lost: the next asks for four cookies back.
        let mut s = session(8);
        for _ in 0..3 {
            s.request(&header).unwrap();
        }
        let (req, sent) = s.request(&header).unwrap();
        let placeholders =
            fields::iter(&req, HEADER_LEN).filter(|f| f.kind == PLACEHOLDER).collect::<Vec<_>>();
        assert_eq!(placeholders.len(), 3);
        assert!(placeholders.iter().all(|f| f.value == [0; 40]), "same length as the cookie");
        assert_eq!(s.verify(&serve(&req, 4), &sent), Ok(4));
        assert_eq!(s.cookies(), 8);
        // More than asked for never overfills the jar.
        let (req, sent) = s.request(&header).unwrap();
        assert_eq!(s.verify(&serve(&req, 8), &sent), Ok(1));
        assert_eq!(s.cookies(), MAX_COOKIES);
    }

    #[test]
    fn cookies_are_never_reused_and_an_empty_jar_asks_for_a_new_exchange() {
        let mut s = session(2);
        let (a, _) = s.request(&[0; HEADER_LEN]).unwrap();
        let (b, _) = s.request(&[0; HEADER_LEN]).unwrap();
        let cookie = |r: &[u8]| {
            fields::iter(r, HEADER_LEN).find(|f| f.kind == COOKIE).unwrap().value.to_vec()
        };
        assert_ne!(cookie(&a), cookie(&b));
        let uid = |r: &[u8]| {
            fields::iter(r, HEADER_LEN).find(|f| f.kind == UNIQUE_ID).unwrap().value.to_vec()
        };
        assert_ne!(uid(&a), uid(&b), "a fresh unique identifier per request");
        assert!(s.request(&[0; HEADER_LEN]).is_none());
    }

    #[test]
    fn tampered_or_foreign_replies_are_refused() {
        let mut s = session(4);
        let (req, sent) = s.request(&[0x23; HEADER_LEN]).unwrap();
        let good = serve(&req, 1);
        // A changed timestamp in the header.
        let mut bad = good.clone();
        bad[40] ^= 1;
        assert_eq!(s.verify(&bad, &sent), Err(AuthError::BadTag));
        // A changed byte of the encrypted cookies.
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x80;
        assert_eq!(s.verify(&bad, &sent), Err(AuthError::BadTag));
        // Another request's identity.
        let (_, other) = s.request(&[0x23; HEADER_LEN]).unwrap();
        assert_eq!(s.verify(&good, &other), Err(AuthError::UniqueId));
        // Stripped of its authenticator (a plain NTP reply).
        assert_eq!(s.verify(&good[..HEADER_LEN + 36], &sent), Err(AuthError::NoAuthenticator));
        // Sealed with the wrong key: the client's own.
        let mut wrong = session(1);
        wrong.keys.s2c = wrong.keys.c2s;
        assert_eq!(wrong.verify(&good, &sent), Err(AuthError::BadTag));
        assert_eq!(s.cookies(), 2, "nothing taken from refused replies");
        assert_eq!(s.verify(&good, &sent), Ok(1));
    }

    #[test]
    fn a_nak_counts_only_with_our_unique_identifier() {
        let mut s = session(2);
        let (req, sent) = s.request(&[0x23; HEADER_LEN]).unwrap();
        let uid = fields::iter(&req, HEADER_LEN).find(|f| f.kind == UNIQUE_ID).unwrap();
        let mut nak = vec![0u8; HEADER_LEN];
        nak[0] = 0x24;
        nak[12..16].copy_from_slice(b"NTSN");
        let mut with_uid = nak.clone();
        fields::push(&mut with_uid, UNIQUE_ID, uid.value);
        assert!(is_nak(&with_uid, &sent));
        assert!(!is_nak(&nak, &sent));
        let mut other = nak.clone();
        fields::push(&mut other, UNIQUE_ID, &[0; 32]);
        assert!(!is_nak(&other, &sent));
    }
}
