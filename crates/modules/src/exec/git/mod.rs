//! Salt's `git` execution module over the `git` binary: the functions the
//! `git` states use (`clone`, `fetch`, `rev_parse`, `config_*`, `remotes`...)
//! and the everyday ones beside them, with Salt's argument names and
//! return shapes.
//!
//! The commands are run by [`run::Git`] (runas, identities, Salt's error
//! text); [`ops`] builds and parses them; this file reads Salt's
//! arguments.

pub mod ops;
pub mod run;
pub mod url;

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;
use run::{Git, GitCmd, GitError};

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "git",
    functions: &[
        ExecFunction::new("branch", branch),
        ExecFunction::new("checkout", checkout),
        ExecFunction::new("clone", clone),
        ExecFunction::new("config_get", config_get),
        ExecFunction::new("config_get_regexp", config_get_regexp),
        ExecFunction::new("config_get_regex", config_get_regexp),
        ExecFunction::new("config_set", config_set),
        ExecFunction::new("config_unset", config_unset),
        ExecFunction::new("current_branch", current_branch),
        ExecFunction::new("describe", describe),
        ExecFunction::new("diff", diff),
        ExecFunction::new("discard_local_changes", discard_local_changes),
        ExecFunction::new("fetch", fetch),
        ExecFunction::new("init", init),
        ExecFunction::new("is_worktree", is_worktree),
        ExecFunction::new("list_branches", list_branches),
        ExecFunction::new("list_tags", list_tags),
        ExecFunction::new("ls_remote", ls_remote),
        ExecFunction::new("merge", merge),
        ExecFunction::new("merge_base", merge_base),
        ExecFunction::new("pull", pull),
        ExecFunction::new("remote_get", remote_get),
        ExecFunction::new("remote_refs", remote_refs),
        ExecFunction::new("remote_set", remote_set),
        ExecFunction::new("remotes", remotes),
        ExecFunction::new("reset", reset),
        ExecFunction::new("rev_parse", rev_parse),
        ExecFunction::new("revision", revision),
        ExecFunction::new("status", status),
        ExecFunction::new("submodule", submodule),
        ExecFunction::new("symbolic_ref", symbolic_ref),
        ExecFunction::new("tag", tag),
        ExecFunction::new("version", version),
    ],
};

/// A failed git command as the caller sees it (Salt's CommandExecutionError).
fn err(e: GitError) -> ExecError {
    ExecError::Execution(e.full())
}

/// The runner for a call: its `user` and `identity` keywords.
fn git_of<'a>(args: &Args, host: &'a Host) -> Git<'a> {
    let identity = match args.kwargs.get("identity") {
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(v) => vec![crate::exec::py_str(v)],
    };
    let mut git = Git::new(host, args.get_str(usize::MAX, "user")).with_identity(identity);
    if let Some(env) = args.get_str(usize::MAX, "saltenv") {
        git.saltenv = env;
    }
    git
}

/// Salt's `_format_opts`: a string split like a shell, a list stringified,
/// a trailing `--` dropped.
pub fn opts_of(v: Option<&Value>) -> Vec<String> {
    let mut opts = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => crate::command::shell_words(s),
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(other) => vec![crate::exec::py_str(other)],
    };
    if opts.last().is_some_and(|o| o == "--") {
        opts.pop();
    }
    opts
}

/// Salt's `_expand_path`: a relative `cwd` is relative to the home of
/// `user` (the minion's own when none).
pub fn expand_path(cwd: &str, user: Option<&str>) -> String {
    if cwd.starts_with('/') {
        return cwd.to_string();
    }
    let home = match user {
        Some(u) => nix::unistd::User::from_name(u)
            .ok()
            .flatten()
            .map(|u| u.dir.display().to_string()),
        None => std::env::var("HOME").ok(),
    };
    match home {
        Some(h) => format!("{}/{cwd}", h.trim_end_matches('/')),
        None => cwd.to_string(),
    }
}

/// The required `cwd` argument at position `i`, expanded.
fn cwd_of(args: &Args, i: usize, fun: &str) -> Result<String, ExecError> {
    let cwd = args.require_str(i, "cwd", fun)?;
    Ok(expand_path(
        &cwd,
        args.get_str(usize::MAX, "user").as_deref(),
    ))
}

