// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the spec controllers.

use std::collections::BTreeSet;

use crate::host::HostError;
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
