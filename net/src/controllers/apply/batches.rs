// SPDX-License-Identifier: Apache-2.0
//! Splitting a plan's operations into batches the kernel can take at once.

use std::collections::BTreeSet;

/// Splits `ops` into consecutive runs in which no object appears twice, in order: a run can
/// go to the kernel as one batch, and an object's later operation is only sent after its
/// earlier one has succeeded.
pub(crate) fn batches<S: AsRef<str>, T>(ops: &[(S, T)]) -> Vec<&[(S, T)]> {
    // In ID order, as the spec controllers plan, an ID can only repeat right after itself:
    // split there, without a set of the IDs seen.
    if ops.windows(2).all(|w| matches!(w, [a, b] if a.0.as_ref() <= b.0.as_ref())) {
        return ops.chunk_by(|a, b| a.0.as_ref() != b.0.as_ref()).collect();
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, (id, _)) in ops.iter().enumerate() {
        if !seen.insert(id.as_ref()) {
            out.push(ops.get(start..i).unwrap_or_default());
            start = i;
            seen.clear();
            seen.insert(id.as_ref());
        }
    }
    if start < ops.len() {
        out.push(ops.get(start..).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::batches;

    /// Sorted or not, each run holds an ID at most once and the runs keep the order.
    #[test]
    fn batches_of_sorted_ops_split_only_at_a_repeated_id() {
        let ops: Vec<(&str, u32)> =
            vec![("a", 1), ("a", 2), ("b", 3), ("c", 4), ("c", 5), ("c", 6)];
        let runs: Vec<Vec<u32>> =
            batches(&ops).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1], vec![2, 3, 4], vec![5], vec![6]]);
        let unsorted: Vec<(&str, u32)> = vec![("b", 1), ("a", 2), ("b", 3), ("a", 4)];
        let runs: Vec<Vec<u32>> =
            batches(&unsorted).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1, 2], vec![3, 4]]);
    }

    #[test]
    fn an_object_repeated_starts_a_new_batch_and_order_is_kept() {
        let ops: Vec<(String, u32)> = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5)]
            .map(|(i, v)| (i.to_owned(), v))
            .into();
        let runs: Vec<Vec<u32>> =
            batches(&ops).iter().map(|run| run.iter().map(|(_, v)| *v).collect()).collect();
        assert_eq!(runs, [vec![1, 2], vec![3, 4], vec![5]]);
        assert!(batches::<String, u32>(&[]).is_empty());
    }
}
