//! Building high data from SLS files: rendering, `include` (relative too),
//! `extend`, `exclude`, short declarations and auto-order numbering, as
//! Salt's `BaseHighState.render_state` / `render_highstate` do.

use std::collections::HashSet;

use indexmap::IndexMap;

use crate::origins::StringOrigins;
use crate::value::{Map, Value};
use halite_salt_rules::fnmatch::fnmatch;

/// One rendered SLS file.
#[derive(Debug, Clone)]
pub struct RenderedSls {
    /// The data the renderer produced (a mapping, or null when empty).
    pub data: Value,
    /// Its path relative to the file root (`foo/init.sls`), used to resolve
    /// relative includes.
    pub source: String,
    /// Whether its strings are Salt's yamlex strings (the pipeline ended
    /// in `yamlex`): the builder notes the SLS in its
    /// [`StringOrigins`], so its states print them quoted.
    pub yamlex: bool,
}

/// Where SLS files come from: file roots rendered through Jinja/YAML.
pub trait SlsSource {
    /// Renders `sls` of `saltenv`. `Ok(None)`: no such SLS. `Err(msg)`:
    /// the renderer's message (the caller adds `Rendering SLS ... failed: `).
    fn render(&self, sls: &str, saltenv: &str) -> Result<Option<RenderedSls>, String>;
    /// Every SLS name of `saltenv` (`foo`, `foo.bar`), for include globs.
    fn available(&self, saltenv: &str) -> Vec<String>;
    /// Whether `saltenv` exists.
    fn has_env(&self, saltenv: &str) -> bool;
}

/// Which SLS to render, per saltenv (top-file matches or `state.sls` args).
pub type Matches = IndexMap<String, Vec<String>>;

/// Renders a set of SLS into one high data map, numbering states in render
/// order (included SLS first) when `state_auto_order` is on.
pub struct HighBuilder<'a> {
    source: &'a dyn SlsSource,
    auto_order: bool,
    iorder: i64,
    mods: HashSet<String>,
    avail: IndexMap<String, (Vec<String>, HashSet<String>)>,
    origins: StringOrigins,
}

impl<'a> HighBuilder<'a> {
    /// A builder over `source`.
    pub fn new(source: &'a dyn SlsSource, auto_order: bool) -> Self {
        HighBuilder {
            source,
            auto_order,
            iorder: 10000,
            mods: HashSet::new(),
            avail: IndexMap::new(),
            origins: StringOrigins::new(),
        }
    }

    /// Where the strings of what it rendered came from (which SLS were
    /// yamlex): the compile needs it beside the high data.
    pub fn into_origins(self) -> StringOrigins {
        self.origins
    }

    fn avail(&mut self, saltenv: &str) -> &(Vec<String>, HashSet<String>) {
        if !self.avail.contains_key(saltenv) {
            let list = self.source.available(saltenv);
            let set = list.iter().cloned().collect();
            self.avail.insert(saltenv.to_string(), (list, set));
        }
        &self.avail[saltenv]
    }

    /// `fnmatch.filter(avail[saltenv], pattern)`.
    fn filter_avail(&mut self, saltenv: &str, pattern: &str) -> Vec<String> {
        let (list, set) = self.avail(saltenv);
        if !halite_salt_rules::is_pattern(pattern) {
            return if set.contains(pattern) {
                vec![pattern.to_string()]
            } else {
                Vec::new()
            };
        }
        list.iter()
            .filter(|s| fnmatch(s, pattern))
            .cloned()
            .collect()
    }

