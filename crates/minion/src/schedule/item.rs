//! One schedule item's settings, read as Salt 3008's scheduler reads
//! them, and when it fires next.

use chrono::{DateTime, Duration, Local, NaiveDateTime, TimeZone};
use halite_modules::schedule_time::{parse_cron, parse_when};
use serde_json::{Map, Value};

/// How an item is timed.
pub enum Timing {
    /// Every so many seconds (`seconds` + `minutes` + `hours` + `days`).
    Every(Duration),
    /// At the times of a cron expression.
    Cron(Box<halite_modules::schedule_time::CronSchedule>),
    /// At each of these `when` times (read again each time: `5:00pm` is today's).
    When(Vec<String>),
    /// Once, at this time (`once`, read with `once_fmt`).
    Once(NaiveDateTime),
}

/// Why an item cannot be scheduled (logged once per change of the item).
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// The item has no `function`.
    #[error("schedule item {0} has no function: add `function: mod.fun`")]
    NoFunction(String),
    /// The item names no time.
    #[error("schedule item {0} has no seconds, minutes, hours, days, when, cron or once: add one")]
    NoTiming(String),
    /// A time setting could not be read (the text says which).
    #[error("schedule item {name}: {what}")]
    Bad {
        /// The item's name.
        name: String,
        /// What is wrong and how to write it.
        what: String,
    },
}

