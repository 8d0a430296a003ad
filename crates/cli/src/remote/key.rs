//! `halite-key`: Salt's salt-key over halite's key directories. Works on
//! the files directly (the master need not run), then tells a running
//! master to reread them at once (and fire `salt/key`).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use halite_client::keys::{status_dir, KeyStore};
use halite_client::MasterConfig;
use halite_runners::wheel::{apply, fingers, glob_match, statuses_named};
use serde_json::{json, Value};

/// What `halite-key` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAction {
    /// `-L`/`-l`: list keys (of this status, or `all`).
    List(String),
    /// `-a`: accept the keys matching this glob.
    Accept(String),
    /// `-r`: reject the keys matching this glob.
    Reject(String),
    /// `-d`: delete the keys matching this glob.
    Delete(String),
    /// `-f`: print the fingerprints of the keys matching this glob.
    Finger(String),
}

/// The options that change how an action runs.
#[derive(Debug, Clone, Default)]
pub struct KeyOptions {
    /// `-y`: do not ask before changing keys.
    pub yes: bool,
    /// `--out json`: print JSON instead of text.
    pub json: bool,
    /// `--include-accepted`: `-a`/`-r` also act on accepted keys.
    pub include_accepted: bool,
    /// `--include-rejected`: `-a`/`-r` also act on rejected keys.
    pub include_rejected: bool,
    /// `--include-denied`: `-a`/`-r` also act on denied keys.
    pub include_denied: bool,
}

fn title(status: &str) -> &'static str {
    match status {
        "minions" => "Accepted Keys:",
        "minions_pre" => "Unaccepted Keys:",
        "minions_rejected" => "Rejected Keys:",
        "minions_denied" => "Denied Keys:",
        _ => "Local Keys:",
    }
}

/// Salt's `key` outputter: statuses sorted by directory name, ids sorted.
pub fn key_output(data: &BTreeMap<String, Value>) -> String {
    let mut lines = Vec::new();
    for (status, ids) in data {
        lines.push(title(status).to_string());
        match ids {
            Value::Array(items) => {
                let mut names: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                names.sort();
                lines.extend(names.into_iter().map(String::from));
            }
            Value::Object(map) => {
                for (id, finger) in map {
                    lines.push(format!("{id}:  {}", finger.as_str().unwrap_or_default()));
                }
            }
            _ => {}
        }
    }
    lines.join("\n")
}

/// Runs `action`, printing as salt-key does; returns the exit code.
pub fn run(
    cfg: &MasterConfig,
    action: &KeyAction,
    opts: &KeyOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let store = KeyStore::open(&cfg.pki_dir)?;
    let print = |out: &mut dyn Write, data: &BTreeMap<String, Value>| -> std::io::Result<()> {
        if opts.json {
            let obj: serde_json::Map<String, Value> =
                data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            writeln!(out, "{}", crate::output::json(&Value::Object(obj), 4))
        } else {
            writeln!(out, "{}", key_output(data))
        }
    };
    match action {
        KeyAction::List(which) => {
            let Some(statuses) = statuses_named(which) else {
                anyhow::bail!("unknown key list {which:?}; use acc, pre, un, rej, den or all");
            };
            let mut data = BTreeMap::new();
            for status in statuses {
                data.insert(status_dir(status).to_string(), json!(store.ids(status)?));
            }
            print(out, &data)?;
            Ok(0)
        }
        KeyAction::Finger(pattern) => {
            let mut data = BTreeMap::new();
            if pattern == "*" {
                if let Ok(key) = halite_proto::keyfile::read_public(&cfg.pki_dir.join("master.pub"))
                {
                    data.insert(
                        "local".to_string(),
                        json!({"master.pub": key.fingerprint()}),
                    );
                }
            }
            data.extend(fingers(&store, pattern)?);
            print(out, &data)?;
            Ok(0)
        }
        KeyAction::Accept(pattern) | KeyAction::Reject(pattern) | KeyAction::Delete(pattern) => {
            change(cfg, &store, action, pattern, opts, input, out)
        }
    }
}

