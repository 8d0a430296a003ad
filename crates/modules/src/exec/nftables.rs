//! Salt's `nftables` execution module over the `nft` CLI: rules built
//! from keyword arguments (`build_rule`), checked against `nft --handle
//! list chain`, added, inserted and deleted (by handle), tables and chains
//! created and removed, flushed, policies read and set, the ruleset
//! listed and saved.
//!
//! Most functions answer Salt's `{result, comment}` dict. Where Salt
//! 3008.5 cannot work (`get_policy` reads its JSON as the wrong type and
//! always answers `None`, `delete` passes a dict as the rule's handle),
//! halite does what the function says.

use halite_state::{CmdOptions, Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "nftables",
    functions: &[
        ExecFunction::new("version", version_fn),
        ExecFunction::new("build_rule", build_rule_fn),
        ExecFunction::new("list_tables", list_tables_fn),
        ExecFunction::new("get_rules", get_rules_fn),
        ExecFunction::new("get_rules_json", get_rules_json_fn),
        ExecFunction::new("check", check_fn),
        ExecFunction::new("check_chain", check_chain_fn),
        ExecFunction::new("check_table", check_table_fn),
        ExecFunction::new("get_rule_handle", get_rule_handle_fn),
        ExecFunction::new("new_table", |a, h| table_fn(true, a, h)),
        ExecFunction::new("delete_table", |a, h| table_fn(false, a, h)),
        ExecFunction::new("new_chain", new_chain_fn),
        ExecFunction::new("delete_chain", delete_chain_fn),
        ExecFunction::new("append", |a, h| add_fn(false, a, h)),
        ExecFunction::new("insert", |a, h| add_fn(true, a, h)),
        ExecFunction::new("delete", delete_fn),
        ExecFunction::new("flush", flush_fn),
        ExecFunction::new("get_policy", get_policy_fn),
        ExecFunction::new("set_policy", set_policy_fn),
        ExecFunction::new("save", save_fn),
    ],
};

/// Salt's `{result, comment}` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether it worked (or, for the checks, whether it exists).
    pub result: bool,
    /// Salt's text.
    pub comment: String,
}

impl Answer {
    fn yes(comment: impl Into<String>) -> Self {
        Answer {
            result: true,
            comment: comment.into(),
        }
    }
    fn no(comment: impl Into<String>) -> Self {
        Answer {
            result: false,
            comment: comment.into(),
        }
    }
    fn value(&self) -> Value {
        let mut m = Map::new();
        m.insert("comment".into(), Value::from(self.comment.clone()));
        m.insert("result".into(), Value::Bool(self.result));
        Value::Object(m)
    }
}

/// Salt's `_NFTABLES_FAMILIES`: the `nft` family of a Salt family name.
pub fn nft_family(family: &str) -> Result<&'static str, ExecError> {
    Ok(match family {
        "ipv4" | "ip4" | "ip" => "ip",
        "ipv6" | "ip6" => "ip6",
        "inet" => "inet",
        "arp" => "arp",
        "bridge" => "bridge",
        "netdev" => "netdev",
        other => {
            return Err(ExecError::Invocation(format!(
                "Unknown nftables family '{other}': use ipv4, ipv6, inet, arp, bridge or netdev"
            )))
        }
    })
}

/// Runs `nft <args>` (split like a shell would, no shell): exit code,
/// stdout, stderr.
fn nft(args: &str) -> Result<(i32, String, String), ExecError> {
    let nft = crate::exec::cmd::which("nft").ok_or_else(|| {
        ExecError::Execution("nft is not installed: install the nftables package".into())
    })?;
    let cmd = format!("{nft} {args}");
    tracing::debug!(%cmd, "running");
    let out = crate::command::run_command(&cmd, &CmdOptions::default())
        .map_err(|e| ExecError::Execution(format!("Unable to run {cmd}: {e}")))?;
    Ok((out.retcode, out.stdout, out.stderr))
}

