//! `file.tidied`: removes what is old or large enough (and matches) under
//! a directory, walked bottom-up as Salt's `os.walk(topdown=False)`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use chrono::{Local, TimeZone};
use halite_state::{StateCall, StateError, StateResult, Value};
use regex::Regex;
use serde_json::json;

use super::{error, target_name};
use crate::exec::file as fexec;

/// Salt's `salt.utils.stringutils.human_to_bytes(size, handle_metric=True)`:
/// `"10M"` is 10 MiB, `"10MB"` 10 000 000 bytes, anything unreadable 0.
fn human_to_bytes(size: &str) -> u64 {
    let s = size.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = (&s[..split], s[split..].trim().to_lowercase());
    let value: f64 = match num.parse::<f64>() {
        Ok(v) => v,
        Err(_) => return 0,
    };
    let unit = if unit.is_empty() {
        "b".to_string()
    } else {
        unit
    };
    let prefixes = "kmgtpezy";
    let first = unit.chars().next().unwrap_or('b');
    let scaled = prefixes.contains(first);
    let metric = scaled && unit.len() == 2 && unit.ends_with('b');
    let binary =
        unit == "b" || scaled && (unit.len() == 1 || unit.len() == 3 && unit.ends_with("ib"));
    if !(metric || binary) {
        return 0;
    }
    let p = "bkmgtpezy".find(first).unwrap_or(0);
    let factor = if metric {
        10f64.powi(p as i32 * 3)
    } else {
        2f64.powi(p as i32 * 10)
    };
    (value * factor) as u64
}

/// Compiles Salt's `matches`/`exclude` regexes anchored at the start, as
/// Python's `re.match` applies them.
fn regexes(call: &StateCall<'_>, key: &str) -> Result<Vec<Regex>, StateError> {
    call.arg_list(key)
        .iter()
        .map(|v| {
            let pat = halite_salt_rules::pyfmt::python_str(v);
            Regex::new(&format!("^(?:{pat})")).map_err(|e| {
                StateError::BadArg(format!("Invalid regular expression {pat:?} in {key}: {e}"))
            })
        })
        .collect()
}

/// One entry found by the walk: its full path and its name in its directory.
struct Entry {
    path: String,
    name: String,
}

/// `os.walk(top, topdown=False)`: each directory's subdirectories first,
/// then the directory's own files and subdirectories (names sorted, where
/// Python takes the directory's order).
fn walk(dir: &Path, followlinks: bool, out: &mut Vec<Entry>) {
    let Ok(read) = fs::read_dir(dir) else {
        return;
    };
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for e in read.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if path.is_dir() {
            dirs.push((name, path));
        } else {
            files.push((name, path));
        }
    }
    files.sort();
    dirs.sort();
    for (_, path) in &dirs {
        let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if followlinks || !is_link {
            walk(path, followlinks, out);
        }
    }
    for (name, path) in files.into_iter().chain(dirs) {
        out.push(Entry {
            path: path.display().to_string(),
            name,
        });
    }
}