/// An optional `cwd` (config functions: required unless `global=True`).
fn config_cwd(args: &Args, i: usize) -> Result<Option<String>, ExecError> {
    let global = args.get_bool(usize::MAX, "global", false);
    match args.get_str(i, "cwd") {
        Some(c) => Ok(Some(expand_path(
            &c,
            args.get_str(usize::MAX, "user").as_deref(),
        ))),
        None if global => Ok(None),
        None => Err(ExecError::Invocation(
            "'cwd' argument required unless global=True".into(),
        )),
    }
}

/// The (`https_user`, `https_pass`) keywords.
fn https_of(args: &Args) -> (Option<String>, Option<String>) {
    (
        args.get_str(usize::MAX, "https_user"),
        args.get_str(usize::MAX, "https_pass"),
    )
}

fn strings(v: Vec<String>) -> Value {
    Value::Array(v.into_iter().map(Value::from).collect())
}

/// `git.clone <cwd> <url> [name] [opts]`: True once cloned.
fn clone(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "clone")?;
    let url = args
        .get_str(1, "url")
        .ok_or_else(|| ExecError::Invocation("Missing 'url' argument".into()))?;
    let target = match args.get_str(2, "name") {
        Some(name) => {
            std::fs::create_dir_all(&cwd).map_err(|e| {
                ExecError::Execution(format!("cannot create {cwd}: {e} (check its parent)"))
            })?;
            format!("{}/{name}", cwd.trim_end_matches('/'))
        }
        None => cwd,
    };
    let (u, p) = https_of(args);
    ops::clone(
        &git_of(args, host),
        &target,
        &url,
        &opts_of(args.get(3, "opts")),
        (u.as_deref(), p.as_deref()),
    )
    .map_err(|e| match e.command.is_empty() {
        // A bad https_user/https_pass is the caller's mistake.
        true => ExecError::Invocation(e.detail),
        false => err(e),
    })?;
    Ok(Value::Bool(true))
}

/// `git.fetch <cwd> [remote] [force] [refspecs] [opts]`: the refs changed.
fn fetch(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "fetch")?;
    let refspecs = match args.get(3, "refspecs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(v) => crate::exec::py_str(v)
            .split(',')
            .map(str::to_string)
            .collect(),
    };
    ops::fetch(
        &git_of(args, host),
        &cwd,
        args.get_str(1, "remote").as_deref(),
        args.get_bool(2, "force", false),
        &refspecs,
        &opts_of(args.get(4, "opts")),
    )
    .map(Value::Object)
    .map_err(err)
}

/// `git.checkout <cwd> [rev] [force] [opts]`: git's message.
fn checkout(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "checkout")?;
    ops::checkout(
        &git_of(args, host),
        &cwd,
        args.get_str(1, "rev").as_deref(),
        args.get_bool(2, "force", false),
        &opts_of(args.get(3, "opts")),
    )
    .map(Value::from)
    .map_err(|e| match e.command.is_empty() {
        true => ExecError::Invocation(e.detail),
        false => err(e),
    })
}

/// `git.rev_parse <cwd> [rev] [opts]`.
fn rev_parse(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "rev_parse")?;
    ops::rev_parse(
        &git_of(args, host),
        &cwd,
        args.get_str(1, "rev").as_deref(),
        &opts_of(args.get(2, "opts")),
    )
    .map(Value::from)
    .map_err(err)
}

/// `git.revision <cwd> [rev=HEAD] [short]`: the commit's SHA1.
fn revision(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "revision")?;
    let rev = args.get_str(1, "rev").unwrap_or_else(|| "HEAD".into());
    ops::revision(
        &git_of(args, host),
        &cwd,
        &rev,
        args.get_bool(2, "short", false),
    )
    .map(Value::from)
    .map_err(err)
}

/// `git.current_branch <cwd>`.
fn current_branch(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "current_branch")?;
    ops::current_branch(&git_of(args, host), &cwd)
        .map(Value::from)
        .map_err(err)
}

/// `git.describe <cwd> [rev=HEAD]`: `git describe --always`.
fn describe(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "describe")?;
    let rev = args.get_str(1, "rev").unwrap_or_else(|| "HEAD".into());
    ops::simple(
        &git_of(args, host),
        &cwd,
        &["describe", "--always"],
        &[],
        &[&rev],
        false,
    )
    .map(Value::from)
    .map_err(err)
}

/// `git.config_get <key> [cwd] [all=False] [global=False]`: the last
/// value (every value with `all`), None when unset.
fn config_get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "config_get")?;
    let cwd = config_cwd(args, 1)?;
    let global = args.get_bool(usize::MAX, "global", false);
    let values =
        ops::config_get_all(&git_of(args, host), cwd.as_deref(), &key, global).map_err(err)?;
    Ok(match values {
        None => Value::Null,
        Some(v) if args.get_bool(usize::MAX, "all", false) => strings(v),
        Some(mut v) => Value::from(v.pop().unwrap_or_default()),
    })
}

