//! `git.latest`: a checkout at `target` that follows `rev` of the remote
//! `name`, as Salt 3008's: the same phases (read the arguments, resolve
//! the remote rev, then update an existing checkout or clone a new one),
//! the same comments, `changes` (`new`, `revision: {old, new}`,
//! `forced update`, `forced clone`, `new_tags`, `deleted_tags`) and
//! `test=True` predictions.

use std::collections::BTreeSet;

use halite_state::{Map, StateCall, StateError, StateResult, Value};

use super::{arg_string, fail, format_comments, git_for, neutral, start};
use crate::exec::git::ops;
use crate::exec::git::run::{Git, GitError};
use crate::exec::git::url::{add_http_basic_auth, redact_http_basic_auth};

/// Salt's `force_reset`: `True`, `False` or `'remote-changes'`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ForceReset {
    No,
    Yes,
    RemoteChanges,
}

impl ForceReset {
    /// Python's truth of the value (`'remote-changes'` is true).
    fn truthy(self) -> bool {
        self != Self::No
    }
}

/// What the remote rev is (Salt's `remote_rev_type`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum RevType {
    Sha1,
    Branch,
    Tag,
}

/// Salt's `desired_upstream`: `False` (no tracking branch wanted),
/// `None` (follow the remote HEAD: leave it) or a branch.
#[derive(Debug, Clone, PartialEq)]
enum Upstream {
    Unset,
    Leave,
    Branch(String),
}

impl Upstream {
    fn branch(&self) -> Option<&str> {
        match self {
            Self::Branch(b) => Some(b),
            _ => None,
        }
    }
}

/// The arguments, read and checked once.
struct Args {
    name: String,
    target: String,
    rev: String,
    branch: Option<String>,
    update_head: bool,
    force_checkout: bool,
    force_clone: bool,
    force_fetch: bool,
    force_reset: ForceReset,
    submodules: bool,
    bare: bool,
    mirror: bool,
    remote: String,
    sync_tags: bool,
    depth: Option<String>,
    https_user: Option<String>,
    https_pass: Option<String>,
    refspecs: Vec<String>,
    test: bool,
}

/// What the remote says about the rev (resolve phase).
struct Remote {
    all_refs: Map,
    default_branch: Option<String>,
    rev: String,
    remote_rev: Option<String>,
    rev_type: Option<RevType>,
    desired_upstream: Upstream,
    remote_loc: String,
    desired_fetch_url: String,
    redacted_fetch_url: String,
}

/// The `identity` argument as a list of key paths (`salt://` ones kept
/// for the runner to fetch), refused as Salt refuses it.
pub(super) fn identity_list(call: &StateCall<'_>) -> Result<Vec<String>, StateError> {
    let ids: Vec<String> = match call.arg("identity") {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(_) => {
            return Err(StateError::BadArg(
                "identity must be either a list or a string".into(),
            ))
        }
    };
    let ids: Vec<String> = ids
        .iter()
        .map(|i| crate::exec::file::expand_user(i))
        .collect();
    for id in &ids {
        if !id.contains("salt://") && !id.starts_with('/') {
            return Err(StateError::BadArg(format!(
                "identity '{id}' is not an absolute path"
            )));
        }
    }
    Ok(ids)
}

/// `git.latest <name> target= [rev=HEAD] [branch] ...`.
pub(super) fn latest(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let ret = start(call);
    let a = match read_args(call) {
        Ok(a) => a,
        Err(msg) => return Ok(fail(ret, msg, &[])),
    };
    let identity = match identity_list(call) {
        Ok(i) => i,
        Err(e) => return Ok(fail(ret, e.to_string(), &[])),
    };
    let mut git = git_for(call).with_identity(identity);
    if let Some(env) = call.chunk.get("__env__").and_then(Value::as_str) {
        git.saltenv = env.to_string();
    }
    if std::path::Path::new(&a.target).is_file() {
        return Ok(fail(
            ret,
            format!(
                "Target '{}' exists and is a regular file, cannot proceed",
                a.target
            ),
            &[],
        ));
    }
    let remote = match resolve(&git, &a) {
        Ok(r) => r,
        Err(msg) => return Ok(fail(ret, msg, &[])),
    };
    let check = if a.bare { "refs" } else { ".git" };
    let gitdir = std::path::Path::new(&a.target).join(check);
    let mut run = Run {
        ret,
        comments: Vec::new(),
    };
    let existing = gitdir.is_dir() || ops::is_worktree(&git, &a.target);
    let outcome = if existing {
        update(&git, &a, &remote, &mut run)
    } else {
        clone(&git, &a, &remote, &mut run)
    };
    Ok(match outcome {
        Ok(Some(done)) => done,
        Ok(None) => run.ret,
        Err(e) => fail(run.ret, e.stripped(), &run.comments),
    })
}

/// The return being built and the actions taken so far.
struct Run {
    ret: StateResult,
    comments: Vec<String>,
}