fn change(
    cfg: &MasterConfig,
    store: &KeyStore,
    action: &KeyAction,
    pattern: &str,
    opts: &KeyOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let (verb, deleting) = match action {
        KeyAction::Accept(_) => ("accept", false),
        KeyAction::Reject(_) => ("reject", false),
        _ => ("delete", true),
    };
    let mut matched = glob_match(store, pattern)?;
    if !deleting {
        matched.retain(|dir, _| {
            dir == "minions_pre"
                || (dir == "minions" && opts.include_accepted && verb != "accept")
                || (dir == "minions_rejected" && opts.include_rejected && verb != "reject")
                || (dir == "minions_denied" && opts.include_denied)
        });
    }
    if matched.is_empty() {
        let mut statuses = vec!["unaccepted"];
        if opts.include_accepted {
            statuses.push("accepted");
        }
        if opts.include_rejected {
            statuses.push("rejected");
        }
        if opts.include_denied {
            statuses.push("denied");
        }
        let stat = match statuses.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => "unaccepted".to_string(),
        };
        writeln!(
            out,
            "The key glob '{pattern}' does not match any {stat} keys."
        )?;
        return Ok(0);
    }
    // Salt: `cmd.rstrip("e") + "ed"`.
    let done = format!("{}ed", verb.trim_end_matches('e'));
    writeln!(out, "The following keys are going to be {done}:")?;
    let shown: BTreeMap<String, Value> =
        matched.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    writeln!(out, "{}", key_output(&shown))?;
    if !opts.yes {
        write!(
            out,
            "{}",
            if deleting {
                "Proceed? [N/y] "
            } else {
                "Proceed? [n/Y] "
            }
        )?;
        out.flush()?;
        let mut answer = String::new();
        input.read_line(&mut answer)?;
        let answer = answer.trim().to_lowercase();
        let proceed = if answer.is_empty() {
            !deleting
        } else {
            answer.starts_with('y')
        };
        if !proceed {
            return Ok(0);
        }
    }
    // Tells a running master now; one that is down rereads the keys at start.
    for id in apply(cfg, store, verb, &matched)? {
        writeln!(out, "Key for minion {id} {done}.")?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::msg::KeyStatus;
    use halite_proto::Identity;

    fn setup() -> (tempfile::TempDir, MasterConfig, KeyStore) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = MasterConfig {
            pki_dir: dir.path().join("pki"),
            cachedir: dir.path().join("cache"),
            sock_dir: dir.path().join("sock"),
            ..MasterConfig::default()
        };
        let store = KeyStore::open(&cfg.pki_dir).unwrap();
        for id in ["web1", "web2", "db1"] {
            store
                .put(
                    KeyStatus::Pending,
                    id,
                    &Identity::generate().unwrap().public(),
                )
                .unwrap();
        }
        (dir, cfg, store)
    }

    fn run_text(cfg: &MasterConfig, action: KeyAction, opts: KeyOptions, input: &str) -> String {
        let mut out = Vec::new();
        run(cfg, &action, &opts, &mut input.as_bytes(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn accept_by_glob_prompts_and_lists_like_salt_key() {
        let (_d, cfg, store) = setup();
        let text = run_text(
            &cfg,
            KeyAction::Accept("web*".into()),
            KeyOptions::default(),
            "\n",
        );
        assert_eq!(
            text,
            "The following keys are going to be accepted:\nUnaccepted Keys:\nweb1\nweb2\nProceed? [n/Y] Key for minion web1 accepted.\nKey for minion web2 accepted.\n"
        );
        assert_eq!(store.ids(KeyStatus::Accepted).unwrap(), ["web1", "web2"]);
        let listing = run_text(
            &cfg,
            KeyAction::List("all".into()),
            KeyOptions::default(),
            "",
        );
        assert_eq!(
            listing,
            "Accepted Keys:\nweb1\nweb2\nDenied Keys:\nUnaccepted Keys:\ndb1\nRejected Keys:\n"
        );
    }

    #[test]
    fn delete_defaults_to_no_and_json_lists() {
        let (_d, cfg, store) = setup();
        let text = run_text(
            &cfg,
            KeyAction::Delete("db1".into()),
            KeyOptions::default(),
            "\n",
        );
        assert!(text.ends_with("Proceed? [N/y] "), "{text}");
        assert_eq!(store.ids(KeyStatus::Pending).unwrap().len(), 3);
        run_text(
            &cfg,
            KeyAction::Delete("db1".into()),
            KeyOptions {
                yes: true,
                ..Default::default()
            },
            "",
        );
        run_text(
            &cfg,
            KeyAction::Reject("web2".into()),
            KeyOptions {
                yes: true,
                ..Default::default()
            },
            "",
        );
        let json: Value = serde_json::from_str(&run_text(
            &cfg,
            KeyAction::List("all".into()),
            KeyOptions {
                json: true,
                ..Default::default()
            },
            "",
        ))
        .unwrap();
        assert_eq!(json["minions_pre"], json!(["web1"]));
        assert_eq!(json["minions_rejected"], json!(["web2"]));
        let none = run_text(
            &cfg,
            KeyAction::Accept("nosuch".into()),
            KeyOptions::default(),
            "",
        );
        assert_eq!(
            none,
            "The key glob 'nosuch' does not match any unaccepted keys.\n"
        );
    }
}