/// `git.config_get_regexp <key> [value_regex] [cwd]`: `{key: [values]}`.
fn config_get_regexp(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "config_get_regexp")?;
    let cwd = config_cwd(args, 2)?;
    let found = ops::config_get_regexp(
        &git_of(args, host),
        cwd.as_deref(),
        &key,
        args.get_str(1, "value_regex").as_deref(),
        args.get_bool(usize::MAX, "global", false),
    )
    .map_err(err)?;
    Ok(Value::Object(
        found.into_iter().map(|(k, v)| (k, strings(v))).collect(),
    ))
}

/// Salt's `multivar`: a list, or a comma-separated string.
pub fn multivar_of(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().map(crate::exec::py_str).collect(),
        other => crate::exec::py_str(other)
            .split(',')
            .map(str::to_string)
            .collect(),
    }
}

/// `git.config_set <key> [value] [multivar] [cwd] [add] [global]`: the
/// values after.
fn config_set(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "config_set")?;
    let cwd = config_cwd(args, 3)?;
    let value = args.get_str(1, "value");
    let multivar = args.get(2, "multivar").filter(|v| !v.is_null());
    let values = match (value, multivar) {
        (Some(_), Some(_)) => {
            return Err(ExecError::Invocation(
                "Only one of 'value' and 'multivar' is permitted".into(),
            ))
        }
        (Some(v), None) => vec![v],
        (None, Some(m)) => multivar_of(m),
        (None, None) => {
            return Err(ExecError::Invocation(
                "Either 'value' or 'multivar' is required".into(),
            ))
        }
    };
    let after = ops::config_set(
        &git_of(args, host),
        cwd.as_deref(),
        &key,
        &values,
        args.get_bool(usize::MAX, "add", false),
        args.get_bool(usize::MAX, "global", false),
    )
    .map_err(err)?;
    Ok(after.map(strings).unwrap_or(Value::Null))
}

/// `git.config_unset <key> [value_regex] [cwd] [all] [global]`: True.
fn config_unset(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "config_unset")?;
    let cwd = config_cwd(args, 2)?;
    ops::config_unset(
        &git_of(args, host),
        cwd.as_deref(),
        &key,
        args.get_str(1, "value_regex").as_deref(),
        args.get_bool(usize::MAX, "all", false),
        args.get_bool(usize::MAX, "global", false),
    )
    .map_err(err)?;
    Ok(Value::Bool(true))
}

/// `git.status <cwd>`: files by state.
fn status(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "status")?;
    ops::status(&git_of(args, host), &cwd)
        .map(Value::Object)
        .map_err(err)
}

/// `git.remotes <cwd> [redact_auth=True]`.
fn remotes(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "remotes")?;
    let redact = args.get_bool(3, "redact_auth", true);
    let r = ops::remotes(&git_of(args, host), &cwd, redact).map_err(err)?;
    Ok(Value::Object(
        r.into_iter().map(|(k, v)| (k, Value::Object(v))).collect(),
    ))
}

/// `git.remote_get <cwd> [remote=origin]`.
fn remote_get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "remote_get")?;
    let remote = args.get_str(1, "remote").unwrap_or_else(|| "origin".into());
    let redact = args.get_bool(4, "redact_auth", true);
    ops::remote_get(&git_of(args, host), &cwd, &remote, redact)
        .map(Value::Object)
        .map_err(err)
}

/// `git.remote_set <cwd> <url> [remote=origin]`: the remote's URLs after.
fn remote_set(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "remote_set")?;
    let url = args.require_str(1, "url", "remote_set")?;
    let remote = args.get_str(2, "remote").unwrap_or_else(|| "origin".into());
    let (u, p) = https_of(args);
    ops::remote_set(
        &git_of(args, host),
        &cwd,
        &url,
        &remote,
        (u.as_deref(), p.as_deref()),
        args.get_str(usize::MAX, "push_url").as_deref(),
    )
    .map(Value::Object)
    .map_err(|e| match e.command.is_empty() {
        true => ExecError::Invocation(e.detail),
        false => err(e),
    })
}

