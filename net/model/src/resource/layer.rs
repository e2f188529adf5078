// SPDX-License-Identifier: Apache-2.0
//! Configuration layers, what one layer of specs holds ([`LayerSpecs`], generated from the kind
//! table), and the IDs of layered and operator-emitted specs (docs/talos.md:
//! Resources and IDs).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a layered spec came from; a higher layer has priority (docs/talos.md: Resources and IDs).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ConfigLayer {
    /// Built-in defaults.
    #[default]
    Default,
    /// The kernel command line.
    Cmdline,
    /// Platform metadata.
    Platform,
    /// Operators (DHCP, VIP, KubeSpan).
    Operator,
    /// The machine configuration.
    Configuration,
}

impl ConfigLayer {
    /// The name used as an ID prefix in `network-config`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigLayer::Default => "default",
            ConfigLayer::Cmdline => "cmdline",
            ConfigLayer::Platform => "platform",
            ConfigLayer::Operator => "operator",
            ConfigLayer::Configuration => "configuration",
        }
    }
}

impl fmt::Display for ConfigLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `<layer>/<natural id>`: the ID of a layered spec in `network-config`.
pub fn layered_id(layer: ConfigLayer, natural: &str) -> String {
    [layer.as_str(), "/", natural].concat()
}

/// [`layered_id`] written into `out` (cleared first): a writer of many specs reuses one buffer.
pub fn layered_id_into(out: &mut String, layer: ConfigLayer, natural: &str) {
    out.clear();
    out.extend([layer.as_str(), "/", natural]);
}

/// `<operator id>/<natural id>`: the ID of a spec an operator emits.
pub fn operator_output_id(operator_id: &str, natural: &str) -> String {
    format!("{operator_id}/{natural}")
}

/// A spec that config sources write into `network-config` (a `layered(...)` row of the kind
/// table): it knows its natural ID and the layer it came from.
pub trait LayeredSpec {
    /// The ID this spec merges under in namespace `network`.
    fn natural_id(&self) -> String;
    /// The layer this spec came from.
    fn layer(&self) -> ConfigLayer;
}

/// Generates [`LayerSpecs`] from the `layered(...)` rows of the kind table.
macro_rules! layer_specs {
    ($( $(#[$m:meta])* $variant:ident($ty:ty) = $short:literal, $full:literal
        $(, layered($field:ident, $merge:path, $ctrl:literal))?
        $(, namespace($ns:ident))?
        $(, aliases($($alias:literal),+))? ; )*) => {
        /// The specs one configuration source produces for one layer, before IDs are assigned:
        /// one list per layered kind.
        ///
        /// Config controllers turn each entry into a `network-config` resource with the ID
        /// `<layer>/<natural id>` (`into_entries`, in `crate::kinds`).
        #[derive(Clone, PartialEq, Debug, Default)]
        pub struct LayerSpecs {
            $( $(
                #[doc = concat!("Every `", $short, "` of this layer.")]
                pub $field: Vec<$ty>,
            )? )*
        }
    };
}
crate::kind_table::kind_table!(layer_specs);