/// Reads and checks the arguments as Salt's first lines do.
fn read_args(call: &StateCall<'_>) -> Result<Args, String> {
    let name = call.name().to_string();
    let remote = arg_string(call, "remote").unwrap_or_else(|| "origin".into());
    if remote.is_empty() {
        return Err("'remote' argument is required".into());
    }
    let Some(target) = arg_string(call, "target").filter(|t| !t.is_empty()) else {
        return Err("'target' argument is required".into());
    };
    let rev = match call.chunk.get("rev") {
        None => "HEAD".to_string(),
        Some(v) if !crate::exec::py_truth(v) => {
            return Err(format!(
                "'{}' is not a valid value for the 'rev' argument",
                crate::exec::py_str(v)
            ))
        }
        Some(v) => crate::exec::py_str(v),
    };
    let force_reset = match call.arg("force_reset") {
        None | Some(Value::Bool(false)) => ForceReset::No,
        Some(Value::Bool(true)) => ForceReset::Yes,
        Some(Value::Number(n)) if n.as_i64() == Some(0) => ForceReset::No,
        Some(Value::Number(n)) if n.as_i64() == Some(1) => ForceReset::Yes,
        Some(Value::String(s)) if s == "remote-changes" => ForceReset::RemoteChanges,
        Some(_) => {
            return Err("'force_reset' must be one of True, False, or 'remote-changes'".into())
        }
    };
    if !target.starts_with('/') {
        return Err(format!("target '{target}' is not an absolute path"));
    }
    let mirror = call.arg_bool("mirror", false);
    let bare = mirror || call.arg_bool("bare", false);
    if rev != "HEAD" && bare {
        return Err("'rev' is not compatible with the 'mirror' and 'bare' arguments".into());
    }
    let fetch_tags = call.arg_bool("fetch_tags", true);
    let refspec_branch = arg_string(call, "refspec_branch").unwrap_or_else(|| "*".into());
    let refspec_tag = arg_string(call, "refspec_tag").unwrap_or_else(|| "*".into());
    let refspecs = if fetch_tags {
        vec![
            format!("refs/heads/{refspec_branch}:refs/remotes/{remote}/{refspec_branch}"),
            format!("+refs/tags/{refspec_tag}:refs/tags/{refspec_tag}"),
        ]
    } else {
        Vec::new()
    };
    Ok(Args {
        name,
        target,
        rev,
        branch: arg_string(call, "branch"),
        update_head: call.arg_bool("update_head", true),
        force_checkout: call.arg_bool("force_checkout", false),
        force_clone: call.arg_bool("force_clone", false),
        force_fetch: call.arg_bool("force_fetch", false),
        force_reset,
        submodules: call.arg_bool("submodules", false),
        bare,
        mirror,
        remote,
        sync_tags: call.arg_bool("sync_tags", true),
        depth: arg_string(call, "depth"),
        https_user: arg_string(call, "https_user"),
        https_pass: arg_string(call, "https_pass"),
        refspecs,
        test: call.test,
    })
}

/// Resolve phase: the remote's refs, which of them `rev` names, and
/// where the checkout should end up (Salt's `remote_rev`, `remote_loc`).
fn resolve(git: &Git<'_>, a: &Args) -> Result<Remote, String> {
    let https = (a.https_user.as_deref(), a.https_pass.as_deref());
    let desired_fetch_url = add_http_basic_auth(&a.name, https.0, https.1)?;
    let redacted_fetch_url = redact_http_basic_auth(&desired_fetch_url);
    let all_refs = ops::ls_remote(git, None, &a.name, None, &[], https)
        .map_err(|e| format!("Failed to check remote refs: {}", e.stripped()))?;
    let sha = |k: &str| all_refs.get(k).and_then(Value::as_str).map(str::to_string);
    let head_rev = sha("HEAD");
    let default_branch = head_rev.as_ref().and_then(|h| {
        all_refs.iter().find_map(|(k, v)| {
            let b = k.strip_prefix("refs/heads/")?;
            (v.as_str() == Some(h)).then(|| b.to_string())
        })
    });
    let mut rev = a.rev.clone();
    let mut desired_upstream = Upstream::Unset;
    let (remote_rev, rev_type) = if a.bare {
        (None, None)
    } else if rev == "HEAD" {
        match &head_rev {
            Some(h) => {
                desired_upstream = Upstream::Leave;
                (Some(h.clone()), Some(RevType::Sha1))
            }
            None => (None, None),
        }
    } else if let Some(s) = sha(&format!("refs/heads/{rev}")) {
        desired_upstream = Upstream::Branch(format!("{}/{rev}", a.remote));
        (Some(s), Some(RevType::Branch))
    } else if let Some(s) = sha(&format!("refs/tags/{rev}^{{}}")) {
        (Some(s), Some(RevType::Tag))
    } else if let Some(s) = sha(&format!("refs/tags/{rev}")) {
        (Some(s), Some(RevType::Tag))
    } else if rev.len() <= 40 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
        rev = rev.to_lowercase();
        (Some(rev.clone()), Some(RevType::Sha1))
    } else {
        (None, None)
    };
    let remote_loc = match (&remote_rev, rev_type) {
        (Some(r), Some(RevType::Sha1)) if rev == "HEAD" => {
            format!("remote HEAD ({})", short(r))
        }
        (Some(r), Some(RevType::Sha1)) => short(r),
        (Some(r), Some(RevType::Branch)) => format!(
            "{} ({})",
            desired_upstream.branch().unwrap_or(&rev),
            short(r)
        ),
        (Some(r), _) => format!("{rev} ({})", short(r)),
        _ => "None".to_string(),
    };
    if a.depth.is_some() && !matches!(rev_type, Some(RevType::Branch | RevType::Tag)) {
        return Err(
            "When 'depth' is used, 'rev' must be set to the name of a branch or tag \
                    on the remote repository"
                .into(),
        );
    }
    if remote_rev.is_none() && !a.bare && rev != "HEAD" {
        return Err(format!(
            "No revision matching '{rev}' exists in the remote repository"
        ));
    }
    Ok(Remote {
        all_refs,
        default_branch,
        rev,
        remote_rev,
        rev_type,
        desired_upstream,
        remote_loc,
        desired_fetch_url,
        redacted_fetch_url,
    })
}

/// Salt's `_short_sha`.
fn short(sha: &str) -> String {
    sha.chars().take(7).collect()
}

