//! Salt's `iptables` execution module: rules built from keyword arguments
//! (`build_rule`), checked (`-C`), appended, inserted and deleted, chains
//! created and removed, policies read and set, tables flushed, and the
//! running rules read (`get_rules`) or saved (`save`) through
//! `iptables-save`; `family=ipv6` drives `ip6tables`.
//!
//! Functions that fail return the command's error text, as Salt's do
//! (`append` returns a bool, `new_chain` `True` or the text).

use halite_state::{CmdOptions, Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "iptables",
    functions: &[
        ExecFunction::new("version", version_fn),
        ExecFunction::new("build_rule", build_rule_fn),
        ExecFunction::new("check", check_fn),
        ExecFunction::new("check_chain", check_chain_fn),
        ExecFunction::new("append", |a, h| add_fn(false, a, h)),
        ExecFunction::new("insert", |a, h| add_fn(true, a, h)),
        ExecFunction::new("delete", delete_fn),
        ExecFunction::new("new_chain", |a, h| chain_fn("-N", a, h)),
        ExecFunction::new("delete_chain", |a, h| chain_fn("-X", a, h)),
        ExecFunction::new("get_policy", get_policy_fn),
        ExecFunction::new("set_policy", set_policy_fn),
        ExecFunction::new("flush", flush_fn),
        ExecFunction::new("get_rules", get_rules_fn),
        ExecFunction::new("get_saved_rules", get_saved_rules_fn),
        ExecFunction::new("save", save_fn),
    ],
};

fn exec_err(msg: impl Into<String>) -> ExecError {
    ExecError::Execution(msg.into())
}

/// `ipv4` (iptables) or `ipv6` (ip6tables).
fn binary(family: &str) -> Result<String, ExecError> {
    let prog = if family == "ipv6" {
        "ip6tables"
    } else {
        "iptables"
    };
    crate::exec::cmd::which(prog).ok_or_else(|| {
        exec_err(format!(
            "{prog} is not installed: install the iptables package"
        ))
    })
}

/// A finished command: exit code, stdout, stderr.
struct Out {
    retcode: i32,
    stdout: String,
    stderr: String,
}

