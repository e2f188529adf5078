// SPDX-License-Identifier: Apache-2.0
//! The cluster key's two uses: AES-256-GCM for an affiliate's data blob (a fresh random nonce
//! each time) and deterministic AES-256 block encryption (ECB) for endpoint blobs, so that two
//! nodes reporting the same endpoint produce the same bytes and the server de-duplicates them.

use std::net::SocketAddr;

use aes::cipher::{generic_array::GenericArray, BlockDecrypt, BlockEncrypt, KeyInit};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use crate::proto::payload::{decode_endpoint, encode_endpoint};
use crate::proto::ProtoError;

/// GCM overhead: the 12-byte nonce in front and the 16-byte tag behind.
pub const GCM_OVERHEAD: usize = NONCE_LEN + 16;

const BLOCK: usize = 16;

/// Why a blob did not seal or open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error("blob of {0} bytes is shorter than nonce and tag")]
    TooShort(usize),
    #[error("authentication failed (another cluster secret?)")]
    Auth,
    #[error("endpoint blob of {0} bytes is not a whole number of blocks")]
    BlockLength(usize),
    #[error("endpoint length prefix {0} exceeds the blob")]
    Prefix(usize),
    #[error("endpoint too long to encode ({0} bytes)")]
    EndpointTooLong(usize),
    #[error("endpoint has no valid address or port")]
    BadEndpoint,
    #[error("the key was refused")]
    Key,
    #[error("plaintext too large to seal")]
    TooLarge,
    #[error("no random bytes for the nonce")]
    Random,
    #[error("decoding: {0}")]
    Proto(#[from] ProtoError),
}

/// Both ciphers of one cluster key.
pub struct Cipher {
    gcm: LessSafeKey,
    ecb: aes::Aes256,
    rng: SystemRandom,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.write_str("Cipher(AES-256)")
    }
}

