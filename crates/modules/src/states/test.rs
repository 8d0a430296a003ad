//! Salt's `test` state module: states that succeed, fail or change on demand.

use halite_state::{StateCall, StateError, StateModule, StateResult};

/// `test.*` states (placeholder until the full module lands).
pub struct TestState;

impl StateModule for TestState {
    fn name(&self) -> &'static str {
        "test"
    }
    fn functions(&self) -> &'static [&'static str] {
        &["succeed_without_changes", "nop"]
    }
    fn call(&self, _fun: &str, call: &StateCall<'_>) -> Result<StateResult, StateError> {
        Ok(StateResult::ok(call.name(), "Success!"))
    }
}
