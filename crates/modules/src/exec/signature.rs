//! Python-style argument checking for execution functions: Salt calls a
//! module function with the CLI's arguments and Python itself rejects a
//! missing required argument or an unknown keyword, with messages users
//! know. A module that wants the same declares each function's
//! parameters as a [`Signature`] and checks the call against it.

use crate::exec::{Args, ExecError};

/// Whether `msg` is what Python's `TypeError` says of a call with bad
/// arguments (`f() missing 1 required positional argument: 'x'`, `got an
/// unexpected keyword argument`, `takes 2 positional arguments but 3 were
/// given`, `got multiple values for argument`): Salt reports those as
/// "Passed invalid arguments", not as the function's own error.
pub fn is_python_type_error(msg: &str) -> bool {
    let Some((_, rest)) = msg.split_once("() ") else {
        return false;
    };
    [
        "missing ",
        "got an unexpected keyword argument",
        "got multiple values for argument",
        "takes ",
    ]
    .iter()
    .any(|p| rest.starts_with(p))
}

/// The parameters of one execution function, in Python's order.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    /// The function name, as Python's messages say it (`set_job`).
    pub fun: &'static str,
    /// Parameters without a default, in positional order.
    pub required: &'static [&'static str],
    /// Parameters with a default, after the required ones.
    pub optional: &'static [&'static str],
    /// Whether the function takes `**kwargs` (any keyword is accepted).
    pub var_kwargs: bool,
}

impl Signature {
    /// A function of `required` then `optional` parameters, no `**kwargs`.
    pub const fn new(
        fun: &'static str,
        required: &'static [&'static str],
        optional: &'static [&'static str],
    ) -> Self {
        Signature {
            fun,
            required,
            optional,
            var_kwargs: false,
        }
    }

    /// The same, accepting any other keyword too.
    pub const fn with_kwargs(self) -> Self {
        Signature {
            var_kwargs: true,
            ..self
        }
    }

    /// Python's `TypeError`s for this call: unknown keywords (Salt's
    /// "The following keyword arguments are not valid"), then missing
    /// required arguments. Keywords starting with `__` (Salt's `__pub_*`)
    /// are always accepted.
    pub fn check(&self, args: &Args) -> Result<(), ExecError> {
        if !self.var_kwargs {
            let invalid: Vec<String> = args
                .kwargs
                .iter()
                .filter(|(k, _)| {
                    !k.starts_with("__")
                        && !self.required.contains(&k.as_str())
                        && !self.optional.contains(&k.as_str())
                })
                .map(|(k, v)| format!("{k}={}", crate::exec::py_str(v)))
                .collect();
            if !invalid.is_empty() {
                return Err(ExecError::Invocation(format!(
                    "The following keyword arguments are not valid: {}",
                    invalid.join(", ")
                )));
            }
        }
        let missing: Vec<String> = self
            .required
            .iter()
            .enumerate()
            .filter(|(i, name)| *i >= args.positional.len() && !args.kwargs.contains_key(**name))
            .map(|(_, name)| format!("'{name}'"))
            .collect();
        let list = match missing.as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            [a, b] => format!("{a} and {b}"),
            [init @ .., last] => format!("{}, and {last}", init.join(", ")),
        };
        let (n, noun) = if missing.len() == 1 {
            (1, "argument")
        } else {
            (missing.len(), "arguments")
        };
        Err(ExecError::Invocation(format!(
            "{}() missing {n} required positional {noun}: {list}",
            self.fun
        )))
    }
}

/// Checks `args` against the signature of `fun` in `table` (no check when
/// the table does not list it).
pub fn check(table: &[Signature], fun: &str, args: &Args) -> Result<(), ExecError> {
    match table.iter().find(|s| s.fun == fun) {
        Some(sig) => sig.check(args),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pythons_call_errors_are_told_apart() {
        assert!(is_python_type_error(
            "check_hash() missing 1 required positional argument: 'file_hash'"
        ));
        assert!(is_python_type_error(
            "get() got an unexpected keyword argument 'x'"
        ));
        assert!(is_python_type_error(
            "ping() takes 0 positional arguments but 1 was given"
        ));
        assert!(!is_python_type_error("Hash must be a string"));
        assert!(!is_python_type_error("File path must be absolute."));
    }

    fn args(positional: Vec<serde_json::Value>, kwargs: serde_json::Value) -> Args {
        Args {
            positional,
            kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn messages_are_pythons() {
        let sig = Signature::new("set_job", &["user", "minute", "hour", "cmd"], &["comment"]);
        let e = sig.check(&args(vec![json!("root"), json!(1)], json!({})));
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("set_job() missing 2 required positional arguments: 'hour' and 'cmd'".into())
        );
        let e = sig.check(&args(vec![json!("root")], json!({})));
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err(
                "set_job() missing 3 required positional arguments: 'minute', 'hour', and 'cmd'"
                    .into()
            )
        );
        let e = sig.check(&args(
            vec![],
            json!({"user": "root", "foo": "bar", "__pub_jid": 1}),
        ));
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("The following keyword arguments are not valid: foo=bar".into())
        );
        assert!(sig
            .check(&args(
                vec![json!("root"), json!(1), json!(2)],
                json!({"cmd": "x", "comment": "c"})
            ))
            .is_ok());
        assert!(sig
            .with_kwargs()
            .check(&args(
                vec![json!("root"), json!(1), json!(2), json!("x")],
                json!({"foo": 1})
            ))
            .is_ok());
    }
}
