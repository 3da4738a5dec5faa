//! Pipe mode's share of the result budget: a pipeline's stdout beyond what one answer may carry
//! is cut at a line, its step marked `truncated: true`, and a note says what was left out.
//!
//! The answer carries stdout twice (in the text, as JSON, and in the structured copy), so what
//! fits is found by measuring the answer as it will be sent, not by a fixed share of the budget.
//! Only the returned stdout is cut: what `tee` writes is bounded by its own recorded limits.

use mcp_core::budget::{cut_at_line, thousands, ResultBudget};
use serde_json::{json, Map, Value};

/// The most cuts tried before stdout is dropped whole; each one at least halves the excess.
const ATTEMPTS: usize = 8;

/// Cuts the `stdout` of `answer` until `cost` (what the answer costs as sent) is within
/// `budget`; marks the last step truncated and appends a note. Returns whether it cut.
pub(crate) fn fit(
    answer: &mut Map<String, Value>,
    budget: ResultBudget,
    cost: impl Fn(&Map<String, Value>) -> usize,
) -> bool {
    let over = cost(answer).saturating_sub(budget.bytes());
    let Some(Value::String(stdout)) = answer.get("stdout") else {
        return false;
    };
    if over == 0 {
        return false;
    }
    let total = stdout.len();
    let mut stdout = stdout.clone();
    // Room for the note and the flag added below.
    let mut excess = over + 600;
    for _ in 0..ATTEMPTS {
        // Each byte of stdout counts twice (text and copy), and more when JSON escapes it.
        let keep = cut_at_line(&stdout, stdout.len().saturating_sub(excess.div_ceil(2)));
        stdout.truncate(keep);
        answer.insert("stdout".into(), json!(stdout));
        mark(answer, budget, stdout.len(), total);
        let now = cost(answer);
        if now <= budget.bytes() || stdout.is_empty() {
            return true;
        }
        excess = now - budget.bytes();
    }
    answer.insert("stdout".into(), json!(""));
    mark(answer, budget, 0, total);
    true
}

/// Marks the last step `truncated` and says in the note how much stdout was shown.
fn mark(answer: &mut Map<String, Value>, budget: ResultBudget, shown: usize, total: usize) {
    if let Some(Value::Array(steps)) = answer
        .get_mut("meta")
        .and_then(|m| m.as_object_mut())
        .and_then(|m| m.get_mut("steps"))
    {
        if let Some(Value::Object(last)) = steps.last_mut() {
            last.insert("truncated".into(), json!(true));
        }
    }
    let cut = format!(
        "stdout cut at the result budget of {} bytes: the first {} of its {} bytes shown; narrow the pipeline (head -n, tail -n, sed -n 'A,Bp', rg) to see the rest",
        thousands(budget.bytes() as u64),
        thousands(shown as u64),
        thousands(total as u64)
    );
    let note = match answer.get("note").and_then(Value::as_str) {
        // A note of an earlier attempt is replaced, one of the call's own kept.
        Some(old) if !old.starts_with("stdout cut at the result budget") => {
            let own = old
                .split("\nstdout cut at the result budget")
                .next()
                .unwrap_or(old);
            format!("{own}\n{cut}")
        }
        _ => cut,
    };
    answer.insert("note".into(), json!(note));
}
