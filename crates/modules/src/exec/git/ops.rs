//! The git operations the `git.*` execution functions and the `git`
//! states share, typed: each builds Salt's command line, runs it through
//! [`Git`] and parses the output the way Salt's `modules/git.py` does.

use std::collections::BTreeSet;

use halite_state::{Map, Value};

use super::run::{Git, GitCmd, GitError};
use super::url::{add_http_basic_auth, redact_http_basic_auth};

/// A remote's fetch and push URLs (`git.remotes`).
pub type Remotes = indexmap::IndexMap<String, Map>;

/// `git clone [opts] -- <url> <target>` (Salt's `git.clone` with no
/// `name`: run from `/tmp`, so a relative target is never meant).
pub fn clone(
    git: &Git<'_>,
    target: &str,
    url: &str,
    opts: &[String],
    https: (Option<&str>, Option<&str>),
) -> Result<(), GitError> {
    let url = add_http_basic_auth(url, https.0, https.1).map_err(GitError::msg)?;
    let mut args = vec!["clone".to_string()];
    args.extend(opts.iter().cloned());
    args.extend(["--".into(), url, target.into()]);
    git.run(&GitCmd::new(None, &args).remote()).map(|_| ())
}

/// `git fetch`: the refs it changed, keyed as Salt's `git.fetch` reports
/// them (`new tags`, `new branches`, `updated branches`, `updated tags`).
pub fn fetch(
    git: &Git<'_>,
    cwd: &str,
    remote: Option<&str>,
    force: bool,
    refspecs: &[String],
    opts: &[String],
) -> Result<Map, GitError> {
    let mut args = vec!["fetch".to_string()];
    if force {
        args.push("--force".into());
    }
    args.extend(
        opts.iter()
            .filter(|o| *o != "-f" && *o != "--force")
            .cloned(),
    );
    args.extend(remote.map(str::to_string));
    args.extend(refspecs.iter().cloned());
    let out = git.out(&GitCmd::new(Some(cwd), &args).merged().remote())?;
    Ok(parse_fetch(&out))
}

/// Salt's reading of `git fetch`'s report lines.
fn parse_fetch(out: &str) -> Map {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r"^[\s*]*(?:([0-9a-f]+)\.\.([0-9a-f]+)|\[(?:new (tag|branch)|tag update)\])\s+(.+)->",
        )
        .ok()
    });
    let mut ret = Map::new();
    let Some(re) = re else {
        return ret;
    };
    for line in out.lines() {
        let Some(c) = re.captures(line) else {
            continue;
        };
        let name = c
            .get(4)
            .map(|m| m.as_str().trim_end().to_string())
            .unwrap_or_default();
        if let Some(kind) = c.get(3) {
            let key = if kind.as_str() == "tag" {
                "new tags"
            } else {
                "new branches"
            };
            push(&mut ret, key, Value::from(name));
        } else if let (Some(old), Some(new)) = (c.get(1), c.get(2)) {
            let entry = ret
                .entry("updated branches".to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = entry {
                m.insert(
                    name,
                    serde_json::json!({"old": old.as_str(), "new": new.as_str()}),
                );
            }
        } else {
            push(&mut ret, "updated tags", Value::from(name));
        }
    }
    ret
}

fn push(map: &mut Map, key: &str, v: Value) {
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(a) = entry {
        a.push(v);
    }
}

/// `git rev-parse [opts] [rev]`: its output.
pub fn rev_parse(
    git: &Git<'_>,
    cwd: &str,
    rev: Option<&str>,
    opts: &[String],
) -> Result<String, GitError> {
    let mut args = vec!["rev-parse".to_string()];
    args.extend(opts.iter().cloned());
    args.extend(rev.map(str::to_string));
    git.out(&GitCmd::new(Some(cwd), &args))
}

/// The commit `rev` (default `HEAD`) is at (`git.revision`).
pub fn revision(git: &Git<'_>, cwd: &str, rev: &str, short: bool) -> Result<String, GitError> {
    let opts = if short {
        vec!["--short".into()]
    } else {
        vec![]
    };
    rev_parse(git, cwd, Some(rev), &opts)
}

/// The checked-out branch (`HEAD` when detached), `git.current_branch`.
pub fn current_branch(git: &Git<'_>, cwd: &str) -> Result<String, GitError> {
    rev_parse(git, cwd, Some("HEAD"), &["--abbrev-ref".into()])
}

/// Local (or, with `remote`, remote-tracking) branch names.
pub fn list_branches(git: &Git<'_>, cwd: &str, remote: bool) -> Result<Vec<String>, GitError> {
    let refs = if remote {
        "refs/remotes/"
    } else {
        "refs/heads/"
    };
    for_each_ref(git, cwd, refs)
}

