// SPDX-License-Identifier: Apache-2.0
//! One structured mutation fuzzer for every hand-written parser, run as a plain `cargo test` on
//! stable Rust (no `cargo fuzz`, no nightly): a target is a set of seeds (real encodings built
//! in code plus the files under `<crate>/fuzz-corpus/<target>/`), a [`Mutator`] that knows the
//! format's length fields and tokens, and an oracle that returns `Err` for a wrong answer.
//!
//! [`run`] first replays every corpus file (the regression inputs of past crashes), then
//! mutates seeds for `KEELSON_FUZZ_ITERS` iterations (the target's short default otherwise) or
//! `KEELSON_FUZZ_SECS` seconds, from the random seed `KEELSON_FUZZ_SEED` (a fixed default, so a
//! CI failure reproduces). The oracle runs under `catch_unwind`: a panic or an `Err` fails the
//! test with the target, the iteration, its seed and the input in hex; the hex goes into
//! `fuzz-corpus/<target>/` as a new file (see [`unhex`]) once the parser is fixed.
//!
//! Mutations: bit flips, interesting bytes and 16/32-bit integers (both byte orders),
//! truncation, length-field tweaks (the target says where its length fields are), splices with
//! another seed, random insertions, deletions, chunk duplication and dictionary tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

/// The default random seed: fixed, so a run without `KEELSON_FUZZ_SEED` is the CI run.
pub const DEFAULT_SEED: u64 = 0x6b65_656c_736f_6e21;

/// Mutants never grow past this many bytes (a mutator bug must not eat the machine).
pub const MAX_INPUT: usize = 1 << 20;

/// splitmix64: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True once in `n` draws.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// A length (or count) field in an input: its offset, width in bytes (1, 2, 3, 4 or 8) and
/// byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LenField {
    pub at: usize,
    pub width: usize,
    pub big_endian: bool,
}

impl LenField {
    pub fn be(at: usize, width: usize) -> Self {
        Self { at, width, big_endian: true }
    }

    pub fn le(at: usize, width: usize) -> Self {
        Self { at, width, big_endian: false }
    }

    fn get(&self, p: &[u8]) -> Option<u64> {
        let b = p.get(self.at..self.at + self.width)?;
        let mut v = 0u64;
        for i in 0..self.width {
            let byte = if self.big_endian { b[i] } else { b[self.width - 1 - i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    }

    fn set(&self, p: &mut [u8], v: u64) {
        let Some(b) = p.get_mut(self.at..self.at + self.width) else { return };
        for i in 0..self.width {
            let byte = (v >> (8 * i)) as u8;
            let at = if self.big_endian { self.width - 1 - i } else { i };
            b[at] = byte;
        }
    }
}

/// Finds the length fields of an input (best effort: it walks what it can and stops).
pub type LengthFields = fn(&[u8]) -> Vec<LenField>;

const INTERESTING8: [u8; 9] = [0, 1, 2, 0x0f, 0x10, 0x7f, 0x80, 0xfe, 0xff];
const INTERESTING32: [u32; 12] =
    [0, 1, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x1_0000, 0x7fff_ffff, 0xffff_ffff];

/// How to mutate one format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mutator<'a> {
    /// Tokens of the format (keywords, magic numbers, delimiters) inserted or overwritten.
    pub dict: &'a [&'a [u8]],
    /// Where the length fields are.
    pub lengths: Option<LengthFields>,
    /// Mutants are cut to this many bytes (0: [`MAX_INPUT`]).
    pub max_len: usize,
}

impl Mutator<'_> {
    /// One mutant of `base`: one to four stacked mutations; `corpus` feeds splices.
    pub fn mutate(&self, base: &[u8], corpus: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
        let mut p = base.to_vec();
        for _ in 0..1 + rng.below(4) {
            self.once(&mut p, corpus, rng);
        }
        let max = if self.max_len == 0 { MAX_INPUT } else { self.max_len };
        p.truncate(max);
        p
    }