    /// Salt's `render_highstate`: renders every matched SLS and merges them.
    pub fn render_highstate(&mut self, matches: &Matches) -> (Map, Vec<String>) {
        let mut high = Map::new();
        let mut all_errors = Vec::new();
        for (saltenv, states) in matches {
            for sls_match in states {
                let mut statefiles = Vec::new();
                if self.source.has_env(saltenv) {
                    statefiles = self.filter_avail(saltenv, sls_match);
                } else {
                    all_errors.push(format!(
                        "No matching salt environment for environment '{saltenv}' found"
                    ));
                }
                if statefiles.is_empty() {
                    statefiles = vec![sls_match.clone()];
                }
                for sls in statefiles {
                    if self.mods.contains(&format!("{saltenv}:{sls}")) {
                        continue;
                    }
                    let (state, mut errors) = self.render_state(&sls, saltenv, Some(matches));
                    if !state.is_empty() {
                        merge_included_states(&mut high, state, &mut errors);
                    }
                    let this_sls = format!("SLS {sls_match} in saltenv");
                    for e in errors.iter_mut() {
                        if e.contains("is not available") && e.contains(&this_sls) {
                            *e = format!(
                                "No matching sls found for '{sls_match}' in env '{saltenv}'"
                            );
                        }
                    }
                    all_errors.extend(errors);
                }
            }
        }
        clean_duplicate_extends(&mut high);
        (high, all_errors)
    }