/// What Salt's `cmd.run` shows of a command: stdout and stderr together
/// (empty means it worked, for the commands that print nothing).
fn run_text(args: &str) -> Result<String, ExecError> {
    let (rc, out, err) = nft(args)?;
    let mut text = [out, err]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    if rc != 0 && text.is_empty() {
        text = format!("nft exited with {rc}");
    }
    Ok(text)
}

fn text(v: &Value) -> String {
    halite_salt_rules::pyfmt::python_str(v)
}

/// Salt's `nftables.build_rule` (without `full`): the rule text from the
/// keyword arguments (`proto`, `dport`/`dports`, `saddr`, `connstate`,
/// `jump`...). `Err` is Salt's comment for a rule it cannot build.
pub fn build_rule(kwargs: &Map, family: &str) -> Result<String, ExecError> {
    let fam = nft_family(family)?;
    let get = |k: &str| kwargs.get(k).filter(|v| !v.is_null()).map(text);
    let mut rule = String::new();
    let proto = get("proto").unwrap_or_default();
    if let Some(v) = get("if") {
        rule.push_str(&format!("meta iifname {v} "));
    }
    if let Some(v) = get("of") {
        rule.push_str(&format!("meta oifname {v} "));
    }
    for (key, word) in [
        ("connstate", "ct state"),
        ("icmp-type", "icmp type"),
        ("icmpv6-type", "icmpv6 type"),
        ("pkttype", "meta pkttype"),
    ] {
        if let Some(v) = get(key) {
            rule.push_str(&format!("{word} {{ {v} }} "));
        }
    }
    if kwargs.contains_key("counter") {
        rule.push_str("counter ");
    }
    if let Some(v) = get("saddr").or_else(|| get("source")) {
        rule.push_str(&format!("{fam} saddr {v} "));
    }
    if let Some(v) = get("daddr").or_else(|| get("destination")) {
        rule.push_str(&format!("{fam} daddr {v} "));
    }
    if let Some(v) = get("dport") {
        rule.push_str(&format!("dport {{ {} }} ", v.replace(':', "-")));
    }
    if let Some(v) = get("sport") {
        rule.push_str(&format!("sport {{ {} }} ", v.replace(':', "-")));
    }
    for (key, word) in [("dports", "dport"), ("sports", "sport")] {
        let Some(v) = kwargs.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let words: Vec<String> = match v {
            Value::Array(items) => items.iter().map(text).collect(),
            other => text(other).split(',').map(str::to_string).collect(),
        };
        let mut ports = Vec::new();
        for w in words {
            ports.push(w.trim().parse::<i64>().map_err(|_| {
                ExecError::Invocation(format!("{key}: '{w}' is not a port number"))
            })?);
        }
        ports.sort_unstable_by(|a, b| b.cmp(a));
        let ports: Vec<String> = ports.iter().map(i64::to_string).collect();
        rule.push_str(&format!("{word} {{ {} }} ", ports.join(", ")));
    }
    for key in ["target", "jump", "j"] {
        if let Some(v) = get(key) {
            rule.push_str(&format!("{v} "));
        }
    }
    if let Some(v) = get("redirect-to").or_else(|| get("to-port")) {
        rule.push_str(&format!("redirect to {v} "));
    }
    if let Some(v) = get("to-ports") {
        rule.push_str(&format!("--to-ports {v} "));
    }
    for key in ["to-source", "to-destination"] {
        if let Some(v) = get(key) {
            rule.push_str(&format!("{v} "));
        }
    }
    if let Some(v) = get("reject-with") {
        rule.push_str(&format!("reject with {v} "));
    }
    let rule = rule.trim();
    Ok(rule
        .replace("dport", &format!("{proto} dport"))
        .replace("sport", &format!("{proto} sport")))
}