    fn once(&self, p: &mut Vec<u8>, corpus: &[Vec<u8>], rng: &mut Rng) {
        if p.is_empty() {
            p.push(rng.next_u64() as u8);
        }
        match rng.below(12) {
            0 => {
                let i = rng.below(p.len());
                p[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(p.len());
                p[i] = INTERESTING8[rng.below(INTERESTING8.len())];
            }
            2 => {
                // An interesting 16- or 32-bit integer, either byte order.
                let v = u64::from(INTERESTING32[rng.below(INTERESTING32.len())]);
                let width = if rng.one_in(2) { 2 } else { 4 };
                let f = LenField { at: rng.below(p.len()), width, big_endian: rng.one_in(2) };
                if f.at + width <= p.len() {
                    f.set(p, v);
                }
            }
            3 => p.truncate(rng.below(p.len() + 1)),
            4 | 5 => {
                let fields = self.lengths.map(|f| f(p)).unwrap_or_default();
                if fields.is_empty() {
                    let i = rng.below(p.len());
                    p[i] = p[i].wrapping_add(1 + rng.below(3) as u8);
                    return;
                }
                let f = fields[rng.below(fields.len())];
                let old = f.get(p).unwrap_or(0);
                let new = match rng.below(7) {
                    0 => 0,
                    1 => old.wrapping_add(1),
                    2 => old.wrapping_sub(1),
                    3 => old.wrapping_add(1 + rng.below(16) as u64),
                    4 => old.wrapping_sub(1 + rng.below(16) as u64),
                    5 => u64::MAX,
                    _ => rng.next_u64(),
                };
                f.set(p, new);
            }
            6 => {
                if corpus.is_empty() {
                    return;
                }
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(p.len() + 1);
                let from = rng.below(other.len() + 1);
                p.truncate(cut);
                p.extend_from_slice(&other[from..]);
            }
            7 => {
                let at = rng.below(p.len() + 1);
                let n = 1 + rng.below(16);
                let junk = rng.bytes(n);
                p.splice(at..at, junk);
            }
            8 => {
                let at = rng.below(p.len());
                let n = 1 + rng.below(16.min(p.len() - at));
                p.drain(at..at + n);
            }
            9 => {
                let at = rng.below(p.len());
                let n = 1 + rng.below(64.min(p.len() - at));
                let chunk = p[at..at + n].to_vec();
                let to = rng.below(p.len() + 1);
                p.splice(to..to, chunk);
            }
            _ => {
                if self.dict.is_empty() {
                    let i = rng.below(p.len());
                    p[i] = rng.next_u64() as u8;
                    return;
                }
                let token = self.dict[rng.below(self.dict.len())];
                let at = rng.below(p.len() + 1);
                if rng.one_in(2) {
                    p.splice(at..at, token.iter().copied());
                } else {
                    let end = (at + token.len()).min(p.len());
                    p.splice(at..end, token.iter().copied());
                }
            }
        }
    }
}

/// The input in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Hex back to bytes; whitespace is ignored (corpus files may be hex text, see [`corpus`]).
pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

/// The files of `<crate_dir>/fuzz-corpus/<target>/`, sorted by name: `*.hex` files are hex
/// text (what a failure prints), any other file raw bytes. An absent directory is empty.
pub fn corpus(crate_dir: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(crate_dir).join("fuzz-corpus").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let raw = std::fs::read(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = if name.ends_with(".hex") {
                unhex(std::str::from_utf8(&raw).unwrap())
            } else {
                raw
            };
            (name, bytes)
        })
        .collect()
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// One target's definition.
#[derive(Debug)]
pub struct Target<'a> {
    /// Its name: the corpus directory and the name in reports.
    pub name: &'a str,
    /// `env!("CARGO_MANIFEST_DIR")` of the crate that holds the corpus.
    pub crate_dir: &'a str,
    /// Valid inputs built in code (the corpus files are added to them).
    pub seeds: Vec<Vec<u8>>,
    pub mutator: Mutator<'a>,
    /// Iterations of a plain `cargo test` (keep a debug build's run to a few seconds).
    pub default_iters: u64,
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub executions: u64,
    /// Inputs the oracle counted as accepted by the parser (see [`Verdict`]).
    pub accepted: u64,
    pub elapsed: Duration,
    pub seed: u64,
}

/// The oracle's answer for an input that passed its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The parser accepted the input (and the oracle checked what it made of it).
    Accepted,
    /// The parser refused the input cleanly.
    Refused,
}

fn failure(name: &str, what: &str, seed: u64, input: &[u8], why: &str) -> ! {
    panic!(
        "fuzz target {name}: {what} (KEELSON_FUZZ_SEED={seed:#x}): {why}\ninput ({} bytes): {}",
        input.len(),
        hex(input)
    )
}

