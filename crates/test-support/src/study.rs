//! Looking things up in `filesystem study report --format json`: the arm or comparison of a
//! given name, so every study test reads the report the same way.

use serde_json::Value;

/// The entry of `arms` for arm `name`; panics naming the arm when the report has none.
pub fn arm<'a>(report: &'a Value, name: &str) -> &'a Value {
    named(report, "arms", name)
}

/// The entry of `comparisons` for arm `name` against the baseline; panics when there is none.
pub fn comparison<'a>(report: &'a Value, name: &str) -> &'a Value {
    named(report, "comparisons", name)
}

fn named<'a>(report: &'a Value, list: &str, name: &str) -> &'a Value {
    report[list]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["arm"] == name))
        .unwrap_or_else(|| panic!("no entry for arm {name} in {list} of the report: {report}"))
}
