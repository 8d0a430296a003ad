//! `git.detached`: a checkout at `target` with a detached HEAD at `rev`
//! (a commit hash, or a branch/tag name resolved through the remote), as
//! Salt 3008's: clone with `--no-checkout`, fetch, resolve, check out.

use halite_state::{StateCall, StateError, StateResult, Value};

use super::{arg_string, fail, format_comments, git_for, neutral, start};
use crate::exec::git::ops;
use crate::exec::git::run::{Git, GitCmd};

/// `git.detached <name> rev= target= [remote] [force_clone]
/// [force_checkout] [fetch_remote] [hard_reset] [submodules] [identity]
/// [https_user] [https_pass]`.
pub(super) fn detached(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let ret = start(call);
    let name = call.name().to_string();
    let rev = match call.arg("rev") {
        Some(v) if crate::exec::py_truth(v) => crate::exec::py_str(v),
        other => {
            let shown = other.map_or_else(|| "None".to_string(), crate::exec::py_str);
            return Ok(fail(
                ret,
                format!("'{shown}' is not a valid value for the 'rev' argument"),
                &[],
            ));
        }
    };
    let Some(target) = arg_string(call, "target").filter(|t| !t.is_empty()) else {
        return Ok(fail(
            ret,
            format!("'{rev}' is not a valid value for the 'target' argument"),
            &[],
        ));
    };
    if !target.starts_with('/') {
        return Ok(fail(
            ret,
            format!("Target '{target}' is not an absolute path"),
            &[],
        ));
    }
    let identity = match super::latest::identity_list(call) {
        Ok(i) => i,
        Err(e) => {
            return Ok(fail(
                ret,
                e.to_string().replacen("identity", "Identity", 1),
                &[],
            ))
        }
    };
    let mut git = git_for(call).with_identity(identity);
    if let Some(env) = call.chunk.get("__env__").and_then(Value::as_str) {
        git.saltenv = env.to_string();
    }
    if std::path::Path::new(&target).is_file() {
        return Ok(fail(
            ret,
            format!("Target '{target}' exists and is a regular file, cannot proceed"),
            &[],
        ));
    }
    let https_user = arg_string(call, "https_user");
    let https_pass = arg_string(call, "https_pass");
    let https = (https_user.as_deref(), https_pass.as_deref());
    if let Err(e) = crate::exec::git::url::add_http_basic_auth(&name, https.0, https.1) {
        return Ok(fail(ret, e, &[]));
    }
    let remote = arg_string(call, "remote").unwrap_or_else(|| "origin".into());
    let is_hash = rev.len() <= 40 && rev.chars().all(|c| c.is_ascii_hexdigit());
    let rev = if is_hash { rev.to_lowercase() } else { rev };
    let d = Detached {
        git: &git,
        call,
        name: &name,
        rev: &rev,
        target: &target,
        remote: &remote,
        https,
        is_hash,
    };
    let mut run = (ret, Vec::new());
    Ok(d.run(&mut run).unwrap_or_else(|| {
        let (mut ret, comments) = run;
        ret.comment = format_comments(&comments);
        ret
    }))
}

/// One `git.detached` call's inputs.
struct Detached<'d> {
    git: &'d Git<'d>,
    call: &'d StateCall<'d>,
    name: &'d str,
    rev: &'d str,
    target: &'d str,
    remote: &'d str,
    https: (Option<&'d str>, Option<&'d str>),
    is_hash: bool,
}

