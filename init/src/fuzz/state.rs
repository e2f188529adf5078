// SPDX-License-Identifier: Apache-2.0
//! The disk: the GPT (`state::gpt`) as `state::disk` reads it, and the state slots
//! (`state::slots`).
//!
//! Checksums would stop almost every mutant at the first check, so each input is tried twice:
//! as it is, and with its checksums recomputed (the header's and the entries' CRC for the
//! GPT; a slot's length and CRCs), which lets mutants reach the fields behind them.
//!
//! Oracles: no panic; the partitions found are no more than the entries read, names at most
//! 36 UTF-16 units; the state partition's offset, for any disk geometry, is exactly its first
//! LBA times the sector size and all of the partition lies on the disk. Slots: a decoded
//! payload is within `MAX_FILES` valid names and its own size, and encodes to a payload that
//! decodes to the same files; `load` picks the slot with the newest generation whose header
//! and payload check, and refuses the rest.

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::state::crc32::crc32;
use crate::state::gpt::{self, Geometry, Guid, STATE_BYTES};
use crate::state::slots::{self, Files, Medium, HEADER_BYTES, HEADER_ROOM, MAX_FILES, SLOT_BYTES};

const SECTOR: usize = 512;
/// The most entry bytes a header may locate: 1024 entries of 1024 bytes.
const MAX_ENTRY_BYTES: usize = 1 << 20;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// The header sector and the entries it locates (read at LBA 2 as the fuzz disk has them).
fn split(b: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut header = b[..b.len().min(SECTOR)].to_vec();
    header.resize(SECTOR, 0);
    let entries = b.get(SECTOR..).unwrap_or_default().to_vec();
    (header, entries)
}

/// Entry regions larger than this (up to the 1 MiB a header may locate) are only checked
/// against the header, not read: CRCs of a megabyte of zeros would slow every run down
/// a hundredfold and test nothing new.
const FIXED_ENTRY_BYTES: u64 = 64 << 10;

fn entries_len(header: &[u8]) -> u64 {
    u64::from(u32_at(header, 80)) * u64::from(u32_at(header, 84))
}

/// The entries region as many bytes as the header's count and size say (zero past the input).
fn entries_for(header: &[u8], entries: &[u8]) -> Vec<u8> {
    let n = entries_len(header) as usize;
    let mut e = entries[..entries.len().min(n)].to_vec();
    e.resize(n.min(MAX_ENTRY_BYTES), 0);
    e
}

/// Recompute the entries CRC and the header CRC.
fn fix_gpt(header: &mut [u8], entries: &[u8]) {
    if entries_len(header) <= FIXED_ENTRY_BYTES {
        let e = entries_for(header, entries);
        header[88..92].copy_from_slice(&crc32(&e).to_le_bytes());
    }
    let size = (u32_at(header, 12) as usize).clamp(92, SECTOR);
    header[16..20].fill(0);
    let crc = crc32(&header[..size]);
    header[16..20].copy_from_slice(&crc.to_le_bytes());
}

fn gpt_lengths(_: &[u8]) -> Vec<LenField> {
    // Header size, entries LBA, count and size; the first two entries' LBAs.
    let mut f =
        vec![LenField::le(12, 4), LenField::le(72, 8), LenField::le(80, 4), LenField::le(84, 4)];
    for e in [SECTOR, SECTOR + 128] {
        f.push(LenField::le(e + 32, 8));
        f.push(LenField::le(e + 40, 8));
    }
    f
}

fn geometries() -> [Geometry; 4] {
    [
        Geometry { sector: 512, sectors: 64 << 11 },
        Geometry { sector: 4096, sectors: 64 << 8 },
        Geometry { sector: 512, sectors: 1 << 40 },
        Geometry { sector: 4096, sectors: 1 << 40 },
    ]
}

