//! Engine errors as JS errors, built here with their JS class and `code`: a `TypeError` or
//! `RangeError` (made by N-API, which sets `code`) or the JS layer's `QueueError` (its constructor
//! is registered once per JS thread by [`set_error_class`]). The binding returns them as
//! `napi::Error`s that hold a reference to the built object, which napi-rs then throws (or
//! rejects with) as is. Nothing in JS decodes a message.
//!
//! Every call builds its answer with a closure returning `Result<T, EngineError>`; [`run`] turns
//! the error into the JS one on the calling (JS) thread. Async calls settle through
//! [`settle`], whose callback runs on the JS thread too.

use std::cell::RefCell;
use std::future::Future;

use ferroqueue_engine::{EngineError, ErrorKind};
use napi::bindgen_prelude::{FnArgs, Function, FunctionRef, PromiseRaw, ToNapiValue};
use napi::{Env, Error, JsError, JsRangeError, JsTypeError, Unknown};
use napi_derive::napi;

type ErrorClass = FunctionRef<FnArgs<(String, String)>, Unknown<'static>>;

thread_local! {
    /// The `QueueError` constructor of this JS thread's module instance.
    static QUEUE_ERROR: RefCell<Option<ErrorClass>> = const { RefCell::new(None) };
}

/// Registers the JS class `new QueueError(code, message)` that errors of kind `Queue` become.
#[napi(catch_unwind)]
pub fn set_error_class(
    class: Function<FnArgs<(String, String)>, Unknown<'static>>,
) -> napi::Result<()> {
    let class = class.create_ref()?;
    QUEUE_ERROR.with(|c| *c.borrow_mut() = Some(class));
    Ok(())
}

/// The JS error for an engine error, as a `napi::Error` holding it.
pub fn js_error(env: &Env, e: EngineError) -> Error {
    match build(env, &e) {
        Ok(value) => Error::from(value),
        // Building failed (the environment is going away): a plain error with the same text.
        Err(_) => Error::from_reason(format!("{}: {e}", e.code())),
    }
}

fn build<'env>(env: &'env Env, e: &EngineError) -> napi::Result<Unknown<'env>> {
    let code = e.code().to_string();
    let message = e.to_string();
    match e.kind() {
        ErrorKind::Type => Ok(JsTypeError::from(Error::new(code, message)).into_unknown(*env)),
        ErrorKind::Range => Ok(JsRangeError::from(Error::new(code, message)).into_unknown(*env)),
        ErrorKind::Queue => QUEUE_ERROR.with(|c| match &*c.borrow() {
            Some(class) => class.borrow_back(env)?.new_instance((code, message).into()),
            // Not registered (the binding used without lib/): an Error with `code`.
            None => Ok(JsError::from(Error::new(code, message)).into_unknown(*env)),
        }),
    }
}

/// Runs a call's body and turns its error into the JS one.
pub fn run<T>(env: &Env, body: impl FnOnce() -> Result<T, EngineError>) -> napi::Result<T> {
    body().map_err(|e| js_error(env, e))
}

/// A promise of an async call: the future runs on the binding's runtime, and its engine error
/// (if any) becomes the JS one on the JS thread, where it can be built.
pub fn settle<T, F>(env: &Env, fut: F) -> napi::Result<PromiseRaw<'_, T>>
where
    T: 'static + Send + ToNapiValue,
    F: 'static + Send + Future<Output = Result<T, EngineError>>,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, r| {
        r.map_err(|e| js_error(env, e))
    })
}

/// A range error on `option`.
pub fn range(option: &str, reason: impl Into<String>) -> EngineError {
    EngineError::range(option, reason)
}

/// A JS number that must be a count: an integer >= 0.
pub fn count_arg(option: &str, v: f64) -> Result<usize, EngineError> {
    if !v.is_finite() || v < 0.0 || v.fract() != 0.0 {
        return Err(range(
            option,
            format!("must be an integer >= 0 (a count), got {v}"),
        ));
    }
    Ok(v.min(usize::MAX as f64) as usize)
}

/// A JS number that must be a non-negative millisecond value (fractions truncated).
pub fn ms(option: &str, v: f64) -> Result<u64, EngineError> {
    ferroqueue_engine::domain::options::non_negative_ms(option, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_with_the_option_named() {
        assert_eq!(ms("delay", 12.9).ok(), Some(12));
        assert!(ms("delay", -1.0)
            .unwrap_err()
            .to_string()
            .starts_with("delay must be"));
        assert_eq!(count_arg("limit", 3.0).ok(), Some(3));
        for bad in [-1.0, 1.5, f64::NAN, f64::INFINITY] {
            let e = count_arg("limit", bad).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_OPTION");
            assert!(e.to_string().starts_with("limit must be an integer >= 0"));
        }
    }
}