impl Cipher {
    pub fn new(key: &[u8; 32]) -> Result<Self, CryptoError> {
        let gcm =
            LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).map_err(|_| CryptoError::Key)?);
        Ok(Self {
            gcm,
            ecb: aes::Aes256::new(GenericArray::from_slice(key)),
            rng: SystemRandom::new(),
        })
    }

    /// Encrypt an affiliate's protobuf with a fresh random nonce: `nonce ‖ ciphertext ‖ tag`.
    pub fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| CryptoError::Random)?;
        self.seal_with_nonce(plaintext, nonce)
    }

    /// Encrypt with a given nonce (tests pin it; real blobs use [`Cipher::seal`]).
    pub fn seal_with_nonce(
        &self,
        plaintext: &[u8],
        nonce: [u8; NONCE_LEN],
    ) -> Result<Vec<u8>, CryptoError> {
        let mut out = Vec::with_capacity(plaintext.len() + GCM_OVERHEAD);
        out.extend_from_slice(&nonce);
        let mut body = plaintext.to_vec();
        // Sealing only fails when the input exceeds GCM's 64 GiB limit.
        self.gcm
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut body)
            .map_err(|_| CryptoError::TooLarge)?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decrypt a data blob; the blob must hold at least a nonce and a tag.
    pub fn open(&self, blob: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if blob.len() < GCM_OVERHEAD {
            return Err(CryptoError::TooShort(blob.len()));
        }
        let (nonce, body) = blob.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| CryptoError::TooShort(blob.len()))?;
        let mut body = body.to_vec();
        let n = self
            .gcm
            .open_in_place(nonce, Aad::empty(), &mut body)
            .map_err(|_| CryptoError::Auth)?
            .len();
        body.truncate(n);
        Ok(body)
    }

    /// `len ‖ Endpoint protobuf`, zero-padded to whole blocks, each block encrypted alone.
    pub fn seal_endpoint(&self, ep: &SocketAddr) -> Result<Vec<u8>, CryptoError> {
        let pb = encode_endpoint(ep);
        let n = u8::try_from(pb.len()).map_err(|_| CryptoError::EndpointTooLong(pb.len()))?;
        let mut buf = Vec::with_capacity(pb.len() + BLOCK);
        buf.push(n);
        buf.extend_from_slice(&pb);
        buf.resize(buf.len().div_ceil(BLOCK) * BLOCK, 0);
        for block in buf.chunks_exact_mut(BLOCK) {
            self.ecb.encrypt_block(GenericArray::from_mut_slice(block));
        }
        Ok(buf)
    }

    /// Decrypt and decode one endpoint blob.
    pub fn open_endpoint(&self, blob: &[u8]) -> Result<SocketAddr, CryptoError> {
        if blob.is_empty() || !blob.len().is_multiple_of(BLOCK) {
            return Err(CryptoError::BlockLength(blob.len()));
        }
        let mut buf = blob.to_vec();
        for block in buf.chunks_exact_mut(BLOCK) {
            self.ecb.decrypt_block(GenericArray::from_mut_slice(block));
        }
        let n = usize::from(buf[0]);
        let pb = buf.get(1..1 + n).ok_or(CryptoError::Prefix(n))?;
        decode_endpoint(pb)?.ok_or(CryptoError::BadEndpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> [u8; 32] {
        std::array::from_fn(|i| i as u8)
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn endpoint_vectors() {
        let c = Cipher::new(&key()).unwrap();
        let ep: SocketAddr = "10.0.0.2:51820".parse().unwrap();
        let blob = c.seal_endpoint(&ep).unwrap();
        assert_eq!(hex(&blob), "45c55198f8ad5b07dd423e192f7e13e8");
        // Deterministic: the same endpoint encrypts to the same bytes.
        assert_eq!(c.seal_endpoint(&ep).unwrap(), blob);
        assert_eq!(c.open_endpoint(&blob).unwrap(), ep);
        let v6: SocketAddr = "[::]:51820".parse().unwrap();
        let blob = c.seal_endpoint(&v6).unwrap();
        assert_eq!(hex(&blob), "f9134409ed7c87ff93b59d0347e3e36cd540ecb0701a4034075880ca6598514e");
        assert_eq!(c.open_endpoint(&blob).unwrap(), v6);
    }

    #[test]
    fn endpoint_rejects_bad_blobs() {
        let c = Cipher::new(&key()).unwrap();
        assert_eq!(c.open_endpoint(&[0; 15]), Err(CryptoError::BlockLength(15)));
        assert_eq!(c.open_endpoint(&[]), Err(CryptoError::BlockLength(0)));
        // A block whose plaintext claims 200 bytes.
        let mut b = [0u8; 16];
        b[0] = 200;
        c.ecb.encrypt_block(GenericArray::from_mut_slice(&mut b));
        assert_eq!(c.open_endpoint(&b), Err(CryptoError::Prefix(200)));
        // n = 15 is allowed in one block (n <= len - 1); zeros decode to nothing valid.
        let mut b = [0u8; 16];
        b[0] = 15;
        c.ecb.encrypt_block(GenericArray::from_mut_slice(&mut b));
        assert!(matches!(c.open_endpoint(&b), Err(CryptoError::Proto(_))));
    }

    #[test]
    fn gcm_vector() {
        let c = Cipher::new(&key()).unwrap();
        let pt = [
            0x0a, 0x02, 0x6e, 0x31, 0x1a, 0x01, 0x68, 0x2a, 0x06, 0x77, 0x6f, 0x72, 0x6b, 0x65,
            0x72,
        ];
        let blob = c.seal_with_nonce(&pt, std::array::from_fn(|i| i as u8)).unwrap();
        assert_eq!(
            hex(&blob),
            "000102030405060708090a0b4d00b82adfe4aa318b36f8f9da8c0a0ed44cb7262429031fe31283e955f4de"
        );
        assert_eq!(c.open(&blob).unwrap(), pt);
        // Random nonces: two seals differ, both open.
        let (a, b) = (c.seal(&pt).unwrap(), c.seal(&pt).unwrap());
        assert_ne!(a, b);
        assert_eq!(c.open(&a).unwrap(), pt);
        assert_eq!(c.open(&b).unwrap(), pt);
    }

    #[test]
    fn gcm_rejects() {
        let c = Cipher::new(&key()).unwrap();
        assert_eq!(c.open(&[0; 27]), Err(CryptoError::TooShort(27)));
        assert_eq!(c.open(&[0; 28]), Err(CryptoError::Auth));
        let mut blob = c.seal(b"x").unwrap();
        blob[12] ^= 1;
        assert_eq!(c.open(&blob), Err(CryptoError::Auth));
        let other = Cipher::new(&[7; 32]).unwrap();
        assert_eq!(other.open(&c.seal(b"x").unwrap()), Err(CryptoError::Auth));
        // Empty plaintext is a valid 28-byte blob.
        assert_eq!(c.open(&c.seal(b"").unwrap()).unwrap(), b"");
    }
}