/// Salt's `_short_sha` of an optional SHA (`None` shown as Python does).
fn short_opt(sha: Option<&str>) -> String {
    sha.map(short).unwrap_or_else(|| "None".into())
}

/// Salt's `_revs_equal`: a SHA1 rev may be given short.
fn revs_equal(a: Option<&str>, b: Option<&str>, rev_type: Option<RevType>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) if rev_type == Some(RevType::Sha1) => a.starts_with(b),
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Salt's `_need_branch_change`.
fn need_branch_change(branch: Option<&str>, local_branch: Option<&str>) -> bool {
    branch.is_some() && branch != local_branch
}

/// Salt's `_uptodate`.
fn uptodate(
    mut ret: StateResult,
    a: &Args,
    comments: &[String],
    local_changes: bool,
) -> StateResult {
    ret.comment = format!("Repository {} is up-to-date", a.target);
    if local_changes {
        ret.comment.push_str(
            ", but with uncommitted changes. Set 'force_reset' to True to purge uncommitted \
             changes.",
        );
    }
    if !comments.is_empty() {
        ret.comment.push_str(&format!(
            "\n\nChanges {}made: {}",
            if a.test { "that would be " } else { "" },
            format_comments(comments)
        ));
    }
    ret
}

/// The checkout's HEAD commit and branch, `None` where git has none.
fn local_rev_and_branch(git: &Git<'_>, target: &str) -> (Option<String>, Option<String>) {
    (
        ops::revision(git, target, "HEAD", false).ok(),
        ops::current_branch(git, target).ok(),
    )
}

/// The `upstream` of `branch` (`branch@{upstream}`), `None` when unset.
fn upstream_of(git: &Git<'_>, target: &str, branch: Option<&str>) -> Option<String> {
    let b = branch?;
    ops::rev_parse(
        git,
        target,
        Some(&format!("{b}@{{upstream}}")),
        &["--abbrev-ref".into()],
    )
    .ok()
    .filter(|u| !u.is_empty())
}

/// Salt's `_get_branch_opts`: the `git branch` options that set the
/// tracking branch, `None` when checking out a new branch sets it.
fn branch_opts(
    branch: Option<&str>,
    local_branches: &[String],
    desired: &str,
) -> Option<Vec<String>> {
    if let Some(b) = branch {
        if !local_branches.iter().any(|l| l == b) {
            return None;
        }
    }
    Some(vec!["--set-upstream-to".into(), desired.into()])
}

/// The tracking-branch action: (message, `git branch` options).
fn upstream_action(
    upstream: Option<&str>,
    desired: &Upstream,
    branch: Option<&str>,
    local_branches: &[String],
) -> Option<(String, Option<Vec<String>>)> {
    match (upstream, desired) {
        (None, Upstream::Branch(d)) => Some((
            format!("Tracking branch was set to {d}"),
            branch_opts(branch, local_branches, d),
        )),
        (Some(_), Upstream::Unset) => Some((
            "Tracking branch was unset".into(),
            Some(vec!["--unset-upstream".into()]),
        )),
        (Some(u), Upstream::Branch(d)) if u != d => Some((
            format!("Tracking branch was updated to {d}"),
            branch_opts(branch, local_branches, d),
        )),
        _ => None,
    }
}

/// Salt's `_not_fast_forward` message.
#[allow(clippy::too_many_arguments)]
fn not_fast_forward(
    a: &Args,
    r: &Remote,
    pre: Option<&str>,
    post: Option<&str>,
    local_branch: Option<&str>,
    local_changes: bool,
    comments: &[String],
    ret: StateResult,
) -> StateResult {
    let rev = &r.rev;
    let mut branch_msg = String::new();
    if a.branch.is_none() {
        if rev != "HEAD" {
            if local_branch != Some(rev.as_str()) {
                branch_msg = format!(
                    " The desired rev ({rev}) differs from the name of the local branch \
                     ({}), if the desired rev is a branch name then a forced update could \
                     possibly be avoided by setting the 'branch' argument to '{rev}' instead.",
                    local_branch.unwrap_or("None")
                );
            }
        } else if let Some(d) = &r.default_branch {
            if local_branch != Some(d.as_str()) {
                let lb = local_branch.unwrap_or("None");
                branch_msg = format!(
                    " The default remote branch ({d}) differs from the local branch ({lb}). \
                     This could be caused by changing the default remote branch, or if the \
                     local branch was manually changed. Rather than forcing an update, it may \
                     be advisable to set the 'branch' argument to '{d}' instead. To ensure \
                     that this state follows the '{d}' branch instead of the remote HEAD, set \
                     the 'rev' argument to '{d}'."
                );
            }
        }
    }
    let (pre, post) = (short_opt(pre), short_opt(post));
    let what = if local_changes && pre != post {
        format!("from {pre} to {post}")
    } else {
        format!("to {post}")
    };
    let after = if need_branch_change(a.branch.as_deref(), local_branch) {
        format!(
            " (after checking out local branch '{}')",
            a.branch.as_deref().unwrap_or_default()
        )
    } else {
        String::new()
    };
    let (why, or_rc, discard) = if local_changes {
        (
            "there are uncommitted changes",
            " (or 'remote-changes')",
            " and discard these changes",
        )
    } else {
        ("this is not a fast-forward merge", "", "")
    };
    fail(
        ret,
        format!(
            "Repository would be updated {what}{after}, but {why}. Set 'force_reset' to \
             True{or_rc} to force this update{discard}.{branch_msg}"
        ),
        comments,
    )
}

