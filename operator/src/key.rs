// SPDX-License-Identifier: Apache-2.0
//! Where a resource lives in etcd, as cosi-project/state-etcd lays it out:
//! `<prefix>/<ns>/<type>/<hex(sha256(id ‖ salt))>`, the namespace and type path-escaped, the ID
//! hashed so that it never shows in a key (and any ID, whatever its bytes, makes one fixed-size
//! key segment). All resources of one type in one namespace share a range prefix, which is
//! what List and Watch read.

use sha2::{Digest, Sha256};

/// Path-escape one segment the way Go's `url.PathEscape` does: unreserved characters and
/// `$&+:=@` stay, everything else (`/` included) becomes `%XX`.
pub fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+:=@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The layout of one store.
#[derive(Debug, Clone)]
pub struct Layout {
    prefix: String,
    salt: Vec<u8>,
}

impl Layout {
    /// `prefix` without a trailing `/` (e.g. `/keelson-operator`).
    pub fn new(prefix: &str, salt: &[u8]) -> Self {
        Self { prefix: prefix.trim_end_matches('/').to_owned(), salt: salt.to_vec() }
    }

    /// `<prefix>/<ns>/<type>/`: every resource of a type in a namespace.
    pub fn kind_prefix(&self, ns: &str, kind: &str) -> Vec<u8> {
        format!("{}/{}/{}/", self.prefix, path_escape(ns), path_escape(kind)).into_bytes()
    }

    /// The key of one resource.
    pub fn key(&self, ns: &str, kind: &str, id: &str) -> Vec<u8> {
        let mut h = Sha256::new();
        h.update(id.as_bytes());
        h.update(&self.salt);
        let mut key = self.kind_prefix(ns, kind);
        for b in h.finalize() {
            key.extend_from_slice(format!("{b:02x}").as_bytes());
        }
        key
    }

    /// The prefix, for keys of the operator's own (its leader election).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_escaped_as_go_escapes_a_path_segment() {
        assert_eq!(path_escape("default"), "default");
        assert_eq!(path_escape("a/b c?d;e,f"), "a%2Fb%20c%3Fd%3Be%2Cf");
        assert_eq!(path_escape("Machines.omni.sidero.dev"), "Machines.omni.sidero.dev");
        assert_eq!(path_escape("x:y=z@w+$&"), "x:y=z@w+$&");
        assert_eq!(path_escape("é"), "%C3%A9");
    }

    #[test]
    fn keys_hide_ids_and_share_a_prefix_per_kind() {
        let l = Layout::new("/keelson-operator/", b"salt");
        let k = l.key("default", "Machines", "node/1");
        let p = l.kind_prefix("default", "Machines");
        assert!(k.starts_with(&p));
        assert_eq!(k.len(), p.len() + 64);
        assert!(!String::from_utf8(k.clone()).unwrap().contains("node"));
        assert_ne!(k, l.key("default", "Machines", "node/2"));
        assert_ne!(
            k,
            Layout::new("/keelson-operator", b"pepper").key("default", "Machines", "node/1")
        );
        // A namespace with a slash cannot reach into another kind's range.
        assert!(!l.key("a/b", "c", "x").starts_with(&l.kind_prefix("a", "b")));
        assert_eq!(p, b"/keelson-operator/default/Machines/");
    }
}