impl Detached<'_> {
    /// The phases; `Some` is an answer, `None` means `run` holds it.
    fn run(&self, run: &mut (StateResult, Vec<String>)) -> Option<StateResult> {
        let (git, target, test) = (self.git, self.target, self.call.test);
        let mut hash_exists_locally = false;
        let mut local_commit_id = None;
        let existing =
            std::path::Path::new(target).join(".git").is_dir() || ops::is_worktree(git, target);
        if existing {
            local_commit_id = ops::revision(git, target, "HEAD", false).ok();
            if self.is_hash {
                hash_exists_locally = describe(git, target, self.rev).is_ok();
            } else {
                let remotes = ops::remotes(git, target, false).unwrap_or_default();
                let current = remotes
                    .get(self.remote)
                    .and_then(|m| m.get("fetch"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if !current.as_deref().is_some_and(|u| u.contains(self.name)) {
                    if test {
                        return Some(neutral(
                            run.0.clone(),
                            format!("Remote {} would be set to {}", self.remote, self.name),
                        ));
                    }
                    if let Err(e) =
                        ops::remote_set(git, target, self.name, self.remote, self.https, None)
                    {
                        return Some(fail(run.0.clone(), e.stripped(), &run.1));
                    }
                    run.1.push(format!(
                        "Remote {} updated from '{}' to '{}'",
                        self.remote,
                        current.as_deref().unwrap_or("None"),
                        self.name
                    ));
                }
            }
        } else {
            if let Some(done) = self.clone(run) {
                return Some(done);
            }
        }
        let fetch_remote = self.call.arg_bool("fetch_remote", true);
        if !hash_exists_locally && fetch_remote {
            if test {
                return Some(neutral(
                    run.0.clone(),
                    format!("Repository remote {} would be fetched", self.remote),
                ));
            }
            let refspecs = vec![
                format!("refs/heads/*:refs/remotes/{}/*", self.remote),
                "+refs/tags/*:refs/tags/*".to_string(),
            ];
            match ops::fetch(git, target, Some(self.remote), true, &refspecs, &[]) {
                Ok(f) if !f.is_empty() => run.1.push(format!(
                    "Remote {} was fetched, resulting in updated refs",
                    self.remote
                )),
                Ok(_) => {}
                Err(e) => {
                    return Some(fail(run.0.clone(), format!("Fetch failed:\n\n{e}"), &run.1))
                }
            }
        }
        let checkout_commit_id = match self.resolve() {
            Ok(id) => id,
            Err(msg) => return Some(fail(run.0.clone(), msg, &[])),
        };
        if self.call.arg_bool("hard_reset", false) {
            if test {
                return Some(neutral(
                    run.0.clone(),
                    format!("Hard reset to HEAD would be performed on {target}"),
                ));
            }
            let reset = ["--hard".to_string(), "HEAD".to_string()];
            if let Err(e) = ops::simple(git, target, &["reset"], &reset, &[], false) {
                return Some(fail(run.0.clone(), e.stripped(), &run.1));
            }
            run.1
                .push("Repository was reset to HEAD before checking out revision".into());
        }
        let mut new_rev = None;
        if Some(&checkout_commit_id) != local_commit_id.as_ref() {
            if test {
                let mut ret = run.0.clone();
                ret.changes.insert(
                    "HEAD".into(),
                    serde_json::json!({"old": local_commit_id, "new": checkout_commit_id}),
                );
                return Some(neutral(
                    ret,
                    format!("Commit ID {checkout_commit_id} would be checked out at {target}"),
                ));
            }
            let force = self.call.arg_bool("force_checkout", false);
            if let Err(e) = ops::checkout(git, target, Some(&checkout_commit_id), force, &[]) {
                return Some(fail(run.0.clone(), e.stripped(), &run.1));
            }
            run.1.push(format!(
                "Commit ID {checkout_commit_id} was checked out at {target}"
            ));
            new_rev = ops::revision(git, target, "HEAD", false).ok();
        }
        if self.call.arg_bool("submodules", false) {
            let opts = ["--init".to_string(), "--recursive".to_string()];
            if let Err(e) = ops::simple(git, target, &["submodule", "update"], &opts, &[], true) {
                return Some(fail(run.0.clone(), e.stripped(), &run.1));
            }
            run.1.push("Submodules were updated".into());
        }
        match new_rev {
            Some(n) => {
                run.0.changes.insert(
                    "HEAD".into(),
                    serde_json::json!({"old": local_commit_id, "new": n}),
                );
            }
            None => run.1.push("Already checked out at correct revision".into()),
        }
        None
    }

    /// Clone phase (`--no-checkout`), with `force_clone` over a
    /// non-empty directory.
    fn clone(&self, run: &mut (StateResult, Vec<String>)) -> Option<StateResult> {
        let (target, name) = (self.target, self.name);
        if std::path::Path::new(target).is_dir() {
            if self.call.arg_bool("force_clone", false) {
                if self.call.test {
                    return Some(neutral(
                        run.0.clone(),
                        format!(
                            "Target directory {target} exists. Since force_clone=True, the \
                             contents of {target} would be deleted, and {name} would be cloned \
                             into this directory."
                        ),
                    ));
                }
                let errors = super::empty_dir(target);
                if !errors.is_empty() {
                    let lines: Vec<String> = errors
                        .iter()
                        .map(|(p, e)| format!("  {p}\n    {e}"))
                        .collect();
                    return Some(fail(
                        run.0.clone(),
                        format!("Unable to remove\n{}", lines.join("\n")),
                        &run.1,
                    ));
                }
                run.0.changes.insert("forced clone".into(), true.into());
            } else if super::non_empty_dir(target) {
                return Some(fail(
                    run.0.clone(),
                    format!(
                        "Target '{target}' exists, is non-empty and is not a git repository. \
                         Set the 'force_clone' option to True to remove this directory's \
                         contents and proceed with cloning the remote repository"
                    ),
                    &[],
                ));
            }
        }
        if self.call.test {
            return Some(neutral(
                run.0.clone(),
                format!("Repository {name} would be cloned to {target}"),
            ));
        }
        let mut opts = vec!["--no-checkout".to_string()];
        if self.remote != "origin" {
            opts.extend(["--origin".to_string(), self.remote.to_string()]);
        }
        if let Err(e) = ops::clone(self.git, target, name, &opts, self.https) {
            return Some(fail(run.0.clone(), e.stripped(), &run.1));
        }
        run.1.push(format!("{name} cloned to {target}"));
        None
    }

    /// The commit to check out: a hash known locally, or the remote
    /// branch or tag of that name in the checkout (Salt lists the
    /// checkout's own refs for it).
    fn resolve(&self) -> Result<String, String> {
        if self.is_hash {
            return match describe(self.git, self.target, self.rev) {
                Ok(d) if !d.is_empty() => Ok(self.rev.to_string()),
                _ => Err(format!("Revision '{}' does not exist", self.rev)),
            };
        }
        let refs = ops::ls_remote(self.git, None, self.target, None, &[], self.https)
            .map_err(|e| format!("Failed to list refs for {}: {}", self.remote, e.stripped()))?;
        let remote_ref = format!("refs/remotes/{}/{}", self.remote, self.rev);
        let tag_ref = format!("refs/tags/{}", self.rev);
        refs.get(&remote_ref)
            .or_else(|| refs.get(&tag_ref))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("Revision '{}' does not exist", self.rev))
    }
}

/// `git describe --always <rev>`: fails when the checkout lacks it.
fn describe(git: &Git<'_>, target: &str, rev: &str) -> Result<String, String> {
    git.out(&GitCmd::new(Some(target), &["describe", "--always", rev]))
        .map_err(|e| e.full())
}