/// A rule as `nft` lists it and as Salt writes it, made comparable: the
/// `# handle N` dropped, a one-element `{ x }` set unwrapped and the
/// elements of a set sorted (nft prints `{ 80, 443 }` for Salt's
/// `{ 443, 80 }`).
pub fn normalize(rule: &str) -> String {
    let rule = rule.split(" # handle").next().unwrap_or(rule).trim();
    let mut out = String::new();
    let mut rest = rule;
    while let Some(start) = rest.find("{ ") {
        let Some(len) = rest[start..].find(" }") else {
            break;
        };
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..start + len];
        let mut items: Vec<&str> = inner.split(',').map(str::trim).collect();
        items.sort_unstable();
        if items.len() == 1 {
            out.push_str(items[0]);
        } else {
            out.push_str(&format!("{{ {} }}", items.join(", ")));
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Salt's `check_table`.
pub fn check_table(table: &str, family: &str) -> Result<Answer, ExecError> {
    let fam = nft_family(family)?;
    let out = run_text(&format!("list tables {fam}"))?;
    let found = out
        .lines()
        .any(|l| l.trim() == format!("table {fam} {table}"));
    Ok(if found {
        Answer::yes(format!("Table {table} in family {family} exists"))
    } else {
        Answer::no(format!("Table {table} in family {family} does not exist"))
    })
}

/// Salt's `check_chain`.
pub fn check_chain(table: &str, chain: &str, family: &str) -> Result<Answer, ExecError> {
    let fam = nft_family(family)?;
    let out = run_text(&format!("list table {fam} {table}"))?;
    Ok(if out.contains(&format!("chain {chain} {{")) {
        Answer::yes(format!(
            "Chain {chain} in table {table} in family {family} exists"
        ))
    } else {
        Answer::no(format!(
            "Chain {chain} in table {table} in family {family} does not exist"
        ))
    })
}

/// The rules of a chain with their handles.
fn chain_rules(table: &str, chain: &str, family: &str) -> Result<Vec<(String, String)>, ExecError> {
    let fam = nft_family(family)?;
    let out = run_text(&format!("--handle list chain {fam} {table} {chain}"))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (rule, handle) = l.trim().rsplit_once(" # handle ")?;
            (!rule.starts_with("chain ") && !rule.starts_with("table "))
                .then(|| (normalize(rule), handle.trim().to_string()))
        })
        .collect())
}

/// Salt's `check`: whether the chain holds the rule (its table and chain
/// checked first).
pub fn check(table: &str, chain: &str, rule: &str, family: &str) -> Result<Answer, ExecError> {
    let t = check_table(table, family)?;
    if !t.result {
        return Ok(t);
    }
    let c = check_chain(table, chain, family)?;
    if !c.result {
        return Ok(c);
    }
    let want = normalize(rule);
    let found = chain_rules(table, chain, family)?
        .iter()
        .any(|(r, _)| *r == want);
    let what = format!("Rule {rule} in chain {chain} in table {table} in family {family}");
    Ok(if found {
        Answer::yes(format!("{what} exists"))
    } else {
        Answer::no(format!("{what} does not exist"))
    })
}

/// Salt's `get_rule_handle`: the handle of the rule, for `delete`.
pub fn rule_handle(
    table: &str,
    chain: &str,
    rule: &str,
    family: &str,
) -> Result<Result<String, Answer>, ExecError> {
    let c = check(table, chain, rule, family)?;
    if !c.result {
        return Ok(Err(c));
    }
    let want = normalize(rule);
    Ok(chain_rules(table, chain, family)?
        .into_iter()
        .find(|(r, _)| *r == want)
        .map(|(_, h)| h)
        .ok_or_else(|| Answer::no(format!("Could not find rule {rule}"))))
}

