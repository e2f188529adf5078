// SPDX-License-Identifier: Apache-2.0
//! The report of specs waiting for their link.

use std::collections::BTreeSet;

use crate::runtime::Ctx;

/// Reports specs waiting for a link: a condition on the controller and one log line each
/// time the set changes, not once per reconcile.
#[derive(Debug, Default)]
pub(crate) struct WaitLog {
    last: BTreeSet<String>,
}

impl WaitLog {
    pub(crate) fn report(&mut self, ctx: &mut Ctx<'_>, what: &str, waiting: &[impl AsRef<str>]) {
        let now: BTreeSet<String> = waiting.iter().map(|w| w.as_ref().to_owned()).collect();
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