fn check(
    name: &str,
    what: &str,
    seed: u64,
    input: &[u8],
    oracle: &mut dyn FnMut(&[u8]) -> Result<Verdict, String>,
) -> Verdict {
    match catch_unwind(AssertUnwindSafe(|| oracle(input))) {
        Ok(Ok(v)) => v,
        Ok(Err(why)) => failure(name, what, seed, input, &why),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            failure(name, what, seed, input, &format!("panicked: {msg}"))
        }
    }
}

/// Replay the corpus, then fuzz; panics (failing the test) on the first bad input.
pub fn run(t: Target<'_>, mut oracle: impl FnMut(&[u8]) -> Result<Verdict, String>) -> Stats {
    let seed = env_u64("KEELSON_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let secs = env_u64("KEELSON_FUZZ_SECS");
    let default = if secs.is_some() { u64::MAX } else { t.default_iters };
    let iters = env_u64("KEELSON_FUZZ_ITERS").unwrap_or(default);
    let deadline = secs.map(|s| Instant::now() + Duration::from_secs(s));
    let mut seeds = t.seeds;
    for (file, bytes) in corpus(t.crate_dir, t.name) {
        check(t.name, &format!("corpus file {file}"), seed, &bytes, &mut oracle);
        seeds.push(bytes);
    }
    for (i, s) in seeds.iter().enumerate() {
        check(t.name, &format!("seed {i}"), seed, s, &mut oracle);
    }
    assert!(!seeds.is_empty(), "fuzz target {}: no seeds", t.name);
    let mut rng = Rng(seed);
    let mut stats = Stats { executions: 0, accepted: 0, elapsed: Duration::ZERO, seed };
    let start = Instant::now();
    while stats.executions < iters {
        // The clock is read every 256 executions: cheap next to any parser.
        if stats.executions.is_multiple_of(256) && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let base = &seeds[rng.below(seeds.len())];
        let input = t.mutator.mutate(base, &seeds, &mut rng);
        let what = format!("iteration {}", stats.executions);
        if check(t.name, &what, seed, &input, &mut oracle) == Verdict::Accepted {
            stats.accepted += 1;
        }
        stats.executions += 1;
    }
    stats.elapsed = start.elapsed();
    let rate = stats.executions as f64 / stats.elapsed.as_secs_f64().max(1e-9);
    eprintln!(
        "fuzz {}: {} executions ({} accepted) in {:.2} s, {:.0}/s, KEELSON_FUZZ_SEED={:#x}",
        t.name,
        stats.executions,
        stats.accepted,
        stats.elapsed.as_secs_f64(),
        rate,
        seed
    );
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_deterministic_by_seed_and_differ_from_the_base() {
        let m =
            Mutator { dict: &[b"TOKEN"], lengths: Some(|_| vec![LenField::be(0, 2)]), max_len: 0 };
        let base = b"\x00\x05hello".to_vec();
        let corpus = vec![base.clone(), b"other seed".to_vec()];
        let run = |seed| {
            let mut rng = Rng(seed);
            (0..200).map(|_| m.mutate(&base, &corpus, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().filter(|p| **p != base).count() > 150);
    }

    #[test]
    fn length_fields_read_and_write_both_byte_orders() {
        let mut p = vec![0u8; 6];
        LenField::be(1, 2).set(&mut p, 0x1234);
        LenField::le(3, 3).set(&mut p, 0xabcdef);
        assert_eq!(p, [0, 0x12, 0x34, 0xef, 0xcd, 0xab]);
        assert_eq!(LenField::be(1, 2).get(&p), Some(0x1234));
        assert_eq!(LenField::le(3, 3).get(&p), Some(0xabcdef));
        assert_eq!(LenField::be(5, 2).get(&p), None);
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(b"\x00\xffab")), b"\x00\xffab");
        assert_eq!(unhex("00 ff\n61"), b"\x00\xffa");
    }

    #[test]
    fn a_panicking_parser_is_reported_with_its_input() {
        let r = catch_unwind(|| {
            run(
                Target {
                    name: "selftest",
                    crate_dir: "/nonexistent",
                    seeds: vec![b"abc".to_vec()],
                    mutator: Mutator::default(),
                    default_iters: 10_000,
                },
                |b| {
                    assert!(b.len() != 4, "four bytes");
                    Ok(Verdict::Refused)
                },
            )
        });
        let msg = r.err().and_then(|p| p.downcast_ref::<String>().cloned()).unwrap_or_default();
        assert!(msg.contains("fuzz target selftest: iteration"), "{msg}");
        assert!(msg.contains("panicked: four bytes"), "{msg}");
        assert!(msg.contains("input (4 bytes): "), "{msg}");
    }
}
