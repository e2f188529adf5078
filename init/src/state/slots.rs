// SPDX-License-Identifier: Apache-2.0
//! The state partition's format: two slots, each a header sector and a payload, written in
//! turn. A write goes to the slot that does not hold the newest state: the payload first,
//! flushed, then the header (a generation one higher, the payload's length and CRC-32, its
//! own CRC-32), flushed. A reader takes the valid slot with the newest generation.
//!
//! Generations are compared in serial-number arithmetic (RFC 1982, for 64-bit numbers): the
//! one after 2^64 − 1 is 0, and 0 is newer than 2^64 − 1. The two slots' generations differ by
//! one when keelson wrote them, far inside the half of the number space in which the
//! comparison is defined, so a wrap never lets the older slot win.
//!
//! Why a power cut never leaves a torn state: until the new header is on the medium, the
//! slot being written has either its old header, which no longer matches the payload being
//! overwritten (so that slot fails its check and the other, untouched slot wins), or a torn
//! header (which fails its own CRC). The header is written only after the payload is
//! flushed, so once a header with the new generation checks, its payload is all there.
//! The newest state is never written over: a write only ever destroys the older slot.
//!
//! The payload is a list of named files (`len | name | len | bytes`), so the state needs no
//! filesystem and no mkfs in the image. Pure apart from the [`Medium`] it is given.

use std::collections::BTreeMap;

use super::crc32::crc32;
use super::gpt::STATE_BYTES;

/// Each slot's size; the two fill the partition.
pub const SLOT_BYTES: u64 = STATE_BYTES / 2;
/// The header's room at the start of a slot (the header itself is one 512-byte sector; a
/// 4 KiB block keeps the payload aligned on 4Kn disks).
pub const HEADER_ROOM: u64 = 4096;
/// The largest payload a slot holds.
pub const MAX_PAYLOAD: u64 = SLOT_BYTES - HEADER_ROOM;
/// The header sector.
pub const HEADER_BYTES: usize = 512;
const MAGIC: &[u8; 8] = b"KEELSTAT";
const FORMAT: u32 = 1;
/// Most files in a state, longest name.
pub const MAX_FILES: usize = 256;
pub const MAX_NAME: usize = 128;

/// The files of one state, by name relative to the state directory.
pub type Files = BTreeMap<String, Vec<u8>>;

/// Block access relative to the partition start.
pub trait Medium {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<()>;
    /// Everything written so far is on stable storage.
    fn sync(&mut self) -> std::io::Result<()>;
}

/// Why a state cannot be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error("state partition I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("the state is {0} bytes; a slot holds {MAX_PAYLOAD}")]
    TooLarge(u64),
    #[error("state file name {0:?}: not a plain relative name of at most {MAX_NAME} bytes")]
    BadName(String),
    #[error("more than {MAX_FILES} state files")]
    TooMany,
    #[error("state payload malformed at byte {0}")]
    Malformed(usize),
}

/// A state read back: which slot, its generation, its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub slot: usize,
    pub generation: u64,
    pub files: Files,
}

/// A name is a relative path of plain components (letters, digits, `.`, `-`, `_`, no
/// component of dots only), at most two deep.
pub fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    name.len() <= MAX_NAME
        && parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.chars().all(|c| c == '.')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        })
}

/// The payload of `files`.
pub fn encode(files: &Files) -> Result<Vec<u8>, SlotError> {
    if files.len() > MAX_FILES {
        return Err(SlotError::TooMany);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (name, data) in files {
        if !valid_name(name) {
            return Err(SlotError::BadName(name.clone()));
        }
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        let len = u32::try_from(data.len()).map_err(|_| SlotError::TooLarge(data.len() as u64))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(data);
    }
    if out.len() as u64 > MAX_PAYLOAD {
        return Err(SlotError::TooLarge(out.len() as u64));
    }
    Ok(out)
}

/// The files of a payload (already checked against its CRC; still validated, as a CRC is no
/// authentication).
pub fn decode(b: &[u8]) -> Result<Files, SlotError> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], SlotError> {
        let end = at.checked_add(n).filter(|e| *e <= b.len()).ok_or(SlotError::Malformed(at))?;
        let s = &b[at..end];
        at = end;
        Ok(s)
    };
    let le32 = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize;
    let count = le32(take(4)?);
    if count > MAX_FILES {
        return Err(SlotError::TooMany);
    }
    let mut files = Files::new();
    for _ in 0..count {
        let n = take(2)?;
        let n = usize::from(u16::from_le_bytes([n[0], n[1]]));
        let name = String::from_utf8_lossy(take(n)?).into_owned();
        if !valid_name(&name) {
            return Err(SlotError::BadName(name));
        }
        let len = le32(take(4)?);
        files.insert(name, take(len)?.to_vec());
    }
    Ok(files)
}

