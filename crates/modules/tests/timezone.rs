//! `timezone.system` and the timezone execution functions on this host
//! (root only): the zone is changed for real (`/etc/localtime`,
//! `/etc/timezone`) and a guard puts the host's zone back.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::PathBuf;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The host's zone files as they were, put back on drop.
struct Restore {
    link: Option<PathBuf>,
    timezone: Option<String>,
    adjtime: Option<String>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(target) = &self.link {
            let _ = std::fs::remove_file("/etc/localtime");
            let _ = std::os::unix::fs::symlink(target, "/etc/localtime");
        }
        match &self.timezone {
            Some(text) => {
                let _ = std::fs::write("/etc/timezone", text);
            }
            None => {
                let _ = std::fs::remove_file("/etc/timezone");
            }
        }
        match &self.adjtime {
            Some(text) => {
                let _ = std::fs::write("/etc/adjtime", text);
            }
            None => {
                let _ = std::fs::remove_file("/etc/adjtime");
            }
        }
    }
}

fn host() -> Host {
    common::host_with(json!({}), json!({"os_family": "Debian"}))
}

fn system(host: &Host, zone: &str, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("timezone"));
    chunk.insert("name".into(), json!(zone));
    chunk.insert("__id__".into(), json!(zone));
    chunk.insert("fun".into(), json!("system"));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    host.states
        .get("timezone")
        .expect("timezone states")
        .call("system", &call)
        .unwrap_or_else(|e| panic!("timezone.system: {e}"))
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>) -> Value {
    host.call(
        fun,
        &Args {
            positional,
            kwargs: Default::default(),
        },
    )
    .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

#[test]
fn timezone_system_sets_the_zone_and_the_host_zone_is_restored() {
    let Ok(link) = std::fs::read_link("/etc/localtime") else {
        println!("skipped: /etc/localtime is not a link to a zone");
        return;
    };
    if !is_root() || !std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists() {
        println!("skipped: needs root and tzdata");
        return;
    }
    let _restore = Restore {
        link: Some(link),
        timezone: std::fs::read_to_string("/etc/timezone").ok(),
        adjtime: std::fs::read_to_string("/etc/adjtime").ok(),
    };
    let host = host();
    let original = exec(&host, "timezone.get_zone", vec![]);
    let original = original.as_str().expect("a zone name").to_string();
    assert_eq!(
        exec(&host, "timezone.zone_compare", vec![json!(original)]),
        json!(true)
    );
    let r = system(&host, &original, false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert!(r
        .comment
        .starts_with(&format!("Timezone {original} already set")));
    assert!(r.changes.is_empty());

    let zone = if original == "America/New_York" {
        "Europe/Paris"
    } else {
        "America/New_York"
    };
    let r = system(&host, zone, true);
    assert_eq!(r.result, None);
    assert_eq!(r.comment, format!("Timezone {zone} needs to be set"));
    let r = system(&host, zone, false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert_eq!(r.comment, format!("Set timezone {zone}"));
    assert_eq!(Value::Object(r.changes), json!({"timezone": zone}));
    assert_eq!(exec(&host, "timezone.get_zone", vec![]), json!(zone));
    assert_eq!(
        std::fs::read_link("/etc/localtime").expect("link"),
        PathBuf::from(format!("/usr/share/zoneinfo/{zone}"))
    );
    assert_eq!(
        std::fs::read_to_string("/etc/timezone").expect("read"),
        format!("{zone}\n")
    );
    let offset = exec(&host, "timezone.get_offset", vec![]);
    assert!(offset.as_str().is_some_and(|o| o.len() == 5), "{offset:?}");

    let r = system(&host, "Nowhere/Land", false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Failed to set timezone: Zone does not exist: /usr/share/zoneinfo/Nowhere/Land"
    );
    let r = system(&host, &original, false);
    assert_eq!(r.comment, format!("Set timezone {original}"));
}
