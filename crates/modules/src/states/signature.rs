//! Salt's check of a state function's arguments: a function without
//! `**kwargs` refuses a keyword it does not take ("'foo' is an invalid
//! keyword argument for 'kmod.absent'"). Salt refuses the whole run; a
//! state that declares its parameters here fails with the same message,
//! instead of silently ignoring a misspelt argument.

use halite_state::requisite::is_internal_keyword;
use halite_state::{StateCall, StateError};

/// Fails when the call has an argument that is neither one of `params`,
/// nor `name`, nor a keyword the engine consumes (requisites, `onlyif`...).
pub fn check(call: &StateCall<'_>, params: &[&str]) -> Result<(), StateError> {
    let unknown = call.chunk.keys().find(|k| {
        *k != "name" && !k.starts_with("__") && !is_internal_keyword(k) && !params.contains(k)
    });
    match unknown {
        None => Ok(()),
        Some(k) => Err(StateError::BadArg(format!(
            "'{k}' is an invalid keyword argument for '{}.{}'",
            call.chunk.state(),
            call.chunk.fun()
        ))),
    }
}
