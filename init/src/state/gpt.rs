// SPDX-License-Identifier: Apache-2.0
//! The GUID partition table keelson writes on an install disk and reads back at boot (UEFI
//! 2.10, chapter 5): a protective MBR in LBA 0, the primary header in LBA 1 and its 128
//! entries after it, the same entries and a backup header at the end of the disk. Pure:
//! bytes in, bytes and offsets out; `disk` does the I/O.
//!
//! keelson makes one partition, the state partition, of its own type GUID and label, 1 MiB
//! into the disk (aligned for any sector and erase-block size in use), 16 MiB long. The rest
//! of the disk stays unallocated.

use super::crc32::crc32;

/// The state partition's type GUID (keelson's own, random).
/// In text form `dcac0c02-f3be-4d89-b748-1c949b7f981a`; here in its on-disk order.
pub const STATE_TYPE: Guid = Guid([
    0x02, 0x0c, 0xac, 0xdc, 0xbe, 0xf3, 0x89, 0x4d, 0xb7, 0x48, 0x1c, 0x94, 0x9b, 0x7f, 0x98, 0x1a,
]);
/// The state partition's label.
pub const STATE_LABEL: &str = "KEELSON-STATE";
/// Where the state partition starts and how long it is, in bytes.
pub const STATE_OFFSET: u64 = 1 << 20;
pub const STATE_BYTES: u64 = 16 << 20;
const STATE_MIB: u64 = STATE_BYTES >> 20;

const SIGNATURE: &[u8; 8] = b"EFI PART";
const REVISION: u32 = 0x0001_0000;
const HEADER_SIZE: u32 = 92;
const ENTRIES: u32 = 128;
const ENTRY_SIZE: u32 = 128;
/// Most entries read from a foreign table (the spec allows more than 128; nobody uses them).
const MAX_ENTRIES: u32 = 1024;
/// The partition name field: 36 UTF-16 code units.
const NAME_UNITS: usize = 36;

/// Why a table cannot be made or read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GptError {
    #[error("the disk is too small for the state partition ({0} bytes; at least {1} needed)")]
    TooSmall(u64, u64),
    #[error("sector size {0} not supported (512 or 4096)")]
    SectorSize(u64),
    #[error("no GPT header")]
    NoSignature,
    #[error("GPT header: {0}")]
    BadHeader(&'static str),
    #[error("GPT partition entries: checksum mismatch")]
    BadEntries,
    #[error(
        "the state partition's entry (LBA {0}..={1}) does not lie within the disk ({2} sectors)"
    )]
    OutsideDisk(u64, u64, u64),
    #[error("the state partition is too small: {0} bytes (LBA {1}..={2}); keelson needs at least {STATE_BYTES} bytes ({STATE_MIB} MiB)")]
    PartitionTooSmall(u64, u64, u64),
}

/// Where a partition lies on the disk, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

/// The state partition's real extent, from its entry's first and last LBA, checked: it lies
/// within the disk (after the primary table, before the backup) and holds the two slots.
/// The entry comes from the disk, so it is input: a partition made by another tool may be
/// smaller than the 16 MiB keelson makes, and the slots must never reach past its end.
pub fn partition_extent(p: &Partition, g: Geometry) -> Result<Extent, GptError> {
    let (first, last) = (p.first_lba, p.last_lba);
    let inside = first >= 2 && first <= last && last < g.sectors.saturating_sub(1);
    if !inside {
        return Err(GptError::OutsideDisk(first, last, g.sectors));
    }
    let span = |n: u64| n.checked_mul(g.sector);
    let (Some(offset), Some(len)) = (span(first), span(last - first + 1)) else {
        return Err(GptError::OutsideDisk(first, last, g.sectors));
    };
    if len < STATE_BYTES {
        return Err(GptError::PartitionTooSmall(len, first, last));
    }
    Ok(Extent { offset, len })
}

/// A GUID in its on-disk byte order (the first three fields little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// A random version 4 GUID from 16 random bytes.
    pub fn random(mut bytes: [u8; 16]) -> Self {
        bytes[7] = (bytes[7] & 0x0F) | 0x40;
        bytes[8] = (bytes[8] & 0x3F) | 0x80;
        Self(bytes)
    }
}