/// Runs a command line as Salt's `cmd.run_*` does without a shell (split
/// like a shell would, so a `--comment "a b"` stays one word).
fn run(cmd: &str) -> Result<Out, ExecError> {
    tracing::debug!(%cmd, "running");
    let out = crate::command::run_command(cmd, &CmdOptions::default())
        .map_err(|e| exec_err(format!("Unable to run {cmd}: {e}")))?;
    Ok(Out {
        retcode: out.retcode,
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// `--wait` when this iptables takes it (Salt's `_has_option`).
fn wait(family: &str) -> Result<&'static str, ExecError> {
    let help = run(&format!("{} --help", binary(family)?))?;
    Ok(if help.stdout.contains("--wait") {
        "--wait"
    } else {
        ""
    })
}

/// Python's `str()` of an argument.
fn text(v: &Value) -> String {
    halite_salt_rules::pyfmt::python_str(v)
}

/// Whether a key of a state chunk is Salt's bookkeeping, never a rule option.
fn internal(key: &str) -> bool {
    key.starts_with("__")
        || matches!(key, "name" | "state" | "chain" | "save" | "table" | "names")
        || halite_state::requisite::is_internal_keyword(key)
}

/// Salt's `(!|not)\s?` negation: `"! "` and the value without it.
fn negation(value: &str) -> (&'static str, String) {
    for prefix in ["!", "not"] {
        if let Some(rest) = value.strip_prefix(prefix) {
            let rest = rest.strip_prefix(char::is_whitespace).unwrap_or(rest);
            return ("! ", rest.to_string());
        }
    }
    ("", value.to_string())
}

/// Options that go after the jump target, in Salt's order (the target's
/// own options must follow `-j`).
const AFTER_JUMP: &[&str] = &[
    "j",
    "jump",
    "add-set",
    "and-mark",
    "and-tos",
    "checksum-fill",
    "clamp-mss-to-pmtu",
    "clustermac",
    "ctevents",
    "ctmask",
    "del-set",
    "ecn-tcp-remove",
    "exist",
    "expevents",
    "gateway",
    "hash-init",
    "hashmode",
    "helper",
    "label",
    "local-node",
    "log-ip-options",
    "log-level",
    "log-prefix",
    "log-tcp-options",
    "log-tcp-sequence",
    "log-uid",
    "map-set",
    "mask",
    "mss",
    "new",
    "nfmask",
    "nflog-group",
    "nflog-prefix",
    "nflog-range",
    "nflog-threshold",
    "nodst",
    "notrack",
    "on-ip",
    "on-port",
    "or-mark",
    "or-tos",
    "persistent",
    "queue-balance",
    "queue-bypass",
    "queue-num",
    "random",
    "random-fully",
    "rateest-ewmalog",
    "rateest-interval",
    "rateest-name",
    "reject-with",
    "restore",
    "restore-mark",
    "sack-perm",
    "save-mark",
    "selctx",
    "set-class",
    "set-dscp",
    "set-dscp-class",
    "set-mark",
    "set-mss",
    "set-tos",
    "set-xmark",
    "strip-options",
    "timeout",
    "timestamp",
    "to",
    "to-destination",
    "to-ports",
    "to-source",
    "total-nodes",
    "tproxy-mark",
    "ttl-dec",
    "ttl-inc",
    "ttl-set",
    "type",
    "ulog-cprange",
    "ulog-nlgroup",
    "ulog-prefix",
    "ulog-qthreshold",
    "wscale",
    "xor-mark",
    "xor-tos",
    "zone",
    "zone-orig",
    "zone-reply",
    "dst-pfx",
    "hl-dec",
    "hl-inc",
    "hl-set",
    "hmark-dport-mask",
    "hmark-dst-prefix",
    "hmark-mod",
    "hmark-offset",
    "hmark-proto-mask",
    "hmark-rnd",
    "hmark-spi-mask",
    "hmark-sport-mask",
    "hmark-src-prefix",
    "hmark-tuple",
    "led-always-blink",
    "led-delay",
    "led-trigger-id",
    "queue-cpu-fanout",
    "src-pfx",
    "to-port",
    "addr",
    "and-mask",
    "delude",
    "honeypot",
    "or-mask",
    "prefix",
    "reset",
    "reuse",
    "set-mac",
    "shift",
    "static",
    "tarpit",
    "tname",
    "ttl",
];

/// Salt's `iptables.build_rule` without `full`: the rule's options, from
/// the keyword arguments in the order given. `Err` holds Salt's
/// "Error: ..." text.
pub fn build_rule(kwargs: &Map) -> Result<String, String> {
    let mut kw: Map = kwargs
        .iter()
        .filter(|(k, _)| !internal(k))
        .filter(|(k, _)| !matches!(k.as_str(), "position" | "full" | "command" | "family"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(target) = kw.shift_remove("target") {
        kw.insert("jump".into(), target);
    }
    let mut rule: Vec<String> = Vec::new();
    let mut protocol = false;
    let take = |kw: &mut Map, key: &str| kw.shift_remove(key).map(|v| negation(&text(&v)));
    if let Some((neg, v)) = take(&mut kw, "if") {
        rule.push(format!("{neg}-i {v}"));
    }
    if let Some((neg, v)) = take(&mut kw, "of") {
        rule.push(format!("{neg}-o {v}"));
    }
    let policy_match = kw.get("match").map(text).as_deref() == Some("policy");
    if !policy_match {
        if let Some(proto) = kw.shift_remove("proto") {
            kw.insert("protocol".into(), proto);
        }
    }
    if let Some((neg, v)) = take(&mut kw, "protocol") {
        rule.push(format!("{neg}-p {v}"));
        protocol = true;
    }
    if let Some(m) = kw.shift_remove("match") {
        let matches: Vec<String> = match &m {
            Value::Array(items) => items.iter().map(text).collect(),
            other => text(other).split(',').map(str::to_string).collect(),
        };
        for one in matches {
            rule.push(format!("-m {one}"));
            if matches!(one.trim(), "pknock" | "quota2" | "recent") {
                if let Some(n) = kw.shift_remove("name_") {
                    rule.push(format!("--name {}", text(&n)));
                }
            }
        }
        if policy_match {
            if let Some((neg, v)) = take(&mut kw, "proto") {
                rule.push(format!("{neg}--proto {v}"));
            }
        }
    }
    if let Some(sets) = kw.shift_remove("match-set") {
        let sets: Vec<String> = match &sets {
            Value::Array(items) => items.iter().map(text).collect(),
            other => vec![text(other)],
        };
        for set in sets {
            let (neg, v) = negation(&set);
            rule.push(format!("-m set {neg}--match-set {v}"));
        }
    }
    if let Some((neg, v)) = take(&mut kw, "connstate") {
        if !rule.iter().any(|r| r == "-m state") {
            rule.push("-m state".into());
        }
        rule.push(format!("{neg}--state {v}"));
    }
    if let Some((neg, v)) = take(&mut kw, "dport") {
        rule.push(format!("{neg}--dport {v}"));
    }
    if let Some((neg, v)) = take(&mut kw, "sport") {
        rule.push(format!("{neg}--sport {v}"));
    }
    for multi in ["dports", "sports"] {
        let Some(value) = kw.shift_remove(multi) else {
            continue;
        };
        if !rule.iter().any(|r| r == "-m multiport") {
            rule.push("-m multiport".into());
            if !protocol {
                return Err("Error: protocol must be specified".into());
            }
        }
        let ports = match &value {
            Value::Array(items) => {
                let words: Vec<String> = items.iter().map(text).collect();
                if words
                    .iter()
                    .any(|w| w.starts_with('!') || w.starts_with("not"))
                {
                    rule.push("!".into());
                    words
                        .iter()
                        .map(|w| negation(w).1)
                        .collect::<Vec<_>>()
                        .join(",")
                } else {
                    words.join(",")
                }
            }
            other => {
                let (neg, v) = negation(&text(other));
                if !neg.is_empty() {
                    rule.push("!".into());
                }
                v
            }
        };
        rule.push(format!("--{multi} {ports}"));
    }
    if let Some(comment) = kw.shift_remove("comment") {
        if !rule.iter().any(|r| r == "-m comment") {
            rule.push("-m comment".into());
        }
        rule.push(format!("--comment \"{}\"", text(&comment)));
    }
    if kw.get("set").is_some_and(crate::exec::py_truth) {
        if let Some((neg, v)) = take(&mut kw, "set") {
            rule.push(format!("{neg}--match-set {v}"));
        }
    }
    let mut after_jump = Vec::new();
    for key in AFTER_JUMP {
        let Some(value) = kw.shift_remove(*key) else {
            continue;
        };
        let v = text(&value);
        if value.is_null() || v.is_empty() {
            after_jump.push(format!("--{key}"));
        } else if v.chars().any(char::is_whitespace) {
            after_jump.push(format!("--{key} \"{v}\""));
        } else {
            after_jump.push(format!("--{key} {v}"));
        }
    }
    for (key, value) in &kw {
        let (neg, v) = if value.is_null() {
            ("", String::new())
        } else {
            negation(&text(value))
        };
        let flag = if key.chars().count() == 1 { "-" } else { "--" };
        let v = if v.is_empty() { v } else { format!(" {v}") };
        rule.push(format!("{neg}{flag}{key}{v}"));
    }
    rule.extend(after_jump);
    Ok(rule.join(" "))
}

/// Salt's `build_rule(full=True)`: the whole command line, as the state
/// comments show it (`/usr/sbin/iptables --wait -t filter -A INPUT  -p ...`,
/// the double space where no position is given).
pub fn full_command(
    family: &str,
    table: &str,
    command: &str,
    chain: &str,
    position: &str,
    rule: &str,
) -> Result<String, ExecError> {
    let flag = if command.len() == 1 && "ACDIRLSFZNXPE".contains(command) {
        "-"
    } else {
        "--"
    };
    Ok(format!(
        "{} {} -t {table} {flag}{command} {chain} {position} {rule}",
        binary(family)?,
        wait(family)?
    ))
}

/// Salt's `iptables.check`: whether the rule is in the chain (`-C`).
pub fn check(table: &str, chain: &str, rule: &str, family: &str) -> Result<bool, ExecError> {
    let out = run(&format!("{} -t {table} -C {chain} {rule}", binary(family)?))?;
    Ok(out.retcode == 0)
}

/// Salt's `iptables.check_chain`: whether `iptables-save -t <table>`
/// lists the chain.
pub fn check_chain(table: &str, chain: &str, family: &str) -> Result<bool, ExecError> {
    let out = run(&format!("{}-save -t {table}", binary(family)?))?;
    Ok(out.stdout.contains(&format!(":{chain} ")))
}

/// Runs an iptables command and returns its stderr (Salt's
/// `cmd.run_stderr`): empty means it worked.
fn stderr_of(family: &str, rest: &str) -> Result<String, ExecError> {
    let cmd = format!("{} {} {rest}", binary(family)?, wait(family)?);
    Ok(run(&cmd)?.stderr)
}

/// Salt's `iptables.append`: true when the rule was added (false when
/// it was already there or iptables refused it).
pub fn append(table: &str, chain: &str, rule: &str, family: &str) -> Result<bool, ExecError> {
    if check(table, chain, rule, family)? {
        return Ok(false);
    }
    Ok(stderr_of(family, &format!("-t {table} -A {chain} {rule}"))?.is_empty())
}

/// Salt's `iptables.insert` at `position` (negative counts from the end):
/// iptables's error text, empty when inserted.
pub fn insert(
    table: &str,
    chain: &str,
    position: i64,
    rule: &str,
    family: &str,
) -> Result<String, ExecError> {
    let mut position = position;
    if position < 0 {
        let rules = get_rules(family)?;
        let size = rules
            .get(table)
            .and_then(|t| t.get(chain))
            .and_then(|c| c.get("rules"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        position = (i64::try_from(size).unwrap_or(i64::MAX) + position + 1).max(1);
    }
    if check(table, chain, rule, family)? {
        return Ok(String::new());
    }
    stderr_of(family, &format!("-t {table} -I {chain} {position} {rule}"))
}

/// Salt's `iptables.delete` of a rule or of the rule at a position:
/// iptables's error text, empty when deleted.
pub fn delete(table: &str, chain: &str, what: &str, family: &str) -> Result<String, ExecError> {
    stderr_of(family, &format!("-t {table} -D {chain} {what}"))
}

/// Salt's `iptables.flush` of a chain (every chain when empty).
pub fn flush(table: &str, chain: &str, family: &str) -> Result<String, ExecError> {
    stderr_of(family, &format!("-t {table} -F {chain}"))
}

/// Salt's `new_chain` (`-N`) and `delete_chain` (`-X`): `None` when it
/// worked, else iptables's error text.
pub fn chain_op(
    op: &str,
    table: &str,
    chain: &str,
    family: &str,
) -> Result<Option<String>, ExecError> {
    let err = stderr_of(family, &format!("-t {table} {op} {chain}"))?;
    Ok((!err.is_empty()).then_some(err))
}

/// Salt's `iptables.set_policy`: iptables's error text, empty when set.
pub fn set_policy(
    table: &str,
    chain: &str,
    policy: &str,
    family: &str,
) -> Result<String, ExecError> {
    stderr_of(family, &format!("-t {table} -P {chain} {policy}"))
}

/// Salt's `iptables.get_policy`.
pub fn get_policy(table: &str, chain: &str, family: &str) -> Result<Option<String>, ExecError> {
    let rules = get_rules(family)?;
    Ok(rules
        .get(table)
        .and_then(|t| t.get(chain))
        .and_then(|c| c.get("policy"))
        .and_then(Value::as_str)
        .map(str::to_string))
}

/// Salt's `iptables.get_rules`: the running rules, per table and chain.
pub fn get_rules(family: &str) -> Result<Value, ExecError> {
    let out = run(&format!("{}-save", binary(family)?))?;
    Ok(parse_save(&out.stdout))
}

/// The long option name `iptables-save` abbreviates with one letter, as
/// Salt's parser names its keys.
fn long_name(flag: &str) -> &str {
    match flag {
        "-s" => "source",
        "-d" => "destination",
        "-p" => "protocol",
        "-i" => "in-interface",
        "-o" => "out-interface",
        "-j" => "jump",
        "-g" => "goto",
        "-m" => "match",
        "-f" => "fragment",
        "-A" => "append",
        other => other.trim_start_matches('-'),
    }
}

/// Salt's `_parse_conf` of `iptables-save` text: for each `*table`, each
/// chain's `policy`, `packet count`, `byte count`, and its `rules`, each
/// a map of option to the list of its values (`!` kept in front).
pub fn parse_save(text: &str) -> Value {
    let mut ret = Map::new();
    let mut table = String::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_string();
            ret.insert(table.clone(), Value::Object(Map::new()));
        } else if let Some(rest) = line.strip_prefix(':') {
            let comps: Vec<&str> = rest.split_whitespace().collect();
            let (Some(chain), Some(policy)) = (comps.first(), comps.get(1)) else {
                continue;
            };
            let counters = comps.get(2).unwrap_or(&"[0:0]").trim_matches(['[', ']']);
            let (p, b) = counters.split_once(':').unwrap_or(("0", "0"));
            let mut c = Map::new();
            c.insert("policy".into(), Value::from(*policy));
            c.insert("packet count".into(), Value::from(p));
            c.insert("byte count".into(), Value::from(b));
            c.insert("rules".into(), Value::Array(Vec::new()));
            c.insert("rules_comment".into(), Value::Object(Map::new()));
            if let Some(Value::Object(t)) = ret.get_mut(&table) {
                t.insert(chain.to_string(), Value::Object(c));
            }
        } else if line.starts_with("-A") {
            let words = crate::command::shell_words(line);
            let mut parsed = Map::new();
            let mut chain = String::new();
            let mut i = 0;
            let mut negate = false;
            while i < words.len() {
                let w = &words[i];
                if w == "!" {
                    negate = true;
                    i += 1;
                    continue;
                }
                if w.starts_with('-') {
                    let key = long_name(w).to_string();
                    let mut vals = Vec::new();
                    while i + 1 < words.len()
                        && !words[i + 1].starts_with('-')
                        && words[i + 1] != "!"
                    {
                        vals.push(words[i + 1].clone());
                        i += 1;
                    }
                    let mut v = vals.join(" ");
                    if negate {
                        v = format!("! {v}");
                        negate = false;
                    }
                    if key == "append" {
                        chain = v;
                    } else if let Some(Value::Array(list)) = parsed.get_mut(&key) {
                        list.push(Value::from(v));
                    } else {
                        parsed.insert(key, Value::Array(vec![Value::from(v)]));
                    }
                }
                i += 1;
            }
            let comment = parsed
                .get("comment")
                .and_then(|c| c.get(0))
                .and_then(Value::as_str)
                .map(|c| c.trim_matches('"').to_string());
            if let Some(Value::Object(c)) = ret.get_mut(&table).and_then(|t| t.get_mut(&chain)) {
                if let (Some(comment), Some(Value::Object(rc))) =
                    (comment, c.get_mut("rules_comment"))
                {
                    rc.insert(comment, Value::Object(parsed.clone()));
                }
                if let Some(Value::Array(rules)) = c.get_mut("rules") {
                    rules.push(Value::Object(parsed));
                }
            }
        }
    }
    Value::Object(ret)
}

/// Salt's `_conf`: where `save` writes by default on this OS family.
fn default_conf(grains: &Value, family: &str) -> Result<String, ExecError> {
    let os_family = grains
        .get("os_family")
        .and_then(Value::as_str)
        .unwrap_or("");
    let v6 = family == "ipv6";
    let path = match os_family {
        "RedHat" if v6 => "/etc/sysconfig/ip6tables",
        "RedHat" => "/etc/sysconfig/iptables",
        "Arch" | "Void" if v6 => "/etc/iptables/ip6tables.rules",
        "Arch" | "Void" => "/etc/iptables/iptables.rules",
        "Debian" if v6 => "/etc/iptables/rules.v6",
        "Debian" => "/etc/iptables/rules.v4",
        _ => {
            let os = grains
                .get("os")
                .and_then(Value::as_str)
                .unwrap_or(os_family);
            return Err(exec_err(format!(
                "Saving iptables to file is not supported on {os}. Pass filename= (or save: <file> in the state)"
            )));
        }
    };
    Ok(path.to_string())
}

/// Salt's `iptables.save`: `iptables-save` written to `filename` (the
/// OS's rules file by default), minus the lines matching the
/// `iptables.save_filters` regexes of the config.
pub fn save(host: &Host, filename: Option<&str>, family: &str) -> Result<String, ExecError> {
    let filename = match filename {
        Some(f) => f.to_string(),
        None => default_conf(&host.grains, family)?,
    };
    if let Some(parent) = std::path::Path::new(&filename).parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| exec_err(format!("Unable to create {}: {e}", parent.display())))?;
    }
    let mut out = run(&format!("{}-save", binary(family)?))?.stdout;
    let option = Args {
        positional: vec![Value::from("iptables.save_filters")],
        kwargs: Map::new(),
    };
    let filters: Vec<regex::Regex> = host
        .call("config.option", &option)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            let p = text(p);
            regex::Regex::new(&p)
                .map_err(|e| tracing::warn!("Skipping regex rule: '{p}': {e}"))
                .ok()
        })
        .collect();
    if !filters.is_empty() {
        out = out
            .split_inclusive('\n')
            .filter(|l| !filters.iter().any(|r| r.is_match(l)))
            .collect();
    }
    std::fs::write(&filename, format!("{out}\n"))
        .map_err(|e| exec_err(format!("Unable to write {filename}: {e}")))?;
    // Salt's `file.write` counts its arguments, not the lines: always 1.
    Ok(format!("Wrote 1 lines to \"{filename}\""))
}

