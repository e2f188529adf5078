// SPDX-License-Identifier: Apache-2.0
//! What the leader follows of one machine's node: the reconciler says which machines
//! ([`crate::reconcile::Reconciler::watches`]), [`crate::push`] holds their streams. Its own
//! module because both sides name it and the stream code calls the node client, which the
//! reconciler's trait is implemented by.

use std::sync::Arc;

/// What the leader follows for one machine.
#[derive(Debug, Clone)]
pub struct Watch {
    pub address: String,
    /// Past maintenance mode (`Installing` and later): the stream needs mutual TLS.
    pub configured: bool,
    /// The machine's client (its generated cluster's admin), else `serve`'s.
    pub client: Option<Arc<rustls::ClientConfig>>,
}

impl PartialEq for Watch {
    fn eq(&self, o: &Self) -> bool {
        let same_client = match (&self.client, &o.client) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.address == o.address && self.configured == o.configured && same_client
    }
}
