// SPDX-License-Identifier: Apache-2.0
//! RFC 3339 timestamps, as resources show `created` and `updated`.

use std::fmt;
use std::time::SystemTime;

/// Formats a `SystemTime` as `2021-06-29T20:23:18Z` (UTC, whole seconds).
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub SystemTime);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        )
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
    }
}