// ---- the rows: arguments as Salt binds them -------------------------

fn family_of(args: &Args, i: usize) -> String {
    args.get_str(i, "family").unwrap_or_else(|| "ipv4".into())
}

fn table_of(args: &Args, i: usize) -> String {
    args.get_str(i, "table").unwrap_or_else(|| "filter".into())
}

fn need_chain(args: &Args, i: usize) -> Option<String> {
    args.get_str(i, "chain").filter(|c| !c.is_empty())
}

const NO_CHAIN: &str = "Error: Chain needs to be specified";

/// Under `test=True` a function that would change the firewall says so
/// instead (Salt runs it anyway; halite's dispatch probe calls every
/// function with no arguments, which for `flush` means every chain).
fn dry(host: &Host, what: &str) -> Option<Value> {
    host.test_mode()
        .then(|| Value::from(format!("test=True: would run iptables {what}")))
}

fn version_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let out = run(&format!("{} --version", binary(&family_of(args, 0))?))?;
    Ok(Value::from(
        out.stdout.split_whitespace().nth(1).unwrap_or_default(),
    ))
}

fn build_rule_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut kw = args.kwargs.clone();
    for (i, key) in ["table", "chain", "command", "position", "full", "family"]
        .iter()
        .enumerate()
    {
        if let Some(v) = args.positional.get(i) {
            kw.insert((*key).into(), v.clone());
        }
    }
    let rule = match build_rule(&kw) {
        Ok(r) => r,
        Err(e) => return Ok(Value::from(e)),
    };
    if !kw.get("full").is_some_and(crate::exec::py_truth) {
        return Ok(Value::from(rule));
    }
    let get = |k: &str| kw.get(k).map(text).filter(|s| !s.is_empty());
    // An explicitly empty table is Salt's error; absent means `filter`.
    let table = match kw.get("table") {
        None => "filter".to_string(),
        Some(_) => match get("table") {
            Some(t) => t,
            None => return Ok(Value::from("Error: Table needs to be specified")),
        },
    };
    let Some(chain) = get("chain") else {
        return Ok(Value::from(NO_CHAIN));
    };
    let Some(command) = get("command") else {
        return Ok(Value::from("Error: Command needs to be specified"));
    };
    let family = get("family").unwrap_or_else(|| "ipv4".into());
    let position = get("position").unwrap_or_default();
    Ok(Value::from(full_command(
        &family, &table, &command, &chain, &position, &rule,
    )?))
}