/// A number of seconds from a YAML number or numeric string.
fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// The item's timing, or why it has none.
pub fn timing(name: &str, item: &Map<String, Value>) -> Result<Timing, ItemError> {
    let bad = |what: String| ItemError::Bad {
        name: name.to_string(),
        what,
    };
    let mut secs = 0.0;
    let mut any = false;
    for (key, unit) in [
        ("seconds", 1.0),
        ("minutes", 60.0),
        ("hours", 3600.0),
        ("days", 86400.0),
    ] {
        if let Some(v) = item.get(key) {
            let n = number(v).ok_or_else(|| bad(format!("{key} must be a number")))?;
            secs += n * unit;
            any = true;
        }
    }
    if any {
        if secs <= 0.0 {
            return Err(bad("the interval must be more than 0 seconds".into()));
        }
        return Ok(Timing::Every(Duration::milliseconds(
            (secs * 1000.0) as i64,
        )));
    }
    if let Some(expr) = item.get("cron").and_then(Value::as_str) {
        return parse_cron(expr)
            .map(|c| Timing::Cron(Box::new(c)))
            .map_err(|e| bad(format!("invalid cron string {expr}: {e}")));
    }
    if let Some(when) = item.get("when") {
        let whens: Vec<String> = match when {
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        let now = Local::now().naive_local();
        if let Some(w) = whens.iter().find(|w| parse_when(w, now).is_none()) {
            return Err(bad(format!(
                "\"when\" {w} is not a time halite reads (YYYY-MM-DD HH:MM[:SS], MM/DD/YYYY H:MMam, 17:00, 5:00pm, Monday 5:00pm)"
            )));
        }
        return Ok(Timing::When(whens));
    }
    if let Some(once) = item.get("once").and_then(Value::as_str) {
        let fmt = item
            .get("once_fmt")
            .and_then(Value::as_str)
            .unwrap_or("%Y-%m-%dT%H:%M:%S");
        return NaiveDateTime::parse_from_str(once, fmt)
            .map(Timing::Once)
            .map_err(|_| bad(format!("Date string could not be parsed: {once}, {fmt}")));
    }
    Err(ItemError::NoTiming(name.to_string()))
}

/// A local naive time as a local instant (the earliest when ambiguous).
pub fn local(t: NaiveDateTime) -> Option<DateTime<Local>> {
    Local.from_local_datetime(&t).earliest()
}

/// The next time after `now` an item of `timing` fires, given when it
/// last fired (`None`: never).
pub fn next_after(
    timing: &Timing,
    now: DateTime<Local>,
    last: Option<DateTime<Local>>,
) -> Option<DateTime<Local>> {
    match timing {
        Timing::Every(every) => Some(last.map_or(now + *every, |l| l + *every)),
        Timing::Cron(c) => c.after(&now).next(),
        Timing::When(whens) => whens
            .iter()
            .filter_map(|w| parse_when(w, now.naive_local()).and_then(local))
            .filter(|t| *t > now && last.is_none_or(|l| *t > l))
            .min(),
        Timing::Once(t) => local(*t).filter(|t| *t > now && last.is_none()),
    }
}

/// Whether one of the item's `key` entries (`skip_explicit`,
/// `run_explicit`: `[{time, time_fmt}]`, as `schedule.skip_job` and
/// `postpone_job` add them) names `now`, within `window` (one scheduler
/// check; Salt's `_handle_skip_explicit`/`_handle_run_explicit`). An entry
/// that does not parse is logged and matches nothing.
pub fn explicit_at(
    item: &Map<String, Value>,
    key: &str,
    now: DateTime<Local>,
    window: Duration,
) -> bool {
    let Some(Value::Array(entries)) = item.get(key) else {
        return false;
    };
    entries.iter().any(|entry| {
        let time = entry.get("time").and_then(Value::as_str).unwrap_or_default();
        let fmt = entry
            .get("time_fmt")
            .and_then(Value::as_str)
            .unwrap_or("%Y-%m-%dT%H:%M:%S");
        match NaiveDateTime::parse_from_str(time, fmt).ok().and_then(local) {
            Some(at) => at <= now && now < at + window,
            None => {
                tracing::warn!(%key, %time, %fmt, "a schedule item's {key} time does not parse; it is ignored");
                false
            }
        }
    })
}

/// Seconds of random delay before a run (`splay: N`, or `{start, end}`).
pub fn splay(item: &Map<String, Value>) -> Duration {
    let (start, end) = match item.get("splay") {
        Some(Value::Object(m)) => (
            m.get("start").and_then(number).unwrap_or(0.0),
            m.get("end").and_then(number).unwrap_or(0.0),
        ),
        Some(v) => (0.0, number(v).unwrap_or(0.0)),
        None => return Duration::zero(),
    };
    if end <= start {
        return Duration::seconds(start.max(0.0) as i64);
    }
    let span = ((end - start) * 1000.0) as u64;
    let r = halite_proto::crypto::random_u64().unwrap_or(0) % (span + 1);
    Duration::milliseconds((start * 1000.0) as i64 + r as i64)
}

/// Whether `now` lets the item run under its `range` (`start`, `end`,
/// `invert`): inside the range, or outside it when inverted.
pub fn in_range(item: &Map<String, Value>, now: DateTime<Local>) -> Result<bool, String> {
    let Some(range) = item.get("range") else {
        return Ok(true);
    };
    let Some(range) = range.as_object() else {
        return Err("range must be a dict with start and end".into());
    };
    let read = |k: &str| {
        range
            .get(k)
            .and_then(Value::as_str)
            .and_then(|s| parse_when(s, now.naive_local()))
            .and_then(local)
            .ok_or_else(|| format!("range {k} is missing or not a time halite reads"))
    };
    let (start, end) = (read("start")?, read("end")?);
    if end < start {
        return Err("range end must come after its start".into());
    }
    let inside = start <= now && now <= end;
    let invert = range.get("invert").is_some_and(halite_state::truthy);
    Ok(inside != invert)
}

/// A boolean setting with its default (Salt's truthiness).
pub fn flag(item: &Map<String, Value>, key: &str, default: bool) -> bool {
    item.get(key).map_or(default, halite_state::truthy)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    fn item(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn intervals_add_up_and_fire_after_the_last_run() {
        let i = item(json!({"function": "test.ping", "minutes": 1, "seconds": "30"}));
        let t = timing("a", &i).unwrap();
        let now = Local::now();
        assert_eq!(next_after(&t, now, None), Some(now + Duration::seconds(90)));
        assert_eq!(
            next_after(&t, now, Some(now)),
            Some(now + Duration::seconds(90))
        );
        assert!(matches!(
            timing("b", &item(json!({"function": "test.ping"}))),
            Err(ItemError::NoTiming(_))
        ));
        assert!(timing("c", &item(json!({"seconds": 0}))).is_err());
    }

    #[test]
    fn cron_and_once_and_range() {
        let now = Local::now();
        let t = timing("a", &item(json!({"cron": "* * * * *"}))).unwrap();
        let next = next_after(&t, now, None).unwrap();
        assert!(next > now && next <= now + Duration::seconds(60));
        let past = timing("b", &item(json!({"once": "2001-01-01T00:00:00"}))).unwrap();
        assert_eq!(next_after(&past, now, None), None);
        assert!(timing("c", &item(json!({"once": "tomorrow"}))).is_err());
        let always = item(json!({"range": {"start": "00:00", "end": "23:59:59"}}));
        let inverted =
            item(json!({"range": {"start": "00:00", "end": "23:59:59", "invert": true}}));
        assert_ne!(
            in_range(&always, now).unwrap(),
            in_range(&inverted, now).unwrap()
        );
        let at_noon = local(now.date_naive().and_hms_opt(12, 0, 0).unwrap()).unwrap();
        assert!(in_range(&always, at_noon).unwrap());
        let morning = item(json!({"range": {"start": "01:00", "end": "02:00"}}));
        assert!(!in_range(&morning, at_noon).unwrap());
        let s = splay(&item(json!({"splay": {"start": 2, "end": 4}})));
        assert!(s >= Duration::seconds(2) && s <= Duration::seconds(4));
    }
}
