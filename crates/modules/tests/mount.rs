//! `mount` states and execution functions against real mounts: a tmpfs
//! on a temp dir, an fstab copy and a mount cache in temp dirs, and a
//! swap file (as root; skipped with the reason when mounting or swapping
//! is not permitted here). Expected comments are what Salt 3008.5
//! answered for the same states on this host.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

/// Whether this process may mount a tmpfs; prints why not.
fn can_mount(dir: &Path) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: mounting needs root");
        return false;
    }
    let probe = dir.join("probe");
    let _ = std::fs::create_dir_all(&probe);
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&probe)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        println!("skipped: mounting a tmpfs is not permitted in this sandbox");
        return false;
    }
    let _ = Command::new("umount").arg(&probe).status();
    true
}

/// Unmounts what a test mounted, whatever happens.
struct Unmount(String);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).output();
    }
}

fn host(cachedir: &Path) -> Host {
    common::host_with(json!({"cachedir": cachedir.to_string_lossy()}), json!({}))
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let call = common::Call {
        module: "mount",
        fun,
        name,
        args,
        test,
        sfun: Some("mounted"),
    };
    call.run(host)
        .unwrap_or_else(|e| StateResult::fail(name, e.to_string()))
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

fn live_opts(mnt: &str) -> Option<String> {
    std::fs::read_to_string("/proc/self/mounts")
        .ok()?
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(mnt))
        .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
}

#[test]
fn mounted_tmpfs_persists_remounts_on_change_and_unmounts() {
    let dir = tempfile::tempdir().expect("tempdir");
    if !can_mount(dir.path()) {
        return;
    }
    let host = host(&dir.path().join("cache"));
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let m = mnt.to_string_lossy().into_owned();
    let _guard = Unmount(m.clone());
    let fstab = dir.path().join("fstab");
    std::fs::write(&fstab, "# test fstab\nproc /proc proc defaults 0 0\n").expect("fstab");
    let c = fstab.to_string_lossy().into_owned();
    let args = |size: &str| json!({"device": "tmpfs", "fstype": "tmpfs", "opts": format!("size={size}"), "config": c});

    let t = state(&host, "mounted", &m, args("1m"), true);
    assert_eq!(
        (t.result, t.comment.clone()),
        (None, format!("{m} would be mounted"))
    );
    let r = state(&host, "mounted", &m, args("1m"), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        "Target was successfully mounted. Added new entry to the fstab."
    );
    assert_eq!(r.changes.get("mount"), Some(&json!(true)));
    assert_eq!(r.changes.get("persist"), Some(&json!("new")));
    assert_eq!(live_opts(&m).as_deref(), Some("rw,relatime,size=1024k"));
    assert_eq!(
        std::fs::read_to_string(&fstab).ok(),
        Some(format!(
            "# test fstab\nproc /proc proc defaults 0 0\ntmpfs\t\t{m}\ttmpfs\tsize=1m\t0 0\n"
        ))
    );
    assert_eq!(exec(&host, "mount.is_mounted", vec![json!(m)]), json!(true));
    assert_eq!(
        exec(&host, "mount.active", vec![])[&m]["fstype"],
        json!("tmpfs")
    );
    assert_eq!(
        exec(&host, "mount.fstab", vec![json!(c)])[&m]["opts"],
        json!(["size=1m"])
    );

    let again = state(&host, "mounted", &m, args("1m"), false);
    assert_eq!(
        again.comment,
        "Target was already mounted. Entry already exists in the fstab."
    );
    assert!(again.changes.is_empty());

    let t = state(&host, "mounted", &m, args("2m"), true);
    assert_eq!(
        t.comment,
        "Remount would be forced because options (size=1m)changed"
    );
    let r = state(&host, "mounted", &m, args("2m"), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        "Target was already mounted. Updated the entry in the fstab."
    );
    assert_eq!(
        r.changes.get("umount"),
        Some(&json!(
            "Forced remount because options (size=1024k) changed"
        ))
    );
    assert_eq!(r.changes.get("persist"), Some(&json!("update")));
    assert_eq!(live_opts(&m).as_deref(), Some("rw,relatime,size=2048k"));

    // A watched mounted state remounts (mod_watch with sfun mounted).
    let w = state(&host, "mod_watch", &m, args("2m"), false);
    assert_eq!(
        (w.result, w.comment.clone()),
        (Some(true), format!("{m} remounted"))
    );
    assert_eq!(live_opts(&m).as_deref(), Some("rw,relatime,size=2048k"));

    let unmount = json!({"config": c, "persist": true});
    let t = state(&host, "unmounted", &m, unmount.clone(), true);
    assert_eq!(
        t.comment,
        format!("Mount point {m} is mounted but should not be")
    );
    let r = state(&host, "unmounted", &m, unmount.clone(), false);
    assert_eq!(
        r.comment,
        "Target was successfully unmounted. Removed target from fstab"
    );
    assert_eq!(r.changes.get("persist"), Some(&json!("purged")));
    assert_eq!(live_opts(&m), None);
    assert_eq!(
        std::fs::read_to_string(&fstab).ok(),
        Some("# test fstab\nproc /proc proc defaults 0 0\n".into())
    );
    let r = state(&host, "unmounted", &m, unmount, false);
    assert_eq!(
        r.comment,
        "Target was already unmounted. fstab entry not found"
    );
}