fn check_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    let Some(rule) = args.get_str(2, "rule").filter(|r| !r.is_empty()) else {
        return Ok(Value::from("Error: Rule needs to be specified"));
    };
    Ok(Value::Bool(check(
        &table_of(args, 0),
        &chain,
        &rule,
        &family_of(args, 3),
    )?))
}

fn check_chain_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    Ok(Value::Bool(check_chain(
        &table_of(args, 0),
        &chain,
        &family_of(args, 2),
    )?))
}

/// `append table chain rule family` / `insert table chain position rule family`.
fn add_fn(insert_at: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    let shift = usize::from(insert_at);
    let position = args.get(2, "position").filter(|_| insert_at);
    if insert_at && !position.is_some_and(crate::exec::py_truth) {
        return Ok(Value::from(
            "Error: Position needs to be specified or use append (-A)",
        ));
    }
    let Some(rule) = args.get_str(2 + shift, "rule").filter(|r| !r.is_empty()) else {
        return Ok(Value::from("Error: Rule needs to be specified"));
    };
    let (table, family) = (table_of(args, 0), family_of(args, 3 + shift));
    if let Some(said) = dry(host, &format!("-t {table} -A {chain} {rule}")) {
        return Ok(said);
    }
    if insert_at {
        let pos = position
            .map(text)
            .and_then(|p| p.parse::<i64>().ok())
            .ok_or_else(|| ExecError::Invocation("position must be an integer".into()))?;
        return Ok(Value::from(insert(&table, &chain, pos, &rule, &family)?));
    }
    Ok(Value::Bool(append(&table, &chain, &rule, &family)?))
}