/// Salt's `new_table` / `delete_table`.
pub fn table_op(create: bool, table: &str, family: &str) -> Result<Answer, ExecError> {
    let exists = check_table(table, family)?;
    if exists.result == create {
        return Ok(exists);
    }
    let fam = nft_family(family)?;
    let (verb, done) = if create {
        ("add", "created")
    } else {
        ("delete", "deleted")
    };
    let out = run_text(&format!("{verb} table {fam} {table}"))?;
    Ok(if out.is_empty() {
        Answer::yes(format!("Table {table} in family {family} {done}"))
    } else {
        Answer::no(format!(
            "Table {table} in family {family} could not be {done}"
        ))
    })
}

/// Salt's `new_chain`, a base chain when `hook` (with `table_type` and
/// `priority`) is given.
pub fn new_chain(
    table: &str,
    chain: &str,
    base: Option<(&str, &str, &str)>,
    family: &str,
) -> Result<Answer, ExecError> {
    let t = check_table(table, family)?;
    if !t.result {
        return Ok(t);
    }
    if check_chain(table, chain, family)?.result {
        return Ok(Answer::no(format!(
            "Chain {chain} in table {table} in family {family} already exists"
        )));
    }
    let fam = nft_family(family)?;
    let mut cmd = format!("-- add chain {fam} {table} {chain}");
    if let Some((kind, hook, priority)) = base {
        cmd.push_str(&format!(
            " {} ",
            crate::host::shell_quote(&format!(
                "{{ type {kind} hook {hook} priority {priority}; }}"
            ))
        ));
    }
    let out = run_text(&cmd)?;
    Ok(if out.is_empty() {
        Answer::yes(format!(
            "Chain {chain} in table {table} in family {family} created"
        ))
    } else {
        Answer::no(format!(
            "Chain {chain} in table {table} in family {family} could not be created"
        ))
    })
}

/// Salt's `delete_chain`.
pub fn delete_chain(table: &str, chain: &str, family: &str) -> Result<Answer, ExecError> {
    let t = check_table(table, family)?;
    if !t.result {
        return Ok(t);
    }
    let c = check_chain(table, chain, family)?;
    if !c.result {
        return Ok(c);
    }
    let fam = nft_family(family)?;
    let out = run_text(&format!("delete chain {fam} {table} {chain}"))?;
    Ok(if out.is_empty() {
        Answer::yes(format!(
            "Chain {chain} in table {table} in family {family} deleted"
        ))
    } else {
        Answer::no(format!(
            "Chain {chain} in table {table} in family {family} could not be deleted"
        ))
    })
}

/// Salt's `append` and `insert` (at `position`, a rule handle, when given).
pub fn add(
    table: &str,
    chain: &str,
    position: Option<&str>,
    rule: &str,
    family: &str,
    insert: bool,
) -> Result<Answer, ExecError> {
    let c = check(table, chain, rule, family)?;
    if c.result {
        return Ok(Answer::no(format!(
            "Rule {rule} chain {chain} in table {table} in family {family} already exists"
        )));
    }
    if c.comment.starts_with("Table ") || c.comment.starts_with("Chain ") {
        return Ok(c);
    }
    let fam = nft_family(family)?;
    let cmd = match (insert, position.filter(|p| !p.is_empty() && *p != "0")) {
        (true, Some(p)) => format!("insert rule {fam} {table} {chain} position {p} {rule}"),
        (true, None) => format!("insert rule {fam} {table} {chain} {rule}"),
        (false, _) => format!("add rule {fam} {table} {chain} {rule}"),
    };
    let out = run_text(&cmd)?;
    let what = format!("rule \"{rule}\" chain {chain} in table {table} in family {family}.");
    Ok(if out.is_empty() {
        Answer::yes(format!("Added {what}"))
    } else {
        Answer::no(format!("Failed to add {what}"))
    })
}