fn check_gpt(header: &[u8], entries: &[u8]) -> Result<bool, String> {
    let Ok(h) = gpt::parse_header(header, 1) else { return Ok(false) };
    if h.entries_bytes() > MAX_ENTRY_BYTES as u64 {
        return Err(format!("a header locating {} bytes of entries", h.entries_bytes()));
    }
    if h.entries_bytes() > FIXED_ENTRY_BYTES {
        return Ok(true);
    }
    let e = entries_for(header, entries);
    let Ok(parts) = gpt::parse_entries(&h, &e) else { return Ok(false) };
    if parts.len() > h.entries as usize {
        return Err(format!("{} partitions from {} entries", parts.len(), h.entries));
    }
    if let Some(p) = parts.iter().find(|p| p.name.encode_utf16().count() > 36) {
        return Err(format!("partition name {:?}", p.name));
    }
    for g in geometries() {
        let Some(p) = parts.iter().find(|p| p.is_state()) else { continue };
        let Ok(x) = gpt::partition_extent(p, g) else { continue };
        let exact = u128::from(p.first_lba) * u128::from(g.sector);
        let len = (u128::from(p.last_lba) + 1 - u128::from(p.first_lba)) * u128::from(g.sector);
        let end = u128::from(x.offset) + u128::from(x.len);
        if u128::from(x.offset) != exact
            || u128::from(x.len) != len
            || x.len < STATE_BYTES
            || end > u128::from(g.sectors) * u128::from(g.sector)
        {
            return Err(format!(
                "state extent {x:?} from LBAs {}..={} on {g:?}",
                p.first_lba, p.last_lba
            ));
        }
    }
    Ok(true)
}

fn gpt_seeds() -> Vec<Vec<u8>> {
    let g = Geometry { sector: 512, sectors: 64 << 11 };
    let written = gpt::layout(g, Guid::random([7; 16]), Guid::random([9; 16])).unwrap();
    let primary = written[0].1[SECTOR..].to_vec();
    // Two partitions, entries of 256 bytes.
    let (mut header, entries) = split(&primary);
    let mut wide = vec![0u8; 8 * 256];
    wide[..128].copy_from_slice(&entries[..128]);
    wide[256..384].copy_from_slice(&entries[..128]);
    wide[256] ^= 1;
    header[80..84].copy_from_slice(&8u32.to_le_bytes());
    header[84..88].copy_from_slice(&256u32.to_le_bytes());
    fix_gpt(&mut header, &wide);
    vec![primary, [header, wide].concat()]
}

#[test]
fn fuzz_target_gpt() {
    let target = Target {
        name: "gpt",
        crate_dir: super::CRATE_DIR,
        seeds: gpt_seeds(),
        mutator: Mutator {
            dict: &[
                b"EFI PART",
                b"\x00\x00\x01\x00",
                b"\x5c\x00\x00\x00",
                b"\x80\x00\x00\x00",
                b"\x00\x04\x00\x00",
                b"\xff\xff\xff\xff\xff\xff\xff\xff",
            ],
            lengths: Some(gpt_lengths),
            max_len: 64 << 10,
        },
        default_iters: 1_500,
    };
    run(target, |b| {
        let (mut header, entries) = split(b);
        let raw = check_gpt(&header, &entries)?;
        fix_gpt(&mut header, &entries);
        let fixed = check_gpt(&header, &entries)?;
        let _ = gpt::mbr_in_use(b);
        Ok(if raw || fixed { Verdict::Accepted } else { Verdict::Refused })
    });
}

/// A medium that keeps only what was written (reads elsewhere are zeros).
#[derive(Default)]
struct Sparse(Vec<(u64, Vec<u8>)>);

impl Medium for Sparse {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        let end = offset + buf.len() as u64;
        for (at, bytes) in &self.0 {
            let (from, to) = ((*at).max(offset), (at + bytes.len() as u64).min(end));
            if from < to {
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
            }
        }
        Ok(())
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
        self.0.push((offset, buf.to_vec()));
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Slot 1 holds this generation of `other_files()`.
const OTHER_GENERATION: u64 = 5;

fn other_files() -> Files {
    Files::from([("other".to_string(), b"kept".to_vec())])
}

fn slot_header(generation: u64, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_BYTES];
    h[0..8].copy_from_slice(b"KEELSTAT");
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[16..24].copy_from_slice(&generation.to_le_bytes());
    fix_slot(&mut h, payload);
    h
}

