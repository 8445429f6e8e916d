//! Free text as PostgreSQL can hold it. A `text` value (and a `jsonb` string) cannot contain
//! U+0000, which JavaScript strings, and so job names, failure reasons, stack traces and log
//! lines, can. The embedded engine keeps them as they are; so must this backend, or a job whose
//! processor throws `'\0'` could never be failed.
//!
//! So such a string is stored escaped, behind a marker, U+0001 (which `text` holds): `\u{1}0`
//! stands for U+0000 and `\u{1}\u{1}` for U+0001. Any string that contains U+0000 or begins with
//! the marker is escaped, so every stored value that begins with the marker is an escaped one and
//! reading is exact. Every other string (all but hostile input) is stored as it is, unscanned
//! beyond one search for a zero byte.
//!
//! Ids are not free text: a custom job id containing U+0000 is refused on every backend (see
//! `validate_custom_id` in the engine), and queue names refuse control characters.

use std::borrow::Cow;

use ferroqueue_engine::domain::dlq::{history_json, parse_history};

const MARK: char = '\u{1}';

/// `s` as it is stored.
pub fn store(s: &str) -> Cow<'_, str> {
    if !s.as_bytes().contains(&0) && !s.starts_with(MARK) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    out.push(MARK);
    for c in s.chars() {
        match c {
            '\0' => out.extend([MARK, '0']),
            MARK => out.extend([MARK, MARK]),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A stored value as the string it stands for.
pub fn load(stored: String) -> String {
    match stored.strip_prefix(MARK) {
        None => stored,
        Some(rest) => unescape(rest),
    }
}

fn unescape(rest: &str) -> String {
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c != MARK {
            out.push(c);
            continue;
        }
        // A marker not followed by `0` or a marker was not written here: kept as it is.
        match chars.next() {
            Some('0') => out.push('\0'),
            Some(MARK) => out.push(MARK),
            Some(other) => out.extend([MARK, other]),
            None => out.push(MARK),
        }
    }
    out
}

/// A stored JSON array of stored strings (stack traces, logs) as the JSON array of the strings
/// they stand for. `jsonb` writes U+0001 as `\u0001`: a text without it is returned unchanged.
pub fn load_json_array(stored: String) -> String {
    if !stored.contains("\\u0001") {
        return stored;
    }
    match serde_json::from_str::<Vec<String>>(&stored) {
        Ok(items) => {
            let items: Vec<String> = items.into_iter().map(load).collect();
            serde_json::to_string(&items).unwrap_or(stored)
        }
        Err(_) => stored,
    }
}

/// A stored history (`domain/dlq.rs`: attempts whose `error` is a stored string) with each
/// error as the string it stands for; a text without U+0001 is returned unchanged.
pub fn load_history(stored: String) -> String {
    if !stored.contains("\\u0001") {
        return stored;
    }
    let mut history = parse_history(&stored);
    for a in &mut history {
        a.error = load(a.error.to_string()).into_boxed_str();
    }
    history_json(&history)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_history_reads_back_its_errors() {
        let stored = format!(
            r#"[{{"attempt":1,"startedAt":1,"failedAt":2,"error":{},"kind":"error","final":true}}]"#,
            serde_json::to_string(&store("nul \0 here")).expect("JSON")
        );
        let history = parse_history(&load_history(stored));
        assert_eq!(&*history[0].error, "nul \0 here");
        let plain = r#"[{"attempt":1,"startedAt":1,"failedAt":2,"error":"e","kind":"error"}]"#;
        assert_eq!(load_history(plain.to_string()), plain);
    }

    #[test]
    fn ordinary_text_is_stored_as_it_is() {
        for s in ["", "mail", "a\u{1}b", "é\n\t\u{7f}"] {
            assert!(matches!(store(s), Cow::Borrowed(_)), "{s:?}");
            assert_eq!(load(s.to_string()), s);
        }
    }

    #[test]
    fn zero_and_a_leading_marker_are_escaped() {
        assert_eq!(store("a\0b"), "\u{1}a\u{1}0b");
        assert_eq!(store("\u{1}x"), "\u{1}\u{1}\u{1}x");
        assert_eq!(load("\u{1}a\u{1}0b".into()), "a\0b");
        assert_eq!(load("\u{1}\u{1}\u{1}x".into()), "\u{1}x");
    }

    #[test]
    fn a_stray_marker_reads_as_itself() {
        assert_eq!(load("\u{1}a\u{1}".into()), "a\u{1}");
        assert_eq!(load("\u{1}a\u{1}z".into()), "a\u{1}z");
    }

    #[test]
    fn json_arrays_are_read_element_by_element() {
        let stored = serde_json::to_string(&[store("l\0g"), store("plain")]).unwrap();
        assert!(stored.contains("\\u0001"), "{stored}");
        let back: Vec<String> = serde_json::from_str(&load_json_array(stored)).unwrap();
        assert_eq!(back, ["l\0g", "plain"]);
        assert_eq!(load_json_array("[\"x\"]".into()), "[\"x\"]");
        assert_eq!(
            load_json_array("not json \\u0001".into()),
            "not json \\u0001"
        );
    }

    fn text_with_controls() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![Just('\0'), Just(MARK), Just('0'), Just('a'), any::<char>()],
            0..24,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn storing_is_exact_and_never_holds_a_zero(s in text_with_controls()) {
            let stored = store(&s).into_owned();
            prop_assert!(!stored.contains('\0'));
            prop_assert_eq!(load(stored), s);
        }
    }
}