#[test]
fn mounted_without_mounting_and_bad_devices() {
    let dir = tempfile::tempdir().expect("tempdir");
    if !can_mount(dir.path()) {
        return;
    }
    let host = host(&dir.path().join("cache"));
    let fstab = dir.path().join("fstab");
    std::fs::write(&fstab, "proc /proc proc defaults 0 0\n").expect("fstab");
    let c = fstab.to_string_lossy().into_owned();
    let new = dir.path().join("new").to_string_lossy().into_owned();
    let args = json!({"device": "tmpfs", "fstype": "tmpfs", "config": c, "mount": false});
    let r = state(&host, "mounted", &new, args.clone(), false);
    assert_eq!(
        r.comment,
        format!("{new} not present and not mounted. Added new entry to the fstab.")
    );
    let mut with_mkmnt = args.clone();
    with_mkmnt["mkmnt"] = json!(true);
    let t = state(&host, "mounted", &new, with_mkmnt, true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("{new} would be created, but not mounted. Entry already exists in the fstab.")
    );

    let mnt2 = dir.path().join("mnt2").to_string_lossy().into_owned();
    let _guard = Unmount(mnt2.clone());
    let r = state(
        &host,
        "mounted",
        &mnt2,
        json!({"device": "/nonexist", "fstype": "ext4", "config": c, "mkmnt": true}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.starts_with(&format!(
            "mount: {mnt2}: special device /nonexist does not exist."
        )),
        "{}",
        r.comment
    );
    let r = state(
        &host,
        "mounted",
        &mnt2,
        json!({"fstype": "ext4", "config": c}),
        false,
    );
    assert_eq!(r.comment, "Must provide device to mount.mounted");
    let missing = state(
        &host,
        "mounted",
        &mnt2,
        json!({"device": "tmpfs", "fstype": "tmpfs", "config": dir.path().join("nofstab").to_string_lossy(), "mount": false}),
        false,
    );
    assert_eq!(missing.result, Some(false));
    assert!(
        missing
            .comment
            .ends_with(". However, the fstab was not found."),
        "{}",
        missing.comment
    );
}

#[test]
fn set_and_rm_fstab_edit_only_their_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = host(dir.path());
    let fstab = dir.path().join("fstab");
    std::fs::write(&fstab, "# keep me\nUUID=abc / ext4 errors=remount-ro 0 1\n").expect("fstab");
    let c = json!(fstab.to_string_lossy());
    let set = |opts: &str| {
        host.call(
            "mount.set_fstab",
            &Args {
                positional: vec![
                    json!("/srv"),
                    json!("/dev/sdz1"),
                    json!("ext4"),
                    json!(opts),
                ],
                kwargs: [("config".to_string(), c.clone())].into_iter().collect(),
            },
        )
    };
    assert_eq!(set("defaults").ok(), Some(json!("new")));
    assert_eq!(set("defaults").ok(), Some(json!("present")));
    assert_eq!(set("noatime").ok(), Some(json!("change")));
    assert_eq!(
        std::fs::read_to_string(&fstab).ok(),
        Some("# keep me\nUUID=abc / ext4 errors=remount-ro 0 1\n/dev/sdz1\t\t/srv\text4\tnoatime\t0 0\n".into())
    );
    assert_eq!(
        exec(
            &host,
            "mount.rm_fstab",
            vec![json!("/srv"), json!("/dev/sdz1"), c.clone()]
        ),
        json!(true)
    );
    assert_eq!(
        std::fs::read_to_string(&fstab).ok(),
        Some("# keep me\nUUID=abc / ext4 errors=remount-ro 0 1\n".into())
    );
    let err = host.call(
        "mount.set_fstab",
        &Args {
            positional: vec![json!("/srv"), json!("/dev/sdz1"), json!("ext4")],
            kwargs: [("config".to_string(), json!("/nonexistent/fstab"))]
                .into_iter()
                .collect(),
        },
    );
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("Bad config file \"/nonexistent/fstab\"".into())
    );
}

#[test]
fn swap_file_is_activated_and_persisted() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    if !can_mount(dir.path()) {
        return;
    }
    let file = dir.path().join("swapfile");
    let f = file.to_string_lossy().into_owned();
    std::fs::write(&file, vec![0u8; 4 * 1024 * 1024]).expect("swap file");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let made = Command::new("mkswap")
        .arg(&file)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(made, "mkswap");
    struct SwapOff(String);
    impl Drop for SwapOff {
        fn drop(&mut self) {
            let _ = Command::new("swapoff").arg(&self.0).output();
        }
    }
    let _guard = SwapOff(f.clone());
    let host = host(dir.path());
    let fstab = dir.path().join("fstab");
    std::fs::write(&fstab, "").expect("fstab");
    let c = fstab.to_string_lossy().into_owned();
    let t = state(&host, "swap", &f, json!({"config": c}), true);
    assert_eq!(
        (t.result, t.comment.clone()),
        (None, format!("Swap {f} is set to be activated"))
    );
    let r = state(&host, "swap", &f, json!({"config": c}), false);
    if r.comment == format!("Swap {f} failed to activate") {
        println!("skipped: swapon is not permitted here");
        return;
    }
    assert_eq!(
        r.comment,
        format!("Swap {f} activated. Added new entry to the fstab.")
    );
    assert_eq!(r.changes.get("type"), Some(&json!("file")));
    assert_eq!(r.changes.get("persist"), Some(&json!("new")));
    assert_eq!(
        std::fs::read_to_string(&fstab).ok(),
        Some(format!("{f}\t\tnone\tswap\tdefaults\t0 0\n"))
    );
    let again = state(&host, "swap", &f, json!({"config": c}), false);
    assert_eq!(again.comment, format!("Swap {f} already active"));
    assert!(exec(&host, "mount.swaps", vec![]).get(&f).is_some());
    assert_eq!(exec(&host, "mount.swapoff", vec![json!(f)]), json!(true));
    assert_eq!(exec(&host, "mount.swapoff", vec![json!(f)]), Value::Null);
}