/// Length, payload CRC and the header's own CRC, recomputed.
fn fix_slot(h: &mut [u8], payload: &[u8]) {
    h[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    h[32..36].copy_from_slice(&crc32(payload).to_le_bytes());
    let own = crc32(&h[..60]);
    h[60..64].copy_from_slice(&own.to_le_bytes());
}

fn load_with_slot0(slot0: &[u8]) -> Result<Option<slots::Loaded>, String> {
    let mut m = Sparse::default();
    slots::store(&mut m, Some((0, OTHER_GENERATION - 1)), &other_files()).unwrap();
    m.write_at(0, &slot0[..HEADER_BYTES.min(slot0.len())]).unwrap();
    m.write_at(HEADER_ROOM, slot0.get(HEADER_BYTES..).unwrap_or_default()).unwrap();
    slots::load(&mut m).map_err(|e| format!("load failed: {e}"))
}

fn check_slot(b: &[u8]) -> Result<bool, String> {
    let Ok(files) = slots::decode(b) else { return Ok(false) };
    let data: usize = files.iter().map(|(n, d)| n.len() + d.len()).sum();
    if files.len() > MAX_FILES || data > b.len() || !files.keys().all(|n| slots::valid_name(n)) {
        return Err(format!("{} files, {data} bytes from {}", files.len(), b.len()));
    }
    let encoded = slots::encode(&files).map_err(|e| format!("re-encoding failed: {e}"))?;
    if encoded.len() > b.len() || slots::decode(&encoded).ok().as_ref() != Some(&files) {
        return Err(format!("{files:?} does not round-trip"));
    }
    Ok(true)
}

/// What slot 0 holds by the format's own rules (written out here independently of the
/// parser): its generation and files, when its header and payload check.
fn expected_slot0(slot0: &[u8]) -> Option<(u64, Files)> {
    let h = slot0.get(..HEADER_BYTES)?;
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
    let ok = h.starts_with(b"KEELSTAT") && u32_at(h, 8) == 1 && u32_at(h, 60) == crc32(&h[..60]);
    let len = u64_at(24);
    if !ok || len > SLOT_BYTES - HEADER_ROOM {
        return None;
    }
    let mut payload = slot0[HEADER_BYTES..].to_vec();
    payload.resize(len as usize, 0);
    if crc32(&payload) != u32_at(h, 32) {
        return None;
    }
    Some((u64_at(16), slots::decode(&payload).ok()?))
}

fn slot_lengths(b: &[u8]) -> Vec<LenField> {
    let mut f = vec![LenField::le(24, 8), LenField::le(16, 8)];
    // The file count, then each name length and data length of the payload.
    let mut at = HEADER_BYTES;
    f.push(LenField::le(at, 4));
    at += 4;
    while let Some(n) = b.get(at..at + 2) {
        f.push(LenField::le(at, 2));
        at += 2 + usize::from(u16::from_le_bytes([n[0], n[1]]));
        let Some(len) = b.get(at..at + 4) else { break };
        f.push(LenField::le(at, 4));
        at += 4 + u32_at(len, 0) as usize;
    }
    f.retain(|l| l.at + l.width <= b.len());
    f
}

#[test]
fn fuzz_target_slots() {
    let mut seeds = Vec::new();
    for (generation, files) in [
        (
            9,
            Files::from([
                ("config.yaml".into(), b"version: v1\n".to_vec()),
                ("pki/ca.crt".into(), vec![0x30; 40]),
            ]),
        ),
        (1, Files::new()),
        (6, Files::from([("a".into(), vec![])])),
    ] {
        let payload = slots::encode(&files).unwrap();
        seeds.push([slot_header(generation, &payload), payload].concat());
    }
    let target = Target {
        name: "slots",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[b"KEELSTAT", b"/", b"..", b".", b"\xff\xff", b"\x00\x01\x00\x00"],
            lengths: Some(slot_lengths),
            max_len: 16 << 10,
        },
        default_iters: 10_000,
    };
    run(target, |b| {
        let payload = b.get(HEADER_BYTES..).unwrap_or_default();
        let decodes = check_slot(payload)?;
        let mut fixed = b.to_vec();
        fixed.resize(fixed.len().max(HEADER_BYTES), 0);
        fix_slot(&mut fixed[..HEADER_BYTES], payload);
        for slot0 in [b, &fixed[..]] {
            let loaded = load_with_slot0(slot0)?.ok_or("the valid slot 1 was not loaded")?;
            match expected_slot0(slot0) {
                // Slot 0 wins unless slot 1 is newer in serial-number order (ties keep slot 0).
                Some((generation, files)) if !slots::newer(OTHER_GENERATION, generation) => {
                    if loaded.slot != 0 || loaded.files != files {
                        return Err(format!("slot 0 (generation {generation}) lost: {loaded:?}"));
                    }
                }
                _ => {
                    if loaded.slot != 1 || loaded.files != other_files() {
                        return Err(format!("slot 0 should not have loaded: {loaded:?}"));
                    }
                }
            }
        }
        Ok(if decodes { Verdict::Accepted } else { Verdict::Refused })
    });
}

