// SPDX-License-Identifier: Apache-2.0
//! Pure merge functions (placeholder until the merge work lands).
#![allow(missing_docs)]

use std::collections::BTreeMap;

use crate::resource::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Merged<S> {
    pub specs: BTreeMap<String, MergedSpec<S>>,
    pub warnings: Vec<String>,
}
#[derive(Debug, Clone, PartialEq)]
pub struct MergedSpec<S> {
    pub spec: S,
    pub provenance: Provenance,
}
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    pub fields: BTreeMap<&'static str, Vec<String>>,
}

macro_rules! placeholder {
    ($($f:ident: $t:ty),*) => {$(
        pub fn $f(_inputs: &[(&str, &$t)]) -> Merged<$t> { Merged { specs: BTreeMap::new(), warnings: vec![] } }
    )*};
}
placeholder!(merge_addresses: AddressSpec, merge_routes: RouteSpec, merge_links: LinkSpec, merge_resolvers: ResolverSpec,
    merge_hostnames: HostnameSpec, merge_time_servers: TimeServerSpec, merge_operators: OperatorSpec, merge_rules: RoutingRuleSpec);
