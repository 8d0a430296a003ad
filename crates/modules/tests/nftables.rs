//! `nftables` states and execution functions against the real `nft`,
//! inside a network namespace each test creates for its own thread, so
//! the host's ruleset is never touched. The expected comments are Salt
//! 3008.5's, recorded with `unshare -n salt-call --local state.apply`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

/// Moves this test's thread into a new network namespace; false, with
/// the reason printed, when that is not possible here.
fn private_netns() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root to create a network namespace");
        return false;
    }
    if !std::path::Path::new("/usr/sbin/nft").exists() {
        println!("skipped: nft is not installed (scripts/install-deps.sh installs nftables)");
        return false;
    }
    // SAFETY: unshare affects only the calling thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        println!(
            "skipped: unshare(CLONE_NEWNET) is not permitted here: {}",
            std::io::Error::last_os_error()
        );
        return false;
    }
    true
}

fn host() -> Host {
    common::host_with(json!({}), json!({"os_family": "Debian"}))
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state_or_fail(host, "nftables", fun, name, args, test)
}

fn ruleset() -> String {
    let out = std::process::Command::new("nft")
        .args(["list", "ruleset"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        serde_json::to_value(&r.changes).unwrap(),
    )
}

fn ok(comment: &str, locale: &str) -> (Option<bool>, String, Value) {
    (Some(true), comment.into(), json!({"locale": locale}))
}

fn unchanged(comment: &str) -> (Option<bool>, String, Value) {
    (Some(true), comment.into(), json!({}))
}

#[test]
fn tables_chains_rules_and_policies_are_applied_once_like_salt() {
    if !private_netns() {
        return;
    }
    let host = host();
    let base = json!({"table": "salt", "table_type": "filter", "hook": "input", "priority": 0});
    let ssh =
        json!({"table": "salt", "chain": "input", "proto": "tcp", "dport": 22, "jump": "accept"});
    let web = json!({"table": "salt", "chain": "input", "position": 0, "proto": "tcp",
                     "dports": "80,443", "jump": "accept"});
    let pol = json!({"table": "salt", "chain": "input", "policy": "drop"});

    // test=True: Salt 3008.5's predictions; nothing changes.
    let t = state(&host, "table_present", "salt", json!({}), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "nftables table salt would be created in family ipv4")
    );
    let t = state(&host, "chain_present", "input", base.clone(), true);
    assert_eq!(
        t.comment,
        "nftables chain input would be created in table salt for family ipv4"
    );
    let t = state(&host, "append", "ssh", ssh.clone(), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (
            None,
            "nftables rule for ssh needs to be set (tcp dport { 22 } accept) for ipv4"
        )
    );
    let t = state(&host, "insert", "web", web.clone(), true);
    assert_eq!(
        t.comment,
        "nftables rule for web needs to be set for ipv4 (tcp dport { 443, 80 } accept)"
    );
    assert!(!ruleset().contains("salt"));

    // The real run: Salt 3008.5's comments and changes.
    let r = state(&host, "table_present", "salt", json!({}), false);
    assert_eq!(
        outcome(&r),
        ok(
            "nftables table salt successfully created in family ipv4",
            "salt"
        )
    );
    let r = state(&host, "chain_present", "input", base.clone(), false);
    assert_eq!(
        outcome(&r),
        ok(
            "nftables input chain in salt table create success for ipv4",
            "input"
        )
    );
    let r = state(
        &host,
        "chain_present",
        "plain",
        json!({"table": "salt"}),
        false,
    );
    assert_eq!(
        outcome(&r),
        ok(
            "nftables plain chain in salt table create success for ipv4",
            "plain"
        )
    );
    let r = state(&host, "append", "ssh", ssh.clone(), false);
    assert_eq!(
        outcome(&r),
        ok(
            "Set nftables rule for ssh to: tcp dport { 22 } accept for ipv4",
            "ssh"
        )
    );
    let r = state(&host, "insert", "web", web.clone(), false);
    assert_eq!(
        outcome(&r),
        ok(
            "Set nftables rule for web to: tcp dport { 443, 80 } accept for ipv4",
            "web"
        )
    );
    let t = state(&host, "set_policy", "pol", pol.clone(), true);
    assert_eq!(
        t.comment,
        "nftables default policy for chain input on table salt for ipv4 needs to be set to drop"
    );
    let r = state(&host, "set_policy", "pol", pol.clone(), false);
    assert_eq!(
        outcome(&r),
        ok("Set default policy for input to drop family ipv4", "pol")
    );
    let rules = ruleset();
    assert!(rules.contains("policy drop;"), "{rules}");
    let web_at = rules
        .find("tcp dport { 80, 443 } accept")
        .expect("web rule");
    let ssh_at = rules.find("tcp dport 22 accept").expect("ssh rule");
    assert!(web_at < ssh_at, "insert did not go first: {rules}");

    // Applied twice: no changes.
    let again = state(&host, "table_present", "salt", json!({}), false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables table salt already exists in family ipv4")
    );
    let again = state(&host, "chain_present", "input", base.clone(), false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables input chain is already exist in salt table for ipv4")
    );
    let again = state(&host, "append", "ssh", ssh.clone(), false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables rule for ssh already set (tcp dport { 22 } accept) for ipv4")
    );
    let again = state(&host, "insert", "web", web.clone(), false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables rule for web already set for ipv4 (tcp dport { 443, 80 } accept)")
    );
    let again = state(&host, "set_policy", "pol", pol.clone(), false);
    assert_eq!(
        outcome(&again),
        unchanged(
            "nftables default policy for chain input on table salt for ipv4 already set to drop"
        )
    );
    assert_eq!(ruleset(), rules);

    // delete, flush, chain_absent, table_absent.
    let del =
        json!({"table": "salt", "chain": "input", "proto": "tcp", "dport": 22, "jump": "accept"});
    let t = state(&host, "delete", "delssh", del.clone(), true);
    assert_eq!(
        t.comment,
        "nftables rule for delssh needs to be deleted for ipv4 (tcp dport { 22 } accept)"
    );
    let r = state(&host, "delete", "delssh", del.clone(), false);
    assert_eq!(
        outcome(&r),
        ok(
            "Delete nftables rule for delssh tcp dport { 22 } accept",
            "delssh"
        )
    );
    assert!(!ruleset().contains("dport 22"));
    let again = state(&host, "delete", "delssh", del, false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables rule for delssh already absent for ipv4 (tcp dport { 22 } accept)")
    );
    let t = state(
        &host,
        "flush",
        "fl",
        json!({"table": "salt", "chain": "input"}),
        true,
    );
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "nftables flush not performed in test mode.")
    );
    let r = state(
        &host,
        "flush",
        "fl",
        json!({"table": "salt", "chain": "input"}),
        false,
    );
    assert_eq!(
        outcome(&r),
        ok(
            "Flush nftables rules in salt table input chain ipv4 family",
            "fl"
        )
    );
    assert!(!ruleset().contains("dport"));
    let r = state(
        &host,
        "chain_absent",
        "plain",
        json!({"table": "salt"}),
        false,
    );
    assert_eq!(
        outcome(&r),
        ok(
            "nftables plain chain in salt table delete success for ipv4",
            "plain"
        )
    );
    let again = state(
        &host,
        "chain_absent",
        "plain",
        json!({"table": "salt"}),
        false,
    );
    assert_eq!(
        outcome(&again),
        unchanged("nftables plain chain is already absent in salt table for ipv4")
    );
    let t = state(&host, "table_absent", "salt", json!({}), true);
    assert_eq!(
        t.comment,
        "nftables table salt would be deleted from family ipv4"
    );
    let r = state(&host, "table_absent", "salt", json!({}), false);
    assert_eq!(
        outcome(&r),
        ok(
            "nftables table salt successfully deleted from family ipv4",
            "salt"
        )
    );
    let again = state(&host, "table_absent", "salt", json!({}), false);
    assert_eq!(
        outcome(&again),
        unchanged("nftables table salt is already absent from family ipv4")
    );
    let r = state(
        &host,
        "flush",
        "fl",
        json!({"table": "salt", "chain": "input"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (
            Some(false),
            "Failed to flush table salt in family ipv4, table does not exist."
        )
    );
    assert!(!ruleset().contains("salt"));
}

#[test]
fn execution_functions_answer_salts_dicts() {
    if !private_netns() {
        return;
    }
    let host = host();
    let call = |fun: &str, kwargs: Value| -> Value {
        let Value::Object(kwargs) = kwargs else {
            panic!("kwargs")
        };
        host.call(
            fun,
            &Args {
                positional: vec![],
                kwargs,
            },
        )
        .unwrap_or_else(|e| panic!("{fun}: {e}"))
    };
    assert_eq!(
        call(
            "nftables.new_table",
            json!({"table": "t6", "family": "ipv6"})
        ),
        json!({"comment": "Table t6 in family ipv6 created", "result": true})
    );
    assert_eq!(
        call(
            "nftables.new_chain",
            json!({"table": "t6", "chain": "c", "family": "ipv6"})
        ),
        json!({"comment": "Chain c in table t6 in family ipv6 created", "result": true})
    );
    assert_eq!(
        call(
            "nftables.append",
            json!({"table": "t6", "chain": "c", "rule": "tcp dport 8080 drop", "family": "ipv6"})
        ),
        json!({"comment": "Added rule \"tcp dport 8080 drop\" chain c in table t6 in family ipv6.", "result": true})
    );
    let handle = call(
        "nftables.get_rule_handle",
        json!({"table": "t6", "chain": "c", "rule": "tcp dport 8080 drop", "family": "ipv6"}),
    );
    assert_eq!(handle["result"], json!(true), "{handle}");
    assert_eq!(
        call(
            "nftables.check_table",
            json!({"table": "t6", "family": "ipv4"})
        ),
        json!({"comment": "Table t6 in family ipv4 does not exist", "result": false})
    );
    // Salt 3008.5's answer, a YAML `True` for `full` included.
    assert_eq!(
        call(
            "nftables.build_rule",
            json!({"table": "salt", "chain": "input", "proto": "tcp", "dports": "80,443",
                   "jump": "accept", "full": true, "command": "add"})
        ),
        json!({"comment": "Successfully built rule", "rule": "tcp dport { 443, 80 } accept", "result": true})
    );
    assert_eq!(
        call(
            "nftables.build_rule",
            json!({"table": "salt", "chain": "input", "proto": "tcp", "dport": 22,
                   "jump": "accept", "full": "True", "command": "add"})
        )["rule"],
        json!("nft add rule ip salt input tcp dport { 22 } accept")
    );
    let saved = tempfile::tempdir().unwrap();
    let text = call(
        "nftables.save",
        json!({"filename": saved.path().display().to_string()}),
    );
    assert!(text.as_str().unwrap().starts_with("#! nft -f\n"));
    let file = std::fs::read_to_string(saved.path().join("salt-all-in-one.nft")).unwrap();
    assert!(file.contains("table ip6 t6"), "{file}");
    assert!(file.contains("tcp dport 8080 drop"), "{file}");
}
