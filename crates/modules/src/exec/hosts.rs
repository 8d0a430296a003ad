//! Salt's `hosts` execution module: reads and edits the hosts file
//! (`/etc/hosts`, or the `hosts.file` option, which tests point at a copy)
//! as salt/modules/hosts.py does, line formats included (`ip\t\talias`,
//! `\t\t# comment`), for the `host.present`/`absent`/`only` states.

use std::path::PathBuf;

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "hosts",
    functions: &[
        ExecFunction::new("list_hosts", list_hosts_fn),
        ExecFunction::new("get_ip", get_ip_fn),
        ExecFunction::new("get_alias", get_alias_fn),
        ExecFunction::new("has_pair", has_pair_fn),
        ExecFunction::new("set_host", set_host_fn),
        ExecFunction::new("add_host", add_host_fn),
        ExecFunction::new("rm_host", rm_host_fn),
        ExecFunction::new("set_comment", set_comment_fn),
    ],
};

/// The hosts file: the `hosts.file` option, else `/etc/hosts`.
pub fn hosts_file(opts: &Value) -> PathBuf {
    PathBuf::from(
        opts.get("hosts.file")
            .and_then(Value::as_str)
            .unwrap_or("/etc/hosts"),
    )
}

fn io_err(path: &std::path::Path, e: std::io::Error) -> ExecError {
    ExecError::Execution(format!(
        "Unable to access hosts file {}: {e}",
        path.display()
    ))
}

/// Salt's `_list_hosts`: each address with its `aliases` (and `comment`),
/// and each comment line as `comment-<n>`, in file order. A missing file
/// reads as empty.
pub fn list(opts: &Value) -> Result<Map, ExecError> {
    let path = hosts_file(opts);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    let mut ret = Map::new();
    let mut count = 0;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            ret.insert(
                format!("comment-{count}"),
                Value::Array(vec![Value::from(line)]),
            );
            count += 1;
            continue;
        }
        let (body, comment) = match line.split_once('#') {
            Some((body, comment)) => (body.trim(), Some(comment.trim_start())),
            None => (line, None),
        };
        let mut comps = body.split_whitespace();
        let Some(ip) = comps.next() else { continue };
        let entry = ret
            .entry(ip.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(info) = entry {
            let aliases = info
                .entry("aliases")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = aliases {
                list.extend(comps.map(Value::from));
            }
            if let Some(c) = comment.filter(|c| !c.is_empty()) {
                info.insert("comment".into(), Value::from(c));
            }
        }
    }
    Ok(ret)
}

