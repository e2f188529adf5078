// SPDX-License-Identifier: Apache-2.0
//! RFC 3339 timestamps, as resources show `created` and `updated`.

use std::fmt;
use std::time::SystemTime;

/// Formats a `SystemTime` as `2021-06-29T20:23:18Z` (UTC, whole seconds).
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub SystemTime);

impl Rfc3339 {
    /// Year, month, day, hour, minute, second (UTC).
    fn civil(&self) -> (i64, i64, i64, u64, u64, u64) {
        let secs = self.0.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let days = i64::try_from(secs / 86_400).unwrap_or(0);
        let rem = secs % 86_400;
        // Civil-from-days (H. Hinnant's algorithm), valid for the proleptic Gregorian calendar.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        (year, month, day, rem / 3600, (rem / 60) % 60, rem % 60)
    }

    /// The text as 20 bytes, for a year of four digits (any other year: `None`). A serializer
    /// takes it in one piece; through `Display`, serde_json escapes every formatted fragment
    /// on its own, which a large `-o json` listing pays once per timestamp.
    pub fn to_array(&self) -> Option<[u8; 20]> {
        let (year, month, day, hour, minute, second) = self.civil();
        let year = u16::try_from(year).ok().filter(|y| *y <= 9999)?;
        let mut out = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, value: u64, width: usize| {
            let mut v = value;
            for i in (at..at + width).rev() {
                if let Some(b) = out.get_mut(i) {
                    *b = b'0' + (v % 10) as u8;
                }
                v /= 10;
            }
        };
        put(0, u64::from(year), 4);
        for (at, value) in
            [(5, month as u64), (8, day as u64), (11, hour), (14, minute), (17, second)]
        {
            put(at, value, 2);
        }
        Some(out)
    }
}

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = self.to_array() {
            return f.write_str(std::str::from_utf8(&text).unwrap_or_default());
        }
        let (year, month, day, hour, minute, second) = self.civil();
        write!(f, "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_624_998_198);
        assert_eq!(Rfc3339(t).to_string(), "2021-06-29T20:23:18Z");
        assert_eq!(Rfc3339(SystemTime::UNIX_EPOCH).to_string(), "1970-01-01T00:00:00Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(Rfc3339(leap).to_string(), "2000-02-29T00:00:00Z");
        // Past four-digit years the text is still right, just not taken from the array.
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_800);
        assert_eq!(Rfc3339(far).to_array(), None);
        assert_eq!(Rfc3339(far).to_string(), "10000-01-01T00:00:00Z");
        let last = SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799);
        assert_eq!(Rfc3339(last).to_string(), "9999-12-31T23:59:59Z");
    }
}
