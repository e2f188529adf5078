// SPDX-License-Identifier: Apache-2.0
//! Stable sorting through one shared sort routine.
//!
//! `slice::sort_by` and friends are generic: every element type and every comparator gets its
//! own copy of the standard library's sort (about 4 KiB of code each, plus unwind tables), and
//! the static binary had some 35 of them. Here the elements stay where they are while one
//! non-generic routine sorts their indices through a `dyn` comparator; the per-type part is
//! only the final permutation. The order is exactly `sort_by`'s: stable, equal elements keep
//! their relative order. The cost is one index vector and an indirect call per comparison,
//! nothing next to what is sorted here (resources, names, addresses). [`into_map`] does the
//! same for `collect::<BTreeMap<_, _>>()`, which sorts too.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Two IDs in `str`'s order (lexicographic by byte), compared a word at a time: big-endian
/// words order as their bytes do. Resource IDs share long prefixes
/// (`inet4/10.0.0.1/10.100.3.7/32/1024`), and `str`'s own ordering calls `memcmp`, which
/// musl (the static binary's C library) runs one byte at a time.
pub fn ids(a: &str, b: &str) -> Ordering {
    let (mut ra, mut rb) = (a.as_bytes(), b.as_bytes());
    while let (Some((wa, ta)), Some((wb, tb))) =
        (ra.split_first_chunk::<8>(), rb.split_first_chunk::<8>())
    {
        let (x, y) = (u64::from_be_bytes(*wa), u64::from_be_bytes(*wb));
        if x != y {
            return x.cmp(&y);
        }
        (ra, rb) = (ta, tb);
    }
    for (x, y) in ra.iter().zip(rb) {
        if x != y {
            return x.cmp(y);
        }
    }
    ra.len().cmp(&rb.len())
}

/// Sorts `v` by `cmp`, stably, like `slice::sort_by`.
pub fn by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = {
        let items: &[T] = v;
        order(items.len(), &mut |a, b| match (items.get(a), items.get(b)) {
            (Some(x), Some(y)) => cmp(x, y),
            _ => Ordering::Equal,
        })
    };
    permute(v, order);
}

/// Sorts `v` by the key `key` gives each element, stably, like `slice::sort_by_key`.
pub fn by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    by(v, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `v` in ascending order, stably, like `slice::sort`.
pub fn ascending<T: Ord>(v: &mut [T]) {
    by(v, T::cmp);
}

/// Collects `(key, value)` pairs into a map, a later pair replacing an earlier one with an
/// equal key, as `collect::<BTreeMap<_, _>>()` does. By insertion: `collect` first sorts the
/// pairs, with one more copy of the standard library's sort for every pair type.
pub fn into_map<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        map.insert(k, v);
    }
    map
}

/// The stable order of `len` elements under `cmp` on their indices: the one instance of the
/// standard library's sort that every caller shares.
fn order(len: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Moves element `order[i]` to position `i` for every `i`, one cycle of the permutation at a
/// time; `order` marks what is in place by pointing each done slot at itself.
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    for start in 0..order.len() {
        let mut at = start;
        while let Some(slot) = order.get_mut(at) {
            let from = std::mem::replace(slot, at);
            if from == start || from == at || from >= v.len() || at >= v.len() {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random numbers (a 64-bit LCG), enough to shuffle test input.
    fn numbers(seed: u64, n: usize, modulo: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % modulo
            })
            .collect()
    }

    #[test]
    fn same_order_as_the_standard_stable_sort() {
        for (seed, n, modulo) in [(1, 0, 1), (2, 1, 5), (3, 2, 2), (4, 17, 4), (5, 300, 1000)] {
            for m in [modulo, 3] {
                // Pairs (key, original position): equal keys show whether the sort is stable.
                let input: Vec<(u64, usize)> =
                    numbers(seed, n, m).into_iter().enumerate().map(|(i, k)| (k, i)).collect();
                let mut want = input.clone();
                want.sort_by_key(|p| p.0);
                let mut got = input.clone();
                by_key(&mut got, |p| p.0);
                assert_eq!(got, want, "seed {seed} n {n} modulo {m}");
                let mut got = input.clone();
                by(&mut got, |a, b| b.0.cmp(&a.0));
                want.sort_by_key(|p| std::cmp::Reverse(p.0));
                assert_eq!(got, want, "descending, seed {seed} n {n} modulo {m}");
            }
        }
    }

    #[test]
    fn ascending_sorts_owned_values() {
        let mut names: Vec<String> =
            ["eth1", "bond0", "eth0", "eth1", "lo"].iter().map(|s| s.to_string()).collect();
        ascending(&mut names);
        assert_eq!(names, ["bond0", "eth0", "eth1", "eth1", "lo"]);
    }

    #[test]
    fn into_map_keeps_the_last_value_like_collect() {
        let pairs = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)];
        let want: BTreeMap<&str, i32> = pairs.iter().copied().collect();
        assert_eq!(into_map(pairs), want);
    }

    #[test]
    fn already_sorted_and_reversed_inputs() {
        let mut v: Vec<u32> = (0..50).collect();
        ascending(&mut v);
        assert_eq!(v, (0..50).collect::<Vec<_>>());
        let mut v: Vec<u32> = (0..50).rev().collect();
        ascending(&mut v);
        assert_eq!(v, (0..50).collect::<Vec<_>>());
    }
}
