//! JSON-RPC batches (protocol 2025-03-26 only; the dispatcher refuses them in every other
//! revision) and the bounds that keep one from taking the server's memory.
//!
//! A batch is answered as one frame, an array of its members' replies, so everything in it is
//! held at once. A small batch can ask for a great deal: a few hundred reads of a large file in
//! 50 KB of request, or tens of thousands of `tools/list` in a frame well under the message limit.
//! So a batch has at most [`MAX_MEMBERS`] members (a longer one is refused whole, before any of it
//! is parsed into a tree or run), and its answer grows to about [`MAX_REPLY_BYTES`]: a member that
//! comes after the answer has reached it is not run and is answered with an error that says to send
//! it again on its own. Each member is written into the answer as it finishes, never kept as a
//! parsed tree.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;

use super::message::{self, code};

/// The most members of one batch. A client that batches sends a handful; past this the batch is
/// refused whole, nothing in it run.
pub const MAX_MEMBERS: usize = 256;

/// The size an answer to one batch may reach before its remaining members are refused (the member
/// that crosses it is still answered in full: it ran, and its effects must be reported).
pub const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

/// A frame's JSON, with a batch's length known before its members are built.
pub enum Parsed {
    /// One message.
    Single(Value),
    /// A batch of at most [`MAX_MEMBERS`] members.
    Batch(Vec<Value>),
    /// A batch of this many members, more than [`MAX_MEMBERS`]; its members were only counted.
    TooLong(usize),
}

/// Parses one frame; a batch's members past [`MAX_MEMBERS`] are checked to be JSON and counted,
/// never built.
pub fn parse(bytes: &[u8]) -> serde_json::Result<Parsed> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[') {
        return serde_json::from_slice(bytes).map(Parsed::Single);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = de.deserialize_seq(Bounded)?;
    de.end()?;
    Ok(parsed)
}

/// Builds a batch's members up to [`MAX_MEMBERS`], then only counts.
struct Bounded;

impl<'de> Visitor<'de> for Bounded {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC batch (an array of messages)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut members = Vec::new();
        while members.len() < MAX_MEMBERS {
            match seq.next_element::<Value>()? {
                Some(member) => members.push(member),
                None => return Ok(Parsed::Batch(members)),
            }
        }
        if seq.next_element::<IgnoredAny>()?.is_none() {
            return Ok(Parsed::Batch(members));
        }
        let mut count = members.len() + 1;
        drop(members);
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok(Parsed::TooLong(count))
    }
}

/// The error that refuses a batch longer than [`MAX_MEMBERS`].
pub fn too_long(count: usize) -> Value {
    message::error(
        &Value::Null,
        code::INVALID_REQUEST,
        format!(
            "a batch of {count} messages is more than the {MAX_MEMBERS} one batch may hold; nothing in it was run. Send at most {MAX_MEMBERS} at a time, or send them one at a time"
        ),
        None,
    )
}

/// The reply to a member that came after the batch's answer reached [`MAX_REPLY_BYTES`].
fn refused(id: &Value) -> Value {
    message::error(
        id,
        code::INVALID_REQUEST,
        format!(
            "not run: the answer to this batch reached {} MiB before this member; send it again on its own (send large reads one at a time rather than in a batch)",
            MAX_REPLY_BYTES / (1024 * 1024)
        ),
        None,
    )
}

/// A batch's answer being written into a buffer: `[`, the members' replies separated by commas,
/// `]`, each written as its member finishes.
pub struct Answer<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    members: usize,
}

impl<'a> Answer<'a> {
    /// An answer appended to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Answer<'a> {
        let start = out.len();
        Answer {
            out,
            start,
            members: 0,
        }
    }

    /// True once the answer has reached [`MAX_REPLY_BYTES`]: what comes next is refused.
    pub fn full(&self) -> bool {
        self.out.len() - self.start >= MAX_REPLY_BYTES
    }

    /// Adds the reply `reply` of the member `id`, or, once the answer is full, the error that
    /// refuses it.
    pub fn push(&mut self, id: &Value, reply: &[u8]) {
        if self.full() {
            self.refuse(id);
            return;
        }
        self.separate();
        self.out.extend_from_slice(reply);
    }

    /// Adds the error that refuses the member `id` (see [`Answer::full`]).
    pub fn refuse(&mut self, id: &Value) {
        self.separate();
        // Writing a Value into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *self.out, &refused(id));
    }

    /// Adds what `write` appends to the buffer, written in place (a read's reply is not copied);
    /// nothing when it appends nothing (a cancelled call has no reply). Call only when the answer
    /// is not [`full`](Answer::full).
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>) -> bool) {
        let before = self.out.len();
        self.separate();
        let mark = self.out.len();
        if !write(self.out) || self.out.len() == mark {
            self.out.truncate(before);
            self.members -= 1;
        }
    }

    fn separate(&mut self) {
        self.out.push(if self.members == 0 { b'[' } else { b',' });
        self.members += 1;
    }

    /// Closes the array; false, with nothing left in the buffer, when no member had a reply.
    pub fn finish(self) -> bool {
        if self.members == 0 {
            self.out.truncate(self.start);
            return false;
        }
        self.out.push(b']');
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_built_up_to_the_limit_and_only_counted_past_it() {
        let batch = |n: usize| format!("[{}]", vec!["{\"a\":[1,2]}"; n].join(","));
        assert!(matches!(parse(batch(3).as_bytes()), Ok(Parsed::Batch(m)) if m.len() == 3));
        assert!(
            matches!(parse(batch(MAX_MEMBERS).as_bytes()), Ok(Parsed::Batch(m)) if m.len() == MAX_MEMBERS)
        );
        assert!(matches!(
            parse(batch(MAX_MEMBERS + 5).as_bytes()),
            Ok(Parsed::TooLong(n)) if n == MAX_MEMBERS + 5
        ));
        assert!(matches!(parse(b" {\"a\":1}"), Ok(Parsed::Single(_))));
        // Past the limit the rest is still checked to be JSON, and nothing may follow the array.
        let broken = format!(
            "{},]",
            &batch(MAX_MEMBERS + 1)[..batch(MAX_MEMBERS + 1).len() - 1]
        );
        assert!(parse(broken.as_bytes()).is_err());
        assert!(parse(b"[1] 2").is_err());
    }

    #[test]
    fn an_answer_refuses_what_comes_after_it_is_full() {
        let mut out = b"head".to_vec();
        let mut answer = Answer::new(&mut out);
        answer.push(&Value::from(1), b"{\"id\":1}");
        answer.push_with(|_| false);
        let big = vec![b' '; MAX_REPLY_BYTES];
        answer.push_with(|out| {
            out.extend_from_slice(&big);
            true
        });
        assert!(answer.full());
        answer.push(&Value::from(3), b"{\"id\":3}");
        assert!(answer.finish());
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.starts_with("head[{\"id\":1}, "), "{}", &text[..20]);
        assert!(
            text.ends_with(",{\"error\":{\"code\":-32600,\"message\":\"not run: the answer to this batch reached 16 MiB before this member; send it again on its own (send large reads one at a time rather than in a batch)\"},\"id\":3,\"jsonrpc\":\"2.0\"}]"),
            "{}",
            &text[text.len() - 200..]
        );
        let mut empty = b"x".to_vec();
        let answer = Answer::new(&mut empty);
        assert!(!answer.finish());
        assert_eq!(empty, b"x");
    }
}
