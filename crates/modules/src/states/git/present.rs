//! `git.present` (an initialized repository, bare by default) and
//! `git.cloned` (a clone that is never updated, optionally on a branch).

use halite_state::{StateCall, StateError, StateResult};

use super::{arg_string, fail, flag, format_comments, git_for, neutral, non_empty_dir, start};
use crate::exec::git::ops;

/// `git.present <name> [force] [bare=True] [template] [separate_git_dir] [shared]`.
pub(super) fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let ret = start(call);
    let force = flag(call, "force", false);
    let bare = flag(call, "bare", true);
    let git = git_for(call);
    let bare_word = if bare { "bare " } else { "" };
    let path = std::path::Path::new(&name);
    let mut forced = false;
    if path.is_dir() {
        // Already a repository: Salt returns without a comment.
        if bare && path.join("HEAD").is_file() {
            return Ok(ret);
        }
        if !bare && (path.join(".git").is_dir() || ops::is_worktree(&git, &name)) {
            return Ok(ret);
        }
        if force {
            if call.test {
                let mut r = ret;
                r.changes.insert("new".into(), name.clone().into());
                r.changes.insert("forced init".into(), true.into());
                return Ok(neutral(
                    r,
                    format!(
                        "Target directory {name} exists. Since force=True, the contents of \
                         {name} would be deleted, and a {bare_word}repository would be \
                         initialized in its place."
                    ),
                ));
            }
            let removed = if path.is_symlink() {
                std::fs::remove_file(path)
            } else {
                std::fs::remove_dir_all(path)
            };
            if let Err(e) = removed {
                return Ok(fail(ret, format!("Unable to remove {name}: {e}"), &[]));
            }
            forced = true;
        } else if non_empty_dir(&name) {
            return Ok(fail(
                ret,
                format!(
                    "Target '{name}' exists, is non-empty, and is not a git repository. Set \
                     the 'force' option to True to remove this directory's contents and \
                     proceed with initializing a repository"
                ),
                &[],
            ));
        }
    }
    let mut ret = ret;
    if forced {
        ret.changes.insert("forced init".into(), true.into());
    }
    if call.test {
        ret.changes.insert("new".into(), name.clone().into());
        return Ok(neutral(
            ret,
            format!("New {bare_word}repository would be created"),
        ));
    }
    let template = arg_string(call, "template");
    let separate = arg_string(call, "separate_git_dir");
    let shared = call.arg("shared").map(|v| match v {
        halite_state::Value::Number(n) => format!("0{n}"),
        halite_state::Value::Bool(b) => b.to_string(),
        other => crate::exec::py_str(other),
    });
    if let Err(e) = ops::init(
        &git,
        &name,
        bare,
        template.as_deref(),
        separate.as_deref(),
        shared.as_deref(),
        &[],
    ) {
        return Ok(fail(ret, e.full(), &[]));
    }
    let mut actions = vec![format!("Initialized {bare_word}repository in {name}")];
    if let Some(t) = &template {
        actions.push(format!("Template directory set to {t}"));
    }
    if let Some(d) = &separate {
        actions.push(format!("Gitdir set to {d}"));
    }
    ret.changes.insert("new".into(), name.into());
    ret.comment = format_comments(&actions);
    Ok(ret)
}

/// `git.cloned <name> <target> [branch] [user] [identity] [https_user] [https_pass]`.
pub(super) fn cloned(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = start(call);
    ret.result = Some(false);
    let Some(target) = arg_string(call, "target") else {
        ret.comment = "'target' argument is required".into();
        return Ok(ret);
    };
    if !target.starts_with('/') {
        ret.comment = "'target' path must be absolute".into();
        return Ok(ret);
    }
    let branch = arg_string(call, "branch");
    if branch.as_deref() == Some("") {
        ret.comment = "Invalid 'branch' argument".into();
        return Ok(ret);
    }
    let git = git_for(call).with_identity(super::latest::identity_list(call)?);
    let need_clone = !std::path::Path::new(&target).exists();
    if !need_clone {
        if let Err(e) = ops::status(&git, &target) {
            ret.comment = e.full();
            return Ok(ret);
        }
    }
    let with_branch = branch
        .as_ref()
        .map(|b| format!(" with branch '{b}'"))
        .unwrap_or_default();
    if need_clone {
        ret.changes
            .insert("new".into(), format!("{name} => {target}").into());
        if call.test {
            return Ok(neutral(
                ret,
                format!("{name} would be cloned to {target}{with_branch}"),
            ));
        }
        let opts: Vec<String> = branch
            .iter()
            .flat_map(|b| ["--branch".to_string(), b.clone()])
            .collect();
        let https_user = arg_string(call, "https_user");
        let https_pass = arg_string(call, "https_pass");
        if let Err(e) = ops::clone(
            &git,
            &target,
            &name,
            &opts,
            (https_user.as_deref(), https_pass.as_deref()),
        ) {
            ret.changes.clear();
            return Ok(fail(ret, format!("Clone failed: {}", e.stripped()), &[]));
        }
        ret.comment = format_comments(&[format!("{name} cloned to {target}{with_branch}")]);
        ret.result = Some(true);
        return Ok(ret);
    }
    let Some(branch) = branch else {
        return Ok(already_cloned(ret, &target, None));
    };
    let current = ops::current_branch(&git, &target).unwrap_or_default();
    if current == branch {
        return Ok(already_cloned(ret, &target, Some(&branch)));
    }
    if call.test {
        ret.changes.insert(
            "branch".into(),
            serde_json::json!({"old": current, "new": branch}),
        );
        return Ok(neutral(
            ret,
            format!("Branch would be changed to '{branch}'"),
        ));
    }
    let (rev, opts) = match ops::rev_parse(&git, &target, Some(&branch), &[]) {
        Ok(_) => (branch.clone(), vec![]),
        Err(_) => (
            format!("origin/{branch}"),
            vec!["-b".to_string(), branch.clone()],
        ),
    };
    if let Err(e) = ops::checkout(&git, &target, Some(&rev), false, &opts) {
        return Ok(fail(
            ret,
            format!("Failed to change branch to '{branch}': {e}"),
            &[],
        ));
    }
    ret.changes.insert(
        "branch".into(),
        serde_json::json!({"old": current, "new": branch}),
    );
    ret.comment = format_comments(&[format!("Branch changed to '{branch}'")]);
    ret.result = Some(true);
    Ok(ret)
}

/// Salt's `_already_cloned`.
fn already_cloned(mut ret: StateResult, target: &str, branch: Option<&str>) -> StateResult {
    ret.result = Some(true);
    ret.comment = format!(
        "Repository already exists at {target}{}",
        branch
            .map(|b| format!(" and is checked out to branch '{b}'"))
            .unwrap_or_default()
    );
    ret
}