/// A slot's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    generation: u64,
    len: u64,
    crc: u32,
}

fn encode_header(h: Header) -> [u8; HEADER_BYTES] {
    let mut b = [0u8; HEADER_BYTES];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&FORMAT.to_le_bytes());
    b[16..24].copy_from_slice(&h.generation.to_le_bytes());
    b[24..32].copy_from_slice(&h.len.to_le_bytes());
    b[32..36].copy_from_slice(&h.crc.to_le_bytes());
    let own = crc32(&b[..60]);
    b[60..64].copy_from_slice(&own.to_le_bytes());
    b
}

fn parse_header(b: &[u8; HEADER_BYTES]) -> Option<Header> {
    let u64_at = |at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(a)
    };
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let ok = &b[0..8] == MAGIC && u32_at(8) == FORMAT && u32_at(60) == crc32(&b[..60]);
    let h = Header { generation: u64_at(16), len: u64_at(24), crc: u32_at(32) };
    (ok && h.len <= MAX_PAYLOAD).then_some(h)
}

fn slot_offset(slot: usize) -> u64 {
    slot as u64 * SLOT_BYTES
}

/// Read one slot: its generation and files, or `None` if it does not check.
fn read_slot(m: &mut impl Medium, slot: usize) -> Result<Option<(u64, Files)>, SlotError> {
    let mut hb = [0u8; HEADER_BYTES];
    m.read_at(slot_offset(slot), &mut hb)?;
    let Some(h) = parse_header(&hb) else { return Ok(None) };
    // Bounded by MAX_PAYLOAD through parse_header.
    let mut payload = vec![0u8; h.len as usize];
    m.read_at(slot_offset(slot) + HEADER_ROOM, &mut payload)?;
    if crc32(&payload) != h.crc {
        return Ok(None);
    }
    Ok(decode(&payload).ok().map(|f| (h.generation, f)))
}

/// Is generation `a` newer than `b`? Serial-number arithmetic: `a` is ahead of `b` by less
/// than half the number space. Two generations exactly half the space apart are neither
/// (keelson never writes such a pair; the reader then keeps slot A).
pub fn newer(a: u64, b: u64) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 63
}

/// The newest state that checks, if any slot holds one.
pub fn load(m: &mut impl Medium) -> Result<Option<Loaded>, SlotError> {
    let mut best: Option<Loaded> = None;
    for slot in 0..2 {
        if let Some((generation, files)) = read_slot(m, slot)? {
            if best.as_ref().is_none_or(|b| newer(generation, b.generation)) {
                best = Some(Loaded { slot, generation, files });
            }
        }
    }
    Ok(best)
}

/// Store `files` as the state after `current` (the newest slot and generation, `None` on
/// an empty partition): into the other slot, one generation up. Returns the new newest.
pub fn store(
    m: &mut impl Medium,
    current: Option<(usize, u64)>,
    files: &Files,
) -> Result<(usize, u64), SlotError> {
    let payload = encode(files)?;
    let (slot, generation) = match current {
        Some((s, g)) => (1 - s, g.wrapping_add(1)),
        None => (0, 1),
    };
    m.write_at(slot_offset(slot) + HEADER_ROOM, &payload)?;
    m.sync()?;
    let h = Header { generation, len: payload.len() as u64, crc: crc32(&payload) };
    m.write_at(slot_offset(slot), &encode_header(h))?;
    m.sync()?;
    Ok((slot, generation))
}