/// Salt's `delete` of a rule (found by its text) or of a handle.
pub fn delete(
    table: &str,
    chain: &str,
    handle: Option<&str>,
    rule: &str,
    family: &str,
) -> Result<Answer, ExecError> {
    let handle = match handle {
        Some(h) => h.to_string(),
        None => match rule_handle(table, chain, rule, family)? {
            Ok(h) => h,
            Err(a) if a.comment.contains("does not exist") && a.comment.starts_with("Rule ") => {
                return Ok(Answer::no(format!(
                    "Rule {rule} chain {chain} in table {table} in family {family} does not exist"
                )))
            }
            Err(a) => return Ok(a),
        },
    };
    let fam = nft_family(family)?;
    let out = run_text(&format!(
        "delete rule {fam} {table} {chain} handle {handle}"
    ))?;
    Ok(if out.is_empty() {
        Answer::yes(format!(
            "Deleted rule \"{rule}\" in chain {chain} in table {table} in family {family}."
        ))
    } else {
        Answer::no(format!(
            "Failed to delete rule \"{rule}\" in chain {chain}  table {table} in family {family}"
        ))
    })
}

/// Salt's `flush` of a chain, or of the whole table when `chain` is empty.
pub fn flush(table: &str, chain: &str, family: &str) -> Result<Answer, ExecError> {
    let t = check_table(table, family)?;
    if !t.result {
        return Ok(t);
    }
    let fam = nft_family(family)?;
    let (cmd, what) = if chain.is_empty() {
        (
            format!("flush table {fam} {table}"),
            format!("from table {table} in family {family}."),
        )
    } else {
        let c = check_chain(table, chain, family)?;
        if !c.result {
            return Ok(c);
        }
        (
            format!("flush chain {fam} {table} {chain}"),
            format!("from chain {chain} in table {table} in family {family}."),
        )
    };
    let out = run_text(&cmd)?;
    Ok(if out.is_empty() {
        Answer::yes(format!("Flushed rules {what}"))
    } else {
        Answer::no(format!("Failed to flush rules {what}"))
    })
}

/// Salt's `get_rules_json`: the `nftables` list of `nft --json list
/// ruleset <family>`.
pub fn rules_json(family: &str) -> Result<Vec<Value>, ExecError> {
    let fam = nft_family(family)?;
    let out = run_text(&format!(
        "--numeric --numeric --numeric --json list ruleset {fam}"
    ))?;
    Ok(serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.get("nftables").and_then(Value::as_array).cloned())
        .unwrap_or_default())
}

/// The `chain` object of `table`/`chain` in the JSON ruleset.
fn chain_info(table: &str, chain: &str, family: &str) -> Result<Option<Value>, ExecError> {
    Ok(rules_json(family)?.into_iter().find_map(|item| {
        let c = item.get("chain")?;
        (c.get("table")?.as_str()? == table && c.get("name")?.as_str()? == chain).then(|| c.clone())
    }))
}

/// The policy of a base chain (`None` for a regular chain or none at all).
pub fn get_policy(table: &str, chain: &str, family: &str) -> Result<Option<String>, ExecError> {
    Ok(chain_info(table, chain, family)?
        .and_then(|c| c.get("policy").and_then(Value::as_str).map(str::to_string)))
}

/// Salt's `set_policy`: re-adds the base chain with the policy; false
/// when the chain is not a base chain (policies need a hook).
pub fn set_policy(table: &str, chain: &str, policy: &str, family: &str) -> Result<bool, ExecError> {
    let Some(info) = chain_info(table, chain, family)? else {
        return Ok(false);
    };
    let (Some(kind), Some(hook), Some(prio)) =
        (info.get("type"), info.get("hook"), info.get("prio"))
    else {
        return Ok(false);
    };
    let fam = nft_family(family)?;
    let spec = format!(
        "{{ type {} hook {} priority {}; policy {policy}; }}",
        text(kind),
        text(hook),
        text(prio)
    );
    let (rc, _, _) = nft(&format!(
        "add chain {fam} {table} {chain} {}",
        crate::host::shell_quote(&spec)
    ))?;
    Ok(rc == 0)
}

