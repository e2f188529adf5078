// SPDX-License-Identifier: Apache-2.0
//! Sets of spec IDs sized for a large apply: copied out of the store in one buffer, and
//! asked about in the store's (ascending) order.

/// IDs copied out of the store for the finalizer writes after a reconcile, in one buffer:
/// ten thousand `String`s are ten thousand allocations.
#[derive(Debug, Default)]
pub(crate) struct IdList {
    text: String,
    ends: Vec<usize>,
}

impl IdList {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).filter_map(|(a, b)| self.text.get(a..b))
    }
}

impl<S: AsRef<str>> FromIterator<S> for IdList {
    fn from_iter<I: IntoIterator<Item = S>>(ids: I) -> Self {
        let mut list = IdList::default();
        for id in ids {
            list.text.push_str(id.as_ref());
            list.ends.push(list.text.len());
        }
        list
    }
}

/// IDs in ascending order, asked about in ascending order too (both follow the store's
/// order): each question moves a cursor past the smaller IDs instead of searching again.
/// A question out of order is answered by a binary search.
#[derive(Debug)]
pub(crate) struct SortedIds<'a> {
    ids: Vec<&'a str>,
    /// Every ID before this one is smaller than the last question.
    at: usize,
}

impl<'a> SortedIds<'a> {
    pub(crate) fn new(mut ids: Vec<&'a str>) -> Self {
        if !ids.is_sorted() {
            crate::sort::by(&mut ids, |a, b| a.cmp(b));
        }
        Self { ids, at: 0 }
    }

    pub(crate) fn contains(&mut self, id: &str) -> bool {
        let behind = self.at.checked_sub(1).and_then(|i| self.ids.get(i));
        if behind.is_some_and(|b| *b >= id) {
            return self.ids.binary_search(&id).is_ok();
        }
        let rest = self.ids.get(self.at..).unwrap_or_default();
        self.at += rest.iter().take_while(|x| **x < id).count();
        self.ids.get(self.at) == Some(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_list_gives_back_its_ids_in_order() {
        let ids = ["b", "", "a/10.0.0.1//1024", "b"];
        let list: IdList = ids.iter().collect();
        assert_eq!(list.iter().collect::<Vec<_>>(), ids);
        assert_eq!(IdList::from_iter(Vec::<String>::new()).iter().count(), 0);
    }

    /// Asked in order or not, the answer is membership.
    #[test]
    fn sorted_ids_answer_membership_in_any_order() {
        let ids = ["a", "c", "c/1", "e", "g"];
        let asked = ["", "a", "b", "c", "c/1", "c/1", "d", "a", "e", "c", "f", "g", "h", "g"];
        let mut s = SortedIds::new(vec!["g", "c", "a", "e", "c/1"]);
        for q in asked {
            assert_eq!(s.contains(q), ids.contains(&q), "{q}");
        }
        let mut s = SortedIds::new(Vec::new());
        assert!(!s.contains("a") && !s.contains(""));
    }
}