/// Zero both headers (a fresh install: nothing from an earlier one may come back).
pub fn clear(m: &mut impl Medium) -> Result<(), SlotError> {
    for slot in 0..2 {
        m.write_at(slot_offset(slot), &[0u8; HEADER_BYTES])?;
    }
    m.sync()?;
    Ok(())
}

/// Zero both slots whole, headers and payloads (a reset: the configs and keys they held must
/// not be readable afterwards).
pub fn erase(m: &mut impl Medium) -> Result<(), SlotError> {
    const CHUNK: usize = 1 << 20;
    let zeros = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < 2 * SLOT_BYTES {
        let n = (2 * SLOT_BYTES - at).min(CHUNK as u64) as usize;
        m.write_at(at, zeros.get(..n).unwrap_or(&zeros))?;
        at += n as u64;
    }
    m.sync()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A medium that keeps what reached it: writes land in `pending` until a sync, and a
    /// power cut after `budget` bytes drops the rest.
    #[derive(Clone)]
    struct Mem {
        bytes: Vec<u8>,
        budget: usize,
    }

    impl Medium for Mem {
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            let at = offset as usize;
            buf.copy_from_slice(&self.bytes[at..at + buf.len()]);
            Ok(())
        }
        fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
            let n = buf.len().min(self.budget);
            let at = offset as usize;
            self.bytes[at..at + n].copy_from_slice(&buf[..n]);
            self.budget -= n;
            if n < buf.len() {
                return Err(std::io::Error::other("power cut"));
            }
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn files(tag: &str, size: usize) -> Files {
        let mut f = Files::new();
        f.insert("config.yaml".into(), format!("# {tag}\n").repeat(size / 8).into_bytes());
        f.insert("dhcp4-eth0.json".into(), tag.as_bytes().to_vec());
        f
    }

    fn fresh() -> Mem {
        Mem { bytes: vec![0u8; STATE_BYTES as usize], budget: usize::MAX }
    }

    #[test]
    fn erase_leaves_nothing_to_load_nor_to_read() {
        let mut m = fresh();
        let first = store(&mut m, None, &files("secret-a", 4096)).unwrap();
        store(&mut m, Some(first), &files("secret-b", 4096)).unwrap();
        assert!(load(&mut m).unwrap().is_some());
        erase(&mut m).unwrap();
        assert_eq!(load(&mut m).unwrap(), None);
        assert!(m.bytes.iter().all(|b| *b == 0), "both slots zeroed, payloads too");
        // A state written afterwards starts over, and reads back.
        let again = store(&mut m, None, &files("c", 64)).unwrap();
        assert_eq!(again, (0, 1));
        assert_eq!(load(&mut m).unwrap().map(|l| l.files), Some(files("c", 64)));
    }

    #[test]
    fn writes_alternate_and_the_newest_wins() {
        let mut m = fresh();
        assert_eq!(load(&mut m).unwrap(), None);
        let a = store(&mut m, None, &files("a", 100)).unwrap();
        assert_eq!(a, (0, 1));
        let b = store(&mut m, Some(a), &files("b", 100)).unwrap();
        assert_eq!(b, (1, 2));
        let c = store(&mut m, Some(b), &files("c", 100)).unwrap();
        assert_eq!(c, (0, 3));
        let got = load(&mut m).unwrap().unwrap();
        assert_eq!((got.slot, got.generation, got.files), (0, 3, files("c", 100)));
        clear(&mut m).unwrap();
        assert_eq!(load(&mut m).unwrap(), None);
    }

    /// The power cut at every byte of a write (payload and header): the reader finds the old
    /// state or the new one, and the new one only once the whole header is down.
    #[test]
    fn a_write_torn_at_any_byte_leaves_old_or_new() {
        for (old_size, new_size) in [(3000, 5000), (5000, 600), (64, 64)] {
            let mut base = fresh();
            let first = store(&mut base, None, &files("first", 2000)).unwrap();
            let current = store(&mut base, Some(first), &files("old", old_size)).unwrap();
            let new = files("new", new_size);
            let payload = encode(&new).unwrap().len();
            // The header's fields and CRC are its first 64 bytes; the rest is zeros.
            let header_down = payload + 64;
            for budget in 0..=payload + HEADER_BYTES {
                let mut m = base.clone();
                m.budget = budget;
                let stored = store(&mut m, Some(current), &new);
                assert_eq!(stored.is_ok(), budget == payload + HEADER_BYTES);
                let got = load(&mut m).unwrap().unwrap();
                if budget >= header_down {
                    assert!(got.files == new && got.generation == 3, "cut after {budget} bytes");
                } else {
                    let old = files("old", old_size);
                    assert!(got.files == old && got.generation == 2, "cut after {budget} bytes");
                }
            }
        }
    }

    /// Before the flush the disk may keep any subset of the payload's sectors (write caches
    /// reorder): whatever subset, the old state stays the one read.
    #[test]
    fn any_subset_of_payload_sectors_before_the_flush_leaves_old() {
        let mut base = fresh();
        let current = store(&mut base, None, &files("old", 4000)).unwrap();
        let current = store(&mut base, Some(current), &files("older", 4000)).unwrap();
        let payload = encode(&files("new", 6000)).unwrap();
        let sectors = payload.len().div_ceil(512);
        let target = slot_offset(1 - current.0) as usize + HEADER_ROOM as usize;
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            let mut m = base.clone();
            for s in 0..sectors {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                if seed & 1 == 1 {
                    let end = ((s + 1) * 512).min(payload.len());
                    m.bytes[target + s * 512..target + end].copy_from_slice(&payload[s * 512..end]);
                }
            }
            let got = load(&mut m).unwrap().unwrap();
            assert!(got.files == files("older", 4000));
        }
    }

    /// Past 2^64 − 1 the generation wraps to 0, and that write is the newest: the old slot
    /// never wins again.
    #[test]
    fn generations_wrap_and_the_newest_still_wins() {
        let mut m = fresh();
        let top = store(&mut m, Some((0, u64::MAX - 1)), &files("top", 100)).unwrap();
        assert_eq!(top, (1, u64::MAX));
        assert_eq!(load(&mut m).unwrap().unwrap().generation, u64::MAX);
        let wrapped = store(&mut m, Some(top), &files("wrapped", 100)).unwrap();
        assert_eq!(wrapped, (0, 0));
        let got = load(&mut m).unwrap().unwrap();
        assert_eq!((got.slot, got.generation, got.files), (0, 0, files("wrapped", 100)));
        let next = store(&mut m, Some(wrapped), &files("next", 100)).unwrap();
        let got = load(&mut m).unwrap().unwrap();
        assert_eq!((got.slot, got.generation, got.files), (next.0, 1, files("next", 100)));
    }

    #[test]
    fn serial_number_comparison() {
        for (a, b) in
            [(1, 0), (0, u64::MAX), (5, u64::MAX - 5), (1 << 62, 0), (u64::MAX, u64::MAX - 1)]
        {
            assert!(newer(a, b) && !newer(b, a), "{a} after {b}");
        }
        assert!(!newer(7, 7));
        // Half the space apart: neither; the reader keeps slot A.
        assert!(!newer(1 << 63, 0) && !newer(0, 1 << 63));
        let mut m = fresh();
        store(&mut m, Some((1, (1 << 63) - 1)), &files("a", 10)).unwrap();
        store(&mut m, Some((0, u64::MAX)), &files("b", 10)).unwrap();
        assert_eq!(load(&mut m).unwrap().unwrap().slot, 0);
    }

    #[test]
    fn names_and_sizes_are_bounded() {
        for bad in ["../x", "/etc/passwd", "a/b/c", "..", "a//b", "sp ace", ""] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(valid_name("kubespan/key") && valid_name("dhcp4-eth0.json"));
        let mut f = Files::new();
        f.insert("big".into(), vec![0u8; MAX_PAYLOAD as usize]);
        assert!(matches!(encode(&f), Err(SlotError::TooLarge(_))));
        assert!(matches!(decode(&[5, 0, 0, 0, 200]), Err(SlotError::Malformed(_))));
        assert!(matches!(decode(&[1, 1, 0, 0]), Err(SlotError::TooMany)));
    }
}
