//! A backend's [`Reply`] as a JS value: an answer at hand is returned as is (a sync call, no
//! promise), a pending one as a promise. JS awaits either the same way.

use ferroqueue_engine::Reply;
use napi::bindgen_prelude::{Either, PromiseRaw, ToNapiValue};
use napi::Env;

use crate::errors::{run, settle};

/// A value now, or a promise of it.
pub type Answer<'env, T> = Either<T, PromiseRaw<'env, T>>;

/// The JS form of `reply`, its value mapped by `f` (on the JS thread for `Now`, on the runtime
/// for `Later`).
pub fn answer<'env, T, U>(
    env: &'env Env,
    reply: Reply<T>,
    f: impl FnOnce(T) -> U + Send + 'static,
) -> napi::Result<Answer<'env, U>>
where
    T: Send + 'static,
    U: ToNapiValue + Send + 'static,
{
    match reply {
        Reply::Now(r) => run(env, || r.map(f)).map(Either::A),
        Reply::Later(p) => settle(env, async move { p.await.map(f) }).map(Either::B),
    }
}
