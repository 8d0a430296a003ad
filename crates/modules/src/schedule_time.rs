//! The times a schedule item names: `when` strings and `cron`
//! expressions, read as Salt 3008's scheduler reads them.
//!
//! Salt parses `when` with dateutil, which reads almost any wording.
//! halite reads the forms Salt's documentation uses that need no natural
//! language: `YYYY-MM-DD HH:MM[:SS]` (or with `T`), `MM/DD/YYYY H:MM[am|pm]`,
//! a time of day alone (`17:00`, `5:00pm`, `5pm`: today, as dateutil
//! fills the date with today's) and a weekday before a time (`Monday
//! 5:00pm`: the next such day, today included). `cron` is read by the
//! `cron` crate (well kept, the usual Rust choice): five fields as in a
//! crontab (Salt's croniter), or six/seven with seconds first.

/// A parsed cron expression (the `cron` crate's), for the scheduler.
pub use cron::Schedule as CronSchedule;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Weekday};

/// The date-and-time forms `when` may take.
const DATETIME_FORMATS: &[&str] = &[
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M",
    "%m/%d/%Y %I:%M%p",
    "%m/%d/%Y %I:%M %p",
    "%m/%d/%Y %H:%M",
    "%m/%d/%Y %H:%M:%S",
];

/// The time-of-day forms (today's date is added).
const TIME_FORMATS: &[&str] = &[
    "%H:%M:%S",
    "%H:%M",
    "%I:%M%p",
    "%I:%M %p",
    "%I:%M:%S%p",
    "%I%p",
    "%I %p",
];

/// A time of day in one of [`TIME_FORMATS`].
fn parse_time(text: &str) -> Option<NaiveTime> {
    let upper = text.trim().to_uppercase();
    TIME_FORMATS.iter().find_map(|f| {
        // chrono needs a minute for %I%p: add one.
        if *f == "%I%p" || *f == "%I %p" {
            let (h, rest) = upper.split_at(upper.find(|c: char| !c.is_ascii_digit())?);
            let with_minutes = format!("{h}:00{rest}");
            let f2 = if *f == "%I%p" { "%I:%M%p" } else { "%I:%M %p" };
            return NaiveTime::parse_from_str(&with_minutes, f2).ok();
        }
        NaiveTime::parse_from_str(&upper, f).ok()
    })
}

/// A weekday's English name or its three-letter abbreviation.
fn parse_weekday(word: &str) -> Option<Weekday> {
    let w = word.trim_end_matches(',').to_lowercase();
    let days = [
        ("mon", Weekday::Mon),
        ("tue", Weekday::Tue),
        ("wed", Weekday::Wed),
        ("thu", Weekday::Thu),
        ("fri", Weekday::Fri),
        ("sat", Weekday::Sat),
        ("sun", Weekday::Sun),
    ];
    days.iter()
        .find(|(abbr, _)| w.len() >= 3 && w.starts_with(abbr))
        .map(|(_, d)| *d)
}

/// `when` text as a local date and time relative to `now` (`None`: not a
/// form halite reads; Salt then says the item's `when` is invalid).
pub fn parse_when(text: &str, now: NaiveDateTime) -> Option<NaiveDateTime> {
    let text = text.trim();
    for f in DATETIME_FORMATS {
        if let Ok(t) = NaiveDateTime::parse_from_str(&text.to_uppercase(), f) {
            return Some(t);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0);
    }
    if let Some(t) = parse_time(text) {
        return Some(now.date().and_time(t));
    }
    let (first, rest) = text.split_once(char::is_whitespace)?;
    let day = parse_weekday(first)?;
    let time = parse_time(rest)?;
    let ahead = (7 + day.num_days_from_monday() - now.weekday().num_days_from_monday()) % 7;
    Some((now.date() + Duration::days(i64::from(ahead))).and_time(time))
}

/// A `cron` expression, five fields (a crontab's) or six/seven (seconds first).
pub fn parse_cron(expr: &str) -> Result<cron::Schedule, String> {
    let fields = expr.split_whitespace().count();
    let full = if fields == 5 {
        format!("0 {expr}")
    } else {
        expr.to_string()
    };
    full.parse::<cron::Schedule>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn when_reads_salts_documented_forms() {
        // A Thursday.
        let now = at("2026-11-26 10:00:00");
        assert_eq!(parse_when("5:00pm", now), Some(at("2026-11-26 17:00:00")));
        assert_eq!(parse_when("5pm", now), Some(at("2026-11-26 17:00:00")));
        assert_eq!(parse_when("17:30", now), Some(at("2026-11-26 17:30:00")));
        assert_eq!(
            parse_when("Monday 5:00pm", now),
            Some(at("2026-11-30 17:00:00"))
        );
        assert_eq!(
            parse_when("Thursday 3:00pm", now),
            Some(at("2026-11-26 15:00:00"))
        );
        assert_eq!(
            parse_when("11/26/2026 11:00am", now),
            Some(at("2026-11-26 11:00:00"))
        );
        assert_eq!(
            parse_when("2026-12-01 08:15", now),
            Some(at("2026-12-01 08:15:00"))
        );
        assert_eq!(parse_when("tomorrow at noon", now), None);
    }

    #[test]
    fn cron_takes_a_crontab_line_or_seconds_first() {
        assert!(parse_cron("*/5 * * * *").is_ok());
        assert!(parse_cron("*/10 * * * * *").is_ok());
        assert!(parse_cron("61 * * * *").is_err());
    }
}
