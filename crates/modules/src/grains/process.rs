//! Grains about the running process: `uid`, `gid`, `username`,
//! `groupname`, `pid`.

use halite_state::{Map, Value};
use nix::unistd::{getegid, geteuid, Gid, Group, Uid, User};

/// Inserts the identity grains of this process (effective ids, as Salt's
/// `os.geteuid()`-based grains).
pub fn insert_process_grains(grains: &mut Map) {
    let uid: Uid = geteuid();
    let gid: Gid = getegid();
    let username = User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_default();
    let groupname = Group::from_gid(gid)
        .ok()
        .flatten()
        .map(|g| g.name)
        .unwrap_or_default();
    grains.insert("username".into(), Value::from(username));
    grains.insert("groupname".into(), Value::from(groupname));
    grains.insert("pid".into(), Value::from(std::process::id()));
    grains.insert("gid".into(), Value::from(gid.as_raw()));
    grains.insert("uid".into(), Value::from(uid.as_raw()));
}