/// Update phase: an existing checkout brought to the remote rev.
/// `Ok(Some(ret))` is an early answer; `Ok(None)` means `run.ret` is it.
fn update(
    git: &Git<'_>,
    a: &Args,
    r: &Remote,
    run: &mut Run,
) -> Result<Option<StateResult>, GitError> {
    let target = a.target.as_str();
    let all_local_branches = ops::list_branches(git, target, false)?;
    let all_local_tags: BTreeSet<String> = ops::list_tags(git, target)?.into_iter().collect();
    let (local_rev, local_branch) = local_rev_and_branch(git, target);
    let remote_rev = r.remote_rev.as_deref();
    let branch = a.branch.as_deref();
    if !a.bare && remote_rev.is_none() && local_rev.is_some() {
        return Ok(Some(fail(
            run.ret.clone(),
            "Remote repository is empty, cannot update from a non-empty to an empty \
             repository",
            &[],
        )));
    }
    let mut base_rev = local_rev.clone();
    let mut base_branch = local_branch.clone();
    if need_branch_change(branch, local_branch.as_deref()) {
        let b = branch.unwrap_or_default();
        if !all_local_branches.iter().any(|l| l == b) {
            base_rev = remote_rev.map(str::to_string);
        } else {
            base_branch = Some(b.to_string());
            match ops::rev_parse(git, target, Some(&format!("{b}^{{commit}}")), &[]) {
                Ok(s) => base_rev = Some(s),
                Err(e) => {
                    return Ok(Some(fail(
                        run.ret.clone(),
                        format!(
                            "Unable to get position of local branch '{b}': {}",
                            e.stripped()
                        ),
                        &run.comments,
                    )))
                }
            }
        }
    }
    let remotes = ops::remotes(git, target, false)?;
    let revs_match = revs_equal(local_rev.as_deref(), remote_rev, r.rev_type);
    let local_changes = !a.bare
        && ops::diff(git, target, &["HEAD"], &[])
            .map(|d| !d.is_empty())
            .unwrap_or(false);

    if local_changes && revs_match {
        if a.force_reset == ForceReset::Yes {
            let msg = format!(
                "{target} is up-to-date, but with uncommitted changes. Since 'force_reset' is \
                 set to True, these local changes would be reset. To only reset when there \
                 are changes in the remote repository, set 'force_reset' to 'remote-changes'."
            );
            if a.test {
                run.ret.changes.insert("forced update".into(), true.into());
                return Ok(Some(neutral(run.ret.clone(), msg)));
            }
        } else {
            return Ok(Some(uptodate(run.ret.clone(), a, &run.comments, true)));
        }
    }

    let mut has_remote_rev = false;
    if r.rev_type == Some(RevType::Sha1)
        && base_rev
            .as_deref()
            .zip(remote_rev)
            .is_some_and(|(b, rr)| b.starts_with(rr))
    {
        has_remote_rev = true;
    } else if let Some(rr) = remote_rev {
        if ops::rev_parse(git, target, Some(&format!("{rr}^{{commit}}")), &[]).is_ok() {
            match r.rev_type {
                Some(RevType::Branch) if remotes.contains_key(&a.remote) => {
                    let up = r.desired_upstream.branch().unwrap_or_default();
                    if ops::rev_parse(git, target, Some(up), &[]).ok().as_deref() == Some(rr) {
                        has_remote_rev = true;
                    }
                }
                Some(RevType::Tag) if all_local_tags.contains(&r.rev) => {
                    let local_tag =
                        ops::rev_parse(git, target, Some(&format!("{}^{{commit}}", r.rev)), &[])
                            .ok();
                    if local_tag.as_deref() == Some(rr) {
                        has_remote_rev = true;
                    } else if !a.force_reset.truthy() {
                        return Ok(Some(fail(
                            run.ret.clone(),
                            format!(
                                "'{}' is a tag, but the remote SHA1 for this tag ({}) doesn't \
                                 match the local SHA1 ({}). Set 'force_reset' to True to force \
                                 this update.",
                                r.rev,
                                short(rr),
                                short_opt(local_tag.as_deref())
                            ),
                            &[],
                        )));
                    }
                }
                Some(RevType::Sha1) => has_remote_rev = true,
                _ => {}
            }
        }
    }

    let mut fast_forward: Option<bool> =
        if local_changes && a.force_reset != ForceReset::RemoteChanges {
            Some(false)
        } else {
            None
        };

    if has_remote_rev {
        if !revs_match && !a.update_head && (branch.is_none() || branch == local_branch.as_deref())
        {
            let mut ret = run.ret.clone();
            ret.comment = format!(
                "{} is already present and local HEAD ({}) does not match, but \
                 update_head=False. HEAD has not been updated locally.",
                loc_capitalized(r),
                short_opt(local_rev.as_deref())
            );
            return Ok(Some(ret));
        }
        if fast_forward != Some(false) {
            fast_forward = Some(match (&base_rev, remote_rev) {
                (None, _) => true,
                (Some(b), Some(rr)) => ops::is_ancestor(git, target, b, rr)?,
                (Some(_), None) => false,
            });
        }
    }

    let merge_action = match fast_forward {
        Some(false) => {
            if a.force_reset == ForceReset::No {
                return Ok(Some(not_fast_forward(
                    a,
                    r,
                    base_rev.as_deref(),
                    remote_rev,
                    local_branch.as_deref(),
                    local_changes,
                    &run.comments,
                    run.ret.clone(),
                )));
            }
            "hard-reset"
        }
        Some(true) => "fast-forwarded",
        None => "updated",
    };

    let upstream = upstream_of(git, target, base_branch.as_deref());
    let fetch_url = remotes
        .get(&a.remote)
        .and_then(|m| m.get("fetch"))
        .and_then(Value::as_str)
        .map(str::to_string);

    if remote_rev.is_some() && Some(&r.desired_fetch_url) != fetch_url.as_ref() {
        let shown_old = fetch_url
            .as_deref()
            .map(redact_http_basic_auth)
            .unwrap_or_else(|| "None".into());
        if a.test {
            let mut actions = vec![format!(
                "Remote '{}' would be changed from {shown_old} to {}",
                a.remote, r.redacted_fetch_url
            )];
            if !has_remote_rev {
                actions.push("Remote would be fetched".into());
            }
            if !revs_match && a.update_head {
                run.ret.changes.insert(
                    "revision".into(),
                    serde_json::json!({"old": local_rev, "new": remote_rev}),
                );
                if fast_forward == Some(false) {
                    run.ret.changes.insert("forced update".into(), true.into());
                }
                actions.push(format!(
                    "Repository would be {merge_action} to {}",
                    short_opt(remote_rev)
                ));
            }
            if !run.ret.changes.is_empty() {
                return Ok(Some(neutral(run.ret.clone(), format_comments(&actions))));
            }
            if !revs_match && !a.update_head {
                let mut ret = run.ret.clone();
                ret.comment = format_comments(&actions);
                return Ok(Some(ret));
            }
            return Ok(Some(uptodate(run.ret.clone(), a, &actions, false)));
        }
        ops::remote_set(
            git,
            target,
            &a.name,
            &a.remote,
            (a.https_user.as_deref(), a.https_pass.as_deref()),
            None,
        )?;
        if fetch_url.is_none() {
            run.comments.push(format!(
                "Remote '{}' set to {}",
                a.remote, r.redacted_fetch_url
            ));
            run.ret
                .changes
                .insert("new".into(), format!("{} => {}", a.name, a.remote).into());
        } else {
            run.comments.push(format!(
                "Remote '{}' changed from {shown_old} to {}",
                a.remote, r.redacted_fetch_url
            ));
        }
    }

    if let Some(rr) = remote_rev {
        if a.test {
            return Ok(Some(predict(
                a,
                r,
                run,
                Prediction {
                    has_remote_rev,
                    revs_match,
                    local_rev: local_rev.as_deref(),
                    local_branch: local_branch.as_deref(),
                    all_local_branches: &all_local_branches,
                    fast_forward,
                    merge_action,
                    upstream: upstream.as_deref(),
                },
            )));
        }
        let action = upstream_action(
            upstream.as_deref(),
            &r.desired_upstream,
            branch,
            &all_local_branches,
        );
        if action.as_ref().is_some_and(|(_, o)| o.is_some()) && local_branch.is_none() {
            return Ok(Some(fail(
                run.ret.clone(),
                "Cannot set/unset upstream tracking branch, local HEAD refers to nonexistent \
                 branch. This may have been caused by cloning a remote repository for which \
                 the default branch was renamed or deleted. If you are unable to fix the \
                 remote repository, you can work around this by setting the 'branch' \
                 argument (which will ensure that the named branch is created if it does not \
                 already exist).",
                &run.comments,
            )));
        }
        sync_tags(git, a, run, &all_local_tags, &mut has_remote_rev)?;

        if !has_remote_rev {
            let fetched = match ops::fetch(
                git,
                target,
                Some(&a.remote),
                a.force_fetch,
                &a.refspecs,
                &[],
            ) {
                Ok(f) => f,
                Err(e) => {
                    return Ok(Some(fail(
                        run.ret.clone(),
                        format!(
                            "Fetch failed. Set 'force_fetch' to True to force the fetch if the \
                             failure was due to not being able to fast-forward. Output of the \
                             fetch command follows:\n\n{}",
                            e.stripped()
                        ),
                        &run.comments,
                    )))
                }
            };
            if !fetched.is_empty() {
                run.comments
                    .push(format!("{} was fetched, resulting in updated refs", a.name));
            }
            if let Err(e) = ops::rev_parse(git, target, Some(&format!("{rr}^{{commit}}")), &[]) {
                return Ok(Some(fail(
                    run.ret.clone(),
                    format!(
                        "Fetch did not successfully retrieve rev '{}' from {}: {e}",
                        r.rev, a.name
                    ),
                    &[],
                )));
            }
            if !revs_match
                && !a.update_head
                && (branch.is_none() || branch == local_branch.as_deref())
            {
                let mut ret = run.ret.clone();
                ret.comment = format!(
                    "{} is already present and local HEAD ({}) does not match, but \
                     update_head=False. HEAD has not been updated locally.",
                    loc_capitalized(r),
                    short_opt(local_rev.as_deref())
                );
                return Ok(Some(ret));
            }
            fast_forward = Some(match &base_rev {
                None => true,
                Some(b) => ops::is_ancestor(git, target, b, rr)?,
            });
            let refuse = (fast_forward == Some(false) && a.force_reset == ForceReset::No)
                || (fast_forward == Some(true) && local_changes && a.force_reset == ForceReset::No);
            if refuse {
                return Ok(Some(not_fast_forward(
                    a,
                    r,
                    base_rev.as_deref(),
                    remote_rev,
                    local_branch.as_deref(),
                    local_changes,
                    &run.comments,
                    run.ret.clone(),
                )));
            }
        }

        if need_branch_change(branch, local_branch.as_deref()) {
            let b = branch.unwrap_or_default();
            if local_changes && !a.force_checkout {
                return Ok(Some(fail(
                    run.ret.clone(),
                    format!(
                        "Local branch '{}' has uncommitted changes. Set 'force_checkout' to \
                         True to discard them and proceed.",
                        local_branch.as_deref().unwrap_or("None")
                    ),
                    &[],
                )));
            }
            let (checkout_rev, opts) = if !all_local_branches.iter().any(|l| l == b) {
                let from = if r.rev == "HEAD" {
                    rr.to_string()
                } else {
                    r.desired_upstream
                        .branch()
                        .map(str::to_string)
                        .unwrap_or_else(|| r.rev.clone())
                };
                (from, vec!["-b".to_string(), b.to_string()])
            } else {
                (b.to_string(), vec![])
            };
            ops::checkout(git, target, Some(&checkout_rev), a.force_checkout, &opts)?;
            if opts.is_empty() {
                run.comments
                    .push(format!("'{checkout_rev}' was checked out"));
            } else {
                run.comments.push(format!(
                    "New branch '{b}' was checked out, with {} as a starting point",
                    r.remote_loc
                ));
            }
        }

        if fast_forward == Some(false) {
            ops::simple(
                git,
                target,
                &["reset"],
                &["--hard".into(), rr.into()],
                &[],
                false,
            )?;
            run.ret.changes.insert("forced update".into(), true.into());
            if local_changes {
                run.comments
                    .push("Uncommitted changes were discarded".into());
            }
            run.comments
                .push(format!("Repository was hard-reset to {}", r.remote_loc));
        } else if fast_forward == Some(true) && local_changes && a.force_reset != ForceReset::No {
            ops::simple(git, target, &["checkout", "--", "."], &[], &[], false)?;
            run.comments
                .push("Uncommitted changes were discarded".into());
        }

        if let Some((msg, Some(opts))) = &action {
            ops::simple(git, target, &["branch"], opts, &[], false)?;
            run.comments.push(msg.clone());
        }

        if fast_forward == Some(true) && !revs_equal(base_rev.as_deref(), remote_rev, r.rev_type) {
            if r.desired_upstream.branch().is_some() || r.rev == "HEAD" {
                let on_branch = git
                    .run(
                        &crate::exec::git::run::GitCmd::new(
                            Some(target),
                            &["symbolic-ref", "--quiet", "HEAD"],
                        )
                        .soft(),
                    )
                    .map(|o| o.retcode == 0 && !o.stdout.is_empty())
                    .unwrap_or(false);
                if !on_branch {
                    return Ok(Some(fail(
                        run.ret.clone(),
                        "Unable to fast-forward, HEAD is detached",
                        &run.comments,
                    )));
                }
                ops::simple(git, target, &["merge"], &["--ff-only".into()], &[rr], false)?;
                run.comments
                    .push(format!("Repository was fast-forwarded to {}", r.remote_loc));
            } else {
                let to = if r.rev == "HEAD" { rr } else { r.rev.as_str() };
                ops::simple(
                    git,
                    target,
                    &["reset"],
                    &["--hard".into(), to.into()],
                    &[],
                    false,
                )?;
                run.comments
                    .push(format!("Repository was reset to {} (fast-forward)", r.rev));
            }
        }

        if a.submodules {
            if let Err(e) = submodule_update(git, target) {
                return Ok(Some(fail(
                    run.ret.clone(),
                    format!("Failed to update submodules: {}", e.stripped()),
                    &run.comments,
                )));
            }
        }
    } else if a.bare {
        if a.test {
            let msg = format!("Bare repository at {target} would be fetched");
            if !run.ret.changes.is_empty() {
                return Ok(Some(neutral(run.ret.clone(), msg)));
            }
            return Ok(Some(uptodate(run.ret.clone(), a, &[msg], false)));
        }
        match ops::fetch(
            git,
            target,
            Some(&a.remote),
            a.force_fetch,
            &a.refspecs,
            &[],
        ) {
            Ok(f) => run.comments.push(format!(
                "Bare repository at {target} was fetched{}",
                if f.is_empty() {
                    ""
                } else {
                    ", resulting in updated refs"
                }
            )),
            Err(e) => {
                return Ok(Some(fail(
                    run.ret.clone(),
                    format!(
                        "Fetch failed. Set 'force_fetch' to True to force the fetch if the \
                         failure was due to not being able to fast-forward. Output of the \
                         fetch command follows:\n\n{}",
                        e.stripped()
                    ),
                    &run.comments,
                )))
            }
        }
    }

    let new_rev = ops::revision(git, target, "HEAD", false).ok();
    if !a.bare && !revs_equal(new_rev.as_deref(), remote_rev, r.rev_type) {
        return Ok(Some(fail(
            run.ret.clone(),
            "Failed to update repository",
            &run.comments,
        )));
    }
    if local_rev != new_rev {
        run.ret.comment = format_comments(&run.comments);
        run.ret.changes.insert(
            "revision".into(),
            serde_json::json!({"old": local_rev, "new": new_rev}),
        );
        Ok(None)
    } else {
        Ok(Some(uptodate(run.ret.clone(), a, &run.comments, false)))
    }
}