/// `git.ls_remote [cwd] [remote=origin] [ref] [opts]`: `{ref: sha}`.
fn ls_remote(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let user = args.get_str(usize::MAX, "user");
    let cwd = args
        .get_str(0, "cwd")
        .map(|c| expand_path(&c, user.as_deref()));
    let remote = args.get_str(1, "remote").unwrap_or_else(|| "origin".into());
    let (u, p) = https_of(args);
    ops::ls_remote(
        &git_of(args, host),
        cwd.as_deref(),
        &remote,
        args.get_str(2, "ref").as_deref(),
        &opts_of(args.get(3, "opts")),
        (u.as_deref(), p.as_deref()),
    )
    .map(Value::Object)
    .map_err(err)
}

/// `git.remote_refs <url> [heads] [tags] [filter=]`: `{ref: sha}`.
fn remote_refs(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let url = args.require_str(0, "url", "remote_refs")?;
    let mut opts = Vec::new();
    if args.get_bool(1, "heads", false) {
        opts.push("--heads".to_string());
    }
    if args.get_bool(2, "tags", false) {
        opts.push("--tags".to_string());
    }
    let (u, p) = https_of(args);
    ops::ls_remote(
        &git_of(args, host),
        None,
        &url,
        args.get_str(usize::MAX, "filter").as_deref(),
        &opts,
        (u.as_deref(), p.as_deref()),
    )
    .map(Value::Object)
    .map_err(err)
}

/// `git.list_branches <cwd> [remote=False]`.
fn list_branches(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "list_branches")?;
    ops::list_branches(&git_of(args, host), &cwd, args.get_bool(1, "remote", false))
        .map(strings)
        .map_err(err)
}

/// `git.list_tags <cwd>`.
fn list_tags(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "list_tags")?;
    ops::list_tags(&git_of(args, host), &cwd)
        .map(strings)
        .map_err(err)
}

/// `git.is_worktree <cwd>`.
fn is_worktree(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "is_worktree")?;
    Ok(Value::Bool(ops::is_worktree(&git_of(args, host), &cwd)))
}

/// `git.init <cwd> [bare] [template] [separate_git_dir] [shared] [opts]`.
fn init(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "init")?;
    let shared = args.get(4, "shared").and_then(|v| match v {
        Value::Null => None,
        Value::Number(n) => Some(format!("0{n}")),
        Value::Bool(b) => Some(if *b { "true" } else { "false" }.to_string()),
        other => Some(crate::exec::py_str(other)),
    });
    ops::init(
        &git_of(args, host),
        &cwd,
        args.get_bool(1, "bare", false),
        args.get_str(2, "template").as_deref(),
        args.get_str(3, "separate_git_dir").as_deref(),
        shared.as_deref(),
        &opts_of(args.get(5, "opts")),
    )
    .map(Value::from)
    .map_err(err)
}

/// `git.pull <cwd> [opts]`.
fn pull(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "pull")?;
    let opts = opts_of(args.get(1, "opts"));
    ops::simple(&git_of(args, host), &cwd, &["pull"], &opts, &[], true)
        .map(Value::from)
        .map_err(err)
}

/// `git.reset <cwd> [opts]`.
fn reset(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "reset")?;
    let opts = opts_of(args.get(1, "opts"));
    ops::simple(&git_of(args, host), &cwd, &["reset"], &opts, &[], false)
        .map(Value::from)
        .map_err(err)
}

/// `git.merge <cwd> [rev] [opts]`.
fn merge(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "merge")?;
    let opts = opts_of(args.get(2, "opts"));
    let rev = args.get_str(1, "rev");
    let words: Vec<&str> = rev.as_deref().into_iter().collect();
    ops::simple(&git_of(args, host), &cwd, &["merge"], &opts, &words, false)
        .map(Value::from)
        .map_err(err)
}

/// `git.branch <cwd> [name] [opts]`: True.
fn branch(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "branch")?;
    let opts = opts_of(args.get(2, "opts"));
    let name = args.get_str(1, "name");
    let words: Vec<&str> = name.as_deref().into_iter().collect();
    ops::simple(&git_of(args, host), &cwd, &["branch"], &opts, &words, false).map_err(err)?;
    Ok(Value::Bool(true))
}

