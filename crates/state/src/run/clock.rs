//! Salt's clock in a state return: `start_time` as the local wall clock,
//! `duration` in milliseconds.

use std::time::Instant;

/// The local UTC offset, looked up once per process (the timezone does
/// not change during a run; chrono's lookup is the costly part).
pub(super) fn local_offset_secs() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| i64::from(chrono::Local::now().offset().local_minus_utc()))
}

/// Salt's `start_time`: local wall-clock time as `HH:MM:SS.ffffff`.
pub(super) fn now_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = (now.as_secs() as i64 + local_offset_secs()).rem_euclid(86_400) as u32;
    clock_text(secs, now.subsec_micros())
}

/// `HH:MM:SS.ffffff` of a second of the day and its microseconds, written
/// digit by digit (once per state: `format!` costs ten times as much).
pub(super) fn clock_text(secs: u32, micros: u32) -> String {
    let mut b = *b"00:00:00.000000";
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 2, secs / 3600);
    put(3, 2, secs / 60 % 60);
    put(6, 2, secs % 60);
    put(9, 6, micros);
    // ASCII digits and separators: always UTF-8.
    std::str::from_utf8(&b).unwrap_or_default().to_owned()
}

pub(super) fn ms_since(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::clock_text;

    #[test]
    fn clock_text_is_salts_start_time() {
        assert_eq!(clock_text(0, 0), "00:00:00.000000");
        assert_eq!(clock_text(13 * 3600 + 5 * 60 + 9, 42), "13:05:09.000042");
        assert_eq!(clock_text(86_399, 999_999), "23:59:59.999999");
    }
}
