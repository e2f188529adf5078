// SPDX-License-Identifier: Apache-2.0
//! Compressed kernel modules (`pid1::kofile::decompress_zstd_bounded`), as read from the
//! image: the zstd decoder is a crate, the bounds around it are ours.
//!
//! Oracles: no panic; an accepted file decompresses to at least one byte and never more than
//! the limit, whatever its frame header declares; the same input decodes the same way twice.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::pid1::kofile::decompress_zstd_bounded;
use crate::pid1::kofile::tests::{raw_frame, zstd_tool};

/// Small bounds, so a mutant that decodes to a lot costs little per iteration.
const LIMIT: u64 = 256 << 10;
const WINDOW: u64 = 1 << 20;

#[test]
fn fuzz_target_kofile() {
    // Something shaped like a module: an ELF header, repeats, a string table.
    let mut module = b"\x7fELF\x02\x01\x01\0".to_vec();
    for i in 0..2000u32 {
        module.extend_from_slice(&(i % 97).to_le_bytes());
    }
    module.extend_from_slice(b"\0.text\0.data\0.modinfo\0license=GPL\0name=virtio_net\0");
    let seeds = vec![
        zstd_tool(&module),
        raw_frame(&module, Some(module.len() as u32)),
        raw_frame(b"x", None),
    ];
    let target = Target {
        name: "kofile",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[
                b"\x28\xb5\x2f\xfd",
                b"\x50\x2a\x4d\x18",
                b"\xff\xff\xff\xff",
                b"\x00\x00\x00",
                b"\x01\x00\x00",
                b"\x06\x00\x00",
                b"\xf8",
            ],
            lengths: None,
            max_len: 16384,
        },
        default_iters: 20_000,
    };
    run(target, |b| {
        let Ok(out) = decompress_zstd_bounded(b, LIMIT, WINDOW) else {
            return Ok(Verdict::Refused);
        };
        if out.is_empty() || out.len() as u64 > LIMIT {
            return Err(format!("{} bytes decompressed (limit {LIMIT})", out.len()));
        }
        match decompress_zstd_bounded(b, LIMIT, WINDOW) {
            Ok(again) if again == out => Ok(Verdict::Accepted),
            other => {
                Err(format!("decoded differently the second time: {:?}", other.map(|v| v.len())))
            }
        }
    });
}
