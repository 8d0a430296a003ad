//! `iptables` states and execution functions against the real iptables,
//! inside a network namespace each test creates for its own thread, so
//! the host's rules are never touched. The expected comments are Salt
//! 3008.5's, recorded the same way (`unshare -n salt-call --local`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

/// Moves this test's thread into a new network namespace (the commands
/// it spawns inherit it); false, with the reason printed, when that is
/// not possible here.
fn private_netns() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root to create a network namespace");
        return false;
    }
    if !std::path::Path::new("/usr/sbin/iptables").exists() {
        println!("skipped: iptables is not installed (scripts/install-deps.sh installs it)");
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
    // A chunk from the engine carries `order`: the rule built from the
    // arguments must leave it out, as Salt's build_rule does.
    let mut args = args;
    args["order"] = json!(10000);
    common::state_or_fail(host, "iptables", fun, name, args, test)
}

fn exec(host: &Host, fun: &str, kwargs: Value) -> Value {
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
}

fn save_output() -> String {
    let out = std::process::Command::new("iptables-save")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        serde_json::to_value(&r.changes).unwrap(),
    )
}

#[test]
fn chains_rules_and_policies_are_applied_once_like_salt() {
    if !private_netns() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("rules.v4");
    let ssh = json!({"chain": "mychain", "proto": "tcp", "dport": 22, "jump": "ACCEPT",
                     "comment": "ssh in", "save": saved.display().to_string()});
    let web = json!({"chain": "mychain", "position": 1, "proto": "tcp", "dports": [80, 443],
                     "jump": "ACCEPT"});
    let pol = json!({"chain": "FORWARD", "policy": "DROP"});
    let ssh_cmd = "/usr/sbin/iptables --wait -t filter -A mychain  -p tcp --dport 22 -m comment --comment \"ssh in\" --jump ACCEPT";
    let web_cmd = "/usr/sbin/iptables --wait -t filter -I mychain 1 -p tcp -m multiport --dports 80,443 --jump ACCEPT";

    // test=True: Salt 3008.5's predictions, nothing changed.
    let t = state(&host, "chain_present", "mychain", json!({}), true);
    assert_eq!(
        outcome(&t),
        (
            None,
            "iptables mychain chain in filter table needs to be set for ipv4".into(),
            json!({})
        )
    );
    let t = state(&host, "append", "ssh", ssh.clone(), true);
    assert_eq!(
        t.comment,
        format!("iptables rule for ssh needs to be set ({ssh_cmd}) for ipv4")
    );
    let t = state(&host, "set_policy", "pol", pol.clone(), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (
            None,
            "iptables default policy for chain FORWARD on table filter for ipv4 needs to be set to DROP"
        )
    );
    assert!(!save_output().contains("mychain"));

    // The real run.
    let r = state(&host, "chain_present", "mychain", json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "iptables mychain chain in filter table create success for ipv4".into(),
            json!({"locale": "mychain"})
        )
    );
    let r = state(&host, "append", "ssh", ssh.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!(
                "Set and saved iptables rule ssh for ipv4\n{ssh_cmd}\nWrote 1 lines to \"{}\"",
                saved.display()
            ),
            json!({"locale": "ssh"})
        )
    );
    assert!(std::fs::read_to_string(&saved)
        .unwrap()
        .contains("-A mychain -p tcp -m tcp --dport 22 -m comment --comment \"ssh in\" -j ACCEPT"));
    let t = state(&host, "insert", "web", web.clone(), true);
    assert_eq!(
        t.comment,
        format!("iptables rule for web needs to be set for ipv4 ({web_cmd})")
    );
    let r = state(&host, "insert", "web", web.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Set iptables rule for web to: {web_cmd} for ipv4"),
            json!({"locale": "web"})
        )
    );
    let r = state(&host, "set_policy", "pol", pol.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Set default policy for FORWARD to DROP family ipv4".into(),
            json!({"locale": "pol"})
        )
    );
    let rules = save_output();
    assert!(rules.contains(":FORWARD DROP"), "{rules}");
    let web_at = rules.find("--dports 80,443").unwrap();
    let ssh_at = rules.find("--dport 22").unwrap();
    assert!(web_at < ssh_at, "insert did not go first: {rules}");

    // Applied twice: no changes anywhere.
    let again = state(&host, "chain_present", "mychain", json!({}), false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            "iptables mychain chain is already exist in filter table for ipv4".into(),
            json!({})
        )
    );
    let again = state(&host, "append", "ssh", ssh.clone(), false);
    assert_eq!(again.changes.len(), 0);
    // The saved file predates the insert, so Salt saves again.
    assert!(
        again.comment.starts_with(&format!(
            "iptables rule for ssh already set ({ssh_cmd}) for ipv4\nSaved iptables rule ssh"
        )),
        "{}",
        again.comment
    );
    let third = state(&host, "append", "ssh", ssh.clone(), false);
    assert_eq!(
        outcome(&third),
        (
            Some(true),
            format!("iptables rule for ssh already set ({ssh_cmd}) for ipv4"),
            json!({})
        )
    );
    let again = state(&host, "insert", "web", web.clone(), false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            format!("iptables rule for web already set for ipv4 ({web_cmd})"),
            json!({})
        )
    );
    let again = state(&host, "set_policy", "pol", pol.clone(), true);
    assert_eq!(
        (again.result, again.comment.as_str()),
        (
            Some(true),
            "iptables default policy for chain FORWARD on table filter for ipv4 already set to DROP"
        )
    );
    assert_eq!(save_output(), rules);

    // delete: the rule goes, then is already absent.
    let del = json!({"chain": "mychain", "proto": "tcp", "dport": 22, "jump": "ACCEPT",
                     "comment": "ssh in"});
    let del_cmd = "/usr/sbin/iptables --wait -t filter -D mychain  -p tcp --dport 22 -m comment --comment \"ssh in\" --jump ACCEPT";
    let t = state(&host, "delete", "ssh", del.clone(), true);
    assert_eq!(
        (t.result, t.comment.clone()),
        (
            None,
            format!("iptables rule for ssh needs to be deleted for ipv4 ({del_cmd})")
        )
    );
    let r = state(&host, "delete", "ssh", del.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Delete iptables rule for ssh {del_cmd}"),
            json!({"locale": "ssh"})
        )
    );
    assert!(!save_output().contains("--dport 22"));
    let again = state(&host, "delete", "ssh", del, false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            format!("iptables rule for ssh already absent for ipv4 ({del_cmd})"),
            json!({})
        )
    );

    // The execution functions over the same namespace.
    assert_eq!(
        exec(&host, "iptables.get_policy", json!({"chain": "FORWARD"})),
        json!("DROP")
    );
    let rules = exec(&host, "iptables.get_rules", json!({}));
    assert_eq!(
        rules["filter"]["mychain"]["rules"][0]["dports"],
        json!(["80,443"])
    );
    assert_eq!(
        exec(&host, "iptables.check_chain", json!({"chain": "mychain"})),
        json!(true)
    );
    assert_eq!(
        exec(
            &host,
            "iptables.check",
            json!({"chain": "mychain", "rule": "-p tcp -m multiport --dports 80,443 -j ACCEPT"})
        ),
        json!(true)
    );

    assert_eq!(
        exec(
            &host,
            "iptables.build_rule",
            json!({"chain": "INPUT", "proto": "tcp", "dport": 22, "jump": "ACCEPT",
                   "full": true, "command": "A"})
        ),
        json!("/usr/sbin/iptables --wait -t filter -A INPUT  -p tcp --dport 22 --jump ACCEPT")
    );

    // flush and chain_absent.
    let r = state(&host, "flush", "f", json!({"chain": "mychain"}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Flush iptables rules in filter table mychain chain ipv4 family".into(),
            json!({"locale": "f"})
        )
    );
    assert!(!save_output().contains("-A mychain"));
    let t = state(&host, "chain_absent", "mychain", json!({}), true);
    assert_eq!(
        t.comment,
        "iptables mychain chain in filter table needs to be removed ipv4"
    );
    let r = state(&host, "chain_absent", "mychain", json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "iptables mychain chain in filter table delete success for ipv4".into(),
            json!({"locale": "mychain"})
        )
    );
    let again = state(&host, "chain_absent", "mychain", json!({}), false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            "iptables mychain chain is already absent in filter table for ipv4".into(),
            json!({})
        )
    );
    assert!(!save_output().contains("mychain"));
}

#[test]
fn ipv6_rules_go_to_ip6tables() {
    if !private_netns() {
        return;
    }
    let host = host();
    let args = json!({"family": "ipv6", "chain": "INPUT", "proto": "tcp", "dport": 8080,
                      "jump": "DROP"});
    let r = state(&host, "append", "v6", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert!(r
        .comment
        .contains("/usr/sbin/ip6tables --wait -t filter -A INPUT"));
    let out = std::process::Command::new("ip6tables-save")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("--dport 8080 -j DROP"));
    assert!(
        !save_output().contains("8080"),
        "the ipv4 table was touched"
    );
    let again = state(&host, "append", "v6", args, false);
    assert_eq!(again.changes.len(), 0, "{}", again.comment);
}
