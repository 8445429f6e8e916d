//! JSON text handed to JS. ASCII text (the usual case: records and events are JSON that escapes
//! nothing outside ASCII unless the user's data holds it) is created as a Latin-1 string, which
//! both engines copy as is. UTF-8 must be decoded first; on Bun that also yields a two-byte
//! string, which `JSON.parse` then reads at less than half the speed (0.56 vs 0.23 µs per job
//! record, `bench/boundary`'s payload).

use napi::{Env, JsString, Result};

pub fn js_text<'env>(env: &'env Env, text: &str) -> Result<JsString<'env>> {
    if text.is_ascii() {
        env.create_string_latin1(text.as_bytes())
    } else {
        env.create_string(text)
    }
}