/// `remote_loc`, capitalized when it is the remote HEAD (Salt's
/// `remote_loc.capitalize()`, which also lowers the rest).
fn loc_capitalized(r: &Remote) -> String {
    if r.rev != "HEAD" {
        return r.remote_loc.clone();
    }
    let lower = r.remote_loc.to_lowercase();
    let mut c = lower.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// `git submodule update --init --recursive`.
fn submodule_update(git: &Git<'_>, target: &str) -> Result<String, GitError> {
    ops::simple(
        git,
        target,
        &["submodule", "update"],
        &["--init".into(), "--recursive".into()],
        &[],
        true,
    )
}

/// Tags phase: new remote tags are reported, tags the remote no longer
/// has are deleted locally (`sync_tags`); either forces a fetch.
fn sync_tags(
    git: &Git<'_>,
    a: &Args,
    run: &mut Run,
    local_tags: &BTreeSet<String>,
    has_remote_rev: &mut bool,
) -> Result<(), GitError> {
    let remote_tags = ops::remote_tags(git, &a.target, &a.remote).unwrap_or_default();
    if *local_tags == remote_tags {
        return Ok(());
    }
    *has_remote_rev = false;
    let new_tags: Vec<String> = remote_tags
        .difference(local_tags)
        .map(|t| halite_salt_rules::pyfmt::string_repr(t))
        .collect();
    if !new_tags.is_empty() {
        // A Python set in Salt, which its outputters show as its repr.
        run.ret.changes.insert(
            "new_tags".into(),
            format!("{{{}}}", new_tags.join(", ")).into(),
        );
    }
    if !a.sync_tags {
        return Ok(());
    }
    let mut deleted = Vec::new();
    for tag in local_tags.difference(&remote_tags) {
        if !a.test {
            if let Err(e) = ops::simple(git, &a.target, &["tag"], &["-d".into()], &[tag], false) {
                let warnings = run
                    .ret
                    .extra
                    .entry("warnings".to_string())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(w) = warnings {
                    w.push(format!("Failed to remove local tag '{tag}':\n\n{e}\n\n").into());
                }
                continue;
            }
        }
        deleted.push(tag.clone());
    }
    if !deleted.is_empty() {
        run.comments.push(format!(
            "The following tags {} removed from the local checkout: {}",
            if a.test { "would be" } else { "were" },
            deleted.join(", ")
        ));
        run.ret.changes.insert(
            "deleted_tags".into(),
            Value::Array(deleted.into_iter().map(Value::from).collect()),
        );
    }
    Ok(())
}

/// What the test-mode prediction of an update needs to know.
struct Prediction<'p> {
    has_remote_rev: bool,
    revs_match: bool,
    local_rev: Option<&'p str>,
    local_branch: Option<&'p str>,
    all_local_branches: &'p [String],
    fast_forward: Option<bool>,
    merge_action: &'p str,
    upstream: Option<&'p str>,
}

