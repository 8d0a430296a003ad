//! Jinja as Salt configures it, on minijinja: strict undefined, `do`, loop
//! controls, the final newline handled as Salt does, Salt's filters, tests, tags and
//! context variables, Python-like mutable data, and Salt-shaped errors.

mod args;
mod compiled;
pub(crate) mod config;
pub(crate) use config::call_on_data as config_call;
mod context;
mod data;
mod errors;
mod filters;
mod methods;
pub mod objects;
pub mod prepass;
mod salt;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use minijinja::value::{Rest, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State, Value as MjValue};

use crate::memo::{Read, ReadLog, Root};
use crate::{RenderContext, RenderError};
use objects::{python_str, to_template, to_watched, PyDict};
use salt::{SaltData, SaltObject};

/// The name under which a template without a path is compiled.
const ANONYMOUS_TEMPLATE: &str = "<template>";

/// Renders `text` as a Jinja template with Salt's environment and `ctx`,
/// recording what it reads in `log` when one is given.
pub fn render(
    text: &str,
    ctx: &RenderContext,
    log: Option<Arc<ReadLog>>,
) -> Result<String, RenderError> {
    let originals: Arc<Mutex<HashMap<String, String>>> = Arc::new(Mutex::new(HashMap::new()));
    let salt_data = Arc::new(SaltData {
        grains: to_watched(&ctx.grains, Root::Grains, log.as_ref()),
        pillar: to_watched(&ctx.pillar, Root::Pillar, log.as_ref()),
        opts: to_watched(&ctx.opts, Root::Opts, log.as_ref()),
        functions: ctx.salt.clone(),
        last_failure: Mutex::new(None),
        log,
    });
    let name = if ctx.source_path.is_empty() {
        ANONYMOUS_TEMPLATE.to_string()
    } else {
        ctx.source_path.clone()
    };
    if let Ok(mut map) = originals.lock() {
        map.insert(name.clone(), text.to_string());
    }
    let result = compiled::CompiledTemplates::global()
        .environment(&name, text)
        .and_then(|mut env| {
            add_render_globals(&mut env, ctx, salt_data.clone(), originals.clone());
            env.get_template(&name)?.render(MjValue::from(()))
        })
        .map(|output| restore_final_newline(text, output));
    result.map_err(|error| {
        let failure = salt_data
            .last_failure
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        let sources = originals.lock().map(|m| m.clone()).unwrap_or_default();
        RenderError::Jinja(errors::salt_message(
            &error,
            &name,
            &sources,
            failure.as_deref(),
        ))
    })
}

/// What a render adds to the shared environment of its template
/// ([`compiled`]): the loader over its file roots (remembering each text
/// loaded, for error messages) and the render context as globals.
fn add_render_globals(
    env: &mut Environment<'static>,
    ctx: &RenderContext,
    salt_data: Arc<SaltData>,
    originals: Arc<Mutex<HashMap<String, String>>>,
) {
    let files = ctx.files.clone();
    let saltenv = ctx.saltenv.clone();
    let log = salt_data.log.clone();
    env.set_loader(move |name| {
        let clean = name.trim_start_matches('/');
        let found = files.get(clean, &saltenv);
        if let Some(log) = &log {
            match &found {
                Ok(text) => log.note(Read::File {
                    name: clean.to_string(),
                    saltenv: saltenv.clone(),
                    text: text.clone(),
                }),
                Err(_) => log.volatile(),
            }
        }
        match found {
            Ok(Some(text)) => {
                if let Ok(mut map) = originals.lock() {
                    map.insert(name.to_string(), text.clone());
                }
                Ok(Some(prepass::prepare(&text)))
            }
            Ok(None) => Ok(None),
            Err(message) => Err(Error::new(ErrorKind::InvalidOperation, message)),
        }
    });
    // Globals: Salt makes the whole render context global, so templates
    // imported without context and YAML read by import_yaml see it too.
    env.add_global("grains", salt_data.grains.clone());
    env.add_global("pillar", salt_data.pillar.clone());
    env.add_global("opts", salt_data.opts.clone());
    env.add_global("__opts__", salt_data.opts.clone());
    env.add_global("salt", MjValue::from_object(SaltObject { data: salt_data }));
    env.add_global("saltenv", ctx.saltenv.as_str());
    env.add_global("env", ctx.saltenv.as_str());
    env.add_global("sls", ctx.sls.as_str());
    for (key, value) in context::sls_context(&ctx.source_path, &ctx.sls) {
        env.add_global(key, to_template(&value));
    }
    for (key, value) in &ctx.extra {
        env.add_global(key.clone(), to_template(value));
    }
}

