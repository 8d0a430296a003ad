//! `locale.present`/`locale.system` and the locale execution functions on
//! this Debian host (root only): a locale is generated for real with
//! `locale-gen` and the system `LANG` set with `update-locale`; a guard
//! restores `/etc/locale.gen`, `/etc/default/locale` and deletes the
//! generated locale from the archive.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::process::Command;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

const LOCALE: &str = "fr_FR.UTF-8";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct Restore {
    locale_gen: Option<String>,
    default_locale: Option<String>,
    was_available: bool,
}

impl Drop for Restore {
    fn drop(&mut self) {
        for (path, text) in [
            ("/etc/locale.gen", &self.locale_gen),
            ("/etc/default/locale", &self.default_locale),
        ] {
            match text {
                Some(t) => {
                    let _ = std::fs::write(path, t);
                }
                None => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        if !self.was_available {
            let _ = Command::new("localedef")
                .args(["--delete-from-archive", "fr_FR.utf8"])
                .output();
        }
    }
}

fn host() -> Host {
    Host {
        opts: json!({}),
        grains: json!({"os": "Debian", "os_family": "Debian"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn state(host: &Host, fun: &str, name: &str, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("locale"));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    host.states
        .get("locale")
        .expect("locale states")
        .call(fun, &call)
        .unwrap_or_else(|e| panic!("locale.{fun}: {e}"))
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
fn locale_present_generates_and_system_sets_lang() {
    let has = |p: &str| halite_modules::grains::hw::which(p).is_some();
    if !is_root()
        || !has("locale-gen")
        || !has("update-locale")
        || !std::path::Path::new("/etc/locale.gen").exists()
        || std::path::Path::new("/run/systemd/system").is_dir()
    {
        println!(
            "skipped: needs root, locale-gen, update-locale, /etc/locale.gen, no running systemd"
        );
        return;
    }
    let host = host();
    let was_available = exec(&host, "locale.avail", vec![json!(LOCALE)]) == json!(true);
    let _restore = Restore {
        locale_gen: std::fs::read_to_string("/etc/locale.gen").ok(),
        default_locale: std::fs::read_to_string("/etc/default/locale").ok(),
        was_available,
    };
    if !was_available {
        let r = state(&host, "present", LOCALE, true);
        assert_eq!(
            (r.result, r.comment.as_str()),
            (None, "Locale fr_FR.UTF-8 needs to be generated")
        );
        let r = state(&host, "present", LOCALE, false);
        assert_eq!(r.result, Some(true), "{r:?}");
        assert_eq!(r.comment, "Generated locale fr_FR.UTF-8");
        assert_eq!(Value::Object(r.changes), json!({"locale": LOCALE}));
        assert!(std::fs::read_to_string("/etc/locale.gen")
            .expect("read")
            .lines()
            .any(|l| l == "fr_FR.UTF-8 UTF-8"));
        assert!(exec(&host, "locale.list_avail", vec![])
            .as_array()
            .is_some_and(|l| l.contains(&json!("fr_FR.utf8"))));
    }
    let r = state(&host, "present", LOCALE, false);
    assert_eq!(r.comment, "Locale fr_FR.UTF-8 is already present");
    let r = state(&host, "present", "xx_YY.UTF-8", false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "Failed to generate locale xx_YY.UTF-8")
    );

    let r = state(&host, "system", LOCALE, true);
    assert_eq!(r.comment, "System locale fr_FR.UTF-8 needs to be set");
    let r = state(&host, "system", LOCALE, false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert_eq!(r.comment, "Set system locale fr_FR.UTF-8");
    assert!(std::fs::read_to_string("/etc/default/locale")
        .expect("read")
        .contains("LANG=\"fr_FR.UTF-8\""));
    assert_eq!(exec(&host, "locale.get_locale", vec![]), json!(LOCALE));
    let r = state(&host, "system", LOCALE, false);
    assert_eq!(r.comment, "System locale fr_FR.UTF-8 already set");
}
