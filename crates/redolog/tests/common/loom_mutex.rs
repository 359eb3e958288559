//! `crate::sync::Mutex` for loom models: parking_lot's mutex, whose `lock`
//! cannot fail, on loom's (a model thread that panicked holding it has failed
//! the model already).

/// `crate::sync::Mutex` on loom.
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().expect("a model thread panicked holding the lock")
    }
}