fn delete_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let table = args.require_str(0, "table", "delete")?;
    let chain = args.get_str(1, "chain").unwrap_or_default();
    let position = args.get_str(2, "position").filter(|p| !p.is_empty());
    let rule = args.get_str(3, "rule").filter(|r| !r.is_empty());
    let what = match (position, rule) {
        (Some(_), Some(_)) => {
            return Ok(Value::from(
                "Error: Only specify a position or a rule, not both",
            ))
        }
        (Some(p), None) => p,
        (None, r) => r.unwrap_or_else(|| "None".into()),
    };
    if let Some(said) = dry(host, &format!("-t {table} -D {chain} {what}")) {
        return Ok(said);
    }
    Ok(Value::from(delete(
        &table,
        &chain,
        &what,
        &family_of(args, 4),
    )?))
}

fn chain_fn(op: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    let table = table_of(args, 0);
    if let Some(said) = dry(host, &format!("-t {table} {op} {chain}")) {
        return Ok(said);
    }
    Ok(match chain_op(op, &table, &chain, &family_of(args, 2))? {
        None => Value::Bool(true),
        Some(err) => Value::from(err),
    })
}

fn get_policy_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    Ok(get_policy(&table_of(args, 0), &chain, &family_of(args, 2))?
        .map_or(Value::Null, Value::from))
}

