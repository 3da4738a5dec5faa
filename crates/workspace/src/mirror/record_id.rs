//! The one record-id rule of `.shelpa/` mirrors, for every writer (`tee` and `audit restore`).
//!
//! A record id is the unix time in nanoseconds at which the record was written, made strictly
//! greater than the last id this process handed out and than the last id already in the mirror
//! (which another process may have written), so ids in one mirror only grow and never repeat even
//! within one clock tick. The separator shows the id's own second as its time stamp, so the two
//! can never disagree.
//!
//! The mirror holds whatever a model wrote, separator look-alikes included, so an id further in
//! the future than [`MAX_CLOCK_SKEW_NANOS`] is read as forged content and not followed: one
//! planted `record_id=18446744073709551615` line must not exhaust the ids of a mirror. Only the
//! last [`TAIL_BYTES`] of a mirror are searched for its last id, so the cost of a write does not
//! grow with the mirror.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::parse_separator;

/// Mirror record ids further in the future than this are treated as forged content, not as ids.
pub const MAX_CLOCK_SKEW_NANOS: u64 = 24 * 3600 * 1_000_000_000;

/// How much of a mirror's tail is searched for its last record id.
pub const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// The record id of the last separator line in `tail` that is a plausible one at time `now`
/// (unix nanoseconds). Separators are recognised by the reader's grammar
/// ([`parse_separator`]), so writer and reader can never disagree on what one is.
pub fn last_in(tail: &[u8], now: u64) -> Option<u64> {
    let limit = now.saturating_add(MAX_CLOCK_SKEW_NANOS);
    tail.split(|b| *b == b'\n')
        .rev()
        .filter_map(|line| parse_separator(line).ok().flatten())
        .map(|sep| sep.id)
        .find(|id| *id <= limit)
}

/// The rule itself: `now`, raised to one past the larger of `issued` (the last id this process
/// handed out) and `in_mirror` (the mirror's last id). `None` once that would pass `u64::MAX`:
/// an id is never handed out twice, so the write is refused rather than numbered with a repeat.
pub fn following(issued: u64, in_mirror: Option<u64>, now: u64) -> Option<u64> {
    let floor = issued.max(in_mirror.unwrap_or(0)).checked_add(1)?;
    Some(now.max(floor))
}

/// The last id this process handed out, shared by every mirror writer in it.
static ISSUED: Mutex<u64> = Mutex::new(0);

/// The next id for a mirror whose last bytes are `tail`, by [`following`] at the current time,
/// and remembered as this process's last.
pub fn next_for(tail: &[u8]) -> Option<u64> {
    let now = now_nanos();
    let mut issued = match ISSUED.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let id = following(*issued, last_in(tail, now), now)?;
    *issued = id;
    Some(id)
}

/// The time of a record id (unix nanoseconds), to the second, as its separator shows it.
pub fn time_of(id: u64) -> DateTime<Utc> {
    DateTime::from_timestamp((id / 1_000_000_000) as i64, 0).unwrap_or_default()
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::{format_separator, RecordKind};

    const NOW: u64 = 1_772_025_450_395_572_000;

    #[test]
    fn an_id_is_the_clock_when_nothing_is_ahead_of_it() {
        assert_eq!(following(0, None, NOW), Some(NOW));
        assert_eq!(following(NOW - 5, Some(NOW - 9), NOW), Some(NOW));
    }

    #[test]
    fn an_id_passes_the_last_issued_and_the_mirrors_last_within_one_tick() {
        assert_eq!(following(NOW, None, NOW), Some(NOW + 1));
        assert_eq!(following(NOW, Some(NOW + 1_000), NOW), Some(NOW + 1_001));
    }

    #[test]
    fn past_the_largest_id_there_is_none_rather_than_a_repeat() {
        assert_eq!(following(0, Some(u64::MAX), NOW), None);
        assert_eq!(following(u64::MAX, None, NOW), None);
    }

    #[test]
    fn ids_handed_out_by_the_process_strictly_increase() {
        let a = next_for(b"").expect("id");
        let b = next_for(b"").expect("id");
        assert!(b > a);
        let ahead = format_separator(RecordKind::Overwrite, time_of(b), b + 1_000);
        let c = next_for(ahead.as_bytes()).expect("id");
        assert!(c > b + 1_000);
    }

    #[test]
    fn the_last_id_comes_from_real_separators_and_forged_future_ids_are_ignored() {
        let forged = format!(
            "--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id={} ---\n",
            u64::MAX - 1
        );
        let text = format!(
            "--- shelpa:baseline ts=2026-02-25T13:17:30Z record_id=5 ---\nhello\n\
             --- shelpa:other ts=2026-02-25T13:17:30Z record_id=9 ---\n{forged}"
        );
        assert_eq!(last_in(text.as_bytes(), NOW), Some(5));
        let near = format!(
            "--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id={} ---\n",
            NOW + MAX_CLOCK_SKEW_NANOS
        );
        assert_eq!(
            last_in(near.as_bytes(), NOW),
            Some(NOW + MAX_CLOCK_SKEW_NANOS),
            "a clock a day behind is still followed"
        );
    }

    #[test]
    fn separators_carry_the_ids_utc_second() {
        let id = 1772025450395572000;
        assert_eq!(
            format_separator(RecordKind::Overwrite, time_of(id), id),
            "--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=1772025450395572000 ---\n"
        );
    }
}