/// Salt's `list_tables`: the `table` objects of the family.
pub fn list_tables(family: &str) -> Result<Vec<Value>, ExecError> {
    let fam = nft_family(family)?;
    let out = run_text(&format!(
        "--json --numeric --numeric --numeric list tables {fam}"
    ))?;
    Ok(serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.get("nftables").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.get("table").cloned())
        .collect())
}

/// Salt's `get_rules`: the listing of each table of the family.
pub fn get_rules(family: &str) -> Result<Vec<String>, ExecError> {
    let fam = nft_family(family)?;
    let mut out = Vec::new();
    for t in list_tables(family)? {
        if let Some(name) = t.get("name").and_then(Value::as_str) {
            out.push(run_text(&format!(
                "--numeric --numeric --numeric list table {fam} {name}"
            ))?);
        }
    }
    Ok(out)
}

/// Salt's `save`: every family's tables, as an `nft -f` script, to
/// `filename` (`/etc/nftables` on the families Salt knows; a directory
/// gets `salt-all-in-one.nft`). Returns the script.
pub fn save(host: &Host, filename: Option<&str>) -> Result<String, ExecError> {
    let filename = match filename {
        Some(f) => f.to_string(),
        None => match host.grains.get("os_family").and_then(Value::as_str) {
            Some("RedHat" | "Arch" | "Debian") => "/etc/nftables".to_string(),
            _ => {
                return Err(ExecError::Execution(
                    "No default nftables file on this OS: pass filename=".into(),
                ))
            }
        },
    };
    let mut rules = String::from("#! nft -f\n");
    for family in ["ip", "ip6", "inet", "arp", "bridge", "netdev"] {
        let out = get_rules(family)?;
        if !out.is_empty() {
            rules.push('\n');
        }
        rules.push_str(&out.join("\n"));
    }
    rules.push('\n');
    let mut path = std::path::PathBuf::from(&filename);
    if path.is_dir() {
        path = path.join("salt-all-in-one.nft");
    }
    std::fs::write(&path, &rules)
        .map_err(|e| ExecError::Execution(format!("Problem writing to configuration file: {e}")))?;
    Ok(rules)
}

// ---- the rows -----------------------------------------------------------

fn family_of(args: &Args, i: usize) -> String {
    args.get_str(i, "family").unwrap_or_else(|| "ipv4".into())
}

fn table_of(args: &Args, i: usize) -> String {
    args.get_str(i, "table").unwrap_or_else(|| "filter".into())
}

/// Under `test=True` a function that would change the ruleset says so
/// instead (Salt runs it; halite's dispatch probe calls every function
/// with no arguments, which for `flush` means the `filter` table).
fn dry(host: &Host, what: &str) -> Option<Value> {
    host.test_mode()
        .then(|| Value::from(format!("test=True: would run nft {what}")))
}

fn need(args: &Args, i: usize, key: &str, what: &str) -> Result<String, Value> {
    args.get_str(i, key)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Answer::no(format!("{what} needs to be specified")).value())
}

fn version_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let out = run_text("--version")?;
    Ok(Value::from(
        out.split_whitespace().nth(1).unwrap_or_default(),
    ))
}