/// Salt renders with Jinja2's default `keep_trailing_newline=False` (so a
/// `-%}` before the source's last newline has nothing to eat, and included
/// templates lose theirs) and then appends the newline the source ended with
/// (salt/utils/templates.py `render_jinja_tmpl`). Doing the same keeps files
/// byte-identical with Salt's, so the two do not rewrite them in turn.
fn restore_final_newline(source: &str, mut output: String) -> String {
    if source.ends_with('\n') {
        output.push('\n');
    }
    output
}

/// Relative template names (`./x`, `../x`) resolve against the including
/// template; anything else is relative to the file root.
fn join_template_path(name: &str, parent: &str) -> String {
    if !(name.starts_with("./") || name.starts_with("../")) {
        return name.to_string();
    }
    let mut parts: Vec<&str> = parent.split('/').collect();
    parts.pop();
    for segment in name.split('/') {
        match segment {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Prints values as Python's `str()` does (`True`, `None`, `{'a': 1}`).
fn format_value(
    out: &mut minijinja::Output<'_>,
    state: &mut State<'_, '_>,
    value: &MjValue,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined | ValueKind::String => minijinja::escape_formatter(out, state, value),
        ValueKind::Bool | ValueKind::None | ValueKind::Number | ValueKind::Seq | ValueKind::Map => {
            out.write_str(&python_str(value)).map_err(Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// Python's `'fmt' % args`: a tuple spreads into the arguments, a dict
/// feeds `%(name)s`, anything else is the single argument.
fn percent_format(format: String, args: MjValue) -> Result<String, Error> {
    let spread: Vec<MjValue> = if args.is_tuple() {
        args.try_iter()?.collect()
    } else {
        vec![args]
    };
    minijinja::formatting::format(minijinja::formatting::FormatStyle::Printf, &format, &spread)
}

/// `dict(...)`: a mutable dict from a mapping, pairs and/or keywords.
fn dict_function(args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let result = PyDict::default();
    for arg in args.into_values().iter() {
        if arg.is_kwargs() {
            let call = args::CallArgs::new("dict", std::slice::from_ref(arg))?;
            for (key, value) in call.keywords() {
                result.insert(MjValue::from(key.as_str()), value.clone());
            }
        } else {
            for (key, value) in objects::pairs_of(arg)? {
                result.insert(key, value);
            }
        }
    }
    Ok(MjValue::from_object(result))
}

/// `import_yaml`/`import_json`/`import_text`: render the named template
/// (without context, as Salt's import does), then parse it.
fn import_function(state: &State<'_, '_>, name: String, kind: String) -> Result<MjValue, Error> {
    let template = state.get_template(&name)?;
    let text = template.render(MjValue::from(()))?;
    parse_text(&text, &kind, &name)
}

/// `load_yaml`/`load_json` blocks: parse the captured text.
fn parse_function(text: MjValue, kind: String) -> Result<MjValue, Error> {
    parse_text(&python_str(&text), &kind, "load block")
}

fn parse_text(text: &str, kind: &str, origin: &str) -> Result<MjValue, Error> {
    match kind {
        "yaml" => crate::yaml::load(text)
            .map(|data| to_template(&data))
            .map_err(|e| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("Unable to load yaml from {origin}: {}", e.message),
                )
            }),
        "json" => {
            if text.trim().is_empty() {
                return Ok(MjValue::from(()));
            }
            serde_json::from_str::<crate::Value>(text)
                .map(|data| to_template(&data))
                .map_err(|e| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        format!("Unable to load json from {origin}: {e}"),
                    )
                })
        }
        _ => Ok(MjValue::from(text)),
    }
}
