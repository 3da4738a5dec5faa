//! Pipe mode's share of the result budget: a pipeline's stdout (and stderr) beyond what one
//! answer may carry is cut after a whole line, the last step is marked `truncated: true`, and a
//! note says what was left out.
//!
//! The answer carries its streams twice (in the text, as JSON, and in the structured copy), so
//! what fits is found by measuring the answer as it will be sent, not by a fixed share of the
//! budget. Only what the answer shows is cut: the pipeline itself ran under its own limits, and
//! what `tee` wrote is bounded by tee's recorded limits alone.

use mcp_core::budget::{cut_at_line, thousands, ResultBudget};
use serde_json::{json, Map, Value};

/// The most cuts tried; each one removes at least the excess, so two are usually enough.
const ATTEMPTS: usize = 8;

/// The streams an answer may carry, in the order they give way when both are long: stderr is
/// diagnostic, stdout the result.
const STREAMS: [&str; 2] = ["stderr", "stdout"];

/// Room kept for the note and the flag added while cutting.
const NOTE_ROOM: usize = 700;

/// Cuts the streams of `answer` until `cost` (what the answer costs as sent) is within
/// `budget`; marks the last step truncated when stdout was cut and says so in the note. Returns
/// whether anything was cut.
pub(crate) fn fit(
    answer: &mut Map<String, Value>,
    budget: ResultBudget,
    cost: impl Fn(&Map<String, Value>) -> usize,
) -> bool {
    let totals: Vec<(&str, usize)> = STREAMS
        .iter()
        .filter_map(|k| {
            answer
                .get(*k)
                .and_then(Value::as_str)
                .map(|s| (*k, s.len()))
        })
        .collect();
    let mut over = cost(answer).saturating_sub(budget.bytes());
    if over == 0 || totals.is_empty() {
        return false;
    }
    over += NOTE_ROOM;
    for _ in 0..ATTEMPTS {
        // The longest stream gives way first; every byte of it counts twice (text and copy).
        let Some((key, len)) = STREAMS
            .iter()
            .filter_map(|k| {
                answer
                    .get(*k)
                    .and_then(Value::as_str)
                    .map(|s| (*k, s.len()))
            })
            .filter(|&(_, len)| len > 0)
            .max_by_key(|&(k, len)| (len, k == "stderr"))
        else {
            break;
        };
        let Some(Value::String(text)) = answer.get_mut(key) else {
            break;
        };
        let keep = cut_at_line(text, len.saturating_sub(over.div_ceil(2)));
        text.truncate(keep);
        mark(answer, budget, &totals);
        let now = cost(answer);
        if now <= budget.bytes() {
            return true;
        }
        over = now - budget.bytes();
    }
    for key in STREAMS {
        if answer.contains_key(key) {
            answer.insert(key.into(), json!(""));
        }
    }
    mark(answer, budget, &totals);
    true
}

/// Marks the last step `truncated` when stdout was cut, and says in the note how much of each
/// stream was shown.
fn mark(answer: &mut Map<String, Value>, budget: ResultBudget, totals: &[(&str, usize)]) {
    let mut cut = Vec::new();
    for &(key, total) in totals {
        let shown = answer.get(key).and_then(Value::as_str).map_or(0, str::len);
        if shown < total {
            cut.push(format!(
                "the first {} of {}'s {} bytes",
                thousands(shown as u64),
                key,
                thousands(total as u64)
            ));
            if key == "stdout" {
                mark_last_step(answer);
            }
        }
    }
    let said = format!(
        "{PREFIX} of {} bytes: {} shown; narrow the pipeline (head -n, tail -n, sed -n 'A,Bp', rg) to see the rest",
        thousands(budget.bytes() as u64),
        cut.join(" and ")
    );
    // A note of the call's own is kept; one of an earlier attempt here is replaced.
    let own = answer
        .get("note")
        .and_then(Value::as_str)
        .map(|n| n.split(PREFIX).next().unwrap_or(n).trim_end().to_string())
        .filter(|n| !n.is_empty());
    let note = match own {
        Some(own) => format!("{own}\n{said}"),
        None => said,
    };
    answer.insert("note".into(), json!(note));
}

/// How the note of a cut begins.
const PREFIX: &str = "output cut at the result budget";

fn mark_last_step(answer: &mut Map<String, Value>) {
    if let Some(Value::Array(steps)) = answer
        .get_mut("meta")
        .and_then(|m| m.as_object_mut())
        .and_then(|m| m.get_mut("steps"))
    {
        if let Some(Value::Object(last)) = steps.last_mut() {
            last.insert("truncated".into(), json!(true));
        }
    }
}