fn build_rule_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let family = args.get_str(5, "family").unwrap_or_else(|| "ipv4".into());
    let rule = build_rule(&args.kwargs, &family)?;
    let mut ret = Map::new();
    // Salt compares with the strings 'True'/'true': a YAML `True` (a
    // bool) does not ask for the full command there.
    let full = args.get(4, "full").and_then(Value::as_str);
    let mut shown = rule.clone();
    if matches!(full, Some("True" | "true")) {
        let fam = nft_family(&family)?;
        let (Some(table), Some(chain), Some(command)) = (
            args.get_str(0, "table"),
            args.get_str(1, "chain"),
            args.get_str(2, "command"),
        ) else {
            ret.insert(
                "comment".into(),
                Value::from("Table, chain and command need to be specified"),
            );
            ret.insert("rule".into(), Value::from(rule));
            ret.insert("result".into(), Value::Bool(false));
            return Ok(Value::Object(ret));
        };
        let position = args.get_str(3, "position").unwrap_or_default();
        shown = if command.eq_ignore_ascii_case("insert") && !position.is_empty() {
            format!("nft insert rule {fam} {table} {chain} position {position} {rule}")
        } else if command.eq_ignore_ascii_case("insert") {
            format!("nft insert rule {fam} {table} {chain} {rule}")
        } else {
            format!("nft {command} rule {fam} {table} {chain} {rule}")
        };
    }
    let comment = if shown.is_empty() {
        ""
    } else {
        "Successfully built rule"
    };
    ret.insert("comment".into(), Value::from(comment));
    ret.insert("rule".into(), Value::from(shown));
    ret.insert("result".into(), Value::Bool(true));
    Ok(Value::Object(ret))
}

fn list_tables_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(list_tables(&family_of(args, 0))?))
}

fn get_rules_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(
        get_rules(&family_of(args, 0))?
            .into_iter()
            .map(Value::from)
            .collect(),
    ))
}

fn get_rules_json_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(rules_json(&family_of(args, 0))?))
}

fn check_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    let rule = match need(args, 2, "rule", "Rule") {
        Ok(r) => r,
        Err(v) => return Ok(v),
    };
    Ok(check(&table_of(args, 0), &chain, &rule, &family_of(args, 3))?.value())
}

fn check_chain_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    Ok(check_chain(&table_of(args, 0), &chain, &family_of(args, 2))?.value())
}

fn check_table_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let table = match need(args, 0, "table", "Table") {
        Ok(t) => t,
        Err(v) => return Ok(v),
    };
    Ok(check_table(&table, &family_of(args, 1))?.value())
}

fn get_rule_handle_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    let rule = match need(args, 2, "rule", "Rule") {
        Ok(r) => r,
        Err(v) => return Ok(v),
    };
    Ok(
        match rule_handle(&table_of(args, 0), &chain, &rule, &family_of(args, 3))? {
            Ok(h) => {
                let mut m = Map::new();
                m.insert("result".into(), Value::Bool(true));
                m.insert("handle".into(), Value::from(h));
                Value::Object(m)
            }
            Err(a) => a.value(),
        },
    )
}

fn table_fn(create: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let table = match need(args, 0, "table", "Table") {
        Ok(t) => t,
        Err(v) => return Ok(v),
    };
    if let Some(said) = dry(
        host,
        &format!("{} table {table}", if create { "add" } else { "delete" }),
    ) {
        return Ok(said);
    }
    Ok(table_op(create, &table, &family_of(args, 1))?.value())
}

fn new_chain_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    let table = table_of(args, 0);
    let kind = args.get_str(2, "table_type");
    let hook = args.get_str(3, "hook");
    let priority = args.get_str(4, "priority");
    let base = match (&kind, &hook, &priority) {
        (None, None, None) => None,
        (Some(k), Some(h), Some(p)) => Some((k.as_str(), h.as_str(), p.as_str())),
        _ => return Ok(Answer::no("Table_type, hook, and priority required.").value()),
    };
    if let Some(said) = dry(host, &format!("add chain {table} {chain}")) {
        return Ok(said);
    }
    Ok(new_chain(&table, &chain, base, &family_of(args, 5))?.value())
}

fn delete_chain_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    let table = table_of(args, 0);
    if let Some(said) = dry(host, &format!("delete chain {table} {chain}")) {
        return Ok(said);
    }
    Ok(delete_chain(&table, &chain, &family_of(args, 2))?.value())
}