/// `git.tag <cwd> <name> [ref=HEAD] [message] [opts]`: git's output.
fn tag(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "tag")?;
    let name = args.require_str(1, "name", "tag")?;
    let reference = args.get_str(2, "ref").unwrap_or_else(|| "HEAD".into());
    let opts: Vec<String> = opts_of(args.get(4, "opts"))
        .into_iter()
        .filter(|o| o != "-a" && o != "--annotate")
        .collect();
    if opts.iter().any(|o| o == "-m" || o.contains("--message")) {
        return Err(ExecError::Invocation(
            "Tag messages must be passed in the \"message\" argument".into(),
        ));
    }
    let mut cmd = GitCmd::new(Some(&cwd), &["tag"]);
    if let Some(m) = args.get_str(3, "message") {
        cmd = cmd.with(&["-a", "-m", &m]);
    }
    cmd = cmd.with(&opts).with(&[&name]);
    if !opts.iter().any(|o| o == "-d" || o == "--delete") {
        cmd = cmd.with(&[&reference]);
    }
    git_of(args, host)
        .out(&cmd.merged())
        .map(Value::from)
        .map_err(err)
}

/// `git.submodule <cwd> <command> [opts]`.
fn submodule(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "submodule")?;
    let command = args.require_str(1, "command", "submodule")?;
    let opts = opts_of(args.get(2, "opts"));
    ops::simple(
        &git_of(args, host),
        &cwd,
        &["submodule", &command],
        &opts,
        &[],
        true,
    )
    .map(Value::from)
    .map_err(err)
}

/// `git.symbolic_ref <cwd> <ref> [value] [opts]`.
fn symbolic_ref(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "symbolic_ref")?;
    let reference = args.require_str(1, "ref", "symbolic_ref")?;
    let opts = opts_of(args.get(3, "opts"));
    let value = args.get_str(2, "value");
    let mut words = vec![reference.as_str()];
    words.extend(value.as_deref());
    let git = git_of(args, host);
    let out = git
        .run(
            &GitCmd::new(Some(&cwd), &["symbolic-ref"])
                .with(&opts)
                .with(&words)
                .soft(),
        )
        .map_err(err)?;
    // `--quiet` asks "is HEAD a branch?": a detached HEAD answers "".
    if out.retcode != 0 && !(opts.iter().any(|o| o == "--quiet" || o == "-q")) {
        return Err(ExecError::Execution(format!(
            "Command 'git symbolic-ref {reference}' failed: {}",
            out.stderr
        )));
    }
    Ok(Value::from(out.stdout))
}

/// `git.merge_base <cwd> refs=[a, b] [is_ancestor]`: the merge base, or
/// whether the first is an ancestor of the second.
fn merge_base(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "merge_base")?;
    let refs: Vec<String> = match args.get(1, "refs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(v) => crate::exec::py_str(v)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    };
    let git = git_of(args, host);
    if args.get_bool(3, "is_ancestor", false) {
        let [a, b] = refs.as_slice() else {
            return Err(ExecError::Invocation(
                "Two refs/commits are required if 'is_ancestor' is True".into(),
            ));
        };
        return ops::is_ancestor(&git, &cwd, a, b)
            .map(Value::Bool)
            .map_err(err);
    }
    let out = git
        .out(&GitCmd::new(Some(&cwd), &["merge-base"]).with(&refs))
        .map_err(err)?;
    Ok(Value::from(out.lines().next().unwrap_or_default()))
}

/// `git.diff <cwd> [item1] [item2] [opts]`: the diff text.
fn diff(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "diff")?;
    let items: Vec<String> = [args.get_str(1, "item1"), args.get_str(2, "item2")]
        .into_iter()
        .flatten()
        .collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    let mut opts = opts_of(args.get(3, "opts"));
    if args.get_bool(usize::MAX, "cached", false) {
        opts.push("--cached".into());
    }
    ops::diff(&git_of(args, host), &cwd, &items, &opts)
        .map(Value::from)
        .map_err(err)
}

/// `git.discard_local_changes <cwd> [path=.]`.
fn discard_local_changes(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cwd = cwd_of(args, 0, "discard_local_changes")?;
    let path = args.get_str(1, "path").unwrap_or_else(|| ".".into());
    git_of(args, host)
        .out(&GitCmd::new(Some(&cwd), &["checkout", "--", &path]).merged())
        .map(Value::from)
        .map_err(err)
}

/// `git.version [versioninfo=False]`: `2.47.3`, or `[2, 47, 3]`.
fn version(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let v = ops::version(&git_of(args, host));
    if !args.get_bool(0, "versioninfo", false) {
        return Ok(Value::from(v));
    }
    Ok(Value::Array(
        v.split('.')
            .map(|p| p.parse::<i64>().map(Value::from).unwrap_or(Value::from(p)))
            .collect(),
    ))
}