fn set_policy_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = need_chain(args, 1) else {
        return Ok(Value::from(NO_CHAIN));
    };
    let Some(policy) = args.get_str(2, "policy").filter(|p| !p.is_empty()) else {
        return Ok(Value::from("Error: Policy needs to be specified"));
    };
    let table = table_of(args, 0);
    if let Some(said) = dry(host, &format!("-t {table} -P {chain} {policy}")) {
        return Ok(said);
    }
    Ok(Value::from(set_policy(
        &table,
        &chain,
        &policy,
        &family_of(args, 3),
    )?))
}

fn flush_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let table = table_of(args, 0);
    let chain = args.get_str(1, "chain").unwrap_or_default();
    if let Some(said) = dry(host, &format!("-t {table} -F {chain}")) {
        return Ok(said);
    }
    Ok(Value::from(flush(&table, &chain, &family_of(args, 2))?))
}

fn get_rules_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    get_rules(&family_of(args, 0))
}

fn get_saved_rules_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let family = family_of(args, 1);
    let file = match args.get_str(0, "conf_file") {
        Some(f) => f,
        None => default_conf(&host.grains, &family)?,
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| exec_err(format!("A file was not found to parse: {file}: {e}")))?;
    Ok(parse_save(&text))
}

fn save_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let filename = args.get_str(0, "filename");
    let family = family_of(args, 1);
    if let Some(said) = dry(
        host,
        &format!("-save > {}", filename.as_deref().unwrap_or("<default>")),
    ) {
        return Ok(said);
    }
    Ok(Value::from(save(host, filename.as_deref(), &family)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> String {
        let Value::Object(m) = v else { panic!() };
        build_rule(&m).unwrap()
    }

    #[test]
    fn rules_are_built_in_salts_order() {
        assert_eq!(
            rule(
                json!({"chain": "INPUT", "jump": "ACCEPT", "dport": 22, "proto": "tcp", "match": "state", "connstate": "NEW"})
            ),
            "-p tcp -m state --state NEW --dport 22 --jump ACCEPT"
        );
        assert_eq!(
            rule(
                json!({"source": "! 10.0.0.1", "comment": "a b", "j": "DROP", "log-prefix": "x y"})
            ),
            "-m comment --comment \"a b\" ! --source 10.0.0.1 --j DROP --log-prefix \"x y\""
        );
        assert_eq!(
            rule(json!({"proto": "tcp", "dports": [80, 443], "target": "ACCEPT"})),
            "-p tcp -m multiport --dports 80,443 --jump ACCEPT"
        );
        let Value::Object(m) = json!({"dports": [80]}) else {
            panic!()
        };
        assert_eq!(
            build_rule(&m).unwrap_err(),
            "Error: protocol must be specified"
        );
    }

    #[test]
    fn saved_rules_are_parsed() {
        let text = "*filter\n:INPUT ACCEPT [1:2]\n:FOO - [0:0]\n-A FOO -p tcp -m tcp --dport 22 -m comment --comment \"ssh in\" -j ACCEPT\nCOMMIT\n";
        let v = parse_save(text);
        assert_eq!(v["filter"]["INPUT"]["policy"], "ACCEPT");
        assert_eq!(v["filter"]["INPUT"]["packet count"], "1");
        let r = &v["filter"]["FOO"]["rules"][0];
        assert_eq!(r["dport"], json!(["22"]));
        assert_eq!(r["protocol"], json!(["tcp"]));
        assert_eq!(r["match"], json!(["tcp", "comment"]));
        assert_eq!(r["jump"], json!(["ACCEPT"]));
        assert!(v["filter"]["FOO"]["rules_comment"]["ssh in"].is_object());
    }
}