fn add_fn(insert: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let chain = match need(args, 1, "chain", "Chain") {
        Ok(c) => c,
        Err(v) => return Ok(v),
    };
    let shift = usize::from(insert);
    let position = if insert {
        args.get_str(2, "position")
    } else {
        None
    };
    let rule = match need(args, 2 + shift, "rule", "Rule") {
        Ok(r) => r,
        Err(v) => return Ok(v),
    };
    let table = table_of(args, 0);
    if let Some(said) = dry(host, &format!("add rule {table} {chain} {rule}")) {
        return Ok(said);
    }
    Ok(add(
        &table,
        &chain,
        position.as_deref(),
        &rule,
        &family_of(args, 3 + shift),
        insert,
    )?
    .value())
}

fn delete_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let table = args.require_str(0, "table", "delete")?;
    let chain = args.get_str(1, "chain").unwrap_or_default();
    let position = args.get_str(2, "position").filter(|p| !p.is_empty());
    let rule = args.get_str(3, "rule").unwrap_or_default();
    if position.is_some() && !rule.is_empty() {
        return Ok(Answer::no("Only specify a position or a rule, not both").value());
    }
    if let Some(said) = dry(host, &format!("delete rule {table} {chain}")) {
        return Ok(said);
    }
    Ok(delete(
        &table,
        &chain,
        position.as_deref(),
        &rule,
        &family_of(args, 4),
    )?
    .value())
}

fn flush_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let table = table_of(args, 0);
    let chain = args.get_str(1, "chain").unwrap_or_default();
    if let Some(said) = dry(host, &format!("flush {table} {chain}")) {
        return Ok(said);
    }
    Ok(flush(&table, &chain, &family_of(args, 2))?.value())
}

fn get_policy_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = args.get_str(1, "chain").filter(|c| !c.is_empty()) else {
        return Ok(Value::from("Error: Chain needs to be specified"));
    };
    Ok(get_policy(&table_of(args, 0), &chain, &family_of(args, 2))?
        .map_or(Value::Null, Value::from))
}

fn set_policy_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(chain) = args.get_str(1, "chain").filter(|c| !c.is_empty()) else {
        return Ok(Value::from("Error: Chain needs to be specified"));
    };
    let Some(policy) = args.get_str(2, "policy").filter(|p| !p.is_empty()) else {
        return Ok(Value::from("Error: Policy needs to be specified"));
    };
    let table = table_of(args, 0);
    if let Some(said) = dry(host, &format!("policy {table} {chain} {policy}")) {
        return Ok(said);
    }
    Ok(Value::Bool(set_policy(
        &table,
        &chain,
        &policy,
        &family_of(args, 3),
    )?))
}

fn save_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let filename = args.get_str(0, "filename");
    if let Some(said) = dry(host, "list ruleset > file") {
        return Ok(said);
    }
    Ok(Value::from(save(host, filename.as_deref())?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_are_built_as_salt_builds_them() {
        let Value::Object(m) = json!({"proto": "tcp", "dports": "80,443", "jump": "accept"}) else {
            panic!()
        };
        assert_eq!(
            build_rule(&m, "ipv4").unwrap(),
            "tcp dport { 443, 80 } accept"
        );
        let Value::Object(m) = json!({"if": "lo", "connstate": "new", "saddr": "10.0.0.1", "proto": "udp", "dport": "53:54", "jump": "drop"})
        else {
            panic!()
        };
        assert_eq!(
            build_rule(&m, "ipv4").unwrap(),
            "meta iifname lo ct state { new } ip saddr 10.0.0.1 udp dport { 53-54 } drop"
        );
    }

    #[test]
    fn listed_rules_compare_with_salts_text() {
        assert_eq!(
            normalize("tcp dport { 80, 443 } accept # handle 3"),
            normalize("tcp dport { 443, 80 } accept")
        );
        assert_eq!(
            normalize("tcp dport 22 accept"),
            normalize("tcp dport { 22 } accept")
        );
        assert_ne!(
            normalize("tcp dport 22 accept"),
            normalize("tcp dport { 23 } accept")
        );
    }
}