/// Found by `fuzz_target_gpt` (corpus file `state-first-lba-overflow.hex`): a first LBA whose
/// byte offset does not fit in 64 bits overflowed (a panic in a debug build; in release the
/// offset wrapped and could land inside the disk).
#[test]
fn a_state_partition_whose_byte_offset_does_not_fit_is_not_found() {
    let g = Geometry { sector: 512, sectors: 64 << 11 };
    let part = |first_lba: u64| gpt::Partition {
        type_guid: gpt::STATE_TYPE,
        unique: Guid([1; 16]),
        first_lba,
        last_lba: first_lba.wrapping_add(STATE_BYTES / 512 - 1),
        name: gpt::STATE_LABEL.into(),
    };
    // 2^55 + 2048 sectors of 512 bytes: 2^64 + 1 MiB, which wraps to 1 MiB.
    assert!(gpt::partition_extent(&part((1 << 55) + 2048), g).is_err());
    assert!(gpt::partition_extent(&part(u64::MAX), g).is_err());
    let x = gpt::partition_extent(&part(2048), g).unwrap();
    assert_eq!((x.offset, x.len), (1 << 20, STATE_BYTES));
}

/// The node identity file kept in the state (`state::identity::parse`): an accepted NodeID is
/// the canonical base62 of its 32 bytes, decodes back to them, and the file written for it
/// (`render`) parses to the same identity.
#[test]
fn fuzz_target_identity() {
    use crate::state::identity::{decode, encode, machine_id, parse, render};
    let seeds = vec![
        render(&encode(&[7; 32])).into_bytes(),
        b"# kept by keelson\nnodeId: \"0000zZ\"\n".to_vec(),
        render(&encode(&[0xff; 32])).into_bytes(),
    ];
    let target = Target {
        name: "identity",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[b"nodeId:", b"\"", b"0", b"z", b"\n", b" "],
            lengths: None,
            max_len: 512,
        },
        default_iters: 20_000,
    };
    run(target, |b| {
        let Some((id, raw)) = parse(&String::from_utf8_lossy(b)) else {
            return Ok(Verdict::Refused);
        };
        if decode(&id) != Some(raw) || encode(&raw) != id || id.len() > 64 {
            return Err(format!("NodeID {id:?} does not round-trip"));
        }
        if parse(&render(&id)) != Some((id.clone(), raw)) || machine_id(&raw).len() != 32 {
            return Err(format!("the file for {id:?} does not parse back"));
        }
        Ok(Verdict::Accepted)
    });
}