/// A non-negative integer argument (`age`), 0 when absent.
fn int_arg(call: &StateCall<'_>, key: &str) -> i64 {
    match call.arg(key) {
        Some(Value::Number(n)) => n
            .as_i64()
            .unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// `file.tidied`: see Salt's documentation; every argument is Salt's.
pub fn tidied(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(true));
    let mut operator = call
        .arg_str("age_size_logical_operator")?
        .unwrap_or_else(|| "OR".into())
        .to_uppercase();
    if operator != "AND" && operator != "OR" {
        tracing::warn!("Logical operator must be 'AND' or 'OR'. Defaulting to 'OR'...");
        operator = "OR".into();
    }
    let age_size_only = call
        .arg_str("age_size_only")?
        .filter(|s| !s.is_empty())
        .map(|s| s.to_lowercase())
        .filter(|s| {
            let ok = s == "age" || s == "size";
            if !ok {
                tracing::warn!("age_size_only parameter must be 'age' or 'size' if set. Defaulting to 'None'...");
            }
            ok
        });
    if !Path::new(&name).is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    if !Path::new(&name).is_dir() {
        return error(ret, format!("{name} does not exist or is not a directory."));
    }
    let time_comparison = call
        .arg_str("time_comparison")?
        .map(|s| s.to_lowercase())
        .filter(|s| ["atime", "ctime", "mtime"].contains(&s.as_str()))
        .unwrap_or_else(|| "atime".into());
    let size: u64 = match call.arg("size") {
        Some(Value::String(s)) => human_to_bytes(s),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        _ => 0,
    };
    let age = int_arg(call, "age");
    let matches = if call.arg("matches").is_some() {
        regexes(call, "matches")?
    } else {
        vec![Regex::new("^(?:.*)").map_err(|e| StateError::Other(e.to_string()))?]
    };
    let excludes = regexes(call, "exclude")?;
    let rmdirs = call.arg_bool("rmdirs", false);
    let rmlinks = call.arg_bool("rmlinks", true);
    let full_path_match = call.arg_bool("full_path_match", false);
    let today = Local::now().date_naive();

    let mut entries = Vec::new();
    walk(
        Path::new(&name),
        call.arg_bool("followlinks", false),
        &mut entries,
    );
    let mut todelete = Vec::new();
    for e in entries {
        let Ok(lmd) = fs::symlink_metadata(&e.path) else {
            continue;
        };
        let mut deleteme = true;
        let mut mysize = 0u64;
        let md = if lmd.file_type().is_symlink() {
            deleteme = rmlinks;
            lmd
        } else {
            if lmd.is_dir() {
                deleteme = rmdirs;
            } else {
                mysize = lmd.size();
            }
            lmd
        };
        let stamp = match time_comparison.as_str() {
            "ctime" => md.ctime(),
            "mtime" => md.mtime(),
            _ => md.atime(),
        };
        let day = Local
            .timestamp_opt(stamp, 0)
            .single()
            .map_or(today, |t| t.date_naive());
        let myage = (today - day).num_days().abs();
        let filename = if full_path_match { &e.path } else { &e.name };
        let compare = match age_size_only.as_deref() {
            Some("age") => myage >= age,
            Some(_) => mysize >= size,
            None if operator == "AND" => mysize >= size && myage >= age,
            None => mysize >= size || myage >= age,
        };
        let matched = matches.iter().any(|r| r.is_match(filename))
            && !excludes.iter().any(|r| r.is_match(filename));
        if compare && matched && deleteme {
            todelete.push(e.path);
        }
    }
    if todelete.is_empty() {
        ret.comment = format!("Nothing to remove from directory {name}");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("{name} is set for tidy");
        ret.changes.insert("removed".into(), json!(todelete));
        return Ok(ret);
    }
    let mut removed = Vec::new();
    for path in &todelete {
        if let Err(e) = fexec::remove(Path::new(path)) {
            ret.changes.insert("removed".into(), json!(removed));
            return error(ret, format!("Could not remove '{path}': {e}"));
        }
        removed.push(path.clone());
    }
    ret.changes.insert("removed".into(), json!(removed));
    ret.comment = format!(
        "Removed {} files or directories from directory {name}",
        todelete.len()
    );
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::human_to_bytes;

    #[test]
    fn human_to_bytes_is_salts_with_metric() {
        assert_eq!(human_to_bytes("10"), 10);
        assert_eq!(human_to_bytes("1K"), 1024);
        assert_eq!(human_to_bytes("1KiB"), 1024);
        assert_eq!(human_to_bytes("1kb"), 1000);
        assert_eq!(human_to_bytes("2 M"), 2 * 1024 * 1024);
        assert_eq!(human_to_bytes("1.5G"), 1_610_612_736);
        assert_eq!(human_to_bytes("lots"), 0);
        assert_eq!(human_to_bytes("3 parsecs"), 0);
    }
}
