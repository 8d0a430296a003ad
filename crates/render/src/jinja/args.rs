//! Python-style call arguments (positional, then keywords) for the Salt
//! functions and filters this crate implements.

use indexmap::IndexMap;
use minijinja::value::Kwargs;
use minijinja::{Error, ErrorKind, Value as MjValue};

/// The arguments of one call, split into positional and keyword arguments.
pub struct CallArgs {
    positional: Vec<MjValue>,
    keywords: IndexMap<String, MjValue>,
    function: String,
}

impl CallArgs {
    /// Splits minijinja's argument slice (keywords come last as a kwargs value).
    pub fn new(function: &str, args: &[MjValue]) -> Result<Self, Error> {
        let mut positional = args.to_vec();
        let mut keywords = IndexMap::new();
        if positional.last().is_some_and(|v| v.is_kwargs()) {
            if let Some(last) = positional.pop() {
                let kwargs = Kwargs::try_from(last)?;
                for key in kwargs.args() {
                    keywords.insert(key.to_string(), kwargs.get::<MjValue>(key)?);
                }
            }
        }
        Ok(CallArgs {
            positional,
            keywords,
            function: function.to_string(),
        })
    }

    /// Arguments already split (a call from outside a template).
    pub fn from_parts(
        function: &str,
        positional: Vec<MjValue>,
        keywords: IndexMap<String, MjValue>,
    ) -> Self {
        CallArgs {
            positional,
            keywords,
            function: function.to_string(),
        }
    }

    /// The argument called `name`, or the positional one at `index`.
    pub fn get(&self, index: usize, name: &str) -> Option<MjValue> {
        self.keywords
            .get(name)
            .cloned()
            .or_else(|| self.positional.get(index).cloned())
    }

    /// Like [`get`](Self::get) but required.
    pub fn require(&self, index: usize, name: &str) -> Result<MjValue, Error> {
        self.get(index, name).ok_or_else(|| {
            Error::new(
                ErrorKind::MissingArgument,
                format!("{}() missing required argument: '{name}'", self.function),
            )
        })
    }

    /// A boolean argument (Python truthiness), `default` when absent.
    pub fn flag(&self, index: usize, name: &str, default: bool) -> bool {
        self.get(index, name).map_or(default, |v| v.is_true())
    }

    /// A string argument, `default` when absent or None.
    pub fn text(&self, index: usize, name: &str, default: &str) -> String {
        match self.get(index, name) {
            Some(v) if !v.is_none() && !v.is_undefined() => {
                v.as_str().map_or_else(|| v.to_string(), str::to_string)
            }
            _ => default.to_string(),
        }
    }

    /// All positional arguments.
    pub fn positional(&self) -> &[MjValue] {
        &self.positional
    }

    /// All keyword arguments.
    pub fn keywords(&self) -> &IndexMap<String, MjValue> {
        &self.keywords
    }
}
