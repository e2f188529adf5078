// SPDX-License-Identifier: Apache-2.0
//! Calls by method and status code, how long unary calls took, and configuration applies by
//! whether they changed the running configuration, for the node's metrics
//! (`keelson_api_requests_total`, `keelson_api_unary_seconds`, `keelson_config_applies_total`).
//! Labels come from fixed sets:
//! a method is one of the routed paths or `other`, a code one of gRPC's names, so the series
//! are bounded whatever clients send.

use std::collections::BTreeMap;
use std::sync::Mutex;

use base::metrics::Histogram;

/// The label of a method the node does not route.
pub const OTHER: &str = "other";

/// Upper bounds of the unary duration histogram, in seconds.
pub const DURATION_BOUNDS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

#[derive(Default)]
struct Table {
    calls: BTreeMap<(&'static str, &'static str), u64>,
    unary: BTreeMap<&'static str, Histogram>,
    applies: Applies,
}

/// Configuration applies (not dry runs) through the API: whether each changed the running
/// configuration. A manager that repeats an apply (a new leader redoing a step) shows up as
/// `unchanged`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applies {
    pub changed: u64,
    pub unchanged: u64,
}

/// Only the loop's thread counts and reads, so the lock is never contended; it makes the
/// table a plain static.
static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    let mut guard = TABLE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(guard.get_or_insert_with(Table::default))
}

/// A call to `method` (`None`: not routed) ended with `code`.
pub fn ended(method: Option<&'static str>, code: u32) {
    let name = match grpc::code_name(code) {
        "code" => "Unknown",
        n => n,
    };
    with(|t| *t.calls.entry((method.unwrap_or(OTHER), name)).or_default() += 1);
}

/// A unary call to `method` was answered `secs` after its head arrived.
pub fn unary(method: &'static str, secs: f64) {
    with(|t| {
        t.unary.entry(method).or_insert_with(|| Histogram::new(DURATION_BOUNDS)).observe(secs)
    });
}

/// A configuration apply went through; `changed`: the running configuration is another one now.
pub fn config_applied(changed: bool) {
    with(|t| {
        let n = if changed { &mut t.applies.changed } else { &mut t.applies.unchanged };
        *n = n.saturating_add(1);
    });
}

/// Calls by `(method, code, count)`.
pub type Calls = Vec<(&'static str, &'static str, u64)>;
/// Unary durations by method.
pub type Durations = Vec<(&'static str, Histogram)>;

/// What was counted so far.
pub fn snapshot() -> (Calls, Durations, Applies) {
    with(|t| {
        let calls = t.calls.iter().map(|((m, c), n)| (*m, *c, *n)).collect();
        let unary = t.unary.iter().map(|(m, h)| (*m, h.clone())).collect();
        (calls, unary, t.applies)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_under_fixed_labels() {
        ended(Some("/test.Stats/A"), 0);
        ended(Some("/test.Stats/A"), 0);
        ended(None, 12);
        ended(Some("/test.Stats/A"), 99);
        unary("/test.Stats/A", 0.002);
        config_applied(true);
        config_applied(false);
        config_applied(false);
        let (calls, unary, applies) = snapshot();
        // Other tests count too: at least these.
        assert!(applies.changed >= 1 && applies.unchanged >= 2, "{applies:?}");
        let n = |m: &str, c: &str| calls.iter().find(|x| x.0 == m && x.1 == c).map(|x| x.2);
        assert_eq!(n("/test.Stats/A", "OK"), Some(2));
        assert!(n(OTHER, "Unimplemented").is_some_and(|v| v >= 1));
        assert_eq!(n("/test.Stats/A", "Unknown"), Some(1));
        let h = unary.iter().find(|(m, _)| *m == "/test.Stats/A").map(|(_, h)| h.count());
        assert_eq!(h, Some(1));
    }
}
