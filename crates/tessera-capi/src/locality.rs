//! Locality for schedulers (FusionFS and Swift): where a file's bytes live, and the best host.

use crate::boundary::*;
use crate::*;

fn residence_value(r: Residence) -> u32 {
    match r {
        Residence::Hole => 0,
        Residence::BurstBuffer => 1,
        Residence::Pfs => 2,
        Residence::Both => 3,
    }
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`: `out` holds `max` locations; `view_time_ns` is NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_locate(
    client: *mut CClient,
    path: *const c_char,
    offset: u64,
    len: u64,
    out: *mut CLocation,
    max: size_t,
    view_time_ns: *mut i64,
) -> i64 {
    guard(-1, || {
        const F: &str = "tessera_locate";
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, F) }?;
        // SAFETY: `path` is NULL or a NUL-terminated string that the call does not outlive (tessera.h).
        let p = unsafe { text(path, F, "path") }?;
        if max > 0 && out.is_null() {
            return Err(efault(F, "out (with max above 0)"));
        }
        let len = (len != u64::MAX).then_some(len);
        let l = c.locate(p, offset, len)?;
        for (i, e) in l.extents.iter().take(max).enumerate() {
            let (node, host, addr) = match &e.holder {
                Some(h) => (h.node as i32, c_name(&h.host), c_name(&h.addr)),
                None => (-1, c_name(""), c_name("")),
            };
            // SAFETY: `out` holds at least `max` locations (this function's contract).
            unsafe {
                out.add(i).write(CLocation {
                    start: e.start,
                    end: e.end,
                    node,
                    residence: residence_value(e.residence),
                    host,
                    addr,
                })
            };
        }
        if !view_time_ns.is_null() {
            // SAFETY: non-null, so writable (this function's contract).
            unsafe { view_time_ns.write(l.view_time_ns) };
        }
        Ok(l.extents.len() as i64)
    })
}

/// See `tessera.h`.
///
/// # Safety
/// Pointers as documented in `tessera.h`: `paths` holds `n` strings, `out` `n` placements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tessera_locate_many(
    client: *mut CClient,
    paths: *const *const c_char,
    n: size_t,
    out: *mut CPlacement,
) -> c_int {
    guard(-1, || {
        const F: &str = "tessera_locate_many";
        // SAFETY: `client` is NULL or a live handle from `tessera_connect`, not yet given to `tessera_disconnect` (tessera.h).
        let c = unsafe { client_ref(client, F) }?;
        if n == 0 {
            return Ok(0);
        }
        if paths.is_null() {
            return Err(efault(F, "paths"));
        }
        if out.is_null() {
            return Err(efault(F, "out"));
        }
        let mut asks = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `paths` holds `n` string pointers (this function's contract).
            let p = unsafe { *paths.add(i) };
            // SAFETY: each is NULL or a NUL-terminated string (this function's contract).
            let p = unsafe { text(p, F, "a path") }?;
            asks.push(RangeAsk::file(p));
        }
        let answers = c.locate_many(&asks, 1)?;
        for (i, a) in answers.iter().enumerate() {
            let placed = match a {
                Ok(l) => CPlacement {
                    error: 0,
                    hosts: l.bytes_by_host.len() as u32,
                    size: l.size,
                    best_bytes: l.bytes_by_host.first().map_or(0, |h| h.bytes),
                    view_time_ns: l.view_time_ns,
                    best_host: c_name(l.best_host().unwrap_or("")),
                },
                Err(e) => CPlacement {
                    error: e.code(),
                    hosts: 0,
                    size: 0,
                    best_bytes: 0,
                    view_time_ns: 0,
                    best_host: c_name(""),
                },
            };
            // SAFETY: `out` holds `n` placements (this function's contract).
            unsafe { out.add(i).write(placed) };
        }
        Ok(0)
    })
}
