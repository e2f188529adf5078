// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the spec controllers.

use std::collections::{BTreeMap, BTreeSet};

use crate::host::{HostError, HostErrorKind};
use crate::resource::LinkStatus;
use crate::runtime::{ControllerError, Ctx, Next};

/// Find a link by exact name, then by alias, then by altname (TB §4.1).
pub(super) fn resolve_link<'a>(
    links: &'a [(String, LinkStatus)],
    name: &str,
) -> Option<(&'a str, &'a LinkStatus)> {
    links
        .iter()
        .find(|(n, _)| n == name)
        .or_else(|| links.iter().find(|(n, l)| l.answers_to(n, name)))
        .map(|(n, l)| (n.as_str(), l))
}

/// Reports specs waiting for a link: a condition on the controller and one log line each
/// time the set changes, not once per reconcile.
#[derive(Debug, Default)]
pub(super) struct WaitLog {
    last: BTreeSet<String>,
}

impl WaitLog {
    pub(super) fn report(&mut self, ctx: &mut Ctx<'_>, what: &str, waiting: &[String]) {
        let now: BTreeSet<String> = waiting.iter().cloned().collect();
        if now != self.last && !now.is_empty() {
            let list: Vec<&str> = now.iter().map(String::as_str).collect();
            // The link controller owns the warning for a missing link; addresses and routes
            // on it say so only at debug level, so one missing link is one console line.
            let level = if what == "link" { log::Level::Warn } else { log::Level::Debug };
            log::log!(target: ctx.name(), level, "waiting for link: {what} {}", list.join(", "));
        }
        ctx.set_condition((!now.is_empty()).then(|| {
            format!(
                "waiting for link: {what} {}",
                now.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }));
        self.last = now;
    }
}

/// Every item was attempted: log all failures but the first, and return the first (the
/// runtime logs it and retries with backoff).
pub(super) fn first_error(target: &str, errors: Vec<HostError>) -> Result<Next, ControllerError> {
    let mut errors = errors.into_iter();
    let first = errors.next();
    for e in errors {
        log::error!(target: target, "{e}");
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(Next::Idle),
    }
}

/// How many reconciles in a row may issue the very same operation before it is treated as a
/// kernel that does not keep what we ask (a diff that never settles).
pub(super) const REPEAT_LIMIT: u32 = 5;

/// Breaks apply loops that run through the kernel: each apply causes a netlink event, the
/// event wakes the controller, and a diff that never settles would apply again forever
/// (user-demands item 12). An operation that succeeded [`REPEAT_LIMIT`] reconciles in a row
/// is reported as an error, so the runtime backs off (at most one retry per
/// `BACKOFF_INITIAL`) and the log says which operation does not stick.
#[derive(Debug, Default)]
pub(super) struct RepeatGuard {
    counts: BTreeMap<String, u32>,
}

impl RepeatGuard {
    /// Record the operations that succeeded in this reconcile (by their text); returns an
    /// error for each one that hit the limit. Operations not issued this time start again.
    pub(super) fn check(&mut self, ops: impl Iterator<Item = String>) -> Vec<HostError> {
        let previous = std::mem::take(&mut self.counts);
        let mut errors = Vec::new();
        for op in ops {
            let n = previous.get(&op).copied().unwrap_or(0) + 1;
            if n >= REPEAT_LIMIT {
                errors.push(HostError {
                    message: format!(
                        "applied {n} times in a row but the kernel keeps reporting a difference"
                    ),
                    op: op.clone(),
                    kind: HostErrorKind::Invalid,
                });
            }
            self.counts.insert(op, n);
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_guard_trips_on_the_same_op_only() {
        let mut g = RepeatGuard::default();
        for _ in 0..REPEAT_LIMIT - 1 {
            assert!(g.check(["add a".to_owned()].into_iter()).is_empty());
        }
        let errs = g.check(["add a".to_owned(), "add b".to_owned()].into_iter());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].op, "add a");
        // Once the op is no longer issued, it starts from zero.
        assert!(g.check(std::iter::empty()).is_empty());
        assert!(g.check(["add a".to_owned()].into_iter()).is_empty());
    }
}