/// `test=True` on an existing checkout: what would be done.
fn predict(a: &Args, r: &Remote, run: &mut Run, p: Prediction<'_>) -> StateResult {
    let remote_rev = r.remote_rev.as_deref();
    let branch = a.branch.as_deref();
    let mut actions = Vec::new();
    if !p.has_remote_rev {
        actions.push(format!("Remote '{}' would be fetched", a.remote));
    }
    if !p.revs_match && (a.update_head || (branch.is_some() && branch != p.local_branch)) {
        run.ret.changes.insert(
            "revision".into(),
            serde_json::json!({"old": p.local_rev, "new": remote_rev}),
        );
    }
    if need_branch_change(branch, p.local_branch) {
        let b = branch.unwrap_or_default();
        if !p.all_local_branches.iter().any(|l| l == b) {
            actions.push(format!(
                "New branch '{b}' would be checked out, with {} as a starting point",
                r.remote_loc
            ));
            if let Some(d) = r.desired_upstream.branch() {
                actions.push(format!("Tracking branch would be set to {d}"));
            }
        } else {
            actions.push(format!(
                "Branch '{b}' would be checked out and {} to {}",
                p.merge_action,
                short_opt(remote_rev)
            ));
        }
    } else if !p.revs_match {
        if a.update_head {
            if p.fast_forward == Some(true) {
                actions.push(format!(
                    "Repository would be fast-forwarded from {} to {}",
                    short_opt(p.local_rev),
                    short_opt(remote_rev)
                ));
            } else {
                let how = if a.force_reset.truthy() && p.has_remote_rev {
                    "hard-reset"
                } else {
                    "updated"
                };
                actions.push(format!(
                    "Repository would be {how} from {} to {}",
                    short_opt(p.local_rev),
                    short_opt(remote_rev)
                ));
            }
        } else {
            actions.push(format!(
                "Local HEAD ({}) does not match {} but update_head=False, HEAD would not be \
                 updated locally",
                short_opt(p.local_rev),
                r.remote_loc
            ));
        }
    }
    match (p.upstream, &r.desired_upstream) {
        (None, Upstream::Branch(d)) => actions.push(format!("Tracking branch would be set to {d}")),
        (Some(_), Upstream::Unset) => actions.push("Tracking branch would be unset".into()),
        (Some(u), Upstream::Branch(d)) if u != d => {
            actions.push(format!("Tracking branch would be updated to {d}"))
        }
        _ => {}
    }
    if !run.ret.changes.is_empty() {
        return neutral(run.ret.clone(), format_comments(&actions));
    }
    let formatted = format_comments(&actions);
    if !p.revs_match && !a.update_head && !formatted.is_empty() {
        let mut ret = run.ret.clone();
        ret.comment = formatted;
        return ret;
    }
    uptodate(run.ret.clone(), a, &actions, false)
}

