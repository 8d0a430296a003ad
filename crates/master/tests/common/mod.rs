//! A real master and real minions on loopback, each in its own temp
//! config dir, driven through the real CLI binaries: the fleet is
//! halite-test-support's, shared with the API's tests.
#![allow(dead_code, unused_imports)]

use std::path::Path;

pub mod compile_mine;

pub use halite_test_support::fleet::{bin, read_all, sessions, EventWatch, Fleet, QUICK_KEEPALIVE};
pub use halite_test_support::{can_run, free_port, wait_for, write_file, Daemon};

/// The minion's side of an in-process compile whose tree makes no
/// render-time call (`Compiler::bundle` in the compile tests).
pub struct NoMinion;

impl halite_modules::exec::RemoteExec for NoMinion {
    fn call(&self, fun: &str, _args: &halite_modules::Args) -> Result<serde_json::Value, String> {
        Err(format!("{fun}: no minion here"))
    }
}

/// An in-process compiler over `root/salt` (`file_roots`) and
/// `root/pillar` (`pillar_roots`) with Salt's default renderer, as the
/// compile tests build it.
pub fn tree_compiler(root: &Path) -> halite_master::compiler::Compiler {
    use std::collections::BTreeMap;
    let roots = BTreeMap::from([("base".to_string(), vec![root.join("salt")])]);
    let pillar_roots = BTreeMap::from([("base".to_string(), vec![root.join("pillar")])]);
    halite_master::compiler::Compiler::new(
        serde_json::json!({"renderer": "jinja|yaml"}),
        std::sync::Arc::new(halite_master::fileserver::FileServer::new(roots, 1 << 20)),
        pillar_roots,
    )
}

/// The mode bits of `path`.
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

/// Runs `halite ARGS --async` against `fleet` and returns the jid it
/// printed (checked to be one).
pub fn async_jid(fleet: &Fleet, args: &[&str]) -> String {
    let mut full = args.to_vec();
    full.push("--async");
    let (text, code) = fleet.halite(&full);
    assert_eq!(code, 0, "{text}");
    let jid = text
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(halite_proto::jid::is_jid(&jid), "{text}");
    jid
}
