//! `file.patch`: applies a diff with the system's `patch` binary, as Salt
//! does: a forward dry run into a temp output first, so an already
//! applied patch is recognised (its rejects reverse-apply cleanly) and a
//! patch that does not apply changes nothing.

use std::path::Path;

use halite_salt_rules::shell::{shlex_quote, split_words};
use halite_state::{CmdOptions, CmdOutput, StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::managed::{render, resolve_source, template_context};
use super::target_name;

/// The `patch` executable on `PATH`, as Salt's `salt.utils.path.which`.
fn which_patch() -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    path.split(':')
        .map(|d| Path::new(d).join("patch"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// Salt's `file.patch` execution function: runs `patch` on `original`
/// (a file, or a directory with `-d`) with `patch_file`; its
/// `cmd.run_all` return.
fn run_patch(
    call: &StateCall<'_>,
    patch: &str,
    original: &str,
    patch_file: &str,
    options: &[String],
    dry_run: bool,
) -> Result<CmdOutput, StateError> {
    let mut cmd: Vec<String> = vec![patch.to_string()];
    cmd.extend(options.iter().cloned());
    if dry_run {
        cmd.push("--dry-run".into());
    }
    if !cmd.iter().any(|o| o == "-N" || o == "--forward") {
        cmd.push("--forward".into());
    }
    let has_reject = cmd
        .iter()
        .any(|o| o == "-r" || o.starts_with("-r ") || o.starts_with("--reject-file"));
    if !has_reject {
        cmd.push("--reject-file=-".into());
    }
    cmd.extend(["-i".to_string(), patch_file.to_string()]);
    if Path::new(original).is_dir() {
        cmd.extend(["-d".to_string(), original.to_string()]);
        if !cmd
            .iter()
            .any(|o| o.starts_with("-p") || o.starts_with("--strip="))
        {
            cmd.push("--strip=0".into());
        }
    } else {
        cmd.push(original.to_string());
    }
    let line = cmd
        .iter()
        .map(|w| shlex_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    call.env
        .run_cmd(&line, &CmdOptions::default())
        .map_err(|e| StateError::Other(format!("Unable to run patch: {e}")))
}

/// A `cmd.run_all` return as Salt puts it in `changes`.
fn run_all(out: &CmdOutput) -> Value {
    json!({"pid": out.pid, "retcode": out.retcode, "stdout": out.stdout, "stderr": out.stderr})
}

/// The dry run as Salt's `nested` outputter shows it in the comment
/// (indent 14, keys sorted, no colour).
fn nested(out: &CmdOutput) -> String {
    let pad = " ".repeat(14);
    let mut lines = Vec::new();
    let fields = [
        ("pid", out.pid.to_string()),
        ("retcode", out.retcode.to_string()),
        ("stderr", out.stderr.clone()),
        ("stdout", out.stdout.clone()),
    ];
    for (key, value) in fields {
        lines.push(format!("{pad}{key}:"));
        for l in value.lines() {
            lines.push(format!("{pad}    {l}"));
        }
    }
    lines.join("\n")
}

/// Salt's parsing of `options`: `-p`/`--strip` become `strip`, the options
/// the state drives itself are refused, the rest is kept.
fn sanitize_options(raw: &str, strip: &mut Option<i64>) -> Result<Vec<String>, String> {
    let options = split_words(raw);
    let mut kept = Vec::new();
    let mut refused = Vec::new();
    let mut i = 0;
    while i < options.len() {
        let option = &options[i];
        if ["-N", "--forward", "-r", "--reject-file", "-o", "--output"]
            .iter()
            .any(|b| option.starts_with(b))
        {
            refused.push(option.clone());
        }
        if let Some(n) = option.strip_prefix("-p") {
            *strip = Some(n.parse().map_err(|_| {
                "Invalid format for '-p' CLI option. Consider using the 'strip' option for this state."
                    .to_string()
            })?);
        } else if option.starts_with("--strip") {
            let bad = || {
                "Invalid format for '-strip' CLI option. Consider using the 'strip' option for this state."
                    .to_string()
            };
            if let Some((_, n)) = option.rsplit_once('=') {
                *strip = Some(n.parse().map_err(|_| bad())?);
            } else {
                *strip = Some(
                    options
                        .get(i + 1)
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(bad)?,
                );
                i += 1;
            }
        } else {
            kept.push(option.clone());
        }
        i += 1;
    }
    if !refused.is_empty() {
        return Err(format!(
            "The following CLI options are not allowed: {}",
            refused.join(", ")
        ));
    }
    Ok(kept)
}

/// A temp file path that is removed when dropped.
fn temp_path() -> Result<tempfile::TempPath, StateError> {
    tempfile::NamedTempFile::new()
        .map(|f| f.into_temp_path())
        .map_err(|e| StateError::Other(format!("Unable to create a temp file: {e}")))
}

/// `file.patch`: see Salt's documentation (`source`, `options`, `strip`,
/// `reject_file`, `template`...).
pub fn patch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    let Some(patch_bin) = which_patch() else {
        ret.comment = "patch executable not found on minion".into();
        return Ok(ret);
    };
    if name.is_empty() {
        ret.comment = "A file/directory to be patched is required".into();
        return Ok(ret);
    }
    if !Path::new(&name).is_absolute() {
        ret.comment = format!("{name} is not an absolute path");
        return Ok(ret);
    }
    if !Path::new(&name).exists() {
        ret.comment = format!("{name} does not exist");
        return Ok(ret);
    }
    let is_dir = Path::new(&name).is_dir();
    let reject_file = call.arg_str("reject_file")?.filter(|s| !s.is_empty());
    if let Some(rf) = &reject_file {
        let parent = super::dirname(rf);
        if !Path::new(&parent).is_absolute() {
            ret.comment = format!("'{rf}' is not an absolute path");
            return Ok(ret);
        }
        if !Path::new(&parent).is_dir() {
            ret.comment = format!(
                "Parent directory for reject_file '{rf}' either does not exist, or is not a directory"
            );
            return Ok(ret);
        }
    }
    let mut strip = match call.arg("strip") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let options = call.arg_str("options")?.unwrap_or_default();
    let sanitized = match sanitize_options(&options, &mut strip) {
        Ok(o) => o,
        Err(e) => {
            ret.comment = e;
            return Ok(ret);
        }
    };
    let Some(source) = call.arg("source") else {
        ret.comment = "Source file cannot be empty".into();
        return Ok(ret);
    };
    let saltenv = call
        .arg_str("saltenv")?
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            if call.chunk.env().is_empty() {
                "base"
            } else {
                call.chunk.env()
            }
            .to_string()
        });
    // The patch file, rendered when `template` is set, in a temp file.
    let text = match resolve_source(call, source, &saltenv) {
        Ok((_, local)) => std::fs::read_to_string(&local)
            .map_err(|e| StateError::Other(format!("Unable to read {}: {e}", local.display())))?,
        Err(e) => {
            ret.comment = e;
            return Ok(ret);
        }
    };
    let text = match super::opt_str(call, "template")? {
        Some(t) => {
            let ctx = template_context(call).map_err(StateError::BadArg)?;
            match render(call, &text, &t, &ctx, &saltenv) {
                Ok(r) => r,
                Err(e) => {
                    ret.comment = format!("Failed to cache patch file: {e}");
                    return Ok(ret);
                }
            }
        }
        None => text,
    };
    let patch_file = temp_path()?;
    std::fs::write(&patch_file, text)
        .map_err(|e| StateError::Other(format!("Unable to write the patch to a temp file: {e}")))?;
    let patch_file_s = patch_file.display().to_string();
    let tmp_rejects;
    let rejects = match &reject_file {
        Some(rf) => rf.clone(),
        None => {
            tmp_rejects = temp_path()?;
            tmp_rejects.display().to_string()
        }
    };
    let output = temp_path()?;
    let strip_opt = strip.filter(|_| is_dir).map(|n| format!("-p{n}"));
    let with = |extra: &[String]| {
        let mut o = sanitized.clone();
        o.extend(extra.iter().cloned());
        o
    };
    let mut pre_opts = vec![
        "-N".to_string(),
        "-r".into(),
        rejects.clone(),
        "-o".into(),
        output.display().to_string(),
    ];
    pre_opts.extend(strip_opt.clone());
    let pre_check = run_patch(
        call,
        &patch_bin,
        &name,
        &patch_file_s,
        &with(&pre_opts),
        false,
    )?;
    if pre_check.retcode != 0 {
        let rejects_empty = std::fs::metadata(&rejects).map_or(true, |m| m.len() == 0);
        if rejects_empty {
            ret.comment = pre_check.stderr;
            return Ok(ret);
        }
        let reverse = run_patch(
            call,
            &patch_bin,
            &name,
            &rejects,
            &with(&["-R".into(), "-f".into()]),
            true,
        )?;
        if pre_check.retcode == 2 && !pre_check.stderr.is_empty() {
            ret.comment = pre_check.stderr;
            return Ok(ret);
        }
        if reverse.retcode == 0 {
            ret.comment = "Patch was already applied".into();
            ret.result = Some(true);
            return Ok(ret);
        }
        ret.comment =
            "Patch would not apply cleanly, no changes made. Results of dry-run are below.".into();
        if reject_file.is_none() {
            ret.comment.push_str(
                " Run state again using the reject_file option to save rejects to a persistent file.",
            );
        }
        ret.comment.push_str(&format!("\n\n{}", nested(&pre_check)));
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = "The patch would be applied".into();
        if let Value::Object(m) = run_all(&pre_check) {
            ret.changes.extend(m);
        }
        return Ok(ret);
    }
    let applied = run_patch(
        call,
        &patch_bin,
        &name,
        &patch_file_s,
        &with(&strip_opt.into_iter().collect::<Vec<_>>()),
        false,
    )?;
    if let Value::Object(m) = run_all(&applied) {
        ret.changes.extend(m);
    }
    if applied.retcode == 0 {
        ret.comment = "Patch successfully applied".into();
        ret.result = Some(true);
    } else {
        ret.comment = "Failed to apply patch".into();
    }
    Ok(ret)
}