/// Clone phase: no checkout at `target` yet.
fn clone(
    git: &Git<'_>,
    a: &Args,
    r: &Remote,
    run: &mut Run,
) -> Result<Option<StateResult>, GitError> {
    let target = a.target.as_str();
    let name = a.name.as_str();
    if std::path::Path::new(target).is_dir() {
        if a.force_clone {
            if a.test {
                run.ret.changes.insert("forced clone".into(), true.into());
                run.ret
                    .changes
                    .insert("new".into(), format!("{name} => {target}").into());
                return Ok(Some(neutral(
                    run.ret.clone(),
                    format!(
                        "Target directory {target} exists. Since force_clone=True, the \
                         contents of {target} would be deleted, and {name} would be cloned \
                         into this directory."
                    ),
                )));
            }
            let errors = super::empty_dir(target);
            if !errors.is_empty() {
                let lines: Vec<String> = errors
                    .iter()
                    .map(|(p, e)| format!("  {p}\n    {e}"))
                    .collect();
                return Ok(Some(fail(
                    run.ret.clone(),
                    format!("Unable to remove\n{}", lines.join("\n")),
                    &run.comments,
                )));
            }
            run.ret.changes.insert("forced clone".into(), true.into());
        } else if super::non_empty_dir(target) {
            return Ok(Some(fail(
                run.ret.clone(),
                format!(
                    "Target '{target}' exists, is non-empty and is not a git repository. Set \
                     the 'force_clone' option to True to remove this directory's contents and \
                     proceed with cloning the remote repository"
                ),
                &[],
            )));
        }
    }
    if a.test {
        run.ret
            .changes
            .insert("new".into(), format!("{name} => {target}").into());
        return Ok(Some(neutral(
            run.ret.clone(),
            format!("Repository {name} would be cloned to {target}"),
        )));
    }
    let mut opts: Vec<String> = if a.mirror {
        vec!["--mirror".into()]
    } else if a.bare {
        vec!["--bare".into()]
    } else {
        vec![]
    };
    if a.remote != "origin" {
        opts.extend(["--origin".into(), a.remote.clone()]);
    }
    if let Some(d) = &a.depth {
        opts.extend([
            "--depth".into(),
            d.clone(),
            "--branch".into(),
            r.rev.clone(),
        ]);
    }
    if let Err(e) = ops::clone(
        git,
        target,
        name,
        &opts,
        (a.https_user.as_deref(), a.https_pass.as_deref()),
    ) {
        return Ok(Some(fail(
            run.ret.clone(),
            format!("Clone failed: {}", e.stripped()),
            &run.comments,
        )));
    }
    run.ret
        .changes
        .insert("new".into(), format!("{name} => {target}").into());
    run.comments.push(format!(
        "{name} cloned to {target}{}",
        if a.mirror {
            " as mirror"
        } else if a.bare {
            " as bare repository"
        } else {
            ""
        }
    ));
    if !a.bare {
        match r.remote_rev.as_deref() {
            None => {
                if r.rev != "HEAD" {
                    return Ok(Some(fail(
                        run.ret.clone(),
                        format!(
                            "Repository was cloned but is empty, so {}/{} cannot be checked out",
                            a.remote, r.rev
                        ),
                        &run.comments,
                    )));
                }
            }
            Some(rr) => {
                if let Some(done) = checkout_after_clone(git, a, r, rr, run)? {
                    return Ok(Some(done));
                }
            }
        }
    }
    if a.submodules && r.remote_rev.is_some() {
        if let Err(e) = submodule_update(git, target) {
            return Ok(Some(fail(
                run.ret.clone(),
                format!("Failed to update submodules: {}", e.stripped()),
                &run.comments,
            )));
        }
    }
    let new_rev = ops::revision(git, target, "HEAD", false).ok();
    run.ret.comment = format_comments(&run.comments);
    if let Some(n) = new_rev {
        run.ret.changes.insert(
            "revision".into(),
            serde_json::json!({"old": Value::Null, "new": n}),
        );
    }
    Ok(None)
}

