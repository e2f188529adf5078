// SPDX-License-Identifier: Apache-2.0
//! The well-known types Talos's messages use (`google/protobuf/{timestamp,duration,any,
//! empty}.proto`), with their field numbers; written here so the crate needs no
//! `prost-types`.

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The time `t` (clamped to the epoch when before it).
    pub fn from_system(t: std::time::SystemTime) -> Self {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Self {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }
    }
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Duration {
    /// As a std duration; `None` when negative or not normalised.
    pub fn to_std(self) -> Option<std::time::Duration> {
        let secs = u64::try_from(self.seconds).ok()?;
        let nanos = u32::try_from(self.nanos).ok().filter(|n| *n < 1_000_000_000)?;
        Some(std::time::Duration::new(secs, nanos))
    }
}

/// `google.protobuf.Any`: a message and the URL of its type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.protobuf.Empty`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_that_do_not_fit_are_refused() {
        assert_eq!(
            Duration { seconds: 2, nanos: 5 }.to_std(),
            Some(std::time::Duration::new(2, 5))
        );
        assert_eq!(Duration { seconds: -1, nanos: 0 }.to_std(), None);
        assert_eq!(Duration { seconds: 1, nanos: 1_000_000_000 }.to_std(), None);
    }
}