    /// Salt's `render_state`: one SLS and, recursively, what it includes.
    pub fn render_state(
        &mut self,
        sls: &str,
        saltenv: &str,
        matches: Option<&Matches>,
    ) -> (Map, Vec<String>) {
        let mut errors = Vec::new();
        let rendered = match self.source.render(sls, saltenv) {
            Ok(Some(r)) => Some(r),
            Ok(None) => {
                errors.push(format!(
                    "Specified SLS {sls} in saltenv {saltenv} is not available on the salt master or through a configured fileserver"
                ));
                None
            }
            Err(msg) => {
                errors.push(format!("Rendering SLS '{saltenv}:{sls}' failed: {msg}"));
                self.mods.insert(format!("{saltenv}:{sls}"));
                return (Map::new(), errors);
            }
        };
        let Some(rendered) = rendered else {
            return (Map::new(), errors);
        };
        self.mods.insert(format!("{saltenv}:{sls}"));
        let mut state = match rendered.data {
            Value::Object(m) => m,
            Value::Null => return (Map::new(), errors),
            Value::String(ref s) if s.trim().is_empty() => return (Map::new(), errors),
            _ => {
                errors.push(format!("SLS {sls} does not render to a dictionary"));
                return (Map::new(), errors);
            }
        };
        if state.is_empty() {
            return (state, errors);
        }
        let mut include = Vec::new();
        if let Some(inc) = state.get("include") {
            match inc {
                Value::Array(_) => {
                    if let Some(Value::Array(a)) = state.shift_remove("include") {
                        include = a;
                    }
                }
                _ => errors.push(format!(
                    "Include Declaration in SLS {sls} is not formed as a list"
                )),
            }
        }
        handle_extend(&mut state, sls, saltenv, &mut errors);
        handle_exclude(&mut state, sls, &mut errors);
        handle_state_decls(&mut state, sls, saltenv, &mut errors);
        if rendered.yamlex {
            self.origins.add_yamlex_sls(saltenv, sls);
        }

        for inc in include {
            let (env_key, inc_sls) = match inc {
                Value::Object(m) => match m.into_iter().next_back() {
                    Some((k, Value::String(v))) => (k, v),
                    _ => continue,
                },
                Value::String(s) => (saltenv.to_string(), s),
                other => {
                    errors.push(format!(
                        "Badly formatted include {other} found in include in SLS '{saltenv}:{sls}'"
                    ));
                    continue;
                }
            };
            if env_key != "_xenv" && !self.source.has_env(&env_key) {
                errors.push(format!(
                    "Nonexistent saltenv '{env_key}' found in include of '{inc_sls}' within SLS '{saltenv}:{sls}'"
                ));
                continue;
            }
            let inc_sls = if inc_sls.starts_with('.') {
                let levels = inc_sls.chars().take_while(|c| *c == '.').count();
                let rest = &inc_sls[levels..];
                let mut p_comps: Vec<&str> = sls.split('.').collect();
                if format!("salt://{}", rendered.source).ends_with("/init.sls") {
                    p_comps.push("init");
                }
                if levels > p_comps.len() {
                    errors.push(format!(
                        "Attempted relative include of '{inc_sls}' within SLS '{saltenv}:{sls}' goes beyond top level package "
                    ));
                    continue;
                }
                let mut parts: Vec<&str> = p_comps[..p_comps.len() - levels].to_vec();
                parts.push(rest);
                parts.join(".")
            } else {
                inc_sls
            };
            let resolved_envs: Vec<String> = if env_key != "_xenv" {
                let in_matches = matches.is_some_and(|m| m.contains_key(&env_key));
                if in_matches || !self.filter_avail(&env_key, &inc_sls).is_empty() {
                    vec![env_key.clone()]
                } else {
                    Vec::new()
                }
            } else {
                let envs: Vec<String> = matches
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                envs.into_iter()
                    .filter(|e| !self.filter_avail(e, &inc_sls).is_empty())
                    .collect()
            };
            if resolved_envs.len() == 1 || resolved_envs.iter().any(|e| e == saltenv) {
                let mut targets = self.filter_avail(saltenv, &inc_sls);
                if targets.is_empty() {
                    targets.push(inc_sls.clone());
                }
                let r_env = if resolved_envs.len() == 1 {
                    resolved_envs[0].clone()
                } else {
                    saltenv.to_string()
                };
                for target in targets {
                    if self.mods.contains(&format!("{r_env}:{target}")) {
                        continue;
                    }
                    let (mut nstate, err) = self.render_state(&target, &r_env, matches);
                    if !nstate.is_empty() {
                        for (item, body) in nstate.iter_mut() {
                            if item.starts_with("__") {
                                continue;
                            }
                            if let Value::Object(b) = body {
                                let entry = b
                                    .entry("__sls_included_from__")
                                    .or_insert_with(|| Value::Array(Vec::new()));
                                if let Value::Array(a) = entry {
                                    a.push(Value::String(sls.to_string()));
                                }
                            }
                        }
                        merge_included_states(&mut state, nstate, &mut errors);
                    }
                    errors.extend(err);
                }
            } else if resolved_envs.is_empty() {
                let envs = if env_key == "_xenv" {
                    matches
                        .map(|m| m.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                } else {
                    env_key.clone()
                };
                errors.push(format!(
                    "Unknown include: Specified SLS {env_key}: {inc_sls} is not available on the salt master in saltenv(s): {envs} "
                ));
            } else {
                errors.push(format!(
                    "Ambiguous include: Specified SLS {env_key}: {inc_sls} is available on the salt master in multiple available saltenvs: {}",
                    resolved_envs.join(", ")
                ));
            }
        }
        if self.auto_order {
            self.handle_iorder(&mut state);
        }
        (state, errors)
    }

    /// Appends `{order: N}` to every state declaration without one.
    fn handle_iorder(&mut self, state: &mut Map) {
        for (_, body) in state.iter_mut() {
            let Value::Object(body) = body else { continue };
            for (s_dec, run) in body.iter_mut() {
                if s_dec.starts_with('_') {
                    continue;
                }
                let Value::Array(args) = run else { continue };
                let found = args.iter().any(|a| {
                    a.as_object()
                        .and_then(|m| m.keys().next())
                        .is_some_and(|k| k == "order")
                });
                if !found {
                    // Exactly one entry (a new map's entry list would be
                    // sized for three: 200 bytes more per state).
                    let mut m = Map::with_capacity(1);
                    m.insert("order".into(), Value::from(self.iorder));
                    args.push(Value::Object(m));
                    self.iorder += 1;
                }
            }
        }
    }
}

/// Salt's `_handle_state_decls`: pads short declarations, splits
/// `mod.fun` keys, stamps `__sls__` / `__env__`.
///
/// On the calling thread even for a large SLS: done in pieces on two
/// threads it took ~2 ms off a 10 000-state run but added 6 MB of peak
/// memory (the helper's new declarations could not reuse the blocks the
/// old ones freed).
fn handle_state_decls(state: &mut Map, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    for (name, body) in state.iter_mut() {
        handle_state_decl(name, body, sls, saltenv, errors);
    }
}

/// `_handle_state_decls` for one ID.
fn handle_state_decl(
    name: &str,
    body: &mut Value,
    sls: &str,
    saltenv: &str,
    errors: &mut Vec<String>,
) {
    if !body.is_object() {
        if name == "__extend__" || name == "__exclude__" {
            return;
        }
        if let Value::String(s) = body {
            if let Some((module, fun)) = module_fun(s) {
                let mut m = Map::new();
                m.insert("__sls__".into(), Value::from(sls));
                m.insert("__env__".into(), Value::from(saltenv));
                m.insert(module.to_string(), Value::Array(vec![Value::from(fun)]));
                *body = Value::Object(m);
                return;
            }
        }
        errors.push(format!("ID {name} in SLS {sls} is not a dictionary"));
        return;
    }
    let Value::Object(body) = body else { return };
    if let Some(decl) = single_declaration(body, sls, saltenv) {
        *body = decl;
        return;
    }
    // A declaration has a handful of keys: a list beats a hash set.
    let mut skeys: Vec<String> = Vec::new();
    let keys: Vec<String> = body.keys().cloned().collect();
    for key in keys {
        if key.starts_with('_') {
            continue;
        }
        if !body.get(&key).is_some_and(Value::is_array) {
            continue;
        }
        if let Some((module, fun)) = module_fun(&key) {
            let fun = fun.to_string();
            if skeys.iter().any(|k| k == module) {
                errors.push(format!(
                        "ID '{name}' in SLS '{sls}' contains multiple state declarations of the same type"
                    ));
                continue;
            }
            // Moved to the end under the module's name (no copy).
            let mut run = body.shift_remove(&key).unwrap_or(Value::Null);
            if let Value::Array(a) = &mut run {
                a.push(Value::String(fun));
            }
            body.insert(module.to_string(), run);
            skeys.push(module.to_string());
            continue;
        }
        skeys.push(key);
    }
    if !body.contains_key("__sls__") {
        body.insert("__sls__".into(), Value::from(sls));
    }
    if !body.contains_key("__env__") {
        body.insert("__env__".into(), Value::from(saltenv));
    }
}

/// `module.fun` split at its first dot, the function ending at the next
/// (`pkg.installed.extra` is `pkg`, `installed`); `None` without a dot.
fn module_fun(key: &str) -> Option<(&str, &str)> {
    let (dot, end) = module_fun_at(key)?;
    Some((&key[..dot], &key[dot + 1..end]))
}

/// Where [`module_fun`] splits `key`: its first dot and the end of the
/// function. `memchr`: `str::split` sets up a searcher per call, a few
/// percent of rendering a 10k-state tree.
fn module_fun_at(key: &str) -> Option<(usize, usize)> {
    let bytes = key.as_bytes();
    let dot = memchr::memchr(b'.', bytes)?;
    let end = memchr::memchr(b'.', &bytes[dot + 1..]).map_or(bytes.len(), |i| dot + 1 + i);
    Some((dot, end))
}

/// The common declaration, one `mod.fun: [args]` and nothing else,
/// rebuilt as `_handle_state_decls` leaves it (`mod: [args, fun]`,
/// `__sls__`, `__env__`) without the general path's key copies and
/// lookups. `None` (body untouched) for any other shape.
fn single_declaration(body: &mut Map, sls: &str, saltenv: &str) -> Option<Map> {
    if body.len() != 1 {
        return None;
    }
    let (key, value) = body.iter().next()?;
    if key.starts_with('_') || !value.is_array() {
        return None;
    }
    let (dot, end) = module_fun_at(key)?;
    let (key, mut run) = std::mem::take(body).into_iter().next()?;
    let (module, fun) = (&key[..dot], &key[dot + 1..end]);
    if let Value::Array(a) = &mut run {
        // Room for the function and the `{order: N}` that auto-order
        // (on by default) appends next: the list grows once, to its final
        // length; one slot is spare when auto-order is off.
        a.reserve_exact(2);
        a.push(Value::from(fun));
    }
    let mut decl = Map::with_capacity(3);
    decl.insert(module.to_string(), run);
    decl.insert("__sls__".into(), Value::from(sls));
    decl.insert("__env__".into(), Value::from(saltenv));
    Some(decl)
}

/// Salt's `_handle_extend`: moves `extend:` into `__extend__`.
fn handle_extend(state: &mut Map, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    let Some(ext) = state.shift_remove("extend") else {
        return;
    };
    let Value::Object(mut ext) = ext else {
        errors.push(format!(
            "Extension value in SLS '{sls}' is not a dictionary"
        ));
        return;
    };
    let names: Vec<String> = ext.keys().cloned().collect();
    for name in names {
        let Some(Value::Object(body)) = ext.get_mut(&name) else {
            errors.push(format!(
                "Extension name '{name}' in SLS '{sls}' is not a dictionary"
            ));
            continue;
        };
        if !body.contains_key("__sls__") {
            body.insert("__sls__".into(), Value::from(sls));
        }
        if !body.contains_key("__env__") {
            body.insert("__env__".into(), Value::from(saltenv));
        }
        let keys: Vec<String> = body.keys().cloned().collect();
        for key in keys {
            if key.starts_with('_') || !body.get(&key).is_some_and(Value::is_array) {
                continue;
            }
            if let Some((module, fun)) = module_fun(&key) {
                let fun = fun.to_string();
                // Moved to the end under the module's name (no copy).
                let mut run = body.shift_remove(&key).unwrap_or(Value::Null);
                if let Value::Array(a) = &mut run {
                    a.push(Value::String(fun));
                }
                body.insert(module.to_string(), run);
            }
        }
    }
    let entry = state
        .entry("__extend__")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(a) = entry {
        a.push(Value::Object(ext));
    }
}

/// Salt's `_handle_exclude`: moves `exclude:` into `__exclude__`.
fn handle_exclude(state: &mut Map, sls: &str, errors: &mut Vec<String>) {
    let Some(exc) = state.shift_remove("exclude") else {
        return;
    };
    let Value::Array(exc) = exc else {
        errors.push(format!(
            "Exclude Declaration in SLS {sls} is not formed as a list"
        ));
        return;
    };
    let entry = state
        .entry("__exclude__")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(a) = entry {
        a.extend(exc);
    }
}

/// Salt's `merge_included_states`: IDs must be globally unique.
pub fn merge_included_states(high: &mut Map, mut state: Map, errors: &mut Vec<String>) {
    if high.is_empty() && !state.contains_key("__extend__") && !state.contains_key("__exclude__") {
        // The first SLS: nothing to merge with or conflict with.
        *high = state;
        return;
    }
    for key in ["__extend__", "__exclude__"] {
        if let Some(Value::Array(items)) = state.shift_remove(key) {
            let entry = high.entry(key).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = entry {
                a.extend(items);
            }
        }
    }
    for (id, body) in &state {
        if let Some(existing) = high.get(id) {
            if existing != body {
                let env_sls = |v: &Value| {
                    (
                        v.get("__env__")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        v.get("__sls__")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    )
                };
                let (e1, s1) = env_sls(existing);
                let (e2, s2) = env_sls(body);
                errors.push(format!(
                    "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is '{id}' and is found in SLS '{e1}:{s1}' and SLS '{e2}:{s2}'"
                ));
            }
        }
    }
    for (id, body) in state {
        high.insert(id, body);
    }
}

/// Salt's `clean_duplicate_extends`.
fn clean_duplicate_extends(high: &mut Map) {
    let Some(Value::Array(exts)) = high.get_mut("__extend__") else {
        return;
    };
    let mut seen: Vec<(String, Value)> = Vec::new();
    for ext in exts.iter() {
        if let Value::Object(m) = ext {
            for (k, v) in m {
                if !seen.iter().any(|(sk, sv)| sk == k && sv == v) {
                    seen.push((k.clone(), v.clone()));
                }
            }
        }
    }
    *exts = seen
        .into_iter()
        .map(|(k, v)| {
            let mut m = Map::new();
            m.insert(k, v);
            Value::Object(m)
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_fun_splits_at_the_first_dot_and_ends_at_the_next() {
        assert_eq!(module_fun("pkg.installed"), Some(("pkg", "installed")));
        assert_eq!(
            module_fun("pkg.installed.extra"),
            Some(("pkg", "installed"))
        );
        assert_eq!(
            module_fun("test.succeed_without_changes"),
            Some(("test", "succeed_without_changes"))
        );
        assert_eq!(module_fun("pkg."), Some(("pkg", "")));
        assert_eq!(module_fun(".x"), Some(("", "x")));
        assert_eq!(module_fun("a..b"), Some(("a", "")));
        assert_eq!(module_fun("nodot"), None);
        assert_eq!(module_fun(""), None);
    }
}