/// After a clone: the rev (and branch) checked out, the tracking branch
/// set. `Some(ret)` is a failure answer.
fn checkout_after_clone(
    git: &Git<'_>,
    a: &Args,
    r: &Remote,
    rr: &str,
    run: &mut Run,
) -> Result<Option<StateResult>, GitError> {
    let target = a.target.as_str();
    if r.rev_type == Some(RevType::Tag) && !ops::list_tags(git, target)?.contains(&r.rev) {
        return Ok(Some(fail(
            run.ret.clone(),
            format!("Revision '{}' does not exist in clone", r.rev),
            &run.comments,
        )));
    }
    if let Some(b) = a.branch.as_deref() {
        if !ops::list_branches(git, target, false)?
            .iter()
            .any(|l| l == b)
        {
            let from = if r.rev == "HEAD" {
                rr.to_string()
            } else {
                r.desired_upstream
                    .branch()
                    .map(str::to_string)
                    .unwrap_or_else(|| r.rev.clone())
            };
            ops::checkout(git, target, Some(&from), false, &["-b".into(), b.into()])?;
            run.comments.push(format!(
                "Branch '{b}' checked out, with {} as a starting point",
                r.remote_loc
            ));
        }
    }
    let (local_rev, local_branch) = local_rev_and_branch(git, target);
    if local_branch.is_none() && !r.all_refs.contains_key("HEAD") {
        return Ok(Some(fail(
            run.ret.clone(),
            "Remote HEAD refers to a ref that does not exist. This can happen when the \
             default branch on the remote repository is renamed or deleted. If you are unable \
             to fix the remote repository, you can work around this by setting the 'branch' \
             argument (which will ensure that the named branch is created if it does not \
             already exist).",
            &run.comments,
        )));
    }
    if !revs_equal(local_rev.as_deref(), Some(rr), r.rev_type) {
        ops::simple(
            git,
            target,
            &["reset"],
            &["--hard".into(), rr.into()],
            &[],
            false,
        )?;
        run.comments
            .push(format!("Repository was reset to {}", r.remote_loc));
    }
    let upstream = upstream_of(git, target, local_branch.as_deref());
    let branches = ops::list_branches(git, target, false)?;
    if let Some((msg, Some(opts))) = upstream_action(
        upstream.as_deref(),
        &r.desired_upstream,
        a.branch.as_deref(),
        &branches,
    ) {
        ops::simple(git, target, &["branch"], &opts, &[], false)?;
        run.comments.push(msg);
    }
    Ok(None)
}