/// Tag names (`git.list_tags`).
pub fn list_tags(git: &Git<'_>, cwd: &str) -> Result<Vec<String>, GitError> {
    for_each_ref(git, cwd, "refs/tags/")
}

fn for_each_ref(git: &Git<'_>, cwd: &str, prefix: &str) -> Result<Vec<String>, GitError> {
    let out = git.out(&GitCmd::new(
        Some(cwd),
        &["for-each-ref", "--format", "%(refname:short)", prefix],
    ))?;
    Ok(out.lines().map(str::to_string).collect())
}

/// The remotes of a checkout and their fetch/push URLs (`git.remotes`),
/// credentials redacted unless `redact` is false.
pub fn remotes(git: &Git<'_>, cwd: &str, redact: bool) -> Result<Remotes, GitError> {
    let out = git.out(&GitCmd::new(Some(cwd), &["remote", "--verbose"]))?;
    let mut ret = Remotes::new();
    for line in out.lines() {
        let Some((remote, info)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let Some((url, action)) = info.trim().rsplit_once(char::is_whitespace) else {
            continue;
        };
        let action = action
            .trim_start_matches('(')
            .trim_end_matches(')')
            .to_lowercase();
        if action != "fetch" && action != "push" {
            continue;
        }
        let url = url.trim();
        let url = if redact {
            redact_http_basic_auth(url)
        } else {
            url.to_string()
        };
        ret.entry(remote.to_string())
            .or_default()
            .insert(action, Value::from(url));
    }
    Ok(ret)
}

/// One remote's URLs, or Salt's error when the checkout lacks it.
pub fn remote_get(git: &Git<'_>, cwd: &str, remote: &str, redact: bool) -> Result<Map, GitError> {
    remotes(git, cwd, redact)?
        .shift_remove(remote)
        .ok_or_else(|| {
            GitError::msg(format!(
                "Remote '{remote}' not present in git checkout located at {cwd}"
            ))
        })
}

/// Sets `remote` to `url` (removed and added again when it exists), with
/// the https credentials in the URL; its URLs after.
pub fn remote_set(
    git: &Git<'_>,
    cwd: &str,
    url: &str,
    remote: &str,
    https: (Option<&str>, Option<&str>),
    push_url: Option<&str>,
) -> Result<Map, GitError> {
    if remotes(git, cwd, true)?.contains_key(remote) {
        git.run(&GitCmd::new(Some(cwd), &["remote", "rm", remote]))?;
    }
    let url = add_http_basic_auth(url, https.0, https.1).map_err(GitError::msg)?;
    git.run(&GitCmd::new(Some(cwd), &["remote", "add", remote, &url]))?;
    if let Some(push) = push_url {
        git.run(&GitCmd::new(
            Some(cwd),
            &["remote", "set-url", "--push", remote, push],
        ))?;
    }
    remote_get(git, cwd, remote, true)
}

/// `git ls-remote [opts] <remote> [ref]` as `{ref: sha}`, with the https
/// credentials added to the URL (`git.ls_remote`, `git.remote_refs`).
pub fn ls_remote(
    git: &Git<'_>,
    cwd: Option<&str>,
    remote: &str,
    reference: Option<&str>,
    opts: &[String],
    https: (Option<&str>, Option<&str>),
) -> Result<Map, GitError> {
    let remote = add_http_basic_auth(remote, https.0, https.1).map_err(GitError::msg)?;
    let mut args = vec!["ls-remote".to_string()];
    args.extend(opts.iter().cloned());
    args.push(remote);
    args.extend(reference.map(str::to_string));
    let out = git.out(&GitCmd::new(cwd, &args).remote())?;
    let mut ret = Map::new();
    for line in out.lines() {
        if let Some((sha, name)) = line.split_once(char::is_whitespace) {
            ret.insert(name.trim().to_string(), Value::from(sha));
        }
    }
    Ok(ret)
}

/// `git status --porcelain` grouped as Salt does (`modified`, `new`,
/// `deleted`, `untracked`, other codes as they are).
pub fn status(git: &Git<'_>, cwd: &str) -> Result<Map, GitError> {
    let out = git.out(&GitCmd::new(Some(cwd), &["status", "-z", "--porcelain"]))?;
    let mut ret = Map::new();
    for entry in out.split('\0') {
        let Some((code, file)) = entry.trim_start().split_once(char::is_whitespace) else {
            continue;
        };
        let key = match code {
            "M" => "modified",
            "A" => "new",
            "D" => "deleted",
            "??" => "untracked",
            other => other,
        };
        push(&mut ret, key, Value::from(file.trim_start()));
    }
    Ok(ret)
}

/// Whether `cwd` is a linked worktree (`.git` is a `gitdir:` file).
pub fn is_worktree(git: &Git<'_>, cwd: &str) -> bool {
    let Ok(top) = git.out(&GitCmd::new(Some(cwd), &["rev-parse", "--show-toplevel"]).soft()) else {
        return false;
    };
    if top.is_empty() {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(std::path::Path::new(&top).join(".git")) else {
        return false;
    };
    text.lines()
        .next()
        .and_then(|l| l.split_once(char::is_whitespace))
        .is_some_and(|(label, path)| label == "gitdir:" && path.trim().starts_with('/'))
}

/// Whether `a` is an ancestor of `b` (`git merge-base --is-ancestor`).
pub fn is_ancestor(git: &Git<'_>, cwd: &str, a: &str, b: &str) -> Result<bool, GitError> {
    let out = git.run(&GitCmd::new(Some(cwd), &["merge-base", "--is-ancestor", a, b]).soft())?;
    Ok(out.retcode == 0)
}

/// `git diff [opts] [item1 [item2]]`: the diff text.
pub fn diff(git: &Git<'_>, cwd: &str, items: &[&str], opts: &[String]) -> Result<String, GitError> {
    let mut args = vec!["diff".to_string()];
    args.extend(opts.iter().cloned());
    args.extend(items.iter().map(|s| s.to_string()));
    git.out(&GitCmd::new(Some(cwd), &args))
}

/// `git checkout [--force] [opts] [rev]`: git's message.
pub fn checkout(
    git: &Git<'_>,
    cwd: &str,
    rev: Option<&str>,
    force: bool,
    opts: &[String],
) -> Result<String, GitError> {
    let mut args = vec!["checkout".to_string()];
    if force {
        args.push("--force".into());
    }
    args.extend(opts.iter().cloned());
    match rev {
        Some(r) => args.push(r.into()),
        None if !opts.iter().any(|o| o == "-b" || o == "-B") => {
            return Err(GitError::msg(
                "'rev' argument is required unless -b or -B in opts",
            ))
        }
        None => {}
    }
    git.out(&GitCmd::new(Some(cwd), &args).merged())
}

/// `git <sub> [opts] [words]` in `cwd` for the commands that are only
/// their options (`reset`, `merge`, `branch`, `pull`, `submodule`,
/// `symbolic-ref`): the output.
pub fn simple(
    git: &Git<'_>,
    cwd: &str,
    sub: &[&str],
    opts: &[String],
    words: &[&str],
    remote: bool,
) -> Result<String, GitError> {
    let mut cmd = GitCmd::new(Some(cwd), sub).with(opts).with(words);
    if remote {
        cmd = cmd.remote();
    }
    git.out(&cmd)
}

/// `git init [--bare] [--template=] [--separate-git-dir=] [--shared=] <dir>`.
pub fn init(
    git: &Git<'_>,
    cwd: &str,
    bare: bool,
    template: Option<&str>,
    separate_git_dir: Option<&str>,
    shared: Option<&str>,
    opts: &[String],
) -> Result<String, GitError> {
    let mut args = vec!["init".to_string()];
    if bare {
        args.push("--bare".into());
    }
    args.extend(template.map(|t| format!("--template={t}")));
    args.extend(separate_git_dir.map(|d| format!("--separate-git-dir={d}")));
    args.extend(shared.map(|s| format!("--shared={s}")));
    args.extend(opts.iter().cloned());
    args.push(cwd.into());
    git.out(&GitCmd::new(None, &args))
}

/// Where a config command looks: `--global`, or the checkout's `--local`.
fn scope(global: bool) -> &'static str {
    if global {
        "--global"
    } else {
        "--local"
    }
}

/// Every value of `key` (`git config --get-all`), `None` when unset.
pub fn config_get_all(
    git: &Git<'_>,
    cwd: Option<&str>,
    key: &str,
    global: bool,
) -> Result<Option<Vec<String>>, GitError> {
    let out = git.run(&GitCmd::new(cwd, &["config", scope(global), "--get-all", key]).soft())?;
    match out.retcode {
        0 => Ok(Some(out.stdout.lines().map(str::to_string).collect())),
        1 => Ok(None),
        _ => Err(GitError {
            command: format!("git config {} --get-all {key}", scope(global)),
            detail: out.stderr,
        }),
    }
}

/// Keys matching `key` (a regex) with their values matching
/// `value_regex` (`git config --get-regexp`), in git's order.
pub fn config_get_regexp(
    git: &Git<'_>,
    cwd: Option<&str>,
    key: &str,
    value_regex: Option<&str>,
    global: bool,
) -> Result<indexmap::IndexMap<String, Vec<String>>, GitError> {
    let mut args = vec!["config", scope(global), "--get-regexp", key];
    args.extend(value_regex);
    let out = git.run(&GitCmd::new(cwd, &args).soft())?;
    let mut ret = indexmap::IndexMap::<String, Vec<String>>::new();
    match out.retcode {
        0 => {}
        1 => return Ok(ret),
        _ => {
            return Err(GitError {
                command: format!("git {}", args.join(" ")),
                detail: out.stderr,
            })
        }
    }
    for line in out.stdout.lines() {
        if let Some((k, v)) = line.split_once(char::is_whitespace) {
            ret.entry(k.to_string()).or_default().push(v.to_string());
        } else if !line.is_empty() {
            // A key set without `= value` (git prints the key alone).
            ret.entry(line.to_string()).or_default();
        }
    }
    Ok(ret)
}

/// Sets `key` to `values` (the first replaces every value, the rest are
/// added, as Salt's `value`/`multivar`); the values after.
pub fn config_set(
    git: &Git<'_>,
    cwd: Option<&str>,
    key: &str,
    values: &[String],
    add: bool,
    global: bool,
) -> Result<Option<Vec<String>>, GitError> {
    let mut prefix = vec!["config"];
    if global {
        prefix.push("--global");
    }
    for (i, v) in values.iter().enumerate() {
        let how = if i == 0 && !add {
            "--replace-all"
        } else {
            "--add"
        };
        git.run(&GitCmd::new(cwd, &prefix).with(&[how, key, v]))?;
    }
    config_get_all(git, cwd, key, global)
}

/// Unsets `key` (every value with `all`), as Salt's `git.config_unset`,
/// with its messages for git's exit codes.
pub fn config_unset(
    git: &Git<'_>,
    cwd: Option<&str>,
    key: &str,
    value_regex: Option<&str>,
    all: bool,
    global: bool,
) -> Result<(), GitError> {
    let how = if all { "--unset-all" } else { "--unset" };
    let mut args = vec!["config", how, scope(global), key];
    args.extend(value_regex);
    let out = git.run(&GitCmd::new(cwd, &args).soft())?;
    match out.retcode {
        0 => Ok(()),
        1 => Err(GitError::msg("Section or key is invalid")),
        5 => {
            if config_get_all(git, cwd, key, global)?.is_none() {
                Err(GitError::msg(format!("Key '{key}' does not exist")))
            } else {
                let mut m = format!("Multiple values exist for key '{key}'");
                if value_regex.is_some() {
                    m.push_str(" and value_regex matches multiple values");
                }
                Err(GitError::msg(m))
            }
        }
        6 => Err(GitError::msg("The value_regex is invalid")),
        code => {
            let mut m =
                format!("Failed to unset key '{key}', git config returned exit code {code}");
            if !out.stderr.is_empty() {
                m.push_str("; ");
                m.push_str(&out.stderr);
            }
            Err(GitError::msg(m))
        }
    }
}

/// Tag names of a remote (`git ls-remote --tags`), peeled entries left out.
pub fn remote_tags(git: &Git<'_>, cwd: &str, remote: &str) -> Result<BTreeSet<String>, GitError> {
    let refs = ls_remote(
        git,
        Some(cwd),
        remote,
        None,
        &["--tags".into()],
        (None, None),
    )?;
    Ok(refs
        .keys()
        .filter(|k| !k.contains("^{}"))
        .map(|k| k.trim_start_matches("refs/tags/").to_string())
        .collect())
}

/// git's version (`git --version`'s last word, `unknown` when it fails).
pub fn version(git: &Git<'_>) -> String {
    match git.out(&GitCmd::new(None, &["--version"])) {
        Ok(v) => v
            .split('(')
            .next()
            .and_then(|v| v.split_whitespace().last())
            .unwrap_or("unknown")
            .to_string(),
        Err(_) => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_output_is_read_as_salt_reads_it() {
        let out = "From file:///r\n   1a2b3c4..5d6e7f8  main       -> origin/main\n \
                   * [new branch]      dev        -> origin/dev\n \
                   * [new tag]         v2         -> v2\n \
                   + 1111111...2222222 force      -> origin/force  (forced update)\n";
        let m = parse_fetch(out);
        assert_eq!(m["new branches"], serde_json::json!(["dev"]));
        assert_eq!(m["new tags"], serde_json::json!(["v2"]));
        assert_eq!(
            m["updated branches"]["main"],
            serde_json::json!({"old": "1a2b3c4", "new": "5d6e7f8"})
        );
        // Salt's pattern does not read a forced update's `+ a...b` line.
        assert!(m["updated branches"].get("force").is_none());
    }
}
