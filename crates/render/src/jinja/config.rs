//! Salt's `config.get` and `config.option`, written once: templates call
//! them here on the render context, and the `config` execution module
//! (CLI, jobs, `module.run`) calls them through [`crate::config_call`].

use minijinja::Value as MjValue;

use super::args::CallArgs;
use super::data::{lookup_key, traverse};

/// `pillar['master']`, the last place `config.get` looks.
fn master_of(pillar: &MjValue) -> MjValue {
    lookup_key(pillar, &MjValue::from("master")).unwrap_or_else(|| MjValue::from(()))
}

/// `config.get(key, default='', delimiter=':', merge=None, omit_opts=False,
/// omit_pillar=False, omit_master=False, omit_grains=False)`: the first of
/// opts, grains, pillar and `pillar['master']` holding the nested `key`.
pub(crate) fn get(opts: &MjValue, grains: &MjValue, pillar: &MjValue, call: &CallArgs) -> MjValue {
    let key = call.text(0, "key", "");
    let default = call.get(1, "default").unwrap_or_else(|| MjValue::from(""));
    let delimiter = call.text(2, "delimiter", ":");
    let marker = MjValue::from("_|-");
    let master = master_of(pillar);
    let sources = [
        (opts, call.flag(4, "omit_opts", false)),
        (grains, call.flag(7, "omit_grains", false)),
        (pillar, call.flag(5, "omit_pillar", false)),
        (&master, call.flag(6, "omit_master", false)),
    ];
    for (source, omitted) in sources {
        if omitted {
            continue;
        }
        let found = traverse(source, &key, marker.clone(), &delimiter);
        if found != marker {
            return found;
        }
    }
    default
}

/// `config.option(value, default=None, omit_opts=False, omit_grains=False,
/// omit_pillar=False, omit_master=False, omit_all=False)`: top-level keys
/// only, in the same order as [`get`].
pub(crate) fn option(
    opts: &MjValue,
    grains: &MjValue,
    pillar: &MjValue,
    call: &CallArgs,
) -> MjValue {
    let key = MjValue::from(call.text(0, "value", ""));
    let default = call
        .get(1, "default")
        .filter(|v| !v.is_none())
        .unwrap_or_else(|| MjValue::from(""));
    let omit_all = call.flag(6, "omit_all", false);
    let master = master_of(pillar);
    let sources = [
        (opts, omit_all || call.flag(2, "omit_opts", false)),
        (grains, omit_all || call.flag(3, "omit_grains", false)),
        (pillar, omit_all || call.flag(4, "omit_pillar", false)),
        (&master, omit_all || call.flag(5, "omit_master", false)),
    ];
    sources
        .iter()
        .filter(|(_, omitted)| !omitted)
        .find_map(|(source, _)| lookup_key(source, &key))
        .unwrap_or(default)
}

/// [`get`] or [`option`] on plain data (see [`crate::config_call`]).
pub(crate) fn call_on_data(
    fun: &str,
    opts: &crate::Value,
    grains: &crate::Value,
    pillar: &crate::Value,
    args: &[crate::Value],
    kwargs: &crate::Map,
) -> Option<crate::Value> {
    use super::objects::{from_template, to_template};
    let call = CallArgs::from_parts(
        fun,
        args.iter().map(to_template).collect(),
        kwargs
            .iter()
            .map(|(k, v)| (k.clone(), to_template(v)))
            .collect(),
    );
    let (opts, grains, pillar) = (to_template(opts), to_template(grains), to_template(pillar));
    let found = match fun {
        "config.get" => get(&opts, &grains, &pillar, &call),
        "config.option" => option(&opts, &grains, &pillar, &call),
        _ => return None,
    };
    Some(from_template(&found))
}