/// The aliases of `ip`, in file order.
pub fn aliases(hosts: &Map, ip: &str) -> Vec<String> {
    hosts
        .get(ip)
        .and_then(|i| i.get("aliases"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Salt's `has_pair` for one alias.
pub fn has_pair(opts: &Value, ip: &str, alias: &str) -> Result<bool, ExecError> {
    Ok(aliases(&list(opts)?, ip).iter().any(|a| a == alias))
}

/// Reads the file's lines (keeping their endings), creating an empty file
/// when there is none, as Salt's `_get_or_create_hostfile`.
fn read_lines(path: &std::path::Path) -> Result<Vec<String>, ExecError> {
    if !path.exists() {
        std::fs::write(path, "").map_err(|e| io_err(path, e))?;
    }
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    Ok(String::from_utf8_lossy(&bytes)
        .split_inclusive('\n')
        .map(str::to_string)
        .collect())
}

/// Writes the file through a temp file beside it, keeping its mode.
fn write_text(path: &std::path::Path, text: &str) -> Result<(), ExecError> {
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    let tmp = dir.join(format!(
        ".{}.halite.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("hosts")
    ));
    std::fs::write(&tmp, text).map_err(|e| io_err(&tmp, e))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// Salt's `set_host`: the line of `ip` becomes `ip\t\talias` (other lines
/// of that address are dropped); an alias of only spaces removes them all.
pub fn set_host(
    opts: &Value,
    ip: &str,
    alias: &str,
    comment: Option<&str>,
) -> Result<bool, ExecError> {
    let path = hosts_file(opts);
    let mut lines = read_lines(&path)?;
    let to_add = if alias.trim().is_empty() {
        String::new()
    } else {
        match comment.filter(|c| !c.is_empty()) {
            Some(c) => format!("{ip}\t\t{alias}\t\t# {c}\n"),
            None => format!("{ip}\t\t{alias}\n"),
        }
    };
    let mut replaced = false;
    for line in lines.iter_mut() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.split_whitespace().next() == Some(ip) {
            *line = if replaced {
                String::new()
            } else {
                to_add.clone()
            };
            replaced = true;
        }
    }
    if !replaced {
        if let Some(last) = lines.last_mut() {
            if !last.ends_with('\n') {
                last.push('\n');
            }
        }
        lines.push(to_add);
    }
    write_text(&path, &lines.concat())?;
    Ok(true)
}

/// Salt's `rm_host`: takes `alias` off the lines of `ip` (a line left
/// without aliases is dropped).
pub fn rm_host(opts: &Value, ip: &str, alias: &str) -> Result<bool, ExecError> {
    if !has_pair(opts, ip, alias)? {
        return Ok(true);
    }
    let path = hosts_file(opts);
    let mut lines = read_lines(&path)?;
    for line in lines.iter_mut() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (info, comment) = match t.split_once('#') {
            Some((info, comment)) => (info, Some(comment.trim_start())),
            None => (t, None),
        };
        let comps: Vec<&str> = info.split_whitespace().collect();
        if comps.first() != Some(&ip) {
            continue;
        }
        let mut newline = format!("{ip}\t\t");
        for existing in &comps[1..] {
            if *existing != alias {
                newline.push_str(existing);
                newline.push(' ');
            }
        }
        *line = if newline.trim() == ip {
            String::new()
        } else {
            match comment {
                Some(c) => format!("{newline}# {c}\n"),
                None => format!("{newline}\n"),
            }
        };
    }
    write_text(&path, &lines.concat())?;
    Ok(true)
}

/// Salt's `_write_hosts`: the whole file from the parsed entries.
fn write_hosts(opts: &Value, hosts: &Map) -> Result<(), ExecError> {
    let mut out = String::new();
    for (ip, info) in hosts {
        let line = if ip.starts_with("comment") {
            info.as_array()
                .map(|l| l.iter().filter_map(Value::as_str).collect::<String>())
                .unwrap_or_default()
        } else {
            let names = aliases(hosts, ip).join(" ");
            match info.get("comment").and_then(Value::as_str) {
                Some(c) => format!("{ip}\t\t{names}\t\t# {c}"),
                None => format!("{ip}\t\t{names}"),
            }
        };
        if !line.trim().is_empty() {
            out.push_str(line.trim());
            out.push('\n');
        }
    }
    let path = hosts_file(opts);
    write_text(&path, &out)
}

/// Salt's `add_host`: adds `alias` to the entry of `ip` (made if missing)
/// and rewrites the file from its parsed entries.
pub fn add_host(opts: &Value, ip: &str, alias: &str) -> Result<bool, ExecError> {
    let path = hosts_file(opts);
    read_lines(&path)?;
    if has_pair(opts, ip, alias)? {
        return Ok(true);
    }
    let mut hosts = list(opts)?;
    let entry = hosts
        .entry(ip.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(info) = entry {
        let list = info
            .entry("aliases")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.push(Value::from(alias));
        }
    }
    write_hosts(opts, &hosts)?;
    Ok(true)
}

/// Salt's `set_comment`: false when `ip` has no entry.
pub fn set_comment(opts: &Value, ip: &str, comment: &str) -> Result<bool, ExecError> {
    let path = hosts_file(opts);
    read_lines(&path)?;
    let mut hosts = list(opts)?;
    let Some(Value::Object(info)) = hosts.get_mut(ip) else {
        return Ok(false);
    };
    if info.get("comment").and_then(Value::as_str) == Some(comment) {
        return Ok(true);
    }
    info.insert("comment".into(), Value::from(comment));
    write_hosts(opts, &hosts)?;
    Ok(true)
}

fn list_hosts_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    list(&host.opts).map(Value::Object)
}

fn get_ip_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "host", "get_ip")?;
    let hosts = list(&host.opts)?;
    Ok(Value::from(
        hosts
            .keys()
            .find(|ip| aliases(&hosts, ip).contains(&name))
            .cloned()
            .unwrap_or_default(),
    ))
}

fn get_alias_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "get_alias")?;
    Ok(Value::from(aliases(&list(&host.opts)?, &ip)))
}

fn has_pair_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "has_pair")?;
    let have = aliases(&list(&host.opts)?, &ip);
    Ok(Value::Bool(match args.get(1, "alias") {
        Some(Value::Array(wanted)) => wanted
            .iter()
            .all(|w| w.as_str().is_some_and(|w| have.iter().any(|h| h == w))),
        Some(Value::String(one)) => have.contains(one),
        _ => {
            return Err(ExecError::Invocation(
                "has_pair() missing 1 required positional argument: 'alias'".into(),
            ))
        }
    }))
}

fn set_host_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "set_host")?;
    let alias = args.require_str(1, "alias", "set_host")?;
    let comment = args.get_str(2, "comment");
    set_host(&host.opts, &ip, &alias, comment.as_deref()).map(Value::Bool)
}

fn add_host_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "add_host")?;
    let alias = args.require_str(1, "alias", "add_host")?;
    add_host(&host.opts, &ip, &alias).map(Value::Bool)
}

fn rm_host_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "rm_host")?;
    let alias = args.require_str(1, "alias", "rm_host")?;
    rm_host(&host.opts, &ip, &alias).map(Value::Bool)
}

fn set_comment_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let ip = args.require_str(0, "ip", "set_comment")?;
    let comment = args.require_str(1, "comment", "set_comment")?;
    set_comment(&host.opts, &ip, &comment).map(Value::Bool)
}
