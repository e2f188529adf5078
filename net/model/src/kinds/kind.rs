// SPDX-License-Identifier: Apache-2.0
//! What the kind table generates: [`Kind`], [`AnySpec`], the [`SpecType`] impls, the layered
//! kinds with their merges ([`visit_layered`]) and [`LayerSpecs::into_entries`].

use std::fmt;

use serde::{Serialize, Serializer};

use crate::merge::Merged;
use crate::resource::{ConfigLayer, LayerSpecs, LayeredSpec, Namespace};

/// A spec type that can live in the store.
pub trait SpecType: Clone + PartialEq + fmt::Debug + Into<AnySpec> + 'static {
    /// The kind tag.
    const KIND: Kind;
    /// Borrow this type out of an [`AnySpec`], if it is one.
    fn from_any(any: &AnySpec) -> Option<&Self>;
}

/// The pure merge of one layered kind (`crate::merge`).
pub type MergeFn<S> = fn(&[(&str, &S)]) -> Merged<S>;

/// Receives every layered kind, in table order, with its merge: how the runtime registers one
/// merge controller per layered kind without listing them.
pub trait LayeredKindVisitor {
    /// One layered kind `S`, its merge function and its merge controller's name.
    fn visit<S: SpecType + LayeredSpec>(&mut self, merge: MergeFn<S>, controller: &'static str);
}

macro_rules! kinds {
    ($( $(#[$m:meta])* $variant:ident($ty:ty) = $short:literal, $full:literal
        $(, layered($field:ident, $merge:path, $ctrl:literal))?
        $(, namespace($ns:ident))?
        $(, aliases($($alias:literal),+))? ; )*) => {
        /// Every resource kind.
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub enum Kind { $( $(#[$m])* $variant, )* }

        impl Kind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// The kinds config sources write into `network-config` and merge controllers fold
            /// into `network` (the `layered(...)` rows), in declaration order.
            pub const LAYERED: &'static [Kind] =
                &[$( $( $crate::kind_table::keep!($field; Kind::$variant), )? )*];

            /// The short type name shown in tables (`AddressSpec`).
            pub fn short_name(self) -> &'static str {
                match self { $( Kind::$variant => $short, )* }
            }

            /// The full type name shown in YAML (`AddressSpecs.net.keelson.dev`).
            pub fn type_name(self) -> &'static str {
                match self { $( Kind::$variant => $full, )* }
            }

            /// The namespace a kind lives in when none is given.
            pub fn default_namespace(self) -> Namespace {
                match self {
                    $( Kind::$variant => {
                        #[allow(unused_variables)]
                        let ns = Namespace::Network;
                        $( let ns = Namespace::$ns; )?
                        ns
                    } )*
                }
            }

            /// Names the CLI accepts beyond those derived from the type names (irregular
            /// plurals, Talos's own short names), lowercase.
            pub fn extra_aliases(self) -> &'static [&'static str] {
                match self { $( Kind::$variant => &[$($($alias),+)?], )* }
            }
        }

        /// One spec of any kind.
        ///
        /// Each spec is boxed: the variants differ a lot in size (a link spec is about a
        /// kilobyte, a route spec a tenth of that), and an unboxed enum would make every stored
        /// resource, and every slot of the store's B-tree nodes, as large as the largest.
        #[derive(Clone, PartialEq, Debug, Serialize)]
        #[serde(untagged)]
        pub enum AnySpec { $( $(#[$m])* $variant(Box<$ty>), )* }

        impl AnySpec {
            /// The kind of this spec.
            pub fn kind(&self) -> Kind {
                match self { $( AnySpec::$variant(_) => Kind::$variant, )* }
            }
        }

        $(
            impl From<$ty> for AnySpec {
                fn from(v: $ty) -> Self { AnySpec::$variant(Box::new(v)) }
            }
            impl SpecType for $ty {
                const KIND: Kind = Kind::$variant;
                fn from_any(any: &AnySpec) -> Option<&Self> {
                    match any { AnySpec::$variant(v) => Some(&**v), #[allow(unreachable_patterns)] _ => None }
                }
            }
        )*

        /// Calls `visitor` once per layered kind, in declaration order.
        pub fn visit_layered(visitor: &mut impl LayeredKindVisitor) {
            $( $( visitor.visit::<$ty>($merge, $ctrl); )? )*
        }

        impl LayerSpecs {
            /// Every spec with its natural ID and layer, in one list: what writers of a layer
            /// need.
            pub fn into_entries(self) -> Vec<(String, ConfigLayer, AnySpec)> {
                fn add<S: SpecType + LayeredSpec>(
                    out: &mut Vec<(String, ConfigLayer, AnySpec)>,
                    items: Vec<S>,
                ) {
                    out.extend(items.into_iter().map(|s| (s.natural_id(), s.layer(), s.into())));
                }
                let Self { $( $( $field, )? )* } = self;
                let mut out = Vec::with_capacity(0 $( $( + $field.len() )? )*);
                $( $( add(&mut out, $field); )? )*
                out
            }
        }
    };
}

crate::kind_table::kind_table!(kinds);

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.type_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{AddressSpec, HostnameSpec, ResolverSpec};

    #[test]
    fn spec_type_round_trip() {
        let spec = HostnameSpec {
            hostname: "a".into(),
            domainname: String::new(),
            layer: ConfigLayer::Default,
        };
        let any: AnySpec = spec.clone().into();
        assert_eq!(any.kind(), Kind::HostnameSpec);
        assert_eq!(HostnameSpec::from_any(&any), Some(&spec));
        assert_eq!(AddressSpec::from_any(&any), None);
    }

    /// The layered kinds, their order and their merge controllers' names, as they were
    /// registered by hand before the table derived them.
    #[test]
    fn layered_kinds_and_merges() {
        assert_eq!(
            Kind::LAYERED,
            [
                Kind::AddressSpec,
                Kind::RouteSpec,
                Kind::LinkSpec,
                Kind::ResolverSpec,
                Kind::HostnameSpec,
                Kind::TimeServerSpec,
                Kind::OperatorSpec,
                Kind::RoutingRuleSpec,
            ]
        );
        struct Names(Vec<(Kind, &'static str)>);
        impl LayeredKindVisitor for Names {
            fn visit<S: SpecType + LayeredSpec>(&mut self, _: MergeFn<S>, name: &'static str) {
                self.0.push((S::KIND, name));
            }
        }
        let mut names = Names(Vec::new());
        visit_layered(&mut names);
        assert_eq!(
            names.0,
            [
                (Kind::AddressSpec, "network.AddressMergeController"),
                (Kind::RouteSpec, "network.RouteMergeController"),
                (Kind::LinkSpec, "network.LinkMergeController"),
                (Kind::ResolverSpec, "network.ResolverMergeController"),
                (Kind::HostnameSpec, "network.HostnameMergeController"),
                (Kind::TimeServerSpec, "network.TimeServerMergeController"),
                (Kind::OperatorSpec, "network.OperatorMergeController"),
                (Kind::RoutingRuleSpec, "network.RoutingRuleMergeController"),
            ]
        );
    }

    /// Every layered spec leaves `LayerSpecs` under its natural ID and layer.
    #[test]
    fn layer_entries() {
        let hostname = HostnameSpec {
            hostname: "a".into(),
            domainname: String::new(),
            layer: ConfigLayer::Cmdline,
        };
        let specs = LayerSpecs {
            hostnames: vec![hostname.clone()],
            resolvers: vec![ResolverSpec { layer: ConfigLayer::Default, ..Default::default() }],
            ..LayerSpecs::default()
        };
        assert_eq!(
            specs.into_entries(),
            [
                (
                    "resolvers".to_owned(),
                    ConfigLayer::Default,
                    ResolverSpec { layer: ConfigLayer::Default, ..Default::default() }.into()
                ),
                ("hostname".to_owned(), ConfigLayer::Cmdline, hostname.into()),
            ]
        );
    }
}