impl std::fmt::Display for Guid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-",
            b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6]
        )?;
        write!(f, "{:02x}{:02x}-", b[8], b[9])?;
        b[10..].iter().try_for_each(|x| write!(f, "{x:02x}"))
    }
}

/// A disk's size in sectors and its logical sector size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub sector: u64,
    pub sectors: u64,
}

impl Geometry {
    fn entries_sectors(self) -> u64 {
        (u64::from(ENTRIES * ENTRY_SIZE)).div_ceil(self.sector)
    }

    fn last_lba(self) -> u64 {
        self.sectors - 1
    }
}

/// One partition entry in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub type_guid: Guid,
    pub unique: Guid,
    pub first_lba: u64,
    pub last_lba: u64,
    pub name: String,
}

impl Partition {
    /// keelson's state partition?
    pub fn is_state(&self) -> bool {
        self.type_guid == STATE_TYPE && self.name == STATE_LABEL
    }
}

/// A header's fields that locate the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub entries_lba: u64,
    pub entries: u32,
    pub entry_size: u32,
    pub entries_crc: u32,
    pub alternate_lba: u64,
}

impl Header {
    /// How many bytes the entries take.
    pub fn entries_bytes(&self) -> u64 {
        u64::from(self.entries) * u64::from(self.entry_size)
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The state partition's extent in sectors (first, last), checked against the disk.
pub fn state_extent(g: Geometry) -> Result<(u64, u64), GptError> {
    if g.sector != 512 && g.sector != 4096 {
        return Err(GptError::SectorSize(g.sector));
    }
    let first = STATE_OFFSET / g.sector;
    let last = first + STATE_BYTES / g.sector - 1;
    // Room for the backup entries and header after the partition.
    let needed = (last + 1 + g.entries_sectors() + 1) * g.sector;
    let have = g.sectors.saturating_mul(g.sector);
    if have < needed {
        return Err(GptError::TooSmall(have, needed));
    }
    Ok((first, last))
}

/// Everything to write for a fresh table holding only the state partition: (byte offset,
/// bytes) pairs, the primary side first, then the backup side. The disk's and the
/// partition's unique GUIDs come from the caller (random).
pub fn layout(g: Geometry, disk: Guid, part: Guid) -> Result<Vec<(u64, Vec<u8>)>, GptError> {
    let (first, last) = state_extent(g)?;
    let state = Partition {
        type_guid: STATE_TYPE,
        unique: part,
        first_lba: first,
        last_lba: last,
        name: STATE_LABEL.into(),
    };
    Ok(table(g, disk, std::slice::from_ref(&state)))
}

/// The writes of a table holding `parts` (at most 128; `layout` passes one, tests more) on a
/// disk whose geometry `state_extent` accepted.
pub(crate) fn table(g: Geometry, disk: Guid, parts: &[Partition]) -> Vec<(u64, Vec<u8>)> {
    let sector = g.sector as usize;
    let mut entries = vec![0u8; (ENTRIES * ENTRY_SIZE) as usize];
    for (e, p) in entries.chunks_exact_mut(ENTRY_SIZE as usize).zip(parts) {
        e[0..16].copy_from_slice(&p.type_guid.0);
        e[16..32].copy_from_slice(&p.unique.0);
        put_u64(e, 32, p.first_lba);
        put_u64(e, 40, p.last_lba);
        for (i, unit) in p.name.encode_utf16().take(NAME_UNITS).enumerate() {
            e[56 + 2 * i..58 + 2 * i].copy_from_slice(&unit.to_le_bytes());
        }
    }
    let entries_crc = crc32(&entries);
    let es = g.entries_sectors();
    let last_lba = g.last_lba();
    let header = |mine: u64, alternate: u64, entries_lba: u64| {
        let mut h = vec![0u8; sector];
        h[0..8].copy_from_slice(SIGNATURE);
        put_u32(&mut h, 8, REVISION);
        put_u32(&mut h, 12, HEADER_SIZE);
        put_u64(&mut h, 24, mine);
        put_u64(&mut h, 32, alternate);
        put_u64(&mut h, 40, 2 + es);
        put_u64(&mut h, 48, last_lba - es - 1);
        h[56..72].copy_from_slice(&disk.0);
        put_u64(&mut h, 72, entries_lba);
        put_u32(&mut h, 80, ENTRIES);
        put_u32(&mut h, 84, ENTRY_SIZE);
        put_u32(&mut h, 88, entries_crc);
        let crc = crc32(&h[..HEADER_SIZE as usize]);
        put_u32(&mut h, 16, crc);
        h
    };
    // The protective MBR: one partition of type 0xEE covering the disk (or as much of it
    // as 32 bits count), so MBR-only tools see the disk as in use.
    let mut mbr = vec![0u8; sector];
    let p = &mut mbr[446..462];
    p[1..4].copy_from_slice(&[0x00, 0x02, 0x00]);
    p[4] = 0xEE;
    p[5..8].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
    put_u32(p, 8, 1);
    put_u32(p, 12, u32::try_from(g.sectors - 1).unwrap_or(u32::MAX));
    mbr[510] = 0x55;
    mbr[511] = 0xAA;

    let mut primary = mbr;
    primary.extend(header(1, last_lba, 2));
    primary.extend_from_slice(&entries);
    let mut backup = entries;
    backup.resize(es as usize * sector, 0);
    backup.extend(header(last_lba, 1, last_lba - es));
    vec![(0, primary), ((last_lba - es) * g.sector, backup)]
}

/// Parse a GPT header sector read at `lba`.
pub fn parse_header(b: &[u8], lba: u64) -> Result<Header, GptError> {
    if b.len() < HEADER_SIZE as usize || &b[0..8] != SIGNATURE {
        return Err(GptError::NoSignature);
    }
    let size = get_u32(b, 12);
    if !(HEADER_SIZE..=b.len() as u32).contains(&size) {
        return Err(GptError::BadHeader("header size"));
    }
    let mut copy = b[..size as usize].to_vec();
    put_u32(&mut copy, 16, 0);
    if crc32(&copy) != get_u32(b, 16) {
        return Err(GptError::BadHeader("checksum mismatch"));
    }
    if get_u64(b, 24) != lba {
        return Err(GptError::BadHeader("not at its own LBA"));
    }
    let h = Header {
        entries_lba: get_u64(b, 72),
        entries: get_u32(b, 80),
        entry_size: get_u32(b, 84),
        entries_crc: get_u32(b, 88),
        alternate_lba: get_u64(b, 32),
    };
    if h.entries > MAX_ENTRIES
        || h.entry_size < 128
        || h.entry_size > 1024
        || !h.entry_size.is_multiple_of(8)
    {
        return Err(GptError::BadHeader("entry count or size"));
    }
    Ok(h)
}

/// The partitions in use in `entries` (read as the header locates them).
pub fn parse_entries(h: &Header, entries: &[u8]) -> Result<Vec<Partition>, GptError> {
    if entries.len() as u64 != h.entries_bytes() || crc32(entries) != h.entries_crc {
        return Err(GptError::BadEntries);
    }
    let guid = |b: &[u8]| {
        let mut g = [0u8; 16];
        g.copy_from_slice(b);
        Guid(g)
    };
    Ok(entries
        .chunks_exact(h.entry_size as usize)
        .filter(|e| e[0..16] != [0u8; 16])
        .map(|e| {
            let units: Vec<u16> = e[56..56 + 2 * NAME_UNITS]
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .take_while(|u| *u != 0)
                .collect();
            Partition {
                type_guid: guid(&e[0..16]),
                unique: guid(&e[16..32]),
                first_lba: get_u64(e, 32),
                last_lba: get_u64(e, 40),
                name: String::from_utf16_lossy(&units),
            }
        })
        .collect())
}

/// Does LBA 0 hold an MBR with a partition in use (a protective one included)?
pub fn mbr_in_use(lba0: &[u8]) -> bool {
    lba0.len() >= 512
        && lba0[510] == 0x55
        && lba0[511] == 0xAA
        && lba0[446..510].chunks_exact(16).any(|p| p[4] != 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn disk(g: Geometry) -> Vec<u8> {
        let mut d = vec![0u8; (g.sectors * g.sector) as usize];
        for (at, bytes) in layout(g, Guid::random([7; 16]), Guid::random([9; 16])).unwrap() {
            d[at as usize..at as usize + bytes.len()].copy_from_slice(&bytes);
        }
        d
    }

    fn read(d: &[u8], g: Geometry, lba: u64) -> Vec<Partition> {
        let s = g.sector as usize;
        let h = parse_header(&d[lba as usize * s..(lba as usize + 1) * s], lba).unwrap();
        let at = (h.entries_lba * g.sector) as usize;
        parse_entries(&h, &d[at..at + h.entries_bytes() as usize]).unwrap()
    }

    #[test]
    fn the_type_guid_reads_back_as_written() {
        assert_eq!(STATE_TYPE.to_string(), "dcac0c02-f3be-4d89-b748-1c949b7f981a");
        assert_eq!(&STATE_TYPE.0[..4], &[0x02, 0x0c, 0xac, 0xdc]);
    }

    #[test]
    fn primary_and_backup_both_name_the_state_partition() {
        for sector in [512, 4096] {
            let g = Geometry { sector, sectors: (64 << 20) / sector };
            let d = disk(g);
            assert!(mbr_in_use(&d));
            for lba in [1, g.sectors - 1] {
                let parts = read(&d, g, lba);
                assert_eq!(parts.len(), 1);
                assert!(parts[0].is_state());
                assert_eq!(parts[0].first_lba * sector, STATE_OFFSET);
                assert_eq!((parts[0].last_lba + 1) * sector, STATE_OFFSET + STATE_BYTES);
            }
        }
    }

    #[test]
    fn a_flipped_bit_is_caught() {
        let g = Geometry { sector: 512, sectors: 65536 };
        let mut d = disk(g);
        d[512 + 40] ^= 1;
        assert_eq!(parse_header(&d[512..1024], 1), Err(GptError::BadHeader("checksum mismatch")));
        let mut d = disk(g);
        d[1024 + 60] ^= 1;
        let h = parse_header(&d[512..1024], 1).unwrap();
        assert_eq!(parse_entries(&h, &d[1024..1024 + 16384]), Err(GptError::BadEntries));
        assert_eq!(parse_header(&[0u8; 512], 1), Err(GptError::NoSignature));
    }

    fn entry(first_lba: u64, last_lba: u64) -> Partition {
        Partition {
            type_guid: STATE_TYPE,
            unique: Guid::default(),
            first_lba,
            last_lba,
            name: STATE_LABEL.into(),
        }
    }

    #[test]
    fn the_extent_is_the_entrys_and_must_hold_the_slots() {
        let g = Geometry { sector: 512, sectors: (64 << 20) / 512 };
        // The partition keelson writes.
        let (first, last) = state_extent(g).unwrap();
        assert_eq!(
            partition_extent(&entry(first, last), g),
            Ok(Extent { offset: STATE_OFFSET, len: STATE_BYTES })
        );
        // A larger one (made by another tool) is used as it is.
        assert_eq!(
            partition_extent(&entry(first, last + 2048), g).unwrap().len,
            STATE_BYTES + (1 << 20)
        );
        // One sector short, and a 4 KiB one: refused, saying so.
        let short = partition_extent(&entry(first, last - 1), g);
        assert_eq!(short, Err(GptError::PartitionTooSmall(STATE_BYTES - 512, first, last - 1)));
        let tiny = partition_extent(&entry(2048, 2055), g).unwrap_err();
        assert!(tiny.to_string().contains("state partition is too small: 4096 bytes"), "{tiny}");
        // Entries that do not lie within the disk.
        for (f, l) in [
            (0, 100_000),
            (5000, 4000),
            (2048, g.sectors - 1),
            (2048, u64::MAX),
            (u64::MAX / 2, u64::MAX - 2),
        ] {
            assert!(
                matches!(partition_extent(&entry(f, l), g), Err(GptError::OutsideDisk(..))),
                "{f}..={l}"
            );
        }
        // 4Kn: the same bytes in fewer, larger sectors.
        let g4 = Geometry { sector: 4096, sectors: (64 << 20) / 4096 };
        let (f4, l4) = state_extent(g4).unwrap();
        assert_eq!(partition_extent(&entry(f4, l4), g4).unwrap().len, STATE_BYTES);
    }

    #[test]
    fn small_disks_and_odd_sectors_are_refused() {
        let g = Geometry { sector: 512, sectors: 2048 };
        assert!(matches!(state_extent(g), Err(GptError::TooSmall(..))));
        let g = Geometry { sector: 1024, sectors: 1 << 20 };
        assert_eq!(state_extent(g), Err(GptError::SectorSize(1024)));
    }
}
