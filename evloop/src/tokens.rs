// SPDX-License-Identifier: Apache-2.0
//! Epoll tokens: the loop hands each source a [`Tag`]; the source's fds are reported as
//! `tag.token(key)`, with keys of its own choosing. A token splits back into the source it
//! was handed to and the key, so no source picks numbers that another could also pick, and a
//! token no source was given is recognised as such instead of falling through to someone.

/// Bits of a token left to a source's keys; the tag sits above them.
pub const KEY_BITS: u32 = 48;
/// The largest key; [`Tag::token`] keeps keys within it.
pub const KEY_MASK: u64 = (1 << KEY_BITS) - 1;

/// The part of a token naming one source. Tag 0 is never handed out: tokens below
/// `1 << KEY_BITS` stay free for the reactor's own fds (its signalfd and timer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(u16);

impl Tag {
    /// The token for this source's fd `key` (keys wrap within [`KEY_MASK`]).
    pub const fn token(self, key: u64) -> u64 {
        ((self.0 as u64) << KEY_BITS) | (key & KEY_MASK)
    }

    /// Whether `token` was made by [`Tag::token`] of this tag.
    pub const fn owns(self, token: u64) -> bool {
        token >> KEY_BITS == self.0 as u64
    }

    /// The key inside `token`.
    pub const fn key(token: u64) -> u64 {
        token & KEY_MASK
    }
}

/// Every tag is taken (65,535 sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no epoll token left for another event source")]
pub struct Exhausted;

/// Hands out tags and says whose a token is. `S` names the sources (an enum of the loop's).
#[derive(Debug, Clone)]
pub struct Tokens<S> {
    owners: Vec<S>,
}

impl<S> Default for Tokens<S> {
    fn default() -> Self {
        Self { owners: Vec::new() }
    }
}

impl<S: Copy + PartialEq> Tokens<S> {
    /// No tags handed out yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The tag of `source`: new the first time, the same one after. An error once every tag
    /// is taken (65,535 sources; the node has about ten).
    pub fn tag(&mut self, source: S) -> Result<Tag, Exhausted> {
        if let Some(i) = self.owners.iter().position(|s| *s == source) {
            return Self::tag_at(i).ok_or(Exhausted);
        }
        let tag = Self::tag_at(self.owners.len()).ok_or(Exhausted)?;
        self.owners.push(source);
        Ok(tag)
    }

    /// Whose `token` is, and its key; `None` for a token no source was handed.
    pub fn owner(&self, token: u64) -> Option<(S, u64)> {
        let index = usize::try_from(token >> KEY_BITS).ok()?.checked_sub(1)?;
        self.owners.get(index).map(|s| (*s, Tag::key(token)))
    }

    fn tag_at(index: usize) -> Option<Tag> {
        u16::try_from(index.checked_add(1)?).ok().map(Tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Src {
        A,
        B,
        C,
    }

    #[test]
    fn each_source_gets_its_own_tag_and_tokens_split_back() {
        let mut t = Tokens::new();
        let a = t.tag(Src::A).unwrap();
        let b = t.tag(Src::B).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.tag(Src::A), Ok(a), "asking again gives the same tag");
        for key in [0, 1, 7, KEY_MASK] {
            assert_eq!(t.owner(a.token(key)), Some((Src::A, key)));
            assert_eq!(t.owner(b.token(key)), Some((Src::B, key)));
            assert!(a.owns(a.token(key)) && !b.owns(a.token(key)));
        }
        assert_ne!(a.token(0), b.token(0));
    }

    #[test]
    fn keys_never_reach_another_sources_tokens() {
        let mut t = Tokens::new();
        let a = t.tag(Src::A).unwrap();
        let _b = t.tag(Src::B).unwrap();
        // A key past the mask wraps inside A's space instead of becoming one of B's tokens.
        assert_eq!(t.owner(a.token(KEY_MASK + 1)), Some((Src::A, 0)));
        assert_eq!(t.owner(a.token(u64::MAX)), Some((Src::A, KEY_MASK)));
    }

    #[test]
    fn unknown_and_reactor_tokens_belong_to_nobody() {
        let mut t = Tokens::new();
        let a = t.tag(Src::A).unwrap();
        // The reactor's own tokens (0, 1) are below every tag.
        assert_eq!(t.owner(0), None);
        assert_eq!(t.owner(1), None);
        assert!(a.token(0) >= 1 << KEY_BITS);
        // A tag never handed out.
        assert_eq!(t.owner(a.token(0) + (3 << KEY_BITS)), None);
        assert_eq!(t.owner(u64::MAX), None);
        let c = t.tag(Src::C).unwrap();
        assert_eq!(t.owner(c.token(5)), Some((Src::C, 5)));
    }

    #[test]
    fn tags_run_out_without_panicking() {
        let mut t = Tokens::new();
        for i in 0..u16::MAX as u32 {
            assert!(t.tag(i).is_ok());
        }
        assert_eq!(t.tag(u32::from(u16::MAX)), Err(Exhausted));
    }
}
