//! Open files and directories by the handle numbers the kernel was given.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Values by handle number; each behind its own lock, so requests on different handles run
/// at once.
pub struct Handles<T> {
    open: Mutex<HashMap<u64, Arc<Mutex<T>>>>,
    next: AtomicU64,
}

impl<T> Default for Handles<T> {
    fn default() -> Self {
        Handles {
            open: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }
}

impl<T> Handles<T> {
    /// Keeps `value` under a new handle number.
    pub fn insert(&self, value: T) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.map().insert(fh, Arc::new(Mutex::new(value)));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Mutex<T>>> {
        self.map().get(&fh).cloned()
    }

    /// Takes the value of `fh` out. The kernel releases a handle only once no request on it
    /// is running, so nothing else holds it then.
    pub fn remove(&self, fh: u64) -> Option<T> {
        let held = self.map().remove(&fh)?;
        match Arc::try_unwrap(held) {
            Ok(value) => Some(value.into_inner().unwrap_or_else(|e| e.into_inner())),
            Err(_) => {
                tracing::warn!("handle {fh} released while a request on it runs");
                None
            }
        }
    }

    /// Runs `f` on every value for which `pick` holds.
    pub fn each(&self, pick: impl Fn(&T) -> bool, mut f: impl FnMut(&mut T)) {
        let all: Vec<Arc<Mutex<T>>> = self.map().values().cloned().collect();
        for v in all {
            let mut v = v.lock().unwrap_or_else(|e| e.into_inner());
            if pick(&v) {
                f(&mut v);
            }
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Mutex<T>>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_distinct_and_removed_once() {
        let h: Handles<&str> = Handles::default();
        let a = h.insert("a");
        let b = h.insert("b");
        assert_ne!(a, b);
        assert_eq!(*h.get(a).unwrap().lock().unwrap(), "a");
        let mut seen = Vec::new();
        h.each(|v| *v == "b", |v| seen.push(*v));
        assert_eq!(seen, ["b"]);
        assert_eq!(h.remove(a), Some("a"));
        assert_eq!(h.remove(a), None);
        assert!(h.get(a).is_none());
    }
}
